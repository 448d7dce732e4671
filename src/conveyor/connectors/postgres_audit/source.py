"""The PostgreSQL audit source connector (entry point ``postgres-audit-source``) and its task.

The motivating example of KAFKA-14651 / KIP-883: a source connector that captures row changes
of configured tables with triggers into an audit table, emits them to Kafka, and removes its
triggers, function and audit table when — and only when — the connector is deleted.

Connector (every hook on the driver's main control thread, one at a time; no connection is
held between hooks):

* ``start(config)`` creates or reconciles the audit objects in one transaction
  (:func:`.provision.provision`): safe on every start, concurrent-safe, all or nothing;
  configured tables are checked (exist, are tables, have a primary key, privileges) before
  anything is created.
* ``task_configs(max_tasks)`` spreads the tables round robin over ``min(max_tasks, #tables)``
  tasks (never an empty task); each task configuration is the connector's with ``tables``
  replaced by that task's share.
* ``stop(connector_deleted=True)`` drops exactly this connector's objects in one transaction
  (:func:`.provision.deprovision`); ``cleanup_report()`` lists them.
  ``stop(connector_deleted=False)`` removes nothing.

Task (every hook on the task's runner thread in the Spark executor, one at a time):

* source partition, one per table: ``{"schema": "public", "table": "orders"}``;
* source offset: ``{"id": <audit id of the last record emitted for that table>}``; without a
  committed offset a table starts at the first audit row;
* topic ``<topic.prefix><schema>.<table>``;
* key: the primary-key columns, ``{"id": 7}`` (for an update that changed the key: the new
  key; ``before`` holds the old one);
* value, Debezium-like::

      {"op": "c" | "u" | "d",               # insert, update, delete
       "before": {...} | None,              # the old row (update, delete)
       "after": {...} | None,               # the new row (insert, update)
       "source": {"schema": "public", "table": "orders", "txid": 7712, "audit_id": 42},
       "ts_ms": 1767225600123}              # capture time, epoch ms

  ``source.txid`` is the writing transaction's ``txid_current()``; ``ts_ms`` is
  ``clock_timestamp()`` when the row changed (not the commit time, which a trigger cannot
  observe; at or before it) and is also ``SourceRecord.timestamp``.
* Schemaless (``key_schema`` / ``value_schema`` ``None``; a Connect schema would have to be
  re-derived on every ``ALTER TABLE``): rows are PostgreSQL's ``to_jsonb`` of the row, so
  numbers are JSON numbers (a ``numeric`` with more than ~15 significant digits loses precision
  as a Python float), ``timestamp[tz]``/``date``/``uuid`` are ISO/text strings, ``bytea`` is a
  hex string such as ``\\x01ff``, ``json``/``jsonb``/arrays are nested values. A column added
  later simply appears in later rows. ``before``/``after`` keys come in jsonb's order (shorter
  names first); the key's fields in primary-key column order.
* Every ``UPDATE`` of a row is a ``"u"`` record, also one that changed nothing; ``TRUNCATE`` is
  not captured (row triggers do not fire for it). An ``UPDATE`` that moves a row to another
  partition of a captured partitioned table is a ``"d"`` and a ``"c"``.
* Records come out in audit-id order, which for every row is its change order; a change is
  emitted only once no open transaction can still commit a smaller id (see
  :mod:`.reader`), so restarting from a committed offset repeats and skips nothing.

Batches: under ``JsonConverter`` (keys and values), without exactly-once or transformations,
the runtime calls ``poll_batch``: the same records, one table's per call, as JSON text built
without a record object each (:class:`~conveyor.api.batches.SourceBatch`).

Exactly-once (KIP-618): ``exactly_once_support`` is SUPPORTED (an offset is an exact position in
an immutable log; the same offset always yields the same records) and
``can_define_transaction_boundaries`` is SUPPORTED: with ``transaction.boundary=connector`` the
task calls ``transaction_context().commit_transaction()`` for every non-empty batch, so each
``poll`` batch is one Kafka transaction (a database transaction larger than
``poll.max.rows`` spans several). ``commit_record()`` (KIP-416) is not overridden, so the runtime
builds no per-record metadata for it.

Retention (``audit.retention``, default ``committed``): ``commit()`` runs once the runtime has
the offsets in Kafka (and has updated ``context.offset_storage_reader()``); it deletes each
of the task's tables' audit rows up to that table's committed offset, so the audit table does
not grow with everything ever captured. A restart resumes after the committed offset and never
needs them. ``keep`` leaves every row until the connector is deleted.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import psycopg
import pyarrow as pa

from conveyor.api import (
    ConnectError,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    RetriableError,
    SourceConnector,
    SourceRecord,
    SourceTask,
    TransactionContext,
)
from conveyor.api.batches import JSON_TYPE, SourceBatch, json_text
from conveyor.connectors._builtin import BuiltIn
from conveyor.connectors.postgres_audit import db, provision
from conveyor.connectors.postgres_audit.config import (
    AuditNames,
    PostgresAuditSourceConfig,
    TableName,
    load_config,
)
from conveyor.connectors.postgres_audit.reader import AuditReader

log = logging.getLogger(__name__)

_TRANSIENT = (psycopg.OperationalError, psycopg.InterfaceError)
_JSON = json.JSONDecoder()
#: Delay of the RetriableError raised by ``poll`` when the connection broke.
RECONNECT_DELAY = timedelta(seconds=1)


def source_partition(table: TableName) -> dict[str, str]:
    """The source partition of ``table``: ``{"schema": ..., "table": ...}``."""
    return {"schema": table.schema, "table": table.table}


class PostgresAuditSourceConnector(BuiltIn, SourceConnector):
    """Captures row changes of PostgreSQL tables through triggers (entry point
    ``postgres-audit-source``; configuration in :mod:`.config`, objects in :mod:`.provision`).

    Every hook runs on the driver's main control thread, never concurrently with another hook
    of this connector.
    """

    config_model = PostgresAuditSourceConfig

    def __init__(self) -> None:
        self._raw: dict[str, Any] = {}
        self._config: PostgresAuditSourceConfig | None = None
        self._report: list[str] = []
        self.provisioned: list[str] = []

    def validate(self, config: Mapping[str, Any]) -> PostgresAuditSourceConfig:
        """Parse ``config``; no I/O. ``name`` may still be missing here (the runtime adds it).

        Raises:
            ConfigError: naming each bad key and the expected type or value.
        """
        return load_config(config, require_name=False)

    def start(self, config: Mapping[str, Any]) -> None:
        """Create or reconcile the audit objects (one transaction; see
        :func:`.provision.provision`). Driver control thread; blocks for one connection
        (up to ``connection.timeout.ms``) and the DDL (locks up to ``ddl.lock.timeout.ms``).

        The configuration is remembered before any I/O, so that ``stop(connector_deleted=True)``
        can clean up even after a failed start (``conveyor cleanup`` starts the connector
        only to delete it).

        Raises:
            ConfigError: invalid configuration (``name`` is required); under ``tables``: a
                table missing, not a table or without a primary key (nothing created).
            ConnectError: unreachable database (host and port named, never the password),
                missing privileges (each named, e.g. ``TRIGGER privilege on table
                public.orders``), lock timeout, conflicting trigger; nothing created.
        """
        self._config = load_config(config)
        self._raw = dict(config)
        with db.connect(self._config) as conn:
            self.provisioned = provision.provision(conn, self._config)

    def task_class(self) -> type[PostgresAuditSourceTask]:
        return PostgresAuditSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        """Tables round robin over ``min(max_tasks, number of tables)`` tasks (never an empty
        one): table ``i`` goes to task ``i % n``. Each configuration is the connector's with
        ``tables`` set to that task's tables (``"s.t,s2.t2"``). Driver control thread; no I/O.
        """
        cfg = self._require_config()
        count = max(1, min(max_tasks, len(cfg.tables)))
        shares: list[list[TableName]] = [[] for _ in range(count)]
        for index, table in enumerate(cfg.tables):
            shares[index % count].append(table)
        return [{**self._raw, "tables": ",".join(str(t) for t in share)} for share in shares]

    def stop(self, connector_deleted: bool = False) -> None:
        """Called after every task stopped, on the driver control thread.

        ``connector_deleted=False`` (plain stop, restart, pause, rebalance, scale-down): nothing
        is removed, triggers keep capturing so that no change is missed while the connector is
        down. ``connector_deleted=True`` (KIP-883 / KAFKA-14651: the connector was deleted):
        drop exactly this connector's triggers, function, audit table and (if Conveyor created
        it and it is now empty) the audit schema, in one transaction; idempotent. Tasks drop
        nothing: the connector owns every object.

        Raises:
            ConnectError: the database cannot be reached or the cleanup transaction failed
                (rolled back: nothing removed); the runtime keeps the Kubernetes finalizer and
                retries. Also when ``start`` never received a usable configuration (nothing is
                known about where to clean up).
        """
        if not connector_deleted:
            return
        cfg = self._config
        if cfg is None:
            raise ConnectError(
                "cannot clean up: start() never received a valid configuration (with 'name' and"
                " 'connection.url'), so the database and objects to drop are unknown"
            )
        self._report = []
        with db.connect(cfg) as conn:
            self._report = provision.deprovision(conn, cfg)

    def cleanup_report(self) -> list[str]:
        """What the last ``stop(connector_deleted=True)`` dropped, one line each, e.g.
        ``"dropped trigger conveyor_audit_orders on public.orders"``."""
        return list(self._report)

    def exactly_once_support(self, config: Mapping[str, Any]) -> ExactlyOnceSupport:
        """SUPPORTED (KIP-618): offsets are exact positions in an append-only audit log."""
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, Any]) -> ConnectorTransactionBoundaries:
        """SUPPORTED (KIP-618): one transaction per ``poll`` batch (see the module docstring)."""
        return ConnectorTransactionBoundaries.SUPPORTED

    def _require_config(self) -> PostgresAuditSourceConfig:
        if self._config is None:
            raise RuntimeError("PostgresAuditSourceConnector used before start()")
        return self._config


class PostgresAuditSourceTask(BuiltIn, SourceTask):
    """Emits the audit rows of its tables. Every hook runs on the task's runner thread in the
    Spark executor, never concurrently; the task owns one connection (``LISTEN``-ing)."""

    def __init__(self) -> None:
        self._config: PostgresAuditSourceConfig | None = None
        self._reader: AuditReader | None = None
        self._offsets: dict[TableName, int] = {}
        self._partitions: dict[tuple[str, str], dict[str, str]] = {}
        self._topics: dict[tuple[str, str], str] = {}
        self._tables: dict[tuple[str, str], TableName] = {}
        self._transactions: TransactionContext | None = None
        self._pruned: dict[TableName, int] = {}  # audit ids deleted up to, per table
        self._waiting: deque[SourceBatch] = deque()  # read, not yet returned by poll_batch

    @property
    def offsets(self) -> dict[TableName, int]:
        """The audit id of the last record returned per table (a copy)."""
        return dict(self._offsets)

    def start(self, config: Mapping[str, Any]) -> None:
        """Read each table's committed offset (``context.offset_storage_reader()``) and
        connect. Task runner thread, once, after ``initialize``; blocks up to
        ``connection.timeout.ms``.

        Raises:
            ConfigError: invalid task configuration.
            ConnectError: a committed offset that is not ``{"id": <int >= 0>}`` (the partition
                is named), an unreachable database, or a missing audit table (the connector
                creates it in its ``start``).
        """
        cfg = load_config(config)
        names = AuditNames.of(cfg)
        self._config = cfg
        reader = self.context.offset_storage_reader()
        for table in cfg.tables:
            partition = source_partition(table)
            key = (table.schema, table.table)
            self._partitions[key] = partition
            self._topics[key] = cfg.topic_for(table)
            self._tables[key] = table
            stored = reader.offset(partition)
            if stored is None:
                self._offsets[table] = 0
                continue
            value = stored.get("id") if isinstance(stored, Mapping) else None
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConnectError(
                    f"committed offset {stored!r} of source partition {partition} is not"
                    ' {"id": <audit id, integer >= 0>}'
                )
            self._offsets[table] = value
        self._transactions = self.context.transaction_context()
        self._reader = AuditReader(cfg, names, cfg.tables)
        self._reader.open()
        log.info("task for %s starts after audit ids %s", ", ".join(map(str, cfg.tables)), self._offsets)

    def poll(self) -> list[SourceRecord]:
        """Up to ``poll.max.rows`` records, in audit-id order, of changes after each table's
        offset. When there are none, wait (``LISTEN``) up to ``poll.interval.ms`` for a change
        and return ``[]`` if none came. With ``transaction.boundary=connector`` a non-empty
        batch asks for its transaction to be committed. Task runner thread.

        Raises:
            RetriableError: the connection broke, or reconnecting failed (tried again on the
                next call, after 1 s); nothing was emitted, offsets did not move.
            ConnectError: any other database error (e.g. the audit table was dropped).
        """
        rows = self._fetch()
        if not rows:
            return []
        records = self._records(rows, self._require()[1].key_columns)
        if self._transactions is not None:
            self._transactions.commit_transaction()
        return records

    def batch_types(self) -> tuple[pa.DataType, pa.DataType]:
        """JSON values and keys (``arrow.json``): under ``JsonConverter`` the rows are written
        without a record object each."""
        return JSON_TYPE, JSON_TYPE

    def poll_batch(self) -> SourceBatch | None:
        """:meth:`poll` in columnar form, one table per call: the records of one table among
        the rows read (the other tables' wait for the next calls), keys and values as the
        JSON text ``JsonConverter`` writes for them (:func:`~conveyor.api.batches.json_text`),
        the timestamps ``ts_ms``, the source offset the table's last audit id; ``None`` when no
        change came within ``poll.interval.ms``. Never under exactly-once (the runtime then
        calls :meth:`poll`). Task runner thread.

        Raises:
            As :meth:`poll`.
        """
        if not self._waiting:
            rows = self._fetch()
            if not rows:
                return None
            self._waiting.extend(self._batches(rows, self._require()[1].key_columns))
        return self._waiting.popleft()

    def _fetch(self) -> list[tuple[Any, ...]]:
        """Up to ``poll.max.rows`` audit rows after each table's offset, waiting (``LISTEN``)
        up to ``poll.interval.ms`` for one; ``[]`` if none came. Raises as :meth:`poll`."""
        cfg, reader = self._require()
        deadline = time.monotonic() + cfg.poll_interval_ms / 1000
        try:
            reader.open()
            while True:
                reader.drain()
                rows = reader.fetch(self._offsets, cfg.poll_max_rows)
                if rows:
                    return rows
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                # A pending fence resolves when a writer ends, which sends no notification
                # if it rolled back: look again soon.
                reader.wait(min(remaining, 0.05) if reader.pending else remaining)
        except db.DatabaseUnreachable as exc:  # reconnecting failed: the database may be restarting
            raise RetriableError(f"{exc}; retrying", delay=RECONNECT_DELAY) from exc
        except _TRANSIENT as exc:
            reader.close()
            raise RetriableError(
                f"lost the PostgreSQL connection while polling ({db.describe(cfg)}): {db.scrub(cfg, str(exc))};"
                " reconnecting",
                delay=RECONNECT_DELAY,
            ) from exc
        except psycopg.Error as exc:
            raise ConnectError(
                f"PostgreSQL error while reading audit table {reader.names.qualified_table}"
                f" ({db.describe(cfg)}): {type(exc).__name__}: {db.scrub(cfg, str(exc))}"
            ) from exc

    def _records(
        self, rows: list[tuple[Any, ...]], key_columns: Mapping[TableName, tuple[str, ...]]
    ) -> list[SourceRecord]:
        partitions, topics, tables = self._partitions, self._topics, self._tables
        records: list[SourceRecord] = []
        append = records.append
        last: dict[tuple[str, str], int] = {}
        decode = _JSON.raw_decode  # the text is PostgreSQL's jsonb output: no surrounding whitespace
        for audit_id, schema, table, op, txid, ts_ms, images in rows:
            (pk, before, after), _end = decode(images)
            where = (schema, table)
            if len(pk) > 1:
                pk = _key_in_order(pk, key_columns.get(tables[where]))
            append(
                SourceRecord(
                    source_partition=partitions[where],
                    source_offset={"id": audit_id},
                    topic=topics[where],
                    value=_change(op, before, after, schema, table, txid, audit_id, ts_ms),
                    key=pk,
                    timestamp=ts_ms,
                )
            )
            last[where] = audit_id
        for where, audit_id in last.items():
            self._offsets[tables[where]] = audit_id
        return records

    def _batches(self, rows: list[tuple[Any, ...]], key_columns: Mapping[TableName, tuple[str, ...]]
                 ) -> list[SourceBatch]:
        """The rows as one :class:`SourceBatch` per table, in the order of each table's first
        row, with the records :meth:`_records` would make."""
        by_table: dict[tuple[str, str], tuple[list[bytes], list[bytes], list[int], list[int]]] = {}
        decode = _JSON.raw_decode
        tables = self._tables
        for audit_id, schema, table, op, txid, ts_ms, images in rows:
            (pk, before, after), _end = decode(images)
            where = (schema, table)
            if len(pk) > 1:
                pk = _key_in_order(pk, key_columns.get(tables[where]))
            keys, values, stamps, ids = by_table.setdefault(where, ([], [], [], []))
            keys.append(json_text(pk))
            values.append(json_text(_change(op, before, after, schema, table, txid, audit_id, ts_ms)))
            stamps.append(ts_ms)
            ids.append(audit_id)
        batches = []
        for where, (keys, values, stamps, ids) in by_table.items():
            self._offsets[tables[where]] = ids[-1]
            batches.append(SourceBatch(
                topic=self._topics[where], values=_json_column(values), keys=_json_column(keys),
                timestamps=pa.array(stamps, pa.int64()), source_partition=self._partitions[where],
                source_offset={"id": ids[-1]}))
        return batches

    def commit(self) -> None:
        """Offsets were committed: with ``audit.retention=committed``, delete each table's audit
        rows up to its committed offset (read back from ``context.offset_storage_reader()``).
        Task runner thread. A database error is logged and the rows wait for the next commit:
        they are only kept longer, never lost."""
        cfg, reader = self._require()
        if cfg.audit_retention != "committed":
            return
        storage = self.context.offset_storage_reader()
        try:
            reader.open()
            for table in cfg.tables:
                stored = storage.offset(source_partition(table))
                upto = stored.get("id") if isinstance(stored, Mapping) else None
                after = self._pruned.get(table, 0)
                if isinstance(upto, int) and not isinstance(upto, bool) and upto > after:
                    deleted = reader.prune(table, after, upto)
                    self._pruned[table] = upto
                    log.debug("audit rows of %s up to id %d deleted (%d)", table, upto, deleted)
        except (db.DatabaseUnreachable, psycopg.Error) as exc:
            if isinstance(exc, _TRANSIENT):
                reader.close()
            log.warning("audit rows of committed offsets not deleted yet (%s): %s", db.describe(cfg),
                        db.scrub(cfg, str(exc)))

    def stop(self, connector_deleted: bool = False) -> None:
        """Close the connection. Task runner thread, last hook. Nothing is provisioned per
        task, so ``connector_deleted`` changes nothing here: the connector drops the audit
        objects in its own ``stop(connector_deleted=True)``, after every task stopped."""
        if self._reader is not None:
            self._reader.close()

    def _require(self) -> tuple[PostgresAuditSourceConfig, AuditReader]:
        if self._config is None or self._reader is None:
            raise RuntimeError("PostgresAuditSourceTask used before start()")
        return self._config, self._reader


def _change(op: str, before: Any, after: Any, schema: str, table: str, txid: int, audit_id: int,
            ts_ms: int) -> dict[str, Any]:
    """A record's value (see the module docstring)."""
    return {"op": op, "before": before, "after": after,
            "source": {"schema": schema, "table": table, "txid": txid, "audit_id": audit_id}, "ts_ms": ts_ms}


def _key_in_order(pk: dict[str, Any], columns: tuple[str, ...] | None) -> dict[str, Any]:
    """jsonb orders keys by length: the primary key's fields back in its column order."""
    if columns and len(columns) == len(pk) and all(c in pk for c in columns):
        return {c: pk[c] for c in columns}
    return pk


def _json_column(texts: list[bytes]) -> pa.Array:
    return pa.ExtensionArray.from_storage(JSON_TYPE, pa.array(texts, pa.binary()).view(pa.string()))
