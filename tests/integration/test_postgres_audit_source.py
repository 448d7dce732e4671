"""The PostgreSQL audit source connector, driven directly (no Spark, no Kafka) against a real PostgreSQL.

``pg_database`` (from ``conveyor.testing.pytest_plugin``) is the libpq URL of a fresh, empty
database per test. The runtime is replaced by ``_audit_source.DictContext``: committed source
offsets come from a dict, transaction-boundary requests are counted.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from _audit_source import (
    CountingTransactions,
    TcpProxy,
    config,
    functions,
    make_tables,
    names_of,
    poll_until,
    relations,
    role,
    schema_exists,
    sql,
    start_connector,
    start_task,
    triggers,
    with_user,
)

from conveyor.api import (
    ConfigError,
    ConnectError,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    RetriableError,
    SourceRecord,
)
from conveyor.connectors.postgres_audit.config import AuditNames, connector_slug, load_config
from conveyor.connectors.postgres_audit.provision import SCHEMA_MARKER
from conveyor.connectors.postgres_audit.source import PostgresAuditSourceConnector

pytestmark = pytest.mark.integration


def test_start_creates_audit_table_function_and_row_triggers(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, tables="public.orders, sales.lines")
    connector = start_connector(cfg)
    names = names_of(cfg)
    slug = connector_slug("orders-audit")
    assert slug.startswith("orders_audit_") and names.table == f"{slug}_log"
    assert connector.provisioned == [
        "created schema conveyor_audit",
        f"created table conveyor_audit.{slug}_log",
        f"created function conveyor_audit.{slug}_capture()",
        f"created trigger conveyor_audit_{slug} on public.orders",
        f"created trigger conveyor_audit_{slug} on sales.lines",
    ]
    function = f"conveyor_audit.{slug}_capture()"
    assert triggers(pg_database) == {
        (f"conveyor_audit_{slug}", "public.orders", function),
        (f"conveyor_audit_{slug}", "sales.lines", function),
    }
    # AFTER INSERT/UPDATE/DELETE, FOR EACH ROW, on each table
    events = sql(
        pg_database,
        "SELECT event_object_schema || '.' || event_object_table, event_manipulation, action_timing,"
        " action_orientation FROM information_schema.triggers WHERE trigger_name = %s",
        (names.trigger,),
    )
    assert sorted(events) == sorted(
        (table, op, "AFTER", "ROW")
        for table in ("public.orders", "sales.lines")
        for op in ("INSERT", "UPDATE", "DELETE")
    )
    columns = sql(
        pg_database,
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = 'conveyor_audit' AND table_name = %s ORDER BY ordinal_position",
        (names.table,),
    )
    assert columns == [
        ("id", "bigint"),
        ("table_schema", "text"),
        ("table_name", "text"),
        ("op", "character"),
        ("before", "jsonb"),
        ("after", "jsonb"),
        ("pk", "jsonb"),
        ("txid", "bigint"),
        ("captured_at", "timestamp with time zone"),
    ]
    assert relations(pg_database, "conveyor_audit") == {
        names.table,
        f"{names.table}_id_seq",
        names.index,
        f"{names.table}_pkey",
    }
    assert sql(pg_database, "SELECT prosecdef FROM pg_proc WHERE proname = %s", (names.function,)) == [(True,)]
    assert sql(pg_database, "SELECT obj_description('conveyor_audit'::regnamespace, 'pg_namespace')") == [
        (SCHEMA_MARKER,)
    ]
    connector.stop()


def test_start_is_idempotent_concurrent_safe_and_follows_the_table_list(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, tables="public.orders, public.customers")
    first = start_connector(cfg)
    assert len(first.provisioned) == 5
    before = sql(pg_database, "SELECT oid, tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY oid")

    again = start_connector(cfg)  # e.g. a driver restart
    assert again.provisioned == []
    assert sql(pg_database, "SELECT oid, tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY oid") == before

    # customers dropped from the configuration: its trigger goes, orders' stays untouched
    slug = names_of(cfg).slug
    narrowed = start_connector(config(pg_database, tables="public.orders"))
    assert narrowed.provisioned == [f"dropped trigger conveyor_audit_{slug} on public.customers (no longer configured)"]
    assert {t[1] for t in triggers(pg_database)} == {"public.orders"}

    # eight connectors starting at once on the same (new) audit schema: the advisory lock serialises them
    errors: list[BaseException] = []

    def start(i: int) -> None:
        try:
            start_connector(config(pg_database, name=f"c{i}", tables="public.customers", **{"audit.schema": "shared"}))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert {f"c{i}_log" for i in range(8)} <= relations(pg_database, "shared")
    assert len([t for t in triggers(pg_database) if t[1] == "public.customers"]) == 8


def test_missing_table_or_table_without_primary_key_fails_before_anything_is_created(pg_database: str) -> None:
    make_tables(pg_database)
    sql(pg_database, "CREATE TABLE events (at timestamptz, what text)")
    sql(pg_database, "CREATE VIEW big_orders AS SELECT * FROM orders WHERE qty > 10")

    with pytest.raises(ConfigError) as missing:
        start_connector(config(pg_database, tables="public.orders, public.nope, ghost.orders"))
    message = str(missing.value)
    assert "tables" in missing.value.errors
    assert "table public.nope does not exist" in message
    assert "table ghost.orders does not exist (no schema 'ghost')" in message

    with pytest.raises(ConfigError) as no_pk:
        start_connector(config(pg_database, tables="public.orders, public.events, public.big_orders"))
    assert "table public.events has no primary key" in str(no_pk.value)
    assert "public.big_orders is a view" in str(no_pk.value)

    # one transaction: the valid table got nothing either
    assert not schema_exists(pg_database, "conveyor_audit")
    assert triggers(pg_database) == set()


def test_partitioned_tables_are_captured_under_the_parent_name(pg_database: str) -> None:
    sql(
        pg_database,
        "CREATE TABLE events (id bigint, region text, note text, PRIMARY KEY (id, region)) PARTITION BY LIST (region)",
    )
    sql(pg_database, "CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu')")
    sql(pg_database, "CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us')")
    with pytest.raises(ConfigError, match="events_eu is a partition of public.events"):
        start_connector(config(pg_database, tables="public.events, public.events_eu"))
    with pytest.raises(ConfigError, match="own audit table"):
        start_connector(config(pg_database, name="a", tables="public.events, conveyor_audit.a_log"))

    cfg = config(pg_database, tables="public.events")
    connector = start_connector(cfg)
    sql(pg_database, "INSERT INTO events VALUES (1, 'eu', 'x'), (2, 'us', 'y')")
    sql(pg_database, "UPDATE events SET region = 'us' WHERE id = 1")  # moves the row: delete + insert
    task = start_task(cfg)
    try:
        records = poll_until(task, 4)
        assert [(r.source_partition["table"], r.value["op"], r.key) for r in records] == [
            ("events", "c", {"id": 1, "region": "eu"}),
            ("events", "c", {"id": 2, "region": "us"}),
            ("events", "d", {"id": 1, "region": "eu"}),
            ("events", "c", {"id": 1, "region": "us"}),
        ]
    finally:
        task.stop()
    connector.stop(connector_deleted=True)
    assert sql(pg_database, "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal") == [(0,)]  # clones too


def test_permission_denied_names_the_missing_privilege_and_creates_nothing(pg_database: str) -> None:
    make_tables(pg_database)
    database = urlsplit(pg_database).path[1:]
    with (
        role(
            pg_database, f'GRANT CREATE ON DATABASE "{database}" TO {{role}}', "GRANT USAGE ON SCHEMA sales TO {role}"
        ) as auditor,
        role(pg_database, "GRANT INSERT, UPDATE ON public.orders TO {role}") as app,
    ):
        cfg = config(pg_database, tables="public.orders, sales.lines", **{"connection.user": auditor})
        with pytest.raises(ConnectError) as denied:
            start_connector(cfg)
        message = str(denied.value)
        assert "TRIGGER privilege on table public.orders" in message
        assert "TRIGGER privilege on table sales.lines" in message
        assert "nothing was created" in message
        assert not schema_exists(pg_database, "conveyor_audit")
        assert triggers(pg_database) == set()

        sql(pg_database, f'GRANT TRIGGER ON public.orders, sales.lines TO "{auditor}"')
        connector = start_connector(cfg)
        assert len(connector.provisioned) == 5
        # writers need no privilege on the audit schema: the trigger function is SECURITY DEFINER
        sql(with_user(pg_database, app), "INSERT INTO orders VALUES (1, 'apple', 2)")
        task = start_task(cfg)
        try:
            (record,) = poll_until(task, 1)
            assert record.value["after"] == {"id": 1, "item": "apple", "qty": 2}
        finally:
            task.stop()
        connector.stop(connector_deleted=True)
        assert not schema_exists(pg_database, "conveyor_audit")


def test_a_schema_the_role_cannot_create_in_is_named(pg_database: str) -> None:
    make_tables(pg_database)
    sql(pg_database, "CREATE SCHEMA audit_locked")
    with role(
        pg_database, "GRANT TRIGGER ON public.orders TO {role}", "GRANT USAGE ON SCHEMA audit_locked TO {role}"
    ) as r:
        cfg = config(pg_database, **{"connection.user": r, "audit.schema": "audit_locked"})
        with pytest.raises(ConnectError, match="CREATE privilege on schema audit_locked"):
            start_connector(cfg)
    assert relations(pg_database, "audit_locked") == set()


# -- capture --------------------------------------------------------------------------------------


def test_insert_update_delete_are_captured_in_order_with_images_and_keys(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, tables="public.orders, sales.lines", **{"topic.prefix": "pg1."})
    connector = start_connector(cfg)
    task = start_task(connector.task_configs(1)[0])
    try:
        assert task.poll() == []  # idle: blocks up to poll.interval.ms, then nothing
        with psycopg.connect(pg_database, autocommit=True) as conn:
            with conn.transaction():
                conn.execute("INSERT INTO orders VALUES (1, 'apple', 2), (2, 'pear', 1)")
                conn.execute("INSERT INTO sales.lines VALUES (1, 1, 'A-1'), (1, 2, 'B-2')")
            txid = conn.execute("SELECT txid_current() - 1").fetchone()[0]  # type: ignore[index]
            conn.execute("UPDATE orders SET qty = 5 WHERE id = 1")
            conn.execute("UPDATE orders SET id = 3 WHERE id = 2")  # primary key change
            conn.execute("DELETE FROM orders WHERE id = 1")
            conn.execute("DELETE FROM sales.lines WHERE order_id = 1 AND line_no = 2")
        started = time.time() * 1000
        records = poll_until(task, 8)
        assert [r.source_offset["id"] for r in records] == list(range(1, 9))
        summary = [(r.topic, r.source_partition, r.key, r.value["op"]) for r in records]
        orders = {"schema": "public", "table": "orders"}
        lines = {"schema": "sales", "table": "lines"}
        assert summary == [
            ("pg1.public.orders", orders, {"id": 1}, "c"),
            ("pg1.public.orders", orders, {"id": 2}, "c"),
            ("pg1.sales.lines", lines, {"order_id": 1, "line_no": 1}, "c"),  # key in primary-key order
            ("pg1.sales.lines", lines, {"order_id": 1, "line_no": 2}, "c"),
            ("pg1.public.orders", orders, {"id": 1}, "u"),
            ("pg1.public.orders", orders, {"id": 3}, "u"),
            ("pg1.public.orders", orders, {"id": 1}, "d"),
            ("pg1.sales.lines", lines, {"order_id": 1, "line_no": 2}, "d"),
        ]
        first, update, key_change, delete = records[0], records[4], records[5], records[6]
        assert first.value["before"] is None
        assert first.value["after"] == {"id": 1, "item": "apple", "qty": 2}
        assert first.value["source"] == {"schema": "public", "table": "orders", "txid": txid, "audit_id": 1}
        assert records[3].value["source"]["txid"] == txid  # same transaction
        assert update.value["before"] == {"id": 1, "item": "apple", "qty": 2}
        assert update.value["after"] == {"id": 1, "item": "apple", "qty": 5}
        assert key_change.value["before"]["id"] == 2 and key_change.value["after"]["id"] == 3
        assert delete.value["before"] == {"id": 1, "item": "apple", "qty": 5}
        assert delete.value["after"] is None
        for r in records:
            assert r.timestamp == r.value["ts_ms"]
            assert abs(r.timestamp - started) < 60_000  # type: ignore[operator]
            assert r.key_schema is None and r.value_schema is None
        assert task.offsets == {t: 8 if t.table == "lines" else 7 for t in load_config(cfg).tables}
        assert task.poll() == []
    finally:
        task.stop()
        connector.stop()


def test_offsets_resume_after_the_stored_id(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, tables="public.orders, public.customers", **{"poll.max.rows": "4"})
    start_connector(cfg)
    sql(pg_database, "INSERT INTO orders SELECT g, 'item' || g, g FROM generate_series(1, 10) g")
    sql(pg_database, "INSERT INTO customers VALUES (1, 'ann')")

    task = start_task(cfg)
    batch = task.poll()
    task.stop()
    assert [r.source_offset["id"] for r in batch] == [1, 2, 3, 4]  # poll.max.rows
    stored = batch[-1].source_offset

    resumed = start_task(cfg, offsets={("public", "orders"): stored})
    try:
        assert resumed.context.offset_storage_reader().asked == [  # type: ignore[attr-defined]
            {"schema": "public", "table": "orders"},
            {"schema": "public", "table": "customers"},
        ]
        rest = poll_until(resumed, 7)
        assert [(r.source_partition["table"], r.source_offset["id"]) for r in rest] == [
            *(("orders", i) for i in range(5, 11)),
            ("customers", 11),
        ]
        assert [r.key["id"] for r in rest[:-1]] == list(range(5, 11))
    finally:
        resumed.stop()

    # a stored offset per table: customers already done, orders resumes after 8
    third = start_task(cfg, offsets={("public", "orders"): {"id": 8}, ("public", "customers"): {"id": 11}})
    try:
        assert [r.source_offset["id"] for r in poll_until(third, 2)] == [9, 10]
        assert third.poll() == []
    finally:
        third.stop()

    with pytest.raises(ConnectError, match="not"):
        start_task(cfg, offsets={("public", "orders"): {"position": "x"}})


def test_a_smaller_id_committed_late_is_not_skipped_and_rollbacks_do_not_block(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, **{"poll.interval.ms": "300"})
    connector = start_connector(cfg)
    task = start_task(cfg)
    slow = psycopg.connect(pg_database)
    fast = psycopg.connect(pg_database, autocommit=True)
    try:
        slow.execute("INSERT INTO orders VALUES (1, 'slow', 1)")  # takes audit id 1, not committed
        fast.execute("INSERT INTO orders VALUES (2, 'fast', 1)")  # audit id 2, committed first
        # id 2 is visible but id 1 may still commit: nothing is emitted yet (an offset {"id": 2} would lose 1)
        assert task.poll() == []
        slow.commit()
        records = poll_until(task, 2)
        assert [(r.source_offset["id"], r.key["id"]) for r in records] == [(1, 1), (2, 2)]

        slow.execute("INSERT INTO orders VALUES (3, 'never', 1)")  # audit id 3 ...
        fast.execute("INSERT INTO orders VALUES (4, 'later', 1)")  # audit id 4
        slow.rollback()  # ... rolled back: a permanent gap that must not stall capture
        (after_gap,) = poll_until(task, 1, timeout=5)
        assert (after_gap.source_offset["id"], after_gap.key["id"]) == (4, 4)
    finally:
        slow.close()
        fast.close()
        task.stop()
        connector.stop()


def test_concurrent_writers_every_committed_change_exactly_once_in_id_order(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, tables="public.orders, public.customers", **{"poll.max.rows": "7"})
    start_connector(cfg)
    task = start_task(cfg)
    committed: list[int] = []  # order ids whose insert committed
    lock = threading.Lock()

    def writer(w: int) -> None:
        rng = random.Random(w)
        with psycopg.connect(pg_database) as conn:
            for i in range(40):
                oid = w * 1000 + i
                conn.execute("INSERT INTO orders VALUES (%s, 'w', %s)", (oid, w))
                if rng.random() < 0.3:
                    conn.execute("INSERT INTO customers VALUES (%s, 'c')", (oid,))
                time.sleep(rng.random() * 0.01)  # interleave with other writers while holding the ids
                if rng.random() < 0.2:
                    conn.rollback()
                else:
                    conn.commit()
                    with lock:
                        committed.append(oid)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    records: list[SourceRecord] = []
    try:
        while any(t.is_alive() for t in threads):
            records.extend(task.poll())
        for t in threads:
            t.join()
        expected = sql(pg_database, f"SELECT count(*) FROM conveyor_audit.{names_of(cfg).table}")[0][0]
        records.extend(poll_until(task, expected - len(records)))
        assert task.poll() == []
    finally:
        task.stop()
    ids = [r.source_offset["id"] for r in records]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)  # strictly in id order, no duplicates
    emitted_orders = sorted(r.key["id"] for r in records if r.source_partition["table"] == "orders")
    assert emitted_orders == sorted(committed)  # every committed change, nothing rolled back

    # a restart from any committed offset continues with exactly the rest
    cut = records[len(records) // 2]
    resumed = start_task(cfg, offsets={("public", "orders"): cut.source_offset, ("public", "customers"): {"id": 0}})
    try:
        rest = poll_until(
            resumed,
            sum(1 for r in records if r.source_partition["table"] == "customers")
            + sum(
                1
                for r in records
                if r.source_partition["table"] == "orders" and r.source_offset["id"] > cut.source_offset["id"]
            ),
        )
        assert resumed.poll() == []
    finally:
        resumed.stop()
    assert [r.source_offset["id"] for r in rest if r.source_partition["table"] == "orders"] == [
        r.source_offset["id"]
        for r in records
        if r.source_partition["table"] == "orders" and r.source_offset["id"] > cut.source_offset["id"]
    ]


def test_poll_waits_for_a_notification_and_returns_as_soon_as_a_change_commits(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, **{"poll.interval.ms": "10000"})
    connector = start_connector(cfg)
    task = start_task(cfg)
    try:
        timer = threading.Timer(0.3, sql, args=(pg_database, "INSERT INTO orders VALUES (1, 'x', 1)"))
        started = time.monotonic()
        timer.start()
        records = task.poll()
        elapsed = time.monotonic() - started
        assert [r.key for r in records] == [{"id": 1}]
        assert 0.25 < elapsed < 3, elapsed

        quick = start_task({**cfg, "poll.interval.ms": "250"}, offsets={("public", "orders"): {"id": 1}})
        started = time.monotonic()
        assert quick.poll() == []  # idle: returns [] after poll.interval.ms
        assert 0.2 < time.monotonic() - started < 2
        quick.stop()
    finally:
        task.stop()
        connector.stop()


def test_tasks_max_splits_tables_round_robin_without_empty_tasks(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, tables="public.orders, public.customers, sales.lines", **{"tasks.max": "2"})
    connector = start_connector(cfg)
    assert [c["tables"] for c in connector.task_configs(2)] == ["public.orders,sales.lines", "public.customers"]
    assert [c["tables"] for c in connector.task_configs(5)] == ["public.orders", "public.customers", "sales.lines"]
    assert [c["tables"] for c in connector.task_configs(1)] == ["public.orders,public.customers,sales.lines"]
    for c in connector.task_configs(2):
        assert c["name"] == "orders-audit" and c["connection.url"] == pg_database

    sql(pg_database, "INSERT INTO orders VALUES (1, 'a', 1)")
    sql(pg_database, "INSERT INTO customers VALUES (1, 'ann')")
    sql(pg_database, "INSERT INTO sales.lines VALUES (1, 1, 'A')")
    tasks = [start_task(c) for c in connector.task_configs(2)]
    try:
        first = poll_until(tasks[0], 2)
        second = poll_until(tasks[1], 1)
        assert [r.topic for r in first] == ["public.orders", "sales.lines"]
        assert [r.topic for r in second] == ["public.customers"]
        assert tasks[0].poll() == [] and tasks[1].poll() == []
    finally:
        for t in tasks:
            t.stop()


def test_exactly_once_declarations_and_one_transaction_per_batch(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, **{"poll.max.rows": "3"})
    connector = start_connector(cfg)
    assert connector.exactly_once_support(cfg) is ExactlyOnceSupport.SUPPORTED
    assert connector.can_define_transaction_boundaries(cfg) is ConnectorTransactionBoundaries.SUPPORTED
    sql(pg_database, "INSERT INTO orders SELECT g, 'x', 1 FROM generate_series(1, 7) g")
    transactions = CountingTransactions()
    task = start_task(cfg, transactions=transactions)
    try:
        batches = [task.poll() for _ in range(4)]
        assert [len(b) for b in batches] == [3, 3, 1, 0]
        assert transactions.commits == 3 and transactions.aborts == 0  # one per non-empty batch
        task.commit_record(batches[0][0], None)  # no-ops
        task.commit()
    finally:
        task.stop()


def test_broken_connection_is_retriable_and_the_task_resumes_without_gaps(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, **{"poll.max.rows": "2"})
    start_connector(cfg)
    sql(pg_database, "INSERT INTO orders SELECT g, 'x', 1 FROM generate_series(1, 4) g")
    task = start_task(cfg)
    try:
        assert [r.source_offset["id"] for r in task.poll()] == [1, 2]
        sql(
            pg_database,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'conveyor-postgres-audit-source' AND pid <> pg_backend_pid()",
        )
        with pytest.raises(RetriableError, match="lost the PostgreSQL connection"):
            task.poll()
        assert [r.source_offset["id"] for r in poll_until(task, 2)] == [3, 4]
    finally:
        task.stop()


def test_unreachable_database_while_polling_is_retriable_until_it_is_back(pg_database: str) -> None:
    make_tables(pg_database)
    proxy = TcpProxy(pg_database)
    cfg = config(proxy.url, **{"connection.timeout.ms": "2000"})
    start_connector(cfg)
    sql(pg_database, "INSERT INTO orders VALUES (1, 'a', 1)")
    task = start_task(cfg)
    try:
        assert [r.key for r in task.poll()] == [{"id": 1}]
        proxy.close()
        with pytest.raises(RetriableError, match="lost the PostgreSQL connection"):
            task.poll()
        with pytest.raises(RetriableError, match="cannot connect to PostgreSQL.*retrying"):
            task.poll()
        sql(pg_database, "INSERT INTO orders VALUES (2, 'b', 1)")
        proxy.reopen()
        assert [r.key for r in poll_until(task, 1)] == [{"id": 2}]
    finally:
        task.stop()
        proxy.close()


# -- cleanup (KIP-883 / KAFKA-14651) --------------------------------------------------------------


def test_connector_deleted_drops_exactly_its_objects_and_is_idempotent(pg_database: str) -> None:
    make_tables(pg_database)
    a_cfg = config(pg_database, name="orders-audit", tables="public.orders, public.customers")
    b_cfg = config(pg_database, name="billing", tables="public.orders")
    a, b = start_connector(a_cfg), start_connector(b_cfg)
    a_names, b_names = names_of(a_cfg), names_of(b_cfg)
    # a table a no longer captures, from an earlier configuration of a: still a's, still dropped
    sql(pg_database, "CREATE TABLE legacy (id int PRIMARY KEY)")
    start_connector(config(pg_database, name="orders-audit", tables="public.legacy, public.orders, public.customers"))
    sql(pg_database, "INSERT INTO orders VALUES (1, 'a', 1)")

    a.stop(connector_deleted=True)
    slug = a_names.slug
    assert a.cleanup_report() == [
        f"dropped trigger conveyor_audit_{slug} on public.customers",
        f"dropped trigger conveyor_audit_{slug} on public.legacy",
        f"dropped trigger conveyor_audit_{slug} on public.orders",
        f"dropped function conveyor_audit.{slug}_capture()",
        f"dropped table conveyor_audit.{slug}_log (with its sequence and index)",
    ]
    # b's objects survive, and so does the schema they live in
    assert triggers(pg_database) == {("conveyor_audit_billing", "public.orders", "conveyor_audit.billing_capture()")}
    assert relations(pg_database, "conveyor_audit") == {
        "billing_log",
        "billing_log_id_seq",
        "billing_log_pkey",
        b_names.index,
    }
    assert functions(pg_database, "conveyor_audit") == {"billing_capture"}
    assert sql(pg_database, "SELECT count(*) FROM conveyor_audit.billing_log") == [(1,)]
    # the captured tables and their data are the user's: untouched
    assert sql(pg_database, "SELECT count(*) FROM orders") == [(1,)]

    a.stop(connector_deleted=True)  # idempotent: nothing left, still a success
    assert a.cleanup_report() == [
        "nothing to drop: no audit objects of connector 'orders-audit' left in schema conveyor_audit"
    ]

    b.stop(connector_deleted=True)  # the last one: the schema Conveyor created goes too
    assert b.cleanup_report()[-1] == "dropped schema conveyor_audit (created by Conveyor, now empty)"
    assert not schema_exists(pg_database, "conveyor_audit")
    assert triggers(pg_database) == set()


def test_an_audit_schema_that_existed_before_is_never_dropped(pg_database: str) -> None:
    make_tables(pg_database)
    sql(pg_database, "CREATE SCHEMA audit")
    connector = start_connector(config(pg_database, **{"audit.schema": "audit"}))
    connector.stop(connector_deleted=True)
    assert not any("schema" in line for line in connector.cleanup_report())
    assert schema_exists(pg_database, "audit") and relations(pg_database, "audit") == set()


def test_stop_without_deletion_removes_nothing(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, tables="public.orders, public.customers")
    connector = start_connector(cfg)
    task = start_task(cfg)
    before = (triggers(pg_database), relations(pg_database, "conveyor_audit"), functions(pg_database, "conveyor_audit"))
    task.stop(connector_deleted=True)  # tasks never drop anything: the connector owns the objects
    connector.stop(connector_deleted=False)
    assert connector.cleanup_report() == []
    after = (triggers(pg_database), relations(pg_database, "conveyor_audit"), functions(pg_database, "conveyor_audit"))
    assert after == before
    sql(pg_database, "INSERT INTO orders VALUES (1, 'still captured', 1)")
    assert sql(pg_database, f"SELECT count(*) FROM conveyor_audit.{names_of(cfg).table}") == [(1,)]


def test_cleanup_against_an_unreachable_database_raises_connect_error_and_removes_nothing(pg_database: str) -> None:
    make_tables(pg_database)
    proxy = TcpProxy(pg_database)
    cfg = config(proxy.url, tables="public.orders, public.customers", **{"connection.timeout.ms": "2000"})
    connector = start_connector(cfg)
    before = triggers(pg_database)
    proxy.close()

    with pytest.raises(ConnectError) as unreachable:
        connector.stop(connector_deleted=True)
    message = str(unreachable.value)
    assert "cannot connect to PostgreSQL" in message and f"port={proxy.port}" in message
    assert triggers(pg_database) == before and len(before) == 2
    assert connector.cleanup_report() == []

    # the runtime retries once the database is back: now it succeeds
    retry = PostgresAuditSourceConnector()
    with pytest.raises(ConnectError, match="never received a valid configuration"):
        retry.stop(connector_deleted=True)
    retry.start(config(pg_database, tables="public.orders, public.customers"))
    retry.stop(connector_deleted=True)
    assert len(retry.cleanup_report()) == 5
    assert triggers(pg_database) == set()


def test_cleanup_is_all_or_nothing_when_a_lock_cannot_be_had(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, tables="public.orders, public.customers", **{"ddl.lock.timeout.ms": "300"})
    connector = start_connector(cfg)
    writer = psycopg.connect(pg_database)
    try:
        writer.execute("INSERT INTO orders VALUES (1, 'open transaction', 1)")  # holds orders until commit
        # cleanup can drop customers' trigger, but blocks on orders: it must not drop anything
        with pytest.raises(ConnectError) as timed_out:
            connector.stop(connector_deleted=True)
        message = str(timed_out.value)
        assert "timed out after 300 ms" in message and "public.orders" in message
        assert "nothing was changed" in message
        assert {t[1] for t in triggers(pg_database)} == {"public.orders", "public.customers"}
        assert relations(pg_database, "conveyor_audit")
    finally:
        writer.commit()
        writer.close()
    connector.stop(connector_deleted=True)
    assert triggers(pg_database) == set()
    assert not schema_exists(pg_database, "conveyor_audit")


def test_dependent_user_objects_are_never_dropped_with_the_audit_table(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database)
    connector = start_connector(cfg)
    names = names_of(cfg)
    sql(pg_database, f"CREATE VIEW public.audit_view AS SELECT id FROM conveyor_audit.{names.table}")
    with pytest.raises(ConnectError, match="other objects depend on it"):
        connector.stop(connector_deleted=True)
    assert len(triggers(pg_database)) == 1  # rolled back as a whole
    sql(pg_database, "DROP VIEW public.audit_view")
    connector.stop(connector_deleted=True)
    assert triggers(pg_database) == set()


def test_the_task_fails_clearly_when_the_audit_table_is_gone(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database)
    start_connector(cfg).stop(connector_deleted=True)
    with pytest.raises(ConnectError, match="does not exist.*was it deleted"):
        start_task(cfg)


# -- configuration --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "key", "fragment"),
    [
        ({"poll.max.rows": "ten"}, "poll.max.rows", "valid integer"),
        ({"poll.max.rows": "0"}, "poll.max.rows", "greater than or equal to 1"),
        ({"poll.interval.ms": "-1"}, "poll.interval.ms", "greater than or equal to 0"),
        ({"tables": ""}, "tables", "at least 1"),
        ({"tables": "a.b.c"}, "tables", "schema.table"),
        ({"connection.url": None}, "connection.url", "valid string"),
        ({"name": ""}, "name", "connector name"),
        ({"audit.schema": "x" * 64}, "audit.schema", "63 bytes"),
    ],
)
def test_bad_config_names_the_key_and_expected_type(overrides: dict[str, Any], key: str, fragment: str) -> None:
    cfg = {**config("postgresql://u@127.0.0.1:1/db"), **overrides}
    with pytest.raises(ConfigError) as error:
        PostgresAuditSourceConnector().start(cfg)
    assert key in error.value.errors, error.value.errors
    assert fragment in error.value.errors[key], error.value.errors


def test_config_defaults_and_object_names() -> None:
    parsed = load_config({"name": "orders_audit", "connection.url": "jdbc:postgresql://h:5/db", "tables": ["orders"]})
    assert parsed.connection_url == "postgresql://h:5/db"
    assert [str(t) for t in parsed.tables] == ["public.orders"]
    assert (parsed.audit_schema, parsed.topic_prefix, parsed.poll_max_rows, parsed.poll_interval_ms) == (
        "conveyor_audit",
        "",
        1000,
        1000,
    )
    assert parsed.topic_for(parsed.tables[0]) == "public.orders"
    names = AuditNames.of(parsed)
    assert (names.table, names.function, names.trigger, names.channel) == (
        "orders_audit_log",
        "orders_audit_capture",
        "conveyor_audit_orders_audit",
        "conveyor_audit_orders_audit",
    )
    # names that are not plain identifiers get a hash: distinct names never share objects
    assert connector_slug("orders-audit") != connector_slug("orders_audit")
    assert connector_slug("Orders.Audit") != connector_slug("orders.audit")
    assert len(connector_slug("x" * 300)) <= 40


# -- throughput -----------------------------------------------------------------------------------


def test_ten_thousand_rows_throughput(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database)
    connector = start_connector(cfg)
    names = names_of(cfg)
    sql(pg_database, "INSERT INTO orders SELECT g, 'item-' || g, g % 7 FROM generate_series(1, 10000) g")
    task = start_task(cfg)
    try:
        started = time.perf_counter()
        records = poll_until(task, 10_000)
        source_s = time.perf_counter() - started
    finally:
        task.stop()
    assert len(records) == 10_000
    assert [r.source_offset["id"] for r in records] == list(range(1, 10_001))
    assert records[-1].value["after"] == {"id": 10000, "item": "item-10000", "qty": 10000 % 7}

    with psycopg.connect(pg_database, autocommit=True) as conn:
        started = time.perf_counter()
        rows = conn.execute(f"SELECT * FROM conveyor_audit.{names.table} WHERE id > 0 ORDER BY id").fetchall()
        plain_s = time.perf_counter() - started
    assert len(rows) == 10_000
    ratio = plain_s / source_s
    print(
        f"\naudit source: {10_000 / source_s:,.0f} rows/s; plain SELECT: {10_000 / plain_s:,.0f} rows/s;"
        f" ratio {ratio:.2f}x"
    )
    assert 10_000 / source_s > 2_000, f"{10_000 / source_s:.0f} rows/s"
    connector.stop(connector_deleted=True)
