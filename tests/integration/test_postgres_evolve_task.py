"""``auto.evolve`` and records PostgreSQL refuses, with the sink task driven directly (no Spark,
no Kafka) against a real PostgreSQL (``pg_database``: a fresh database per test)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import psycopg
import pytest

from conveyor.api import (
    ConnectError,
    DataError,
    ErrantRecordReporter,
    RetriableError,
    Schema,
    SchemaType,
    SinkRecord,
    TopicPartition,
)
from conveyor.connectors.postgres.sink import PostgresSinkTask
from conveyor.testing.contexts import RecordingReporter, start_sink_task

pytestmark = pytest.mark.integration

TP0 = TopicPartition("orders", 0)
S = SchemaType
V1 = Schema.struct(("id", Schema(S.INT64)), ("item", Schema(S.STRING, optional=True)), name="Order")
V2 = Schema.struct(*((f.name, f.schema) for f in V1.fields), ("note", Schema(S.STRING, optional=True)),
                   ("qty", Schema(S.INT32, default=1)), name="Order")
V3_REQUIRED = Schema.struct(*((f.name, f.schema) for f in V1.fields), ("sku", Schema(S.STRING)), name="Order")
V4_ITEM_INT = Schema.struct(("id", Schema(S.INT64)), ("item", Schema(S.INT64)), name="Order")


def start_task(config: Mapping[str, Any], reporter: ErrantRecordReporter | None = None) -> PostgresSinkTask:
    return start_sink_task(PostgresSinkTask(), config, [TP0], reporter)[0]


def rec(offset: int, value: Any, schema: Schema | None = None) -> SinkRecord:
    return SinkRecord(topic="orders", kafka_partition=0, key=None, value=value, kafka_offset=offset,
                      value_schema=schema)


def sql(url: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


def columns(url: str) -> list[tuple[str, str, str, str | None]]:
    return sql(url, "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns"
                    " WHERE table_name = 'orders' ORDER BY ordinal_position")


def config(url: str, **extra: str) -> dict[str, str]:
    return {"connection.url": url, "auto.create": "true", "auto.evolve": "true", **extra}


def test_evolve_adds_optional_and_defaulted_columns_never_drops(pg_database: str) -> None:
    task = start_task(config(pg_database))
    try:
        task.put([rec(0, {"id": 1, "item": "a"}, V1)])
        task.pre_commit({TP0: 1})
        task.put([rec(1, {"id": 2, "item": "b", "note": "n", "qty": 5}, V2), rec(2, {"id": 3, "item": None}, V1)])
        assert task.pre_commit({TP0: 3}) == {TP0: 3}
        assert columns(pg_database) == [
            ("id", "bigint", "NO", None),
            ("item", "text", "YES", None),
            ("note", "text", "YES", None),
            ("qty", "integer", "NO", "1"),
        ]
        assert sql(pg_database, "SELECT id, item, note, qty FROM orders ORDER BY id") == [
            (1, "a", None, 1), (2, "b", "n", 5), (3, None, None, 1)]
        # schemaless records evolve too (nullable columns typed from the values)
        task.put([rec(3, {"id": 4, "flag": True, "price": 1.5})])
        task.pre_commit({TP0: 4})
        assert columns(pg_database)[-2:] == [
            ("flag", "boolean", "YES", None), ("price", "double precision", "YES", None)]
    finally:
        task.stop()


def test_without_auto_evolve_a_missing_column_stays_an_error(pg_database: str) -> None:
    task = start_task(config(pg_database, **{"auto.evolve": "false"}))
    try:
        task.put([rec(0, {"id": 1, "item": "a"}, V1)])
        task.pre_commit({TP0: 1})
        task.put([rec(1, {"id": 2, "item": "b", "note": "n", "qty": 5}, V2)])
        with pytest.raises(ConnectError, match="no column.*note, qty.*fields.whitelist"):
            task.pre_commit({TP0: 2})
        assert [c[0] for c in columns(pg_database)] == ["id", "item"]
    finally:
        task.stop()


def test_required_field_without_default_is_not_added_and_its_records_are_rejected(pg_database: str) -> None:
    reporter = RecordingReporter()
    task = start_task(config(pg_database), reporter)
    try:
        task.put([rec(0, {"id": 1, "item": "a"}, V1)])
        task.pre_commit({TP0: 1})
        task.put([rec(1, {"id": 2, "item": "b", "sku": "S"}, V3_REQUIRED), rec(2, {"id": 3, "item": "c"}, V1)])
        assert task.pre_commit({TP0: 3}) == {TP0: 3}
        assert [(r.kafka_offset, type(e)) for r, e in reporter.reported] == [(1, DataError)]
        assert "sku" in str(reporter.reported[0][1]) and '"orders"' in str(reporter.reported[0][1])
        assert sql(pg_database, "SELECT id FROM orders ORDER BY id") == [(1,), (3,)]
        assert "sku" not in [c[0] for c in columns(pg_database)]
    finally:
        task.stop()
    task = start_task(config(pg_database))  # no reporter: a DataError naming the record, table and field
    try:
        task.put([rec(3, {"id": 4, "item": "d", "sku": "S"}, V3_REQUIRED)])
        with pytest.raises(DataError, match='orders-0@3.*"orders".*sku.*auto.evolve'):
            task.pre_commit({TP0: 4})
        with pytest.raises(DataError, match="orders-0@3"):
            task.put([])  # and the next put fails the task (the runtime only logs a failed pre_commit)
    finally:
        task.stop()


@pytest.mark.parametrize("mode", ["insert", "exactly_once", "upsert"])
def test_records_postgres_refuses_by_type_go_to_the_reporter_the_rest_is_written(pg_database: str, mode: str) -> None:
    reporter = RecordingReporter()
    exactly_once = mode == "exactly_once"
    extra = {
        "insert": {},
        "exactly_once": {"exactly.once": "true", "name": "evo"},
        "upsert": {"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"},
    }[mode]
    task = start_task(config(pg_database, **extra), reporter)
    try:
        task.put([rec(0, {"id": 1, "item": 7}, V4_ITEM_INT)])  # creates item bigint
        task.pre_commit({TP0: 1})
        bad = [rec(o, {"id": o + 1, "item": "x"}, V1) for o in (2, 5)]
        good = [rec(o, {"id": o + 1, "item": str(o)}, V1) for o in (1, 3, 4, 6)]
        task.put(sorted(bad + good, key=lambda r: r.kafka_offset))
        task.pre_commit({TP0: 7})
        assert [(r.kafka_offset, type(e)) for r, e in reporter.reported] == [(2, DataError), (5, DataError)]
        assert "InvalidTextRepresentation" in str(reporter.reported[0][1])
        assert sql(pg_database, "SELECT id FROM orders ORDER BY id") == [(1,), (2,), (4,), (5,), (7,)]
        if exactly_once:
            assert sql(pg_database, "SELECT next_offset FROM conveyor_sink_offsets") == [(7,)]
    finally:
        task.stop()


def test_refused_record_without_reporter_is_a_data_error_not_retriable(pg_database: str) -> None:
    task = start_task(config(pg_database))
    try:
        task.put([rec(0, {"id": 1, "item": 7}, V4_ITEM_INT), rec(1, {"id": 2, "item": "x"}, V1)])
        with pytest.raises(DataError, match="orders-0@1.*InvalidTextRepresentation"):
            task.pre_commit({TP0: 2})
        assert sql(pg_database, "SELECT id FROM orders") == [(1,)], "the record before it written, not it"
    finally:
        task.stop()


def test_tasks_evolving_the_same_table_at_once(pg_database: str) -> None:
    sql(pg_database, "CREATE TABLE orders (id bigint, item text)")
    tasks = [start_task(config(pg_database)) for _ in range(4)]
    barrier, errors = threading.Barrier(len(tasks)), []

    def run(n: int, task: PostgresSinkTask) -> None:
        try:
            task.put([rec(0, {"id": n, "item": "i", "note": "n", "qty": n}, V2)])
            barrier.wait(timeout=30)
            task.pre_commit({TP0: 1})
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n, t)) for n, t in enumerate(tasks)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        for task in tasks:
            task.stop()
    assert errors == []
    assert [c[0] for c in columns(pg_database)] == ["id", "item", "note", "qty"]
    assert sql(pg_database, "SELECT id, qty FROM orders ORDER BY id") == [(n, n) for n in range(4)]


def test_evolve_waits_for_a_table_lock_no_longer_than_ddl_lock_timeout_then_retries(pg_database: str) -> None:
    """A reader holding the table (here an open transaction's ``ACCESS SHARE`` lock) blocks
    ``ALTER TABLE``: past ``ddl.lock.timeout.ms`` the write is retriable and nothing changed;
    once the reader is gone the retried commit writes the records the task kept."""
    task = start_task(config(pg_database, **{"ddl.lock.timeout.ms": "300"}))
    try:
        task.put([rec(0, {"id": 1, "item": "a"}, V1)])
        task.pre_commit({TP0: 1})
        task.put([rec(1, {"id": 2, "item": "b", "note": "n", "qty": 5}, V2)])
        with psycopg.connect(pg_database) as reader:
            reader.execute("SELECT count(*) FROM orders")  # the transaction keeps its lock until it ends
            started = time.monotonic()
            with pytest.raises(RetriableError, match="lock timeout"):
                task.pre_commit({TP0: 2})
            assert time.monotonic() - started < 5
            assert [c[0] for c in columns(pg_database)] == ["id", "item"]
            reader.rollback()
        assert task.pre_commit({TP0: 2}) == {TP0: 2}
        assert sql(pg_database, "SELECT id, note, qty FROM orders ORDER BY id") == [(1, None, 1), (2, "n", 5)]
    finally:
        task.stop()
