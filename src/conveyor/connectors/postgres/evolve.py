"""``auto.evolve``: adding the columns a destination table lacks, as Confluent's JDBC sink does.

When the records of a write have fields (value schema fields, key fields with
``pk.mode=record_key``, or keys of schemaless dicts) that the table has no column for, the
writer (:mod:`.writer`) asks this module for the column definitions and runs one
``ALTER TABLE ... ADD COLUMN IF NOT EXISTS ...`` for them:

* the type comes from :mod:`.dialect`, as with ``auto.create`` (from the field schema, or
  inferred from a sample value when schemaless);
* an optional field (or a schemaless one) becomes a nullable column; a required field with
  a default becomes ``<type> DEFAULT <default> NOT NULL`` (existing rows get the default);
* a required field *without* a default is refused (Confluent refuses too: existing rows
  would have no value): the writer sets the records carrying it aside as rejects (errant
  record reporter / ``errors.tolerance``), and :func:`column_definition` raises
  :class:`~conveyor.api.ConnectError` naming the table and field for any other such column.

Columns are never dropped and types never changed. Concurrency: tasks of one connector (or
of several) may evolve the same table at once; ``ADD COLUMN IF NOT EXISTS`` makes the
second addition a no-op and the transaction-scoped advisory lock on the table name (the
same one ``auto.create`` takes) serializes the DDL.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from conveyor.api import ConnectError, Schema, SchemaType
from conveyor.connectors.postgres import dialect

log = logging.getLogger(__name__)

LOCK_PREFIX = "conveyor-table:"


def set_lock_timeout(conn: psycopg.Connection, lock_timeout_ms: int) -> None:
    """``lock_timeout`` of the current transaction only (``ddl.lock.timeout.ms``): DDL waits for
    the table's readers and writers; past this the statement fails with ``LockNotAvailable`` (an
    ``OperationalError``: the task retries) and the transaction is rolled back, nothing changed."""
    conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{lock_timeout_ms}ms",))


def lock_table_ddl(conn: psycopg.Connection, ident: sql.Identifier, lock_timeout_ms: int) -> None:
    """Set the transaction's ``lock_timeout`` (:func:`set_lock_timeout`), then take the
    transaction-scoped advisory lock serializing DDL on ``ident`` between tasks. Must be called
    inside a transaction."""
    set_lock_timeout(conn, lock_timeout_ms)
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (LOCK_PREFIX + ident.as_string(conn),))


def unaddable_fields(
    schema: Schema | None, columns: Collection[str], wanted: Collection[str] | None = None
) -> list[str]:
    """The fields of a STRUCT ``schema`` that ``columns`` lacks and that ``auto.evolve`` may
    not add: required (not optional) and without a default. ``wanted`` (when given) limits
    the check to the fields that would be written (e.g. ``fields.whitelist``). A schema
    that is ``None`` or not a struct has none."""
    if schema is None or schema.type is not SchemaType.STRUCT:
        return []
    return [
        f.name
        for f in schema.fields
        if f.name not in columns
        and (wanted is None or f.name in wanted)
        and not f.schema.optional
        and f.schema.default is None
    ]


def column_definition(
    name: str, schema: Schema | None, sample: Any = None, *, not_null: bool = False, table: str | None = None
) -> sql.Composed:
    """``"name" <type>[ DEFAULT <literal>][ NOT NULL]`` for ``CREATE TABLE`` or ``ADD COLUMN``.

    Args:
        name: the column name.
        schema: the field's Connect schema, or ``None`` when schemaless (the type is then
            inferred from ``sample``, ``None`` → ``text``, and the column is nullable).
        sample: a value of the column (schemaless only).
        not_null: force ``NOT NULL`` (primary-key columns of ``CREATE TABLE``).
        table: for ``ADD COLUMN``, the table's display name: a required field then needs a
            default (which the column gets); ``None`` for ``CREATE TABLE`` (no default needed).

    Raises:
        ConnectError: ``table`` is given and ``schema`` is required without a default
            (the message names the table and the field).
    """
    if schema is None:
        pg_type, required, default = dialect.pg_type_for_value(sample), False, None
    else:
        pg_type, required, default = dialect.pg_type_for_schema(schema), not schema.optional, schema.default
    parts: list[sql.Composable] = [sql.Identifier(name), sql.SQL(" " + pg_type)]
    if table is not None and required:
        if default is None:
            raise ConnectError(
                f"auto.evolve cannot add column {name!r} to table {table}: the field is required and has no"
                " default (existing rows would have no value); make it optional or give it a default"
            )
        convert = dialect.value_converter(schema) if schema is not None else None
        value = convert(default) if convert is not None else default
        literal = sql.Literal(Jsonb(value) if isinstance(value, (dict, list)) else value)
        parts.append(sql.SQL(" DEFAULT {}").format(literal))
    if required or not_null:
        parts.append(sql.SQL(" NOT NULL"))
    return sql.Composed(parts)


def add_columns_statement(ident: sql.Identifier, definitions: Sequence[sql.Composable]) -> sql.Composed:
    """``ALTER TABLE <ident> ADD COLUMN IF NOT EXISTS <def>, ADD COLUMN IF NOT EXISTS <def>, ...``

    Raises:
        ValueError: ``definitions`` is empty.
    """
    if not definitions:
        raise ValueError("no column to add")
    adds = sql.SQL(", ").join(sql.SQL("ADD COLUMN IF NOT EXISTS {}").format(d) for d in definitions)
    return sql.SQL("ALTER TABLE {} {}").format(ident, adds)


def add_columns(
    conn: psycopg.Connection, ident: sql.Identifier, definitions: Sequence[sql.Composable], names: Sequence[str],
    lock_timeout_ms: int,
) -> None:
    """Add the columns in one transaction of their own (``conn`` must be in autocommit mode
    and outside a transaction block), holding the table's DDL advisory lock; no lock is waited
    for longer than ``lock_timeout_ms``.

    Raises:
        psycopg.Error: the database refused, or a lock was not granted in time
            (``LockNotAvailable``); unchanged, the task maps it.
    """
    with conn.transaction():
        lock_table_ddl(conn, ident, lock_timeout_ms)
        conn.execute(add_columns_statement(ident, definitions))
    log.info("auto.evolve: added column(s) %s to table %s", ", ".join(names), ident.as_string(conn))
