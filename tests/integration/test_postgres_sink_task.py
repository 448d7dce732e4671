"""The PostgreSQL sink task, driven directly (no Spark, no Kafka) against a real PostgreSQL.

``pg_database`` (from ``conveyor.testing.pytest_plugin``) is the libpq URL of a fresh,
empty database per test. The runtime is replaced by :class:`RecordingContext`, which
records what the task asks of it (rewinds, reports).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from conveyor.api import (
    ConfigError,
    ConnectError,
    DataError,
    ErrantRecordReporter,
    RetriableError,
    Schema,
    SchemaType,
    SinkRecord,
    TopicPartition,
)
from conveyor.connectors.postgres import db
from conveyor.connectors.postgres.config import load_config
from conveyor.connectors.postgres.sink import PostgresSinkConnector, PostgresSinkTask
from conveyor.testing.contexts import RecordingReporter, StubSinkTaskContext, start_sink_task
from conveyor.testing.ports import free_port

pytestmark = pytest.mark.integration

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


RecordingContext = StubSinkTaskContext


# -- helpers --------------------------------------------------------------------------------


def start_task(
    config: Mapping[str, Any],
    partitions: Sequence[TopicPartition] = (TP0,),
    reporter: ErrantRecordReporter | None = None,
) -> tuple[PostgresSinkTask, RecordingContext]:
    return start_sink_task(PostgresSinkTask(), config, partitions, reporter)


def rec(
    offset: int,
    value: Any,
    key: Any = None,
    *,
    partition: int = 0,
    topic: str = "orders",
    value_schema: Schema | None = None,
    key_schema: Schema | None = None,
) -> SinkRecord:
    return SinkRecord(
        topic=topic,
        kafka_partition=partition,
        key=key,
        value=value,
        kafka_offset=offset,
        value_schema=value_schema,
        key_schema=key_schema,
    )


def sql(url: str, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def create_orders(url: str, pk: bool = True) -> None:
    sql(url, f"CREATE TABLE orders (id bigint {'PRIMARY KEY' if pk else ''}, item text, qty integer)")


def terminate_sink_backends(url: str) -> int:
    rows = sql(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE application_name = 'conveyor-postgres-sink' AND pid <> pg_backend_pid()",
    )
    return len(rows)


# -- insert mode ----------------------------------------------------------------------------


def test_insert_mode_buffers_until_batch_size_then_copies(pg_database: str) -> None:
    create_orders(pg_database, pk=False)
    task, _ = start_task({"connection.url": pg_database, "batch.size": "3"})
    try:
        task.put([rec(0, {"id": 1, "item": "apple", "qty": 2}), rec(1, {"id": 2, "item": "pear", "qty": 1})])
        assert sql(pg_database, "SELECT count(*) FROM orders") == [(0,)]  # buffered, below batch.size
        task.put([rec(2, {"id": 3, "item": "fig", "qty": 7})])  # reaches batch.size: written
        assert sql(pg_database, "SELECT count(*) FROM orders") == [(3,)]
        task.put([rec(3, {"id": 4, "item": None, "qty": 5})])
        committed = task.pre_commit({TP0: 4})
        assert committed == {TP0: 4}
        assert sql(pg_database, "SELECT id, item, qty FROM orders ORDER BY id") == [
            (1, "apple", 2),
            (2, "pear", 1),
            (3, "fig", 7),
            (4, None, 5),
        ]
    finally:
        task.stop()


def test_insert_mode_schemaless_missing_fields_become_null_and_whitelist_filters(pg_database: str) -> None:
    sql(pg_database, "CREATE TABLE orders (id bigint, item text, qty integer)")
    task, _ = start_task({"connection.url": pg_database, "fields.whitelist": "id, item"})
    try:
        task.put([rec(0, {"id": 1, "item": "a", "qty": 3, "secret": "x"}), rec(1, {"id": 2, "secret": "y"})])
        assert task.pre_commit({TP0: 2}) == {TP0: 2}
        assert sql(pg_database, "SELECT id, item, qty FROM orders ORDER BY id") == [(1, "a", None), (2, None, None)]
    finally:
        task.stop()


def test_schemaless_values_with_different_keys_of_the_same_size(pg_database: str) -> None:
    sql(pg_database, "CREATE TABLE orders (id bigint, a integer, b integer)")
    task, _ = start_task({"connection.url": pg_database})
    try:
        # Same number of keys, different keys: all three columns are written, none dropped.
        task.put([rec(0, {"id": 1, "a": 10}), rec(1, {"id": 2, "b": 20}), rec(2, {"b": 30, "id": 3})])
        task.pre_commit({TP0: 3})
        assert sql(pg_database, "SELECT id, a, b FROM orders ORDER BY id") == [
            (1, 10, None),
            (2, None, 20),
            (3, None, 30),
        ]
    finally:
        task.stop()
    config = {"connection.url": pg_database, "auto.create": "true", "table.name.format": "auto_${topic}"}
    task, _ = start_task(config)
    try:
        task.put([rec(3, {"id": 1, "a": 10}), rec(4, {"id": 2, "b": "x"})])
        task.pre_commit({TP0: 5})
        assert column_types(pg_database, "auto_orders") == {
            "id": ("bigint", "YES"),
            "a": ("bigint", "YES"),
            "b": ("text", "YES"),
        }
    finally:
        task.stop()


def test_table_name_format_sanitizes_topic_and_accepts_a_schema(pg_database: str) -> None:
    sql(pg_database, "CREATE SCHEMA audit; CREATE TABLE audit.shop_orders_v1 (id bigint)")
    task, _ = start_task(
        {"connection.url": pg_database, "table.name.format": "audit.${topic}"}, [TopicPartition("shop.orders-v1", 0)]
    )
    try:
        task.put([rec(0, {"id": 7}, topic="shop.orders-v1")])
        task.pre_commit({TopicPartition("shop.orders-v1", 0): 1})
        assert sql(pg_database, "SELECT id FROM audit.shop_orders_v1") == [(7,)]
    finally:
        task.stop()


def test_records_of_several_topics_go_to_their_tables_in_one_write(pg_database: str) -> None:
    sql(pg_database, "CREATE TABLE orders (id bigint); CREATE TABLE refunds (id bigint, amount numeric)")
    refunds = TopicPartition("refunds", 0)
    task, _ = start_task({"connection.url": pg_database, "batch.size": 4}, [TP0, refunds])
    try:
        task.put([rec(0, {"id": 1}), rec(0, {"id": 9, "amount": 2.5}, topic="refunds"), rec(1, {"id": 2})])
        task.put([rec(1, {"id": 10, "amount": 1}, topic="refunds")])  # 4 buffered: written
        assert sql(pg_database, "SELECT id FROM orders ORDER BY id") == [(1,), (2,)]
        assert sql(pg_database, "SELECT id, amount::text FROM refunds ORDER BY id") == [(9, "2.5"), (10, "1")]
    finally:
        task.stop()


def test_logical_types_are_converted_and_new_columns_are_picked_up(pg_database: str) -> None:
    sql(pg_database, "CREATE TABLE orders (id bigint, day date, price numeric(10,2))")
    schema = Schema.struct(
        ("id", Schema(SchemaType.INT64)),
        ("day", Schema(SchemaType.INT32, name="org.apache.kafka.connect.data.Date")),
        ("price", Schema(SchemaType.BYTES, name="org.apache.kafka.connect.data.Decimal", parameters={"scale": "2"})),
    )
    task, _ = start_task({"connection.url": pg_database})
    try:
        task.put(
            [rec(0, {"id": 1, "day": 19_000, "price": (12345).to_bytes(2, "big", signed=True)}, value_schema=schema)]
        )
        task.pre_commit({TP0: 1})
        assert sql(pg_database, "SELECT day, price::text FROM orders") == [(dt.date(2022, 1, 8), "123.45")]
        sql(pg_database, "ALTER TABLE orders ADD COLUMN note text")  # the task's column cache is now stale
        task.put([rec(1, {"id": 2, "note": "new column"})])
        task.pre_commit({TP0: 2})
        assert sql(pg_database, "SELECT note FROM orders WHERE id = 2") == [("new column",)]
    finally:
        task.stop()


def test_missing_table_without_auto_create_names_the_table(pg_database: str) -> None:
    task, _ = start_task({"connection.url": pg_database})
    try:
        task.put([rec(0, {"id": 1})])
        with pytest.raises(ConnectError) as err:
            task.pre_commit({TP0: 1})
        message = str(err.value)
        assert '"orders"' in message and "does not exist" in message and "auto.create" in message
        assert not isinstance(err.value, RetriableError)
        # the runtime only logs a failed pre_commit: the next put fails the task with the error
        with pytest.raises(ConnectError) as again:
            task.put([rec(1, {"id": 2})])
        assert again.value is err.value
    finally:
        task.stop()


def test_missing_column_is_a_clear_error(pg_database: str) -> None:
    create_orders(pg_database)
    task, _ = start_task({"connection.url": pg_database})
    try:
        task.put([rec(0, {"id": 1, "colour": "red"})])
        with pytest.raises(ConnectError, match="no column.*colour.*fields.whitelist"):
            task.pre_commit({TP0: 1})
    finally:
        task.stop()


# -- upsert ---------------------------------------------------------------------------------


def test_upsert_record_key_dedupes_within_a_batch_last_record_wins(pg_database: str) -> None:
    create_orders(pg_database)
    sql(pg_database, "INSERT INTO orders VALUES (1, 'old', 0), (9, 'untouched', 9)")
    config = {"connection.url": pg_database, "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id"}
    task, _ = start_task(config)
    try:
        task.put(
            [
                rec(0, {"item": "first", "qty": 1}, key=1),
                rec(1, {"item": "x", "qty": 1}, key=2),
                rec(2, {"item": "second", "qty": 2}, key=1),
                rec(3, {"item": "y", "qty": 2}, key=2),
                rec(4, {"item": "last", "qty": 3}, key=1),
            ]
        )
        assert task.pre_commit({TP0: 5}) == {TP0: 5}
        assert sql(pg_database, "SELECT id, item, qty FROM orders ORDER BY id") == [
            (1, "last", 3),
            (2, "y", 2),
            (9, "untouched", 9),
        ]
        task.put([rec(5, {"item": "again", "qty": 4}, key=2)])
        task.pre_commit({TP0: 6})
        assert sql(pg_database, "SELECT item, qty FROM orders WHERE id = 2") == [("again", 4)]
    finally:
        task.stop()


def test_upsert_record_value_with_struct_schema(pg_database: str) -> None:
    sql(pg_database, "CREATE TABLE orders (region text, id integer, qty integer, PRIMARY KEY (region, id))")
    schema = Schema.struct(
        ("region", Schema(SchemaType.STRING)), ("id", Schema(SchemaType.INT32)), ("qty", Schema(SchemaType.INT32))
    )
    config = {
        "connection.url": pg_database,
        "insert.mode": "UPSERT",
        "pk.mode": "record_value",
        "pk.fields": "region,id",
    }
    task, _ = start_task(config)
    try:
        task.put(
            [
                rec(0, {"region": "eu", "id": 1, "qty": 1}, value_schema=schema),
                rec(1, {"region": "us", "id": 1, "qty": 5}, value_schema=schema),
                rec(2, {"region": "eu", "id": 1, "qty": 2}, value_schema=schema),
            ]
        )
        task.pre_commit({TP0: 3})
        assert sql(pg_database, "SELECT region, id, qty FROM orders ORDER BY region") == [("eu", 1, 2), ("us", 1, 5)]
    finally:
        task.stop()


# -- auto.create ----------------------------------------------------------------------------


def column_types(url: str, table: str) -> dict[str, tuple[str, str]]:
    rows = sql(
        url,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns"
        " WHERE table_name = %s ORDER BY ordinal_position",
        (table,),
    )
    return {name: (data_type, nullable) for name, data_type, nullable in rows}


def primary_key(url: str, table: str) -> list[str]:
    rows = sql(
        url,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
        " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY a.attname",
        (table,),
    )
    return [name for (name,) in rows]


def test_auto_create_from_struct_schema(pg_database: str) -> None:
    schema = Schema.struct(
        ("id", Schema(SchemaType.INT64)),
        ("small", Schema(SchemaType.INT16, optional=True)),
        ("count", Schema(SchemaType.INT32)),
        ("ratio", Schema(SchemaType.FLOAT32, optional=True)),
        ("price", Schema(SchemaType.FLOAT64)),
        ("ok", Schema(SchemaType.BOOLEAN)),
        ("Name", Schema(SchemaType.STRING, optional=True)),
        ("blob", Schema(SchemaType.BYTES, optional=True)),
        ("tags", Schema(SchemaType.ARRAY, optional=True, value_schema=Schema(SchemaType.STRING))),
        ("at", Schema(SchemaType.INT64, name="org.apache.kafka.connect.data.Timestamp", optional=True)),
    )
    config = {
        "connection.url": pg_database,
        "auto.create": "true",
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
    }
    task, _ = start_task(config)
    try:
        value = {
            "id": 1,
            "small": 3,
            "count": 10,
            "ratio": 0.5,
            "price": 9.99,
            "ok": True,
            "Name": "Ann",
            "blob": b"\x00\x01",
            "tags": ["a", "b"],
            "at": 1_700_000_000_000,
        }
        task.put(
            [
                rec(0, value, value_schema=schema),
                rec(1, {"id": 2, "count": 1, "price": 1.0, "ok": False}, value_schema=schema),
            ]
        )
        task.pre_commit({TP0: 2})
        assert column_types(pg_database, "orders") == {
            "id": ("bigint", "NO"),
            "small": ("smallint", "YES"),
            "count": ("integer", "NO"),
            "ratio": ("real", "YES"),
            "price": ("double precision", "NO"),
            "ok": ("boolean", "NO"),
            "Name": ("text", "YES"),
            "blob": ("bytea", "YES"),
            "tags": ("jsonb", "YES"),
            "at": ("timestamp with time zone", "YES"),
        }
        assert primary_key(pg_database, "orders") == ["id"]
        row = sql(pg_database, 'SELECT "Name", blob, tags, at, ratio FROM orders WHERE id = 1')[0]
        assert row[0] == "Ann" and bytes(row[1]) == b"\x00\x01" and row[2] == ["a", "b"]
        assert row[3] == dt.datetime.fromtimestamp(1_700_000_000, dt.timezone.utc) and row[4] == 0.5
        assert sql(pg_database, "SELECT small, tags FROM orders WHERE id = 2") == [(None, None)]
    finally:
        task.stop()


def test_auto_create_schemaless_infers_types_from_the_first_batch(pg_database: str) -> None:
    config = {"connection.url": pg_database, "auto.create": True, "pk.mode": "record_key", "pk.fields": "order_id"}
    task, _ = start_task(config)
    try:
        task.put(
            [
                rec(
                    0,
                    {
                        "n": 1,
                        "x": 1.5,
                        "flag": True,
                        "s": "hi",
                        "doc": {"a": [1, 2]},
                        "arr": [1, "two"],
                        "raw": b"\xff",
                        "later": None,
                    },
                    key=10,
                ),
                rec(
                    1,
                    {"n": 2, "x": None, "flag": False, "s": "yo", "doc": {}, "arr": [], "raw": None, "later": 5},
                    key=11,
                ),
            ]
        )
        task.pre_commit({TP0: 2})
        assert column_types(pg_database, "orders") == {
            "order_id": ("bigint", "NO"),
            "n": ("bigint", "YES"),
            "x": ("double precision", "YES"),
            "flag": ("boolean", "YES"),
            "s": ("text", "YES"),
            "doc": ("jsonb", "YES"),
            "arr": ("jsonb", "YES"),
            "raw": ("bytea", "YES"),
            "later": ("bigint", "YES"),
        }
        assert primary_key(pg_database, "orders") == ["order_id"]
        assert sql(pg_database, "SELECT order_id, doc, arr, later FROM orders ORDER BY order_id") == [
            (10, {"a": [1, 2]}, [1, "two"], None),
            (11, {}, [], 5),
        ]
    finally:
        task.stop()


# -- tombstones -----------------------------------------------------------------------------


def test_tombstone_deletes_by_key_when_delete_enabled(pg_database: str) -> None:
    create_orders(pg_database)
    config = {
        "connection.url": pg_database,
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "pk.fields": "id",
        "delete.enabled": "true",
    }
    task, _ = start_task(config)
    try:
        task.put([rec(0, {"item": "a"}, key=1), rec(1, {"item": "b"}, key=2), rec(2, {"item": "c"}, key=3)])
        task.pre_commit({TP0: 3})
        # delete 1; delete-then-recreate 2 in one batch; recreate-then-delete 3 in one batch.
        task.put(
            [
                rec(3, None, key=1),
                rec(4, None, key=2),
                rec(5, {"item": "b2"}, key=2),
                rec(6, {"item": "c2"}, key=3),
                rec(7, None, key=3),
            ]
        )
        assert task.pre_commit({TP0: 8}) == {TP0: 8}
        assert sql(pg_database, "SELECT id, item FROM orders ORDER BY id") == [(2, "b2")]
    finally:
        task.stop()


def test_tombstone_delete_in_insert_mode_keeps_order_and_struct_keys(pg_database: str) -> None:
    sql(pg_database, "CREATE TABLE orders (shop text, id bigint, item text, PRIMARY KEY (shop, id))")
    config = {"connection.url": pg_database, "pk.mode": "record_key", "delete.enabled": "true"}
    task, _ = start_task(config)
    try:
        k = {"shop": "s1", "id": 1}
        task.put(
            [
                rec(0, {"item": "a"}, key=k),
                rec(1, None, key=k),
                rec(2, {"item": "b"}, key=k),
                rec(3, None, key={"shop": "nope", "id": 5}),
            ]
        )
        task.pre_commit({TP0: 4})
        assert sql(pg_database, "SELECT shop, id, item FROM orders") == [("s1", 1, "b")]
    finally:
        task.stop()


def test_tombstones_are_skipped_without_delete_enabled(pg_database: str) -> None:
    create_orders(pg_database)
    sql(pg_database, "INSERT INTO orders VALUES (1, 'keep', 1)")
    config = {"connection.url": pg_database, "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id"}
    task, _ = start_task(config)
    try:
        task.put([rec(0, None, key=1), rec(1, {"item": "new", "qty": 2}, key=2)])
        assert task.pre_commit({TP0: 2}) == {TP0: 2}
        assert sql(pg_database, "SELECT id, item FROM orders ORDER BY id") == [(1, "keep"), (2, "new")]
    finally:
        task.stop()


# -- exactly once ---------------------------------------------------------------------------


def eo_config(url: str, **extra: Any) -> dict[str, Any]:
    return {"connection.url": url, "name": "orders-sink", "exactly.once": "true", **extra}


def test_exactly_once_stores_offsets_with_rows_and_rewinds_in_open(pg_database: str) -> None:
    create_orders(pg_database)
    task, context = start_task(eo_config(pg_database), [TP0, TP1])
    assert context.rewinds == []  # nothing stored yet
    try:
        task.put([rec(0, {"id": 1}), rec(1, {"id": 2}), rec(0, {"id": 100}, partition=1)])
        assert task.pre_commit({TP0: 2, TP1: 1}) == {}  # Kafka commits nothing
        assert sql(
            pg_database,
            'SELECT connector, topic, "partition", next_offset FROM conveyor_sink_offsets ORDER BY "partition"',
        ) == [("orders-sink", "orders", 0, 2), ("orders-sink", "orders", 1, 1)]
        # Rows and offsets were written by one and the same transaction.
        row_xids = sql(pg_database, "SELECT DISTINCT xmin::text FROM orders")
        offset_xids = sql(pg_database, "SELECT DISTINCT xmin::text FROM conveyor_sink_offsets")
        assert row_xids == offset_xids and len(row_xids) == 1
        task.put([rec(2, {"id": 3})])
        context.closing = True
        assert task.pre_commit({TP0: 3, TP1: 1}) == {}  # closing commit writes the buffer
        task.close([TP0, TP1])
    finally:
        task.stop()

    # A new instance (restart / rebalance) rewinds to the stored offsets.
    task2, context2 = start_task(eo_config(pg_database), [TP0, TP1])
    try:
        assert context2.rewinds == [{TP0: 3, TP1: 1}]
        # Should the runtime redeliver already-committed records anyway, they are dropped.
        task2.put([rec(1, {"id": 2}), rec(2, {"id": 3}), rec(3, {"id": 4})])
        assert task2.pre_commit({TP0: 4, TP1: 1}) == {}
        task2.put([rec(1, {"id": 2}), rec(2, {"id": 3}), rec(0, {"id": 100}, partition=1)])
        assert task2.pre_commit({TP0: 4, TP1: 1}) == {}
        assert sql(pg_database, "SELECT id FROM orders ORDER BY id") == [(1,), (2,), (3,), (4,), (100,)]
        assert sql(pg_database, 'SELECT next_offset FROM conveyor_sink_offsets ORDER BY "partition"') == [(4,), (1,)]
    finally:
        task2.stop()

    # Another connector's offsets are its own.
    task3, context3 = start_task(eo_config(pg_database, name="other"), [TP0])
    task3.stop()
    assert context3.rewinds == []


def test_alter_offsets_rewrites_the_offsets_table_so_tasks_resume_there(pg_database: str) -> None:
    """KIP-875 with exactly.once: the connector's alter_offsets hook writes the new offsets to the
    table (which wins over Kafka's in open) and deletes the rows of reset partitions."""
    create_orders(pg_database)
    task, _ = start_task(eo_config(pg_database), [TP0, TP1])
    try:
        task.put([rec(0, {"id": 1}), rec(0, {"id": 2}, partition=1)])
        task.pre_commit({TP0: 1, TP1: 1})
    finally:
        task.stop()
    assert PostgresSinkConnector().alter_offsets(eo_config(pg_database), {TP0: 7, TP1: None}) is True
    assert sql(pg_database, 'SELECT topic, "partition", next_offset FROM conveyor_sink_offsets') == [("orders", 0, 7)]
    task2, context2 = start_task(eo_config(pg_database), [TP0, TP1])
    task2.stop()
    assert context2.rewinds == [{TP0: 7}]
    assert PostgresSinkConnector().alter_offsets({"connection.url": pg_database}, {TP0: 1}) is False  # at least once


def test_exactly_once_offsets_table_in_a_schema_and_atomic_failure(pg_database: str) -> None:
    create_orders(pg_database)
    sql(pg_database, "CREATE SCHEMA sink_state")
    config = eo_config(pg_database, **{"offsets.table": "sink_state.offsets"})
    task, _ = start_task(config)
    try:
        # Make the offsets write fail after the rows were copied: the whole transaction must go.
        sql(
            pg_database,
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'no offsets today'; END $$;"
            " CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON sink_state.offsets"
            " FOR EACH ROW EXECUTE FUNCTION refuse()",
        )
        task.put([rec(0, {"id": 1}), rec(1, {"id": 2})])
        with pytest.raises(ConnectError, match="no offsets today"):
            task.pre_commit({TP0: 2})
        assert sql(pg_database, "SELECT count(*) FROM orders") == [(0,)]
        assert sql(pg_database, "SELECT count(*) FROM sink_state.offsets") == [(0,)]
        sql(pg_database, "DROP TRIGGER refuse ON sink_state.offsets")
        assert task.pre_commit({TP0: 2}) == {}  # the buffer was kept: retried now
        assert sql(pg_database, "SELECT id FROM orders ORDER BY id") == [(1,), (2,)]
        assert sql(pg_database, "SELECT next_offset FROM sink_state.offsets") == [(2,)]
    finally:
        task.stop()


def test_connector_deletion_removes_its_stored_offsets(pg_database: str) -> None:
    create_orders(pg_database)
    connector = PostgresSinkConnector()
    config = eo_config(pg_database)
    connector.start(config)
    assert connector.task_configs(3) == [config, config, config]
    task, _ = start_task(connector.task_configs(1)[0])
    task.put([rec(0, {"id": 1})])
    task.pre_commit({TP0: 1})
    task.stop()
    connector.stop(connector_deleted=False)
    assert sql(pg_database, "SELECT count(*) FROM conveyor_sink_offsets") == [(1,)]
    connector.stop(connector_deleted=True)
    assert sql(pg_database, "SELECT count(*) FROM conveyor_sink_offsets") == [(0,)]
    assert sql(pg_database, "SELECT id FROM orders") == [(1,)]  # user data stays
    assert connector.cleanup_report() == ["deleted 1 stored offset row(s) of 'orders-sink' from conveyor_sink_offsets"]


def test_update_mode_changes_existing_rows_only_last_record_of_a_key_wins(pg_database: str) -> None:
    create_orders(pg_database)
    sql(pg_database, "INSERT INTO orders VALUES (1, 'old', 0), (2, 'old', 0), (9, 'untouched', 9)")
    config = {"connection.url": pg_database, "insert.mode": "update", "pk.mode": "record_value", "pk.fields": "id"}
    task, _ = start_task(config)
    try:
        task.put([rec(0, {"id": 1, "item": "first", "qty": 1}), rec(1, {"id": 3, "item": "new", "qty": 1}),
                  rec(2, {"id": 1, "item": "last", "qty": 3}), rec(3, {"id": 2, "item": "two", "qty": 2})])
        assert task.pre_commit({TP0: 4}) == {TP0: 4}
        assert sql(pg_database, "SELECT id, item, qty FROM orders ORDER BY id") == [
            (1, "last", 3), (2, "two", 2), (9, "untouched", 9)], "id 3 is not in the table: not written"
    finally:
        task.stop()


def test_kafka_coordinates_as_the_primary_key_make_a_redelivered_record_its_own_row(pg_database: str) -> None:
    config = {"connection.url": pg_database, "insert.mode": "upsert", "pk.mode": "kafka", "auto.create": "true"}
    task, _ = start_task(config, partitions=(TP0, TP1))
    try:
        batch = [rec(0, {"item": "a"}), rec(1, {"item": "b"}), rec(0, {"item": "c"}, partition=1)]
        task.put(batch)
        assert task.pre_commit({TP0: 2, TP1: 1}) == {TP0: 2, TP1: 1}
        task.put([rec(1, {"item": "b again"})])  # read twice after a crash: the same row
        task.pre_commit({TP0: 2, TP1: 1})
        assert sql(pg_database, 'SELECT __connect_topic, __connect_partition, __connect_offset, item FROM orders '
                                'ORDER BY 2, 3') == [("orders", 0, 0, "a"), ("orders", 0, 1, "b again"),
                                                     ("orders", 1, 0, "c")]
        assert sql(pg_database, "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_index i "
                                "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                                "WHERE i.indrelid = 'orders'::regclass AND i.indisprimary ORDER BY a.attnum") == [
            ("__connect_topic", "text"), ("__connect_partition", "integer"), ("__connect_offset", "bigint")]
    finally:
        task.stop()


def test_kafka_coordinates_in_columns_named_by_pk_fields(pg_database: str) -> None:
    sql(pg_database, "CREATE TABLE orders (src text, part integer, pos bigint, item text, PRIMARY KEY (src, part, pos))")
    config = {"connection.url": pg_database, "pk.mode": "kafka", "pk.fields": "src,part,pos"}
    task, _ = start_task(config)
    try:
        task.put([rec(5, {"item": "x"})])
        task.pre_commit({TP0: 6})
        assert sql(pg_database, "SELECT src, part, pos, item FROM orders") == [("orders", 0, 5, "x")]
    finally:
        task.stop()


def test_max_retries_transient_errors_in_a_row_then_the_task_fails(pg_database: str) -> None:
    create_orders(pg_database)
    sql(pg_database,  # a row trigger that kills its own backend: every write of id 13 fails transiently
        "CREATE FUNCTION die() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        "  IF NEW.id = 13 THEN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); END IF;"
        "  RETURN NEW; END $$;"
        " CREATE TRIGGER die BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION die()")
    task, _ = start_task({"connection.url": pg_database, "batch.size": 1, "retry.backoff.ms": 0, "max.retries": 1})
    try:
        with pytest.raises(RetriableError):
            task.put([rec(0, {"id": 13})])
        task.put([rec(1, {"id": 1})])  # a write that succeeds starts the count again
        for expected in (RetriableError, ConnectError):
            with pytest.raises(ConnectError) as err:
                task.put([rec(2, {"id": 13})])
            assert type(err.value) is expected, err.value
        assert "2 in a row, more than max.retries=1" in str(err.value)
        assert sql(pg_database, "SELECT id FROM orders") == [(1,)]
    finally:
        task.stop()


# -- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "key", "fragment"),
    [
        ({}, "connection.url", "required"),
        ({"batch.size": "ten"}, "batch.size", "valid integer"),
        ({"batch.size": 0}, "batch.size", "greater than or equal to 1"),
        ({"auto.create": "maybe"}, "auto.create", "valid boolean"),
        ({"insert.mode": "merge"}, "insert.mode", "'insert', 'upsert' or 'update'"),
        ({"pk.mode": "offset"}, "pk.mode", "'none', 'kafka', 'record_key' or 'record_value'"),
        ({"insert.mode": "upsert"}, "pk.mode", "needs a primary key"),
        ({"insert.mode": "update"}, "pk.mode", "insert.mode=update needs a primary key"),
        ({"pk.mode": "kafka", "pk.fields": "t,p"}, "pk.fields", "none or three pk.fields"),
        ({"pk.mode": "kafka", "delete.enabled": "true"}, "delete.enabled", "pk.mode=record_key"),
        ({"max.retries": "-1"}, "max.retries", "greater than or equal to 0"),
        ({"pk.mode": "record_value"}, "pk.fields", "needs pk.fields"),
        ({"delete.enabled": "true"}, "delete.enabled", "pk.mode=record_key"),
        ({"connection.url": "host=x bogus"}, "connection.url", "not a valid libpq connection string"),
        ({"table.name.format": "a.b.${topic}"}, "table.name.format", "schema.table"),
    ],
)
def test_bad_config_names_the_key_and_expectation(config: dict[str, Any], key: str, fragment: str) -> None:
    full = {"connection.url": "postgresql://u@127.0.0.1:1/db", **config}
    if config == {}:
        full = {}
    with pytest.raises(ConfigError) as err:
        PostgresSinkConnector().validate(full)
    assert key in err.value.errors, err.value.errors
    assert fragment in err.value.errors[key]
    assert key in str(err.value)


def test_bad_url_error_does_not_echo_the_password() -> None:
    with pytest.raises(ConfigError) as err:
        PostgresSinkConnector().validate({"connection.url": "postgresql://u:hunter2@host:5432/db?bogus=1"})
    assert "connection.url" in err.value.errors and "hunter2" not in str(err.value)


def test_exactly_once_task_needs_the_connector_name() -> None:
    task = PostgresSinkTask()
    task.initialize(RecordingContext({}))
    with pytest.raises(ConfigError) as err:
        task.start({"connection.url": "postgresql://u@127.0.0.1:1/db", "exactly.once": "true"})
    assert "name" in err.value.errors


# -- connectivity and transient errors ------------------------------------------------------


def test_unreachable_database_fails_start_with_host_and_port_but_no_password() -> None:
    port = free_port()
    config = {"connection.url": f"postgresql://sinkuser:s3cr3t-pw@127.0.0.1:{port}/db", "connection.timeout.ms": 2000}
    with pytest.raises(ConnectError) as err:
        PostgresSinkConnector().start(config)
    assert f"host=127.0.0.1 port={port}" in str(err.value) and "s3cr3t-pw" not in str(err.value)
    task = PostgresSinkTask()
    task.initialize(RecordingContext(config))
    with pytest.raises(ConnectError) as err2:
        task.start({**config, "connection.password": "other-secret"})
    message = str(err2.value)
    assert "cannot connect to PostgreSQL" in message and f"port={port}" in message
    assert "s3cr3t-pw" not in message and "other-secret" not in message
    assert not isinstance(err2.value, RetriableError)


def test_terminated_backend_raises_retriable_then_reconnects_without_duplicates(pg_database: str) -> None:
    create_orders(pg_database)
    task, _ = start_task({"connection.url": pg_database, "batch.size": 4, "retry.backoff.ms": 250})
    try:
        task.put([rec(0, {"id": 1}), rec(1, {"id": 2}), rec(2, {"id": 3}), rec(3, {"id": 4})])
        assert sql(pg_database, "SELECT count(*) FROM orders") == [(4,)]
        task.put([rec(4, {"id": 5}), rec(5, {"id": 6})])  # buffered
        assert terminate_sink_backends(pg_database) == 1
        batch = [rec(6, {"id": 7}), rec(7, {"id": 8})]
        with pytest.raises(RetriableError) as err:
            task.put(batch)
        assert err.value.delay == timedelta(milliseconds=250)
        assert sql(pg_database, "SELECT count(*) FROM orders") == [(4,)]
        task.put(batch)  # the runtime redelivers the same batch: the task reconnects
        assert task.pre_commit({TP0: 8}) == {TP0: 8}
        assert sql(pg_database, "SELECT id FROM orders ORDER BY id") == [(i,) for i in range(1, 9)]
    finally:
        task.stop()


def test_connection_lost_mid_write_commits_nothing_in_exactly_once_mode(pg_database: str) -> None:
    create_orders(pg_database)
    # A row trigger that kills its own backend in the middle of the COPY (after rows 1 and 2).
    sql(
        pg_database,
        "CREATE TABLE chaos (armed boolean NOT NULL); INSERT INTO chaos VALUES (true);"
        " CREATE FUNCTION die() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        "  IF NEW.id = 3 AND (SELECT armed FROM chaos) THEN"
        "   PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); END IF;"
        "  RETURN NEW; END $$;"
        " CREATE TRIGGER die BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION die()",
    )
    task, context = start_task(eo_config(pg_database, **{"batch.size": 3}))
    try:
        batch = [rec(0, {"id": 1}), rec(1, {"id": 2}), rec(2, {"id": 3}), rec(3, {"id": 4})]
        with pytest.raises(RetriableError, match="nothing was committed"):
            task.put(batch)
        assert sql(pg_database, "SELECT count(*) FROM orders") == [(0,)]
        assert sql(pg_database, "SELECT count(*) FROM conveyor_sink_offsets") == [(0,)]
        sql(pg_database, "UPDATE chaos SET armed = false")
        task.put(batch)
        assert task.pre_commit({TP0: 4}) == {}
        assert sql(pg_database, "SELECT id FROM orders ORDER BY id") == [(1,), (2,), (3,), (4,)]
        assert sql(pg_database, "SELECT next_offset FROM conveyor_sink_offsets") == [(4,)]
    finally:
        task.stop()


# -- records that cannot be rows, revoked partitions ----------------------------------------


def test_unmappable_records_go_to_the_errant_record_reporter(pg_database: str) -> None:
    create_orders(pg_database)
    reporter = RecordingReporter()
    task, _ = start_task({"connection.url": pg_database}, reporter=reporter)
    try:
        task.put([rec(0, {"id": 1}), rec(1, "not a struct"), rec(2, {"id": 3})])
        assert task.pre_commit({TP0: 3}) == {TP0: 3}
        assert sql(pg_database, "SELECT id FROM orders ORDER BY id") == [(1,), (3,)]
        assert [(r.kafka_offset, type(e)) for r, e in reporter.reported] == [(1, DataError)]
    finally:
        task.stop()
    task2, _ = start_task({"connection.url": pg_database})
    try:
        task2.put([rec(3, [1, 2, 3])])
        with pytest.raises(DataError, match="orders-0@3.*not a struct"):
            task2.pre_commit({TP0: 4})
    finally:
        task2.stop()


def test_close_drops_buffered_records_of_revoked_partitions(pg_database: str) -> None:
    create_orders(pg_database)
    task, _ = start_task({"connection.url": pg_database}, [TP0, TP1])
    try:
        task.put([rec(0, {"id": 1}), rec(0, {"id": 100}, partition=1)])
        task.close([TP1])
        assert task.pre_commit({TP0: 1}) == {TP0: 1}
        assert sql(pg_database, "SELECT id FROM orders") == [(1,)]
    finally:
        task.stop()


def test_data_rejected_by_postgres_fails_with_connect_error(pg_database: str) -> None:
    sql(pg_database, "CREATE TABLE orders (id bigint NOT NULL, doc jsonb)")
    task, _ = start_task({"connection.url": pg_database})
    try:
        task.put([rec(0, {"id": None, "doc": {"k": json.dumps("v")}})])
        with pytest.raises(ConnectError, match="NotNullViolation") as err:
            task.pre_commit({TP0: 1})
        assert not isinstance(err.value, RetriableError)
    finally:
        task.stop()


def test_connections_keep_alive_and_bound_unacknowledged_writes_unless_the_url_says_otherwise(pg_database: str) -> None:
    with db.connect(load_config({"connection.url": pg_database, "connection.timeout.ms": "90000"})) as conn:
        params = conn.info.get_parameters()
    assert (params["keepalives"], params["keepalives_idle"], params["keepalives_count"]) == ("1", "30", "3")
    assert (params["tcp_user_timeout"], params["connect_timeout"]) == ("90000", "90")
    url = pg_database + ("&" if "?" in pg_database else "?") + "keepalives_idle=7"
    with db.connect(load_config({"connection.url": url})) as conn:
        params = conn.info.get_parameters()
    assert (params["keepalives_idle"], params["tcp_user_timeout"]) == ("7", "60000")
