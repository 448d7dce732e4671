"""Schema evolution through a running PostgreSQL sink (``auto.evolve``), end to end.

A real connector (the Spark runtime) reads Avro records that confluent_kafka's
``AvroSerializer`` wrote against the real Schema Registry (Apicurio, Confluent API, global
compatibility BACKWARD), with ``value.converter=io.confluent.connect.avro.AvroConverter``:

* v1 records land in a table the sink creates (``auto.create``);
* v2 adds an optional field (default null): the registry accepts it, the sink adds the
  column, old rows keep NULL, new rows get the value, nothing lost or doubled;
* an incompatible change is refused by the registry under BACKWARD; with the subject's
  compatibility set to NONE (as happens in production) records whose field changed type
  (PostgreSQL cannot store them) or that carry a new required field without default
  (``auto.evolve`` refuses to add it) reach the topic anyway. They follow
  ``errors.tolerance``: ``all`` sends them to the dead-letter queue with Connect's error
  headers and later records still land; ``none`` fails the task naming the record and its
  offset, which is not committed (a rerun starts at it).
"""

from __future__ import annotations

import json
import re
import uuid

import psycopg
import pytest
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

FIELDS_V1 = [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "amount", "type": "long"}]
NOTE = {"name": "note", "type": ["null", "string"], "default": None}


def _avro(fields: list[dict]) -> str:
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": fields})


V1 = _avro(FIELDS_V1)
V2 = _avro([*FIELDS_V1, NOTE])  # compatible: an optional field with default null
V3_TYPE_CHANGED = _avro([FIELDS_V1[0], FIELDS_V1[1], {"name": "amount", "type": "string"}, NOTE])
V4_REQUIRED_ADDED = _avro([*FIELDS_V1, NOTE, {"name": "sku", "type": "string"}])  # no default


class Producer:
    """Avro records of one topic, serialized by confluent_kafka against the registry."""

    def __init__(self, registry, bootstrap: str, topic: str) -> None:
        self.client, self.bootstrap, self.topic = registry.client(), bootstrap, topic

    def serializer(self, schema: str) -> AvroSerializer:
        return AvroSerializer(self.client, schema)

    def send(self, schema: str, values: list[dict]) -> None:
        ser, ctx = self.serializer(schema), SerializationContext(self.topic, MessageField.VALUE)
        produce(self.bootstrap, self.topic, [(str(v["id"]).encode(), ser(v, ctx)) for v in values])


def _name() -> str:
    return f"evo-{uuid.uuid4().hex[:8]}"


def _query(url: str, statement: str) -> list[tuple]:
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(statement).fetchall()
    except psycopg.errors.UndefinedTable:
        return []


def _count(url: str, statement: str) -> int:
    return _query(url, statement)[0][0] if _query(url, statement) else 0


def _columns(url: str, table: str) -> dict[str, str]:
    statement = f"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{table}'"
    return dict(_query(url, statement))


def _config(topic: str, url: str, registry, **extra: str) -> dict[str, str]:
    return {
        "topics": topic,
        "connection.url": url,
        "auto.create": "true",
        "auto.evolve": "true",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": registry.url,
        "offset.flush.interval.ms": "1000",
        "consumer.override.session.timeout.ms": "6000",
        **extra,
    }


def _order(i: int, **extra) -> dict:
    return {"id": i, "name": f"order-{i}", "amount": i * 10, **extra}


def _dlq_config(dlq: str) -> dict[str, str]:
    return {
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
    }


def test_compatible_evolution_adds_the_column_and_incompatible_records_go_to_the_dlq(
    kafka_bootstrap, topic_factory, spark, pg_database, schema_registry
):
    topic = topic_factory(partitions=1, name=f"orders-{uuid.uuid4().hex[:8]}")
    table = re.sub(r"[^0-9A-Za-z_]", "_", topic)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    producer = Producer(schema_registry, kafka_bootstrap, topic)
    name = _name()
    rows = f'SELECT id, note FROM "{table}" ORDER BY id'
    count = f'SELECT count(*) FROM "{table}"'
    manifest = connector_manifest(name, "postgres-sink", kafka_bootstrap,
                                  _config(topic, pg_database, schema_registry, **_dlq_config(dlq)))
    with running_connector(manifest, spark) as driver:
        # a. v1 lands in a table the sink creates
        producer.send(V1, [_order(i) for i in range(5)])
        wait_until(lambda: _count(pg_database, count) >= 5, timeout_s=90, message="v1 rows")
        assert set(_columns(pg_database, table)) == {"id", "name", "amount"}

        # b. v2 (optional field, default null): accepted by the registry, the sink adds the column
        producer.send(V2, [_order(i, note=f"note-{i}") for i in range(5, 10)])
        wait_until(lambda: _count(pg_database, count) >= 10, timeout_s=60, message="v2 rows")
        assert _columns(pg_database, table)["note"] == "text", "auto.evolve added the column"
        assert _query(pg_database, rows) == [(i, None) for i in range(5)] + [(i, f"note-{i}") for i in range(5, 10)]
        subject = f"{topic}-value"
        assert producer.client.get_versions(subject) == [1, 2]

        # c. incompatible changes: refused under BACKWARD ...
        for schema in (V3_TYPE_CHANGED, V4_REQUIRED_ADDED):
            with pytest.raises(SchemaRegistryError) as refused:
                producer.send(schema, [_order(99)])
            assert refused.value.http_status_code == 409
        assert producer.client.get_versions(subject) == [1, 2]
        # ... but reach the topic once someone sets the subject's compatibility to NONE
        producer.client.set_compatibility(subject_name=subject, level="NONE")
        producer.send(V3_TYPE_CHANGED, [_order(10, amount="twelve", note=None)])  # offset 10
        producer.send(V4_REQUIRED_ADDED, [_order(11, note=None, sku="S-11")])  # offset 11
        producer.send(V2, [_order(i, note=f"note-{i}") for i in range(12, 15)])  # offsets 12-14
        wait_until(lambda: _count(pg_database, count) >= 13, timeout_s=60, message="good records after the bad")
        wait_until(lambda: driver.status()["tasks"][0].get("records_skipped") == 2, message="2 records skipped")
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 15},
                   timeout_s=30, message="offsets committed past the DLQ'd records")
        assert driver.status()["tasks"][0]["state"] == "RUNNING"

    ids = [i for i, _ in _query(pg_database, rows)]
    assert ids == [*range(10), 12, 13, 14], "none lost, none twice, the two bad ones left out"
    columns = _columns(pg_database, table)
    assert columns["amount"] == "bigint" and "sku" not in columns, "no type change, no required column added"
    dead = sorted(consume_all(kafka_bootstrap, dlq, expected=2), key=lambda m: m.key())
    assert [m.key() for m in dead] == [b"10", b"11"], "the original records"
    assert dead[0].value()[:1] == b"\0", "the original (Avro, registry-framed) bytes"
    headers = [{k: v.decode() for k, v in m.headers()} for m in dead]
    for h, offset in zip(headers, ("10", "11")):
        assert (h["__connect.errors.topic"], h["__connect.errors.offset"]) == (topic, offset)
        assert h["__connect.errors.stage"] == "TASK_PUT"
        assert h["__connect.errors.connector.name"] == name
        assert h["__connect.errors.exception.class.name"].endswith("DataError")
    assert "InvalidTextRepresentation" in headers[0]["__connect.errors.exception.message"]
    assert "twelve" in headers[0]["__connect.errors.exception.message"]
    assert "sku" in headers[1]["__connect.errors.exception.message"]
    assert "auto.evolve" in headers[1]["__connect.errors.exception.message"]


def test_incompatible_record_with_tolerance_none_fails_the_task_and_is_not_committed(
    kafka_bootstrap, topic_factory, spark, pg_database, schema_registry
):
    topic = topic_factory(partitions=1, name=f"orders-{uuid.uuid4().hex[:8]}")
    table = re.sub(r"[^0-9A-Za-z_]", "_", topic)
    producer = Producer(schema_registry, kafka_bootstrap, topic)
    name = _name()
    ids = f'SELECT id FROM "{table}" ORDER BY id'
    group = f"connect-{name}"
    config = _config(topic, pg_database, schema_registry)
    with running_connector(connector_manifest(name, "postgres-sink", kafka_bootstrap, config), spark) as driver:
        producer.send(V1, [_order(i) for i in range(3)])
        wait_until(lambda: committed_offsets(kafka_bootstrap, group, topic, 1) == {0: 3}, timeout_s=90,
                   message="v1 committed")
        producer.client.set_compatibility(subject_name=f"{topic}-value", level="NONE")
        producer.send(V3_TYPE_CHANGED, [_order(3, amount="twelve", note=None)])  # offset 3
        producer.send(V1, [_order(4)])
        status = wait_until(lambda: (s := driver.status())["tasks"][0]["state"] == "FAILED" and s,
                            timeout_s=60, message="task FAILED")
    trace = status["tasks"][0]["trace"]
    assert f"{topic}-0 at offset 3" in trace, trace
    assert "InvalidTextRepresentation" in trace and "amount" in trace, trace
    assert committed_offsets(kafka_bootstrap, group, topic, 1) == {0: 3}, "nothing committed past the bad record"
    assert [i for (i,) in _query(pg_database, ids)] == [0, 1, 2]

    # a rerun of the same connector starts at the bad record: with errors.tolerance=all it
    # goes to the dead-letter queue and the record after it lands, once
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    config = _config(topic, pg_database, schema_registry, **_dlq_config(dlq))
    with running_connector(connector_manifest(name, "postgres-sink", kafka_bootstrap, config), spark):
        wait_until(lambda: committed_offsets(kafka_bootstrap, group, topic, 1) == {0: 5}, timeout_s=90,
                   message="rerun committed")
    [dead] = consume_all(kafka_bootstrap, dlq, expected=1)
    assert dict(dead.headers())["__connect.errors.offset"] == b"3"
    assert [i for (i,) in _query(pg_database, ids)] == [0, 1, 2, 4]
