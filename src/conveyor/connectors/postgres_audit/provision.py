"""Creating and dropping the audit objects of one connector: all or nothing.

:func:`provision` (from ``Connector.start``) and :func:`deprovision` (from
``Connector.stop(connector_deleted=True)``, KIP-883 / KAFKA-14651) each run as ONE
transaction that first takes ``lock_timeout`` = ``ddl.lock.timeout.ms`` and the audit schema's
transaction-level advisory lock (so concurrent starts and cleanups of connectors sharing a
schema never race on ``CREATE SCHEMA`` and friends). Any error rolls the whole transaction
back: nothing is ever left half-created or half-dropped.

What exists for connector ``name`` (names from :class:`~.config.AuditNames`)::

    <audit.schema>                       schema, created if missing and then COMMENTed with
                                         SCHEMA_MARKER ("created by Conveyor")
    <audit.schema>.<slug>_log            audit table (one per connector, all its tables):
        id           bigserial PRIMARY KEY   the order of changes (sequence CACHE 1)
        table_schema text                    captured table (as configured, also for the
        table_name   text                      partitions of a partitioned table)
        op           char(1)                 'c' insert, 'u' update, 'd' delete
        before       jsonb                   to_jsonb(OLD): update/delete, else NULL
        after        jsonb                   to_jsonb(NEW): insert/update, else NULL
        pk           jsonb                   primary-key columns of NEW (OLD for deletes)
        txid         bigint                  txid_current() of the writing transaction
        captured_at  timestamptz             clock_timestamp() when the row changed (NOT the
                                             commit time, which a trigger cannot know; always
                                             at or before it)
      + index (table_schema, table_name, id)
    <audit.schema>.<slug>_capture()      trigger function, plpgsql, SECURITY DEFINER (runs as
                                         the connector's role, so writers of the captured tables
                                         need no privilege on the audit schema), search_path
                                         pinned to pg_catalog; inserts one audit row and calls
                                         pg_notify('conveyor_audit_<slug>', '') (NOTIFY folds
                                         duplicates, so one notification per transaction)
    trigger conveyor_audit_<slug>        AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW on each
                                         configured table, arguments (schema, table, pk
                                         columns in key order)

Row triggers do not see ``TRUNCATE``; it is not captured.

Privileges the connector's role needs: ``CREATE`` on the database (only while the audit schema
does not exist), ``CREATE`` on the audit schema (while the table or function is missing),
``USAGE`` on each captured table's schema and ``TRIGGER`` on each captured table. All are
checked before anything is created; the error names each missing one (e.g.
``TRIGGER privilege on table public.orders``). Ownership of the captured tables is NOT needed,
also not for cleanup: ``DROP TRIGGER`` would need it, so triggers are dropped by dropping the
connector's own trigger function ``CASCADE``, which removes exactly the triggers executing it
(nothing else can depend on a trigger function) and needs only ownership of the function.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from conveyor.api import ConfigError, ConnectError
from conveyor.connectors.postgres_audit import db
from conveyor.connectors.postgres_audit.config import AuditNames, PostgresAuditSourceConfig, TableName

log = logging.getLogger(__name__)

#: ``COMMENT ON SCHEMA`` of an audit schema this connector created; only such a schema is ever dropped.
SCHEMA_MARKER = "created by Conveyor (postgres-audit-source); dropped by the cleanup that leaves it empty"
SCHEMA_LOCK_CLASS = "conveyor.postgres_audit"


@dataclass(frozen=True)
class CapturedTable:
    """A configured table as found in the catalog."""

    name: TableName
    oid: int
    primary_key: tuple[str, ...]

    @property
    def trigger_args(self) -> tuple[str, ...]:
        return (self.name.schema, self.name.table, *self.primary_key)


class _Step:
    """What the transaction is doing, for error messages."""

    def __init__(self) -> None:
        self.doing = "connecting"

    def __call__(self, doing: str) -> None:
        self.doing = doing


def _begin(cur: psycopg.Cursor, names: AuditNames, lock_timeout_ms: int, step: _Step) -> None:
    step(f"setting lock_timeout and taking the advisory lock of audit schema {names.schema}")
    cur.execute("SELECT set_config('lock_timeout', %s, true)", (f"{lock_timeout_ms}ms",))
    cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", (SCHEMA_LOCK_CLASS, names.schema))


def _error(
    exc: psycopg.Error, step: _Step, what: str, config: PostgresAuditSourceConfig, timeout_ms: int
) -> ConnectError:
    """A :class:`ConnectError` for a psycopg error raised while ``step.doing``."""
    detail = db.scrub(config, str(exc))
    where = db.describe(config)
    if isinstance(exc, pg_errors.LockNotAvailable):
        return ConnectError(
            f"{what} failed: timed out after {timeout_ms} ms (ddl.lock.timeout.ms) waiting for a lock while"
            f" {step.doing} ({where}); the transaction was rolled back, nothing was changed; retry later"
        )
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return ConnectError(
            f"{what} failed: permission denied while {step.doing} ({where}): {detail};"
            " the transaction was rolled back, nothing was changed"
        )
    if isinstance(exc, pg_errors.DependentObjectsStillExist):
        return ConnectError(
            f"{what} failed while {step.doing} ({where}): {detail}; other objects depend on it and are never"
            " dropped by Conveyor: drop or detach them first. The transaction was rolled back, nothing was changed"
        )
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return ConnectError(
            f"{what} failed: lost the connection while {step.doing} ({where}): {detail}; the transaction was"
            " rolled back (if the connection broke during COMMIT its outcome is unknown: retrying is safe)"
        )
    return ConnectError(f"{what} failed while {step.doing} ({where}): {type(exc).__name__}: {detail}")


# -- catalog ---------------------------------------------------------------------------------------


def _inspect_tables(
    cur: psycopg.Cursor, tables: Sequence[TableName], names: AuditNames
) -> tuple[list[CapturedTable], list[str], list[str]]:
    """Look the configured tables up. Returns (tables found, config problems, missing privileges)."""
    found: list[CapturedTable] = []
    problems: list[str] = []
    missing: list[str] = []
    configured = set(tables)
    for name in tables:
        if name == TableName(names.schema, names.table):
            problems.append(f"{name} is this connector's own audit table: capturing it would capture itself")
            continue
        cur.execute(
            """
            SELECT n.oid IS NOT NULL, c.oid, c.relkind,
                   CASE WHEN n.oid IS NULL THEN false ELSE has_schema_privilege(n.oid, 'USAGE') END,
                   CASE WHEN c.oid IS NULL THEN false ELSE has_table_privilege(c.oid, 'TRIGGER') END,
                   ARRAY(SELECT a.attname::text
                           FROM pg_index i
                           CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
                           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                          WHERE i.indrelid = c.oid AND i.indisprimary
                          ORDER BY k.ord),
                   CASE WHEN c.relispartition THEN (
                       SELECT jsonb_agg(jsonb_build_array(an.nspname, ac.relname))
                         FROM pg_partition_ancestors(c.oid) AS p(relid)
                         JOIN pg_class ac ON ac.oid = p.relid
                         JOIN pg_namespace an ON an.oid = ac.relnamespace
                        WHERE p.relid <> c.oid) END
              FROM (SELECT 1) AS one
              LEFT JOIN pg_namespace n ON n.nspname = %(schema)s
              LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = %(table)s
            """,
            {"schema": name.schema, "table": name.table},
        )
        schema_exists, oid, relkind, schema_usage, can_trigger, pk, ancestors = cur.fetchone()  # type: ignore[misc]
        if oid is None:
            why = "does not exist" if schema_exists else f"does not exist (no schema {name.schema!r})"
            problems.append(f"table {name} {why}")
            continue
        if relkind not in ("r", "p"):
            kind = {"v": "a view", "m": "a materialized view", "f": "a foreign table", "S": "a sequence"}.get(
                relkind, f"not a table (relkind {relkind!r})"
            )
            problems.append(f"{name} is {kind}: only tables can be captured")
            continue
        if not pk:
            problems.append(
                f"table {name} has no primary key (records are keyed by it): add one or leave the table out"
            )
            continue
        parents = [TableName(*a) for a in ancestors or () if TableName(*a) in configured]
        if parents:
            problems.append(
                f"table {name} is a partition of {parents[0]}, which is captured too (with its partitions):"
                f" leave {name} out"
            )
            continue
        if not schema_usage:
            missing.append(f"USAGE privilege on schema {name.schema}")
        if not can_trigger:
            missing.append(f"TRIGGER privilege on table {name}")
        found.append(CapturedTable(name, int(oid), tuple(pk)))
    return found, problems, missing


def _regprocedure(cur: psycopg.Cursor, names: AuditNames) -> int | None:
    cur.execute("SELECT to_regprocedure(format('%%I.%%I()', %s::text, %s::text))::oid", (names.schema, names.function))
    row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _regclass(cur: psycopg.Cursor, schema: str, relation: str) -> int | None:
    cur.execute("SELECT to_regclass(format('%%I.%%I', %s::text, %s::text))::oid", (schema, relation))
    row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _not_a_clone(cur: psycopg.Cursor) -> str:
    """SQL condition on ``t`` (pg_trigger) leaving out the clones PostgreSQL makes of a
    partitioned table's trigger on each partition (they go with the parent's)."""
    return "t.tgparentid = 0" if cur.connection.info.server_version >= 130000 else "NOT t.tgisinternal"


def _triggers_of(cur: psycopg.Cursor, function_oid: int) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """``(trigger, schema, table, args)`` of every (non-clone) trigger executing ``function_oid``."""
    cur.execute(
        f"""
        SELECT t.tgname::text, n.nspname::text, c.relname::text, t.tgargs
          FROM pg_trigger t
          JOIN pg_class c ON c.oid = t.tgrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE t.tgfoid = %s AND {_not_a_clone(cur)}
         ORDER BY n.nspname, c.relname, t.tgname
        """,
        (function_oid,),
    )
    return [(tg, s, t, _decode_args(args)) for tg, s, t, args in cur.fetchall()]


def _decode_args(raw: bytes | None) -> tuple[str, ...]:
    if not raw:
        return ()
    parts = bytes(raw).split(b"\x00")
    if parts and parts[-1] == b"":
        parts.pop()
    return tuple(p.decode() for p in parts)


def _trigger_on(cur: psycopg.Cursor, table_oid: int, trigger: str) -> tuple[int, tuple[str, ...]] | None:
    """``(function oid, args)`` of trigger ``trigger`` on table ``table_oid``, or ``None``."""
    cur.execute(
        f"SELECT t.tgfoid, t.tgargs FROM pg_trigger t WHERE t.tgrelid = %s AND t.tgname = %s AND {_not_a_clone(cur)}",
        (table_oid, trigger),
    )
    row = cur.fetchone()
    return (int(row[0]), _decode_args(row[1])) if row else None


# -- DDL -------------------------------------------------------------------------------------------


def _create_table(cur: psycopg.Cursor, names: AuditNames) -> None:
    table = sql.Identifier(names.schema, names.table)
    cur.execute(
        sql.SQL(
            """
            CREATE TABLE {table} (
                id           bigserial PRIMARY KEY,
                table_schema text        NOT NULL,
                table_name   text        NOT NULL,
                op           char(1)     NOT NULL CHECK (op IN ('c', 'u', 'd')),
                before       jsonb,
                after        jsonb,
                pk           jsonb       NOT NULL,
                txid         bigint      NOT NULL,
                captured_at  timestamptz NOT NULL DEFAULT clock_timestamp()
            )
            """
        ).format(table=table)
    )
    cur.execute(
        sql.SQL("CREATE INDEX {index} ON {table} (table_schema, table_name, id)").format(
            index=sql.Identifier(names.index), table=table
        )
    )
    cur.execute(
        sql.SQL("COMMENT ON TABLE {table} IS {comment}").format(
            table=table,
            comment=sql.Literal(
                f"Conveyor postgres-audit-source connector {names.connector!r}: captured row changes;"
                " dropped when the connector is deleted"
            ),
        )
    )


_FUNCTION_BODY = """
DECLARE
    old_row jsonb;
    new_row jsonb;
    key_src jsonb;
    key_doc jsonb;
    kind    text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        new_row := to_jsonb(NEW); key_src := new_row; kind := 'c';
    ELSIF TG_OP = 'UPDATE' THEN
        old_row := to_jsonb(OLD); new_row := to_jsonb(NEW); key_src := new_row; kind := 'u';
    ELSE
        old_row := to_jsonb(OLD); key_src := old_row; kind := 'd';
    END IF;
    IF TG_NARGS = 3 THEN
        key_doc := jsonb_build_object(TG_ARGV[2], key_src -> TG_ARGV[2]);
    ELSE
        SELECT jsonb_object_agg(k, key_src -> k) INTO key_doc FROM unnest(TG_ARGV[2:]) AS k;
    END IF;
    INSERT INTO {table} (table_schema, table_name, op, before, after, pk, txid)
    VALUES (TG_ARGV[0], TG_ARGV[1], kind, old_row, new_row, key_doc, txid_current());
    PERFORM pg_notify({channel}, '');
    RETURN NULL;
END
"""


def _create_function(cur: psycopg.Cursor, names: AuditNames) -> None:
    body = (
        sql.SQL(_FUNCTION_BODY)
        .format(table=sql.Identifier(names.schema, names.table), channel=sql.Literal(names.channel))
        .as_string(cur)
    )
    function = sql.Identifier(names.schema, names.function)
    cur.execute(
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER"
            " SET search_path = pg_catalog, pg_temp AS {body}"
        ).format(function=function, body=sql.Literal(body))
    )
    cur.execute(
        sql.SQL("COMMENT ON FUNCTION {function}() IS {comment}").format(
            function=function,
            comment=sql.Literal(
                f"Conveyor postgres-audit-source connector {names.connector!r}: writes row changes to"
                f" {names.qualified_table}; dropped when the connector is deleted"
            ),
        )
    )


def _create_trigger(cur: psycopg.Cursor, names: AuditNames, table: CapturedTable) -> None:
    cur.execute(
        sql.SQL(
            "CREATE TRIGGER {trigger} AFTER INSERT OR UPDATE OR DELETE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION {function}({args})"
        ).format(
            trigger=sql.Identifier(names.trigger),
            table=sql.Identifier(table.name.schema, table.name.table),
            function=sql.Identifier(names.schema, names.function),
            args=sql.SQL(", ").join(sql.Literal(a) for a in table.trigger_args),
        )
    )


# -- the two transactions -------------------------------------------------------------------------


def provision(conn: psycopg.Connection, config: PostgresAuditSourceConfig) -> list[str]:
    """Make the connector's audit objects match ``config``, in one transaction (see the
    module docstring). Idempotent: on a second call with the same configuration it changes
    nothing (no DDL beyond ``CREATE OR REPLACE FUNCTION``). When a table left ``tables`` or a
    table's primary key changed, the function is dropped ``CASCADE`` and every wanted trigger
    created again, in the same transaction (so no change goes uncaptured). Never touches an
    object it did not create: a trigger of the same name executing another function is an error.

    Returns:
        What changed, one line each (``"created trigger conveyor_audit_x on public.orders"``);
        empty when everything was already in place.

    Raises:
        ConfigError: under key ``tables``: a table does not exist, is not a table, or has no
            primary key (every problem listed); nothing was created.
        ConnectError: a missing privilege (each named, e.g. ``TRIGGER privilege on table
            public.orders``), a lock not obtained within ``ddl.lock.timeout.ms``, a conflicting
            trigger, or any other database error; the transaction was rolled back.
    """
    names = AuditNames.of(config)
    step = _Step()
    changes: list[str] = []
    try:
        with conn.transaction(), conn.cursor() as cur:
            _begin(cur, names, config.ddl_lock_timeout_ms, step)

            step("checking the configured tables and privileges")
            tables, problems, missing = _inspect_tables(cur, config.tables, names)
            if problems:
                raise ConfigError({"tables": "; ".join(problems) + " (nothing was created)"})
            cur.execute(
                """
                SELECT current_user::text, current_database()::text,
                       has_database_privilege(current_database(), 'CREATE'),
                       (SELECT oid FROM pg_namespace WHERE nspname = %(s)s),
                       (SELECT has_schema_privilege(oid, 'CREATE') FROM pg_namespace WHERE nspname = %(s)s)
                """,
                {"s": names.schema},
            )
            role, database, can_create_schema, schema_oid, can_create_in_schema = cur.fetchone()  # type: ignore[misc]
            table_oid = _regclass(cur, names.schema, names.table) if schema_oid else None
            function_oid = _regprocedure(cur, names) if schema_oid else None
            if schema_oid is None and not can_create_schema:
                missing.insert(0, f"CREATE privilege on database {database} (to create schema {names.schema})")
            if schema_oid is not None and (table_oid is None or function_oid is None) and not can_create_in_schema:
                missing.insert(0, f"CREATE privilege on schema {names.schema}")
            if missing:
                raise ConnectError(
                    f"role {role!r} lacks what the connector {names.connector!r} needs: "
                    + "; ".join(missing)
                    + " (nothing was created)"
                )

            step("checking for triggers of the same name")
            for table in tables:
                existing = _trigger_on(cur, table.oid, names.trigger)
                if existing is not None and existing[0] != function_oid:
                    raise ConnectError(
                        f"table {table.name} already has a trigger {names.trigger} that does not execute"
                        f" {names.qualified_function} (another connector's, with the same name but another"
                        " audit.schema?); it is left alone: rename the connector or drop that trigger"
                        " (nothing was created)"
                    )

            if schema_oid is None:
                step(f"creating schema {names.schema}")
                cur.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
                cur.execute(
                    sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                        sql.Identifier(names.schema), sql.Literal(SCHEMA_MARKER)
                    )
                )
                changes.append(f"created schema {names.schema}")
            if table_oid is None:
                step(f"creating audit table {names.qualified_table}")
                _create_table(cur, names)
                changes.append(f"created table {names.qualified_table}")
            # Existing triggers of this connector (those executing its function), by table.
            existing: dict[TableName, tuple[str, ...]] = {}
            if function_oid is not None:
                existing = {TableName(s, t): args for _tg, s, t, args in _triggers_of(cur, function_oid)}
            wanted = {t.name for t in tables}
            stale = [name for name in existing if name not in wanted]
            changed = [t for t in tables if t.name in existing and existing[t.name] != t.trigger_args]
            rebuild = bool(stale or changed)
            if rebuild:
                # DROP TRIGGER needs ownership of the table; dropping the function with CASCADE
                # drops exactly the triggers executing it and needs only ownership of the function
                # (which the connector's role has). Every wanted trigger is then created again, in
                # this same transaction, so no change goes uncaptured.
                step(
                    f"dropping function {names.qualified_function} with its triggers on"
                    f" {', '.join(str(n) for n in sorted(existing))} (to drop or replace some of them)"
                )
                cur.execute(sql.SQL("DROP FUNCTION {}() CASCADE").format(sql.Identifier(names.schema, names.function)))
                changes.extend(f"dropped trigger {names.trigger} on {name} (no longer configured)" for name in stale)
                changes.extend(
                    f"replaced trigger {names.trigger} on {t.name} (key columns now {', '.join(t.primary_key)})"
                    for t in changed
                )
            step(f"creating trigger function {names.qualified_function}")
            _create_function(cur, names)
            if function_oid is None:
                changes.append(f"created function {names.qualified_function}")
            for table in tables:
                if table.name in existing and not rebuild:
                    continue
                step(f"creating trigger {names.trigger} on {table.name} (TRIGGER privilege on table {table.name})")
                _create_trigger(cur, names, table)
                if table.name not in existing:
                    changes.append(f"created trigger {names.trigger} on {table.name}")
            step("committing")
    except (ConfigError, ConnectError):
        raise
    except psycopg.Error as exc:
        raise _error(
            exc,
            step,
            f"provisioning the audit objects of connector {names.connector!r}",
            config,
            config.ddl_lock_timeout_ms,
        ) from None
    for line in changes:
        log.info("connector %s: %s", names.connector, line)
    return changes


def deprovision(conn: psycopg.Connection, config: PostgresAuditSourceConfig) -> list[str]:
    """Drop exactly this connector's objects, in one transaction: its trigger function with
    ``CASCADE``, which drops every trigger executing it (also on tables since removed from
    ``tables``; they are listed from the catalog first, for the report), the audit table (with its sequence and index) and, when it was created by
    Conveyor (:data:`SCHEMA_MARKER`) and is now empty, the audit schema. Objects of other
    connectors, a schema that existed before, and anything depending on the audit table
    (then the whole cleanup fails) are never dropped. Idempotent: objects already gone are
    skipped.

    Returns:
        What was dropped, one line each (``"dropped trigger conveyor_audit_x on public.orders"``),
        or one line saying nothing was left.

    Raises:
        ConnectError: any database error (lock timeout, lost connection, dependent objects);
            the transaction was rolled back, nothing was dropped.
    """
    names = AuditNames.of(config)
    step = _Step()
    dropped: list[str] = []
    try:
        with conn.transaction(), conn.cursor() as cur:
            _begin(cur, names, config.ddl_lock_timeout_ms, step)
            step("looking up the connector's objects")
            function_oid = _regprocedure(cur, names)
            if function_oid is not None:
                found = _triggers_of(cur, function_oid)
                # DROP TRIGGER would need ownership of each table; the function's owner may drop it
                # with CASCADE, which removes exactly the triggers executing it.
                step(
                    f"dropping function {names.qualified_function} with its triggers"
                    + (f" on {', '.join(f'{s}.{t}' for _tg, s, t, _a in found)}" if found else "")
                )
                cur.execute(sql.SQL("DROP FUNCTION {}() CASCADE").format(sql.Identifier(names.schema, names.function)))
                dropped.extend(f"dropped trigger {tg} on {s}.{t}" for tg, s, t, _args in found)
                dropped.append(f"dropped function {names.qualified_function}")
            if _regclass(cur, names.schema, names.table) is not None:
                step(f"dropping audit table {names.qualified_table}")
                cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(names.schema, names.table)))
                dropped.append(f"dropped table {names.qualified_table} (with its sequence and index)")
            step(f"checking whether schema {names.schema} was created by Conveyor and is empty")
            cur.execute(
                "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s", (names.schema,)
            )
            row = cur.fetchone()
            if row is not None and row[0] == SCHEMA_MARKER:
                try:
                    with conn.transaction():  # a savepoint: a non-empty schema is kept
                        cur.execute(sql.SQL("DROP SCHEMA {} RESTRICT").format(sql.Identifier(names.schema)))
                    dropped.append(f"dropped schema {names.schema} (created by Conveyor, now empty)")
                except pg_errors.DependentObjectsStillExist:
                    log.info("connector %s: schema %s still holds other objects; kept", names.connector, names.schema)
            step("committing")
    except psycopg.Error as exc:
        raise _error(
            exc, step, f"cleanup of connector {names.connector!r}", config, config.ddl_lock_timeout_ms
        ) from None
    if not dropped:
        dropped.append(
            f"nothing to drop: no audit objects of connector {names.connector!r} left in schema {names.schema}"
        )
    for line in dropped:
        log.info("connector %s: %s", names.connector, line)
    return dropped
