"""The audit source's retention (issue 11 §6): once a table's offset is committed, ``commit()``
deletes its audit rows up to that offset, so the audit table does not grow with everything
ever captured; ``audit.retention=keep`` keeps them. Rows above the committed offset, and other
tables' rows, stay; a restart from the committed offset still reads exactly the rest."""

from __future__ import annotations

import pytest
from _audit_source import config, make_tables, names_of, poll_until, sql, start_connector, start_task

pytestmark = pytest.mark.integration


def audit_ids(url: str, cfg) -> list[tuple[str, int]]:
    return sql(url, f"SELECT table_name, id FROM conveyor_audit.{names_of(cfg).table} ORDER BY id")


def test_committed_audit_rows_are_deleted_and_the_rest_still_flows(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, tables="public.orders, public.customers")
    connector = start_connector(cfg)
    task = start_task(cfg)
    try:
        for i in range(1, 11):
            sql(pg_database, "INSERT INTO orders VALUES (%s, 'x', 1)", (i,))
        sql(pg_database, "INSERT INTO customers VALUES (1, 'c')")
        records = poll_until(task, 11)
        orders = [r.source_offset["id"] for r in records if r.source_partition["table"] == "orders"]
        committed = orders[5]  # the runtime committed orders up to the 6th record, customers nothing
        task.context.reader._offsets[("public", "orders")] = {"id": committed}
        task.commit()
        left = audit_ids(pg_database, cfg)
        assert [i for t, i in left if t == "orders"] == orders[6:], left
        assert [t for t, _ in left].count("customers") == 1, "a table with no committed offset keeps its rows"
        task.commit()  # nothing new committed: nothing more deleted
        assert audit_ids(pg_database, cfg) == left
    finally:
        task.stop()
    resumed = start_task(cfg, offsets={("public", "orders"): {"id": committed}})
    try:
        again = poll_until(resumed, 5)
        assert [r.source_offset["id"] for r in again if r.source_partition["table"] == "orders"] == orders[6:]
    finally:
        resumed.stop()
    connector.stop(connector_deleted=True)


def test_retention_keep_leaves_every_row(pg_database: str) -> None:
    make_tables(pg_database)
    cfg = config(pg_database, **{"audit.retention": "keep"})
    connector = start_connector(cfg)
    task = start_task(cfg)
    try:
        for i in range(1, 4):
            sql(pg_database, "INSERT INTO orders VALUES (%s, 'x', 1)", (i,))
        records = poll_until(task, 3)
        task.context.reader._offsets[("public", "orders")] = records[-1].source_offset
        task.commit()
        assert len(audit_ids(pg_database, cfg)) == 3
    finally:
        task.stop()
    connector.stop(connector_deleted=True)
