"""Reading the audit table in id order without ever skipping a late-committing change.

The problem: ids come from a sequence when a row *changes*, but rows become visible when
their transaction *commits*. Transaction A may take id 10, transaction B id 11, B commit
first: a reader that sees 11, emits it and stores offset ``{"id": 11}`` would never emit 10
once A commits. A plain ``WHERE id > offset`` poll loses changes under concurrent writers.

The rule used here: only rows with ``id <= stable`` are read, where every id up to
``stable`` is *settled* (its transaction has committed or aborted, so no row with such an
id can still appear). ``stable`` is advanced with a *fence*:

1. read the sequence's ``last_value`` ``L`` (CACHE 1, so every id ``<= L`` has been handed
   out already);
2. then read, from ``pg_locks``, the virtual transaction ids ``P`` of every other session
   holding ``RowExclusiveLock`` on the audit table. A transaction that inserted an audit row
   took that lock *before* drawing its id from the sequence and holds it until it ends;
   PostgreSQL releases locks only after the commit is visible;
3. if ``P`` is empty, every id ``<= L`` is settled now: ``stable = L``. Otherwise the fence
   ``(L, P)`` is pending; ``stable = L`` as soon as none of the transactions in ``P`` holds
   the lock any more (later holders drew ids above ``L``). A new fence is taken then.

So records come out strictly in id order, which is also each row's change order (row locks
serialise changes to one row, and the later change draws the higher id after the earlier one
committed), and an offset ``{"id": n}`` means exactly "everything up to ``n`` was emitted":
restarting from it neither repeats nor skips anything. The cost: while a transaction that
wrote an audited row is open, later changes wait for it (as they would in commit order); after
:data:`STUCK_WARNING_S` a warning names the backend pids being waited for.
Polling needs the primary (``pg_locks`` of a standby does not show the primary's writers),
and the audit sequence must keep ``CACHE 1`` (as created).

Idle waiting uses ``LISTEN`` on the connector's channel: the trigger calls ``pg_notify``, so a
poll wakes as soon as a writer commits. psycopg keeps notifications that arrive while a query
runs, so none is missed between a query and the wait.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from conveyor.api import ConnectError
from conveyor.connectors.postgres_audit import db
from conveyor.connectors.postgres_audit.config import AuditNames, PostgresAuditSourceConfig, TableName

log = logging.getLogger(__name__)
#: After this many seconds of waiting for the same open writers, ``poll`` logs a warning naming them.
STUCK_WARNING_S = 60.0
#: Columns of a fetched row, in order. ``images`` is the JSON text ``[pk, before, after]``:
#: one ``json.loads`` per row instead of one per jsonb column (the cost that dominates a poll).
ROW_COLUMNS = ("id", "table_schema", "table_name", "op", "txid", "ts_ms", "images")
_SELECT = (
    "a.id, a.table_schema, a.table_name, a.op, a.txid, (extract(epoch FROM a.captured_at) * 1000)::bigint,"
    " '[' || coalesce(a.pk::text, 'null') || ',' || coalesce(a.before::text, 'null') || ','"
    " || coalesce(a.after::text, 'null') || ']'"
)


class AuditReader:
    """Reads one connector's audit table for a set of tables, from one task's thread.

    Holds one autocommit connection (``LISTEN``-ing on the connector's channel); every
    method may raise ``psycopg.OperationalError`` / ``InterfaceError`` when the connection
    breaks, after which :meth:`close` and a later :meth:`open` recover (the fence state is
    about the database, not the connection, and is kept).
    """

    def __init__(self, config: PostgresAuditSourceConfig, names: AuditNames, tables: Sequence[TableName]) -> None:
        self.config = config
        self.names = names
        self.tables = tuple(tables)
        self.conn: psycopg.Connection | None = None
        self.stable = 0  # every audit id <= stable is settled
        self._pending: tuple[int, frozenset[str]] | None = None
        self._pending_since = 0.0
        self._warned_at = float("-inf")
        self._audit_oid: int | None = None
        self._sequence: sql.Composable | None = None
        self._fetch_one: sql.Composed | None = None
        self._fetch_many: sql.Composed | None = None
        #: primary-key columns in key order per table, from the triggers' arguments
        self.key_columns: dict[TableName, tuple[str, ...]] = {}

    @property
    def pending(self) -> bool:
        """A fence waits for open writer transactions."""
        return self._pending is not None

    def open(self) -> None:
        """Connect, ``LISTEN`` and look the audit table up (no-op when open).

        Raises:
            ConnectError: the database is unreachable, or the audit table does not exist
                (the connector creates it in ``start``; was the connector deleted?).
        """
        if self.conn is not None and not self.conn.closed:
            return
        conn = db.connect(self.config)
        try:
            row = conn.execute(
                "SELECT c.oid::oid, CASE WHEN c.oid IS NOT NULL THEN pg_get_serial_sequence(c.oid::text, 'id') END"
                " FROM (SELECT to_regclass(format('%%I.%%I', %s::text, %s::text)) AS oid) AS c",
                (self.names.schema, self.names.table),
            ).fetchone()
            if row is None or row[0] is None or row[1] is None:
                raise ConnectError(
                    f"audit table {self.names.qualified_table} of connector {self.names.connector!r} does not exist"
                    f" ({db.describe(self.config)}); the connector creates it in start(): was it deleted?"
                )
            self._audit_oid = int(row[0])
            self._sequence = sql.SQL(row[1])  # already quoted by pg_get_serial_sequence
            function_oid = conn.execute(
                "SELECT to_regprocedure(format('%%I.%%I()', %s::text, %s::text))::oid",
                (self.names.schema, self.names.function),
            ).fetchone()[0]  # type: ignore[index]
            self.key_columns = {}
            if function_oid is not None:
                for (args,) in conn.execute(
                    "SELECT tgargs FROM pg_trigger WHERE tgfoid = %s AND tgname = %s",
                    (function_oid, self.names.trigger),
                ):
                    parts = [p.decode() for p in bytes(args).split(b"\x00") if p]
                    if len(parts) >= 3:
                        self.key_columns[TableName(parts[0], parts[1])] = tuple(parts[2:])
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.names.channel)))
        except BaseException:
            conn.close()
            raise
        log_table = sql.Identifier(self.names.schema, self.names.table)
        self._fetch_one = sql.SQL(
            "SELECT " + _SELECT + " FROM {t} a WHERE a.table_schema = %s AND a.table_name = %s"
            " AND a.id > %s AND a.id <= %s ORDER BY a.id LIMIT %s"
        ).format(t=log_table)
        self._fetch_many = sql.SQL(
            "SELECT l.* FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS p(s, t, after_id)"
            " CROSS JOIN LATERAL (SELECT " + _SELECT + " FROM {t} a WHERE a.table_schema = p.s"
            " AND a.table_name = p.t AND a.id > p.after_id AND a.id <= %s ORDER BY a.id LIMIT %s) AS l"
            " ORDER BY l.id LIMIT %s"
        ).format(t=log_table)
        self.conn = conn

    def close(self) -> None:
        """Close the connection (idempotent, never raises)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # -- the fence ----------------------------------------------------------------------------------

    def _holders(self, conn: psycopg.Connection) -> dict[str, int | None]:
        """``{virtual transaction id: pid}`` of the other sessions (and prepared transactions,
        pid ``None``) holding ``RowExclusiveLock`` on the audit table."""
        rows = conn.execute(
            "SELECT virtualtransaction, pid FROM pg_locks WHERE locktype = 'relation' AND relation = %s"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND mode = 'RowExclusiveLock' AND granted AND pid IS DISTINCT FROM pg_backend_pid()",
            (self._audit_oid,),
        ).fetchall()
        return dict(rows)  # type: ignore[arg-type]

    def _warn_if_stuck(self, holders: dict[str, int | None]) -> None:
        now = time.monotonic()
        if now - self._pending_since < STUCK_WARNING_S or now - self._warned_at < STUCK_WARNING_S:
            return
        self._warned_at = now
        pids = sorted({str(pid) if pid is not None else "prepared" for pid in holders.values()})
        log.warning(
            "connector %s: changes after audit id %d wait for %d open transaction(s) that wrote to %s"
            " for %.0f s (backend pids %s); they are emitted once those transactions end",
            self.names.connector,
            self.stable,
            len(holders),
            self.names.qualified_table,
            now - self._pending_since,
            ", ".join(pids),
        )

    def _last_id(self, conn: psycopg.Connection) -> int:
        assert self._sequence is not None
        last_value, is_called = conn.execute(
            sql.SQL("SELECT last_value, is_called FROM {}").format(self._sequence)
        ).fetchone()  # type: ignore[misc]
        return int(last_value) if is_called else 0

    def advance(self) -> int:
        """Move :attr:`stable` forward as far as is safe (see the module docstring); at most
        three short queries. Returns :attr:`stable`."""
        conn = self.conn
        assert conn is not None, "AuditReader.open() first"
        if self._pending is not None:
            fence, waiting = self._pending
            holders = self._holders(conn)
            still = {vxid: pid for vxid, pid in holders.items() if vxid in waiting}
            if still:
                self._warn_if_stuck(still)
                return self.stable
            self.stable = max(self.stable, fence)
            self._pending = None
        last = self._last_id(conn)  # strictly before the pg_locks read below
        if last > self.stable:
            holders = self._holders(conn)
            if holders:
                self._pending = (last, frozenset(holders))
                self._pending_since = time.monotonic()
            else:
                self.stable = last
        return self.stable

    # -- reading ------------------------------------------------------------------------------------

    def fetch(self, after: Mapping[TableName, int], limit: int) -> list[tuple[Any, ...]]:
        """Up to ``limit`` settled audit rows of this reader's tables with ``id > after[table]``,
        in id order, as tuples of :data:`ROW_COLUMNS` (``ts_ms`` the capture time in epoch
        milliseconds, ``images`` the JSON text ``[pk, before, after]``)."""
        stable = self.advance()
        wanted = [t for t in self.tables if after.get(t, 0) < stable]
        if not wanted:
            return []
        conn = self.conn
        assert conn is not None
        if len(wanted) == 1:
            (t,) = wanted
            cur = conn.execute(self._fetch_one, (t.schema, t.table, after.get(t, 0), stable, limit))  # type: ignore[arg-type]
        else:
            cur = conn.execute(
                self._fetch_many,  # type: ignore[arg-type]
                (
                    [t.schema for t in wanted],
                    [t.table for t in wanted],
                    [after.get(t, 0) for t in wanted],
                    stable,
                    limit,
                    limit,
                ),
            )
        return cur.fetchall()

    def prune(self, table: TableName, after: int, upto: int) -> int:
        """Delete ``table``'s audit rows with ``after < id <= upto`` (their offsets are
        committed); returns how many went. Uses the ``(table_schema, table_name, id)`` index."""
        assert self.conn is not None
        log_table = sql.Identifier(self.names.schema, self.names.table)
        cur = self.conn.execute(
            sql.SQL("DELETE FROM {t} WHERE table_schema = %s AND table_name = %s AND id > %s AND id <= %s")
            .format(t=log_table), (table.schema, table.table, after, upto))
        return cur.rowcount

    def drain(self) -> None:
        """Forget notifications received so far (the next query sees their changes)."""
        assert self.conn is not None
        for _ in self.conn.notifies(timeout=0):
            pass

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a notification; ``True`` if one came."""
        assert self.conn is not None
        if timeout <= 0:
            return False
        return any(True for _ in self.conn.notifies(timeout=timeout, stop_after=1))
