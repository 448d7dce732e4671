"""The exactly-once offsets table (``exactly.once=true``).

One row per (connector, topic, partition) holding the *next* offset to consume, written in
the same transaction as the rows it covers, so the table and the data never disagree.
Tasks read it in ``open`` and rewind the consumer with ``context.offset``; nothing is
committed to Kafka (``pre_commit`` returns ``{}``), as the "sink task put/flush/preCommit"
pattern describes::

    CREATE TABLE conveyor_sink_offsets (
        connector   text    NOT NULL,
        topic       text    NOT NULL,
        "partition" integer NOT NULL,
        next_offset bigint  NOT NULL,
        updated_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (connector, topic, "partition"))

All functions take an open psycopg connection in autocommit mode and raise psycopg errors
unchanged (the task maps them to Conveyor errors).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import psycopg
from psycopg import sql

from conveyor.api import TopicPartition
from conveyor.connectors.postgres import evolve
from conveyor.connectors.postgres.config import split_qualified


def table_identifier(qualified_name: str) -> sql.Identifier:
    """``"schema.table"`` or ``"table"`` as a quoted identifier."""
    schema, name = split_qualified(qualified_name)
    return sql.Identifier(schema, name) if schema else sql.Identifier(name)


def ensure_table(conn: psycopg.Connection, qualified_name: str, lock_timeout_ms: int) -> None:
    """Create the offsets table if missing, in its own transaction, waiting for no lock longer
    than ``lock_timeout_ms`` (``ddl.lock.timeout.ms``). Safe to race: tasks serialize on a
    transaction-level advisory lock named after the table.

    Raises:
        psycopg.Error: the database refused, or a lock was not granted in time."""
    ident = table_identifier(qualified_name)
    with conn.transaction():
        evolve.set_lock_timeout(conn, lock_timeout_ms)
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("conveyor-offsets:" + qualified_name,))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (connector text NOT NULL, topic text NOT NULL,"
                ' "partition" integer NOT NULL, next_offset bigint NOT NULL,'
                " updated_at timestamptz NOT NULL DEFAULT now(),"
                ' PRIMARY KEY (connector, topic, "partition"))'
            ).format(ident)
        )


def load(
    conn: psycopg.Connection, qualified_name: str, connector: str, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """Stored next-offsets of ``partitions`` for ``connector`` (partitions without a row are absent)."""
    wanted = set(partitions)
    if not wanted:
        return {}
    rows = conn.execute(
        sql.SQL('SELECT topic, "partition", next_offset FROM {} WHERE connector = %s').format(
            table_identifier(qualified_name)
        ),
        (connector,),
    ).fetchall()
    found = {TopicPartition(topic, partition): offset for topic, partition, offset in rows}
    return {tp: found[tp] for tp in sorted(wanted) if tp in found}


def store(cur: psycopg.Cursor, qualified_name: str, connector: str, next_offsets: Mapping[TopicPartition, int]) -> None:
    """Upsert ``next_offsets``; call inside the transaction that writes the rows."""
    if not next_offsets:
        return
    items = sorted(next_offsets.items())
    cur.execute(
        sql.SQL(
            'INSERT INTO {} (connector, topic, "partition", next_offset) VALUES {}'
            ' ON CONFLICT (connector, topic, "partition")'
            " DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now()"
        ).format(table_identifier(qualified_name), sql.SQL(", ").join([sql.SQL("(%s, %s, %s, %s)")] * len(items))),
        [param for tp, offset in items for param in (connector, tp.topic, tp.partition, offset)],
    )


def delete_connector(conn: psycopg.Connection, qualified_name: str, connector: str) -> int:
    """Delete every stored offset of ``connector``; returns the number of rows removed
    (0 when the table does not exist)."""
    schema, name = split_qualified(qualified_name)
    regclass = (sql.Identifier(schema, name) if schema else sql.Identifier(name)).as_string(conn)
    if conn.execute("SELECT to_regclass(%s)", (regclass,)).fetchone()[0] is None:  # type: ignore[index]
        return 0
    cur = conn.execute(
        sql.SQL("DELETE FROM {} WHERE connector = %s").format(table_identifier(qualified_name)), (connector,)
    )
    return cur.rowcount


def delete_partitions(cur: psycopg.Cursor, qualified_name: str, connector: str,
                      partitions: Iterable[TopicPartition]) -> None:
    """Delete the stored offsets of ``partitions`` (a reset: they resume from Kafka's committed
    offset, or ``auto.offset.reset``)."""
    for tp in sorted(partitions):
        cur.execute(
            sql.SQL('DELETE FROM {} WHERE connector = %s AND topic = %s AND "partition" = %s').format(
                table_identifier(qualified_name)),
            (connector, tp.topic, tp.partition),
        )
