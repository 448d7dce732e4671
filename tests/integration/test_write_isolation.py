"""Records an external system refuses in a write reach the dead-letter queue, found by the
runtime (conveyor.runtime.task.sink.isolation): for a sink with no code of its own for it
(conveyor.testing.plain_postgres, whose put writes at once) and for postgres-sink (which
buffers across puts and hands the runtime what its refused write held). A real PostgreSQL
refuses them, a real broker holds the topic, the dead-letter queue and the group's offsets."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    end_offsets,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

PLAIN = "conveyor.testing.plain_postgres:PlainPostgresSinkConnector"
POISON = {37: {"id": "thirty-seven"}, 101: {"id": None}, 102: {"id": "x"}, 250: {"id": None}}
"""Offsets in partition 0 whose value PostgreSQL refuses: text in an integer column
(a ``psycopg.DataError``), a null in a NOT NULL column (a ``psycopg.IntegrityError``)."""


def _table(url: str) -> str:
    table = f"rows_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id integer NOT NULL, body text)")
    return table


def _sink(sink: str, url: str, table: str) -> tuple[str, dict[str, str]]:
    if sink == "plain":
        return PLAIN, {"connection.url": url, "table": table}
    return "postgres-sink", {"connection.url": url, "table.name.format": table, "batch.size": "120"}


def _rows(url: str, table: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [row[0] for row in conn.execute(f"SELECT id FROM {table} ORDER BY id")]


@pytest.mark.parametrize("sink", ["plain", "postgres-sink"])
@pytest.mark.parametrize("batch_path", ["false", "true"], ids=["records", "batches"])
def test_refused_records_go_to_the_dlq_and_the_rest_is_written_once(kafka_bootstrap, topic_factory, spark,
                                                                    pg_database, batch_path, sink):
    topic = topic_factory(partitions=2)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    table = _table(pg_database)
    items, good = [], []
    for offset in range(300):  # partition 0: 300 records, 4 of them refused
        value = POISON.get(offset, {"id": offset})
        items.append((b"p0-%d" % offset, json.dumps(value).encode(), 0))
        if offset not in POISON:
            good.append(offset)
    for offset in range(100):  # partition 1: 100 records, none refused
        items.append((b"p1-%d" % offset, json.dumps({"id": 1000 + offset}).encode(), 1))
        good.append(1000 + offset)
    produce(kafka_bootstrap, topic, [(k, v) for k, v, p in items if p == 0], partition=0)
    produce(kafka_bootstrap, topic, [(k, v) for k, v, p in items if p == 1], partition=1)
    name = f"iso-{uuid.uuid4().hex[:8]}"
    connector_class, sink_config = _sink(sink, pg_database, table)
    config = {
        "topics": topic, **sink_config,
        "value.converter": "json", "value.converter.schemas.enable": "false",
        "key.converter": "string",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
        "conveyor.batch.path.enable": batch_path,
        "offset.flush.interval.ms": "1000",
        "consumer.override.session.timeout.ms": "6000",
    }
    ends = end_offsets(kafka_bootstrap, topic, 2)
    with running_connector(connector_manifest(name, connector_class, kafka_bootstrap, config), spark) as driver:
        wait_until(lambda: len(_rows(pg_database, table)) >= len(good), timeout_s=90, message="every good row")
        status = wait_until(lambda: (s := driver.status())["tasks"][0].get("records_skipped") == len(POISON) and s,
                            message="the refused records skipped")
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2) == ends,
                   message="offsets committed past the refused and the written records")
    assert status["tasks"][0]["state"] == "RUNNING", status
    assert status["tasks"][0]["batch_path"] is (batch_path == "true")
    assert _rows(pg_database, table) == sorted(good), "every other record written once, none twice"

    dead = consume_all(kafka_bootstrap, dlq, expected=len(POISON))
    assert sorted(int(m.key().decode().split("-")[1]) for m in dead) == sorted(POISON)
    for message in dead:
        offset = int(message.key().decode().split("-")[1])
        assert json.loads(message.value()) == POISON[offset], "the original bytes"
        headers = {k: v.decode() for k, v in message.headers()}
        assert headers["__connect.errors.stage"] == "TASK_PUT"
        assert headers["__connect.errors.topic"] == topic
        assert headers["__connect.errors.partition"] == "0"
        assert headers["__connect.errors.offset"] == str(offset)
        assert headers["__connect.errors.connector.name"] == name
        expected = "NotNullViolation" if POISON[offset]["id"] is None else "InvalidTextRepresentation"
        if sink == "plain":  # PostgreSQL's own error, as the task let it go
            assert headers["__connect.errors.class.name"].endswith("PlainPostgresSinkTask")
            assert headers["__connect.errors.exception.class.name"] == f"psycopg.errors.{expected}", headers
        else:
            assert headers["__connect.errors.class.name"].endswith("PostgresSinkTask")
            assert headers["__connect.errors.exception.class.name"] == "conveyor.api.errors.DataError", headers
            assert expected in headers["__connect.errors.exception.message"], headers


def test_a_refused_record_under_tolerance_none_fails_the_task_naming_it(kafka_bootstrap, topic_factory, spark,
                                                                         pg_database):
    topic = topic_factory(partitions=1)
    table = _table(pg_database)
    values = [{"id": i} for i in range(60)]
    values[42] = {"id": "forty-two"}
    produce(kafka_bootstrap, topic, [(None, json.dumps(v).encode()) for v in values])
    name = f"iso-{uuid.uuid4().hex[:8]}"
    config = {"topics": topic, "connection.url": pg_database, "table": table,
              "value.converter": "json", "value.converter.schemas.enable": "false",
              "conveyor.batch.path.enable": "false", "consumer.override.session.timeout.ms": "6000"}
    with running_connector(connector_manifest(name, PLAIN, kafka_bootstrap, config), spark) as driver:
        status = wait_until(lambda: (s := driver.status())["tasks"][0]["state"] == "FAILED" and s,
                            message="task FAILED")
    trace = status["tasks"][0]["trace"]
    assert f"{topic}-0 at offset 42" in trace and "TASK_PUT" in trace, trace
    assert _rows(pg_database, table) == list(range(42)), "the records before it written, nothing after it"
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1).get(0, 0) <= 42, "nothing past it"
