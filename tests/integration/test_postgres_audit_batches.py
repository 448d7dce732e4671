"""postgres-audit-source's batch path (``poll_batch``: keys and values as JSON text, one table
per batch) against its record path (``poll``), through the runtime with a real broker, Spark
and PostgreSQL: two connectors capture the same changes, each on one path; their topics hold
the same records (key, value, timestamp) and their committed source offsets are the same."""

from __future__ import annotations

import json
import re
import uuid

import psycopg
import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME

from conveyor.runtime.kafka.offsets_topic import read_offsets
from conveyor.testing.runs import connector_manifest, consume_all, running_connector, wait_until

pytestmark = pytest.mark.integration


def _changes(url: str) -> int:
    """Inserts, updates (one changing a key) and deletes on two tables, with text, numbers,
    jsonb and a composite key; returns how many rows changed."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO orders (id, item, price, doc) SELECT i, 'item é ' || i, i / 4.0, "
                     "jsonb_build_object('n', i, 'tags', jsonb_build_array('a', i)) FROM generate_series(1, 300) i")
        conn.execute("UPDATE orders SET item = item || ' \"quoted\"', price = price * 3 WHERE id % 7 = 0")
        conn.execute("UPDATE orders SET id = id + 1000 WHERE id = 5")
        conn.execute("DELETE FROM orders WHERE id % 11 = 0")
        conn.execute("INSERT INTO refunds (a, b, why) SELECT i % 3, i, repeat('x', i % 5) FROM generate_series(1, 50) i")
        conn.execute("DELETE FROM refunds WHERE b < 5")
    return 300 + 300 // 7 + 1 + 300 // 11 + 50 + 4


def _record(message, schemas: bool) -> tuple[bytes, bytes]:
    """A message's key and value, its capture time (``ts_ms``, which each connector's trigger
    reads from its own clock) checked against the record's timestamp and left out."""
    value = json.loads(message.value())
    assert message.timestamp() == (TIMESTAMP_CREATE_TIME, (value["payload"] if schemas else value)["ts_ms"])
    return message.key(), re.sub(rb'"ts_ms":[0-9]+', b'"ts_ms":T', message.value())


@pytest.mark.parametrize("schemas", [False, True], ids=["json", "json-with-envelope"])
def test_the_audit_source_writes_the_same_records_and_offsets_on_both_paths(kafka_bootstrap, spark, pg_database,
                                                                            schemas):
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, item text, price numeric, doc jsonb)")
        conn.execute("CREATE TABLE refunds (a int, b int, why text, PRIMARY KEY (b, a))")
    names = {path: f"audit-{path[0]}-{uuid.uuid4().hex[:6]}" for path in ("records", "batches")}
    offsets_topics = {path: f"offsets-{uuid.uuid4().hex[:6]}" for path in names}
    manifests = {path: connector_manifest(name, "postgres-audit-source", kafka_bootstrap, {
        "connection.url": pg_database, "tables": "public.orders,public.refunds", "topic.prefix": f"{name}.",
        "value.converter": "json", "value.converter.schemas.enable": str(schemas).lower(),
        "key.converter": "json", "key.converter.schemas.enable": str(schemas).lower(),
        "offsets.storage.topic": offsets_topics[path], "offset.flush.interval.ms": "300", "poll.interval.ms": "200",
        "poll.max.rows": "128", "conveyor.batch.path.enable": str(path == "batches").lower()})
        for path, name in names.items()}
    written, offsets = {}, {}
    with running_connector(manifests["records"], spark) as records, \
            running_connector(manifests["batches"], spark) as batches:
        for path, driver in (("records", records), ("batches", batches)):
            task = wait_until(lambda: next((t for t in driver.status()["tasks"]  # noqa: B023
                                            if t["state"] == "RUNNING"), None), message=f"{path}: a task RUNNING")
            assert task["batch_path"] is (path == "batches")
        changed = _changes(pg_database)
        for path, name in names.items():
            msgs = {table: consume_all(kafka_bootstrap, f"{name}.public.{table}", count, timeout_s=120)
                    for table, count in (("orders", changed - 54), ("refunds", 54))}
            written[path] = {table: [_record(m, schemas) for m in table_msgs] for table, table_msgs in msgs.items()}
            offsets[path] = wait_until(
                lambda: o if len(o := read_offsets(kafka_bootstrap, offsets_topics[path],  # noqa: B023
                                                   name)) == 2  # noqa: B023
                and all(v["id"] >= 0 for v in o.values()) else None, timeout_s=30,
                message=f"{path}: an offset per table")
    assert written["batches"] == written["records"]
    assert sorted(offsets["batches"].values(), key=repr) == sorted(offsets["records"].values(), key=repr)
