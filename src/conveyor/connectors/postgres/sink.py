"""The PostgreSQL sink connector (entry point ``postgres-sink``) and its task.

Delivery:

Hooks: the connector's run on the driver's control thread; the task's on its runner
thread in a Spark executor, one at a time. Offsets are "next offset to consume".

* ``exactly.once=false`` (default, at-least-once): ``put`` buffers records and writes the
  whole buffer in one transaction once it holds ``batch.size`` records; ``pre_commit``
  (periodic or closing) writes the rest and returns the offsets it was given, which are
  then all committed in PostgreSQL. After a crash, records since the last Kafka commit are
  written again (duplicates in ``insert`` mode, idempotent in ``upsert`` mode).
* ``exactly.once=true``: each write transaction also stores every partition's next offset
  in ``offsets.table``; ``open`` reads them back and rewinds the consumer with
  ``context.offset``; ``pre_commit`` writes the buffer and returns ``{}`` so Kafka commits
  nothing. Records below a stored offset (redelivered) are dropped, so each record's rows
  are committed exactly once.

The batch path (``put_batch``; schemaless JSON values, string or JSON keys): the same
delivery, written from Arrow columns (:mod:`.columnar`: Arrow decodes the JSON and renders
the CSV of a ``COPY``, no Python object per record). In ``insert`` mode each batch goes into
a ``COPY`` left open in its transaction as it arrives (PostgreSQL reads one batch while the
next is decoded), committed at ``batch.size`` rows or ``pre_commit``. What the columns alone
cannot show to be written as the record path writes it (see :mod:`.columnar`), and a batch
with a row PostgreSQL refuses, is written as records, with every rule below.

Errors: an unreachable database at ``start`` raises :class:`ConnectError` (host, port,
database, user; never the password). A transient database error while writing
(``psycopg.OperationalError``, e.g. a terminated backend, a failover, a serialization
failure) rolls the transaction back, drops the connection and raises
:class:`RetriableError` with ``retry.backoff.ms``; nothing of that transaction is
committed. From ``put`` the records of that call are taken out of the buffer and the
runtime redelivers them; from ``pre_commit``/``flush`` the buffer is kept and written at
the next attempt. The task reconnects on its next write. When the database refuses the
batch because of a record's data (``psycopg.DataError``/``IntegrityError``: a value its
column type cannot hold, e.g. after an incompatible schema change, a null in a NOT NULL
column, a duplicate key) the transaction is rolled back and :class:`DataError` raised with every
record the write held (``DataError.records``; the task no longer buffers them): the runtime
finds the refused records by writing them again in halves
(:mod:`conveyor.runtime.task.sink.isolation`), and they are treated as below.
Other database errors (missing tables or columns, permissions) raise :class:`ConnectError`
and fail the task. Records that cannot be written (a value that is not a dict, a null key
with ``pk.mode=record_key``, a required field ``auto.evolve`` cannot add, a record the
database refuses) go to the context's errant record reporter (dead-letter queue per
``errors.tolerance``; with ``errors.tolerance=none`` the task fails naming the record's
offset, which is not committed) or, without one, raise :class:`DataError`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from operator import attrgetter
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api import (
    ConnectError,
    DataError,
    RetriableError,
    SinkConnector,
    SinkRecord,
    SinkTask,
    TopicPartition,
)
from conveyor.api.batches import JSON_TYPE, KEY, OFFSET, PARTITION, VALUE, original_topics, partition_runs, sink_records
from conveyor.api.sink import Offsets
from conveyor.connectors._builtin import BuiltIn
from conveyor.connectors.postgres import columnar, db, offsets
from conveyor.connectors.postgres.config import InsertMode, PkMode, PostgresSinkConfig, load_config
from conveyor.connectors.postgres.writer import Plan, Rejects, ShapeChanged, Writer

log = logging.getLogger(__name__)
_TRANSIENT = (psycopg.OperationalError, psycopg.InterfaceError)
# What the database refuses because of a record's data (SQLSTATE classes 22 and 23: a value
# it cannot store as the column's type, out of range, a null in a NOT NULL column, a
# duplicate key): handled per record (errant record reporter / errors.tolerance).
_REJECTED = (psycopg.DataError, psycopg.IntegrityError)
_partition_key = attrgetter("original_topic", "original_kafka_partition")
_offset = attrgetter("original_kafka_offset")


class PostgresSinkConnector(BuiltIn, SinkConnector):
    """Writes Kafka records to PostgreSQL tables (like Confluent's JDBC sink).

    Every hook runs on the driver's control thread. The connector holds no connection
    between hooks: ``start`` checks the database is reachable (and creates the offsets
    table with ``exactly.once``), ``stop(connector_deleted=True)`` deletes the connector's
    stored offsets.
    """

    config_model = PostgresSinkConfig

    def __init__(self) -> None:
        self._raw: dict[str, Any] = {}
        self._config: PostgresSinkConfig | None = None
        self._cleanup: list[str] = []

    def start(self, config: Mapping[str, Any]) -> None:
        """Validate ``config`` and check the database answers (one short connection).
        Driver control thread; blocks up to ``connection.timeout.ms``.

        Raises:
            ConfigError: invalid configuration.
            ConnectError: the database is unreachable or refuses the login (message names
                host and port, never the password), or the offsets table cannot be created.
        """
        self._config = load_config(config)
        self._raw = dict(config)
        with db.connect(self._config) as conn:
            conn.execute("SELECT 1")
            if self._config.exactly_once:
                try:
                    offsets.ensure_table(conn, self._config.offsets_table, self._config.ddl_lock_timeout_ms)
                except psycopg.Error as exc:
                    raise ConnectError(f"cannot create offsets table {self._config.offsets_table!r}: {exc}") from exc

    def task_class(self) -> type[PostgresSinkTask]:
        return PostgresSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        """``max_tasks`` (at least 1) identical configurations: the consumer group splits the
        partitions between tasks. Driver control thread."""
        return [dict(self._raw) for _ in range(max(1, max_tasks))]

    def stop(self, connector_deleted: bool = False) -> None:
        """Driver control thread, after every task stopped. The connector holds no
        connection, so a plain stop releases nothing. On deletion with ``exactly.once``, delete
        this connector's rows from ``offsets.table`` (the tables written stay: they are
        the user's data).

        Raises:
            ConnectError: the database cannot be reached during a deletion (the runtime
                keeps the finalizer and retries).
        """
        cfg = self._config
        if not (connector_deleted and cfg is not None and cfg.exactly_once and cfg.name):
            return
        with db.connect(cfg) as conn:
            try:
                removed = offsets.delete_connector(conn, cfg.offsets_table, cfg.name)
            except psycopg.Error as exc:
                raise ConnectError(f"cannot delete stored offsets of connector {cfg.name!r}: {exc}") from exc
        self._cleanup.append(f"deleted {removed} stored offset row(s) of {cfg.name!r} from {cfg.offsets_table}")

    def cleanup_report(self) -> list[str]:
        return list(self._cleanup)

    def alter_offsets(self, config: Mapping[str, Any], changes: Mapping[TopicPartition, int | None]) -> bool:
        """With ``exactly.once``, write the new offsets to ``offsets.table`` (they win over the
        consumer group's when tasks open their partitions), and delete the rows of reset
        partitions, in one transaction. Control API thread, connector stopped (KIP-875).

        Returns:
            ``True`` with ``exactly.once`` (the table now agrees), ``False`` without (nothing
            is kept outside Kafka).

        Raises:
            ConfigError: invalid configuration.
            ConnectError: the database cannot be reached or written.
        """
        cfg = load_config(config)
        if not (cfg.exactly_once and cfg.name):
            return False
        try:
            with db.connect(cfg) as conn:
                offsets.ensure_table(conn, cfg.offsets_table, cfg.ddl_lock_timeout_ms)
                with conn.transaction(), conn.cursor() as cur:
                    offsets.store(cur, cfg.offsets_table, cfg.name,
                                  {tp: offset for tp, offset in changes.items() if offset is not None})
                    offsets.delete_partitions(cur, cfg.offsets_table, cfg.name,
                                              [tp for tp, offset in changes.items() if offset is None])
        except psycopg.Error as exc:
            raise ConnectError(f"cannot alter the stored offsets of connector {cfg.name!r}: {exc}") from exc
        return True


class PostgresSinkTask(BuiltIn, SinkTask):
    """Writes the records of its assigned partitions. Every hook runs on the task's
    runner thread (never concurrently); the task owns one connection."""

    stream_rows = 2000
    """Insert mode's batch path: rows decoded and sent to the open COPY at once. Arrow's JSON
    reader costs about 0.25 ms a call, so small batches go together (measured: 1.2 us a row
    at 500 rows a call, 0.8 us at 2,000, 0.7 us at 5,000)."""

    def __init__(self) -> None:
        self._config: PostgresSinkConfig | None = None
        self._conn: psycopg.Connection | None = None
        self._writer: Writer | None = None
        self._buffer: list[SinkRecord] = []
        # The batch path (put_batch): batches waiting to be written, and their rows. At most
        # one of _buffer and _batches holds anything: a batch whose write falls back to the
        # record path moves into _buffer, and the batches after it follow until it is written.
        self._batches: list[pa.RecordBatch] = []
        self._fallbacks: set[str] = set()
        # insert mode: the transaction whose COPY takes the batches as they come (stream_rows
        # at a time), and how many of _batches it holds; None when not streaming (until the
        # next write, once a batch could not be streamed: the write then takes them all at once).
        self._stream: columnar.CopyStream | None = None
        self._streamed = 0  # _batches[:_streamed] are in the stream
        self._no_stream = False
        self._commit_due = False  # batch.size rows are in the stream: commit at the next put_batch
        self._assigned: set[TopicPartition] = set()
        # exactly.once: (topic, partition) -> next offset committed in PostgreSQL
        self._stored: dict[tuple[str, int], int] = {}
        # A record that could not be written, refused by errors.tolerance (or with no reporter)
        # during pre_commit/flush; raised by the next put. The runtime only logs a failed
        # pre_commit (as Kafka Connect does), so this is how the task fails.
        self._failure: ConnectError | None = None
        self._transient_in_a_row = 0  # transient errors since the last write that succeeded (max.retries)

    @property
    def config(self) -> PostgresSinkConfig:
        if self._config is None:
            raise RuntimeError("PostgresSinkTask used before start()")
        return self._config

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, config: Mapping[str, Any]) -> None:
        """Validate the task configuration and connect (task runner thread, once, after
        ``initialize``; blocks up to ``connection.timeout.ms``). With ``exactly.once`` the
        offsets table is created if missing.

        Raises:
            ConfigError: invalid configuration (``name`` is required with ``exactly.once``).
            ConnectError: the database is unreachable (host/port named, no password).
        """
        self._config = load_config(config, for_task=True)
        self._writer = Writer(self._config)
        self._conn = db.connect(self._config)
        if self._config.exactly_once:
            try:
                offsets.ensure_table(self._conn, self._config.offsets_table, self._config.ddl_lock_timeout_ms)
            except psycopg.Error as exc:
                self._drop_connection()
                raise ConnectError(f"cannot create offsets table {self._config.offsets_table!r}: {exc}") from exc

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        """Track the new partitions; with ``exactly.once`` read their stored next offsets
        and rewind the consumer to them with ``context.offset`` (partitions without a
        stored offset keep the consumer's position). Task runner thread.

        Raises:
            RetriableError: the database could not be read (transient error).
        """
        self._assigned.update(partitions)
        self._abort_stream()  # the connection is needed for other things
        if not self.config.exactly_once or not partitions:
            return
        try:
            stored = self._load_offsets(partitions)
        except _TRANSIENT as exc:
            self._drop_connection()
            raise self._retriable("reading stored offsets", exc) from exc
        if stored:
            self.context.offset(stored)

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Buffer ``records``; once ``batch.size`` are buffered, write them all in one
        transaction (task runner thread; blocks for the write).

        Raises:
            RetriableError: transient database error; nothing was committed and this
                call's records are no longer buffered (the runtime redelivers them).
            ConnectError / DataError: the error of an earlier ``pre_commit``/``flush`` whose
                record could not be written and was not tolerated (it fails the task here,
                since the runtime only logs a failed ``pre_commit``).
            DataError: PostgreSQL refused a row of the write for its data; ``records`` holds
                every record the write held (this call's and those buffered before), none
                of them buffered any more: the runtime finds the refused ones. Also a record
                that cannot be written (not mappable to a row, a required field ``auto.evolve``
                cannot add) when there is no errant record reporter (the runtime's reporter
                raises a ``ConnectError`` naming the record's offset when
                ``errors.tolerance=none``).
            ConnectError: any other database error, a missing table (without
                ``auto.create``) or missing columns (without ``auto.evolve``).
        """
        self._raise_failure()
        if not records:
            return
        mark = len(self._buffer)
        self._buffer.extend(records)
        if len(self._buffer) >= self.config.batch_size:
            try:
                self._write(restore_to=mark)
            except ConnectError:
                self._failure = None  # raised right here already
                raise

    def takes_batches(self, key_type: pa.DataType | None, value_type: pa.DataType | None) -> bool:
        """Schemaless JSON values (``JsonConverter`` with ``schemas.enable=false``), with
        string or JSON keys when ``pk.mode=record_key``: those are written from their Arrow
        columns (:mod:`.columnar`). Task runner thread."""
        if value_type != JSON_TYPE:
            return False
        return self.config.pk_mode is not PkMode.RECORD_KEY or key_type in (pa.string(), JSON_TYPE)

    def batch_columns(self) -> frozenset[str]:
        """The values, and the keys with ``pk.mode=record_key``: all a row is made of."""
        return frozenset({KEY, VALUE}) if self.config.pk_mode is PkMode.RECORD_KEY else frozenset({VALUE})

    def put_batch(self, batch: pa.RecordBatch) -> None:
        """:meth:`put` for a record batch: buffered as it is; once ``batch.size`` rows are
        buffered they are written in one transaction from their columns (:mod:`.columnar`:
        Arrow decodes the JSON and renders the CSV of a ``COPY``), or, where the columns
        alone cannot show that this writes what the record path writes, as records. In
        ``insert`` mode the rows are streamed into an open ``COPY`` as they come, and its
        commit waits for the next call: PostgreSQL reads the last rows while the runtime
        reads the next batch. Task runner thread. Raises as :meth:`put`."""
        self._raise_failure()
        if self._commit_due:
            self._commit_due = False
            try:
                self._write_now(restore_to=len(self._batches))
            except DataError as exc:
                if exc.records is not None:  # this call's batch goes with them: it was never buffered
                    exc.records = [*exc.records, batch]
                raise
        if batch.num_rows == 0:
            return
        if self._buffer:  # records of a fallback are still waiting: these join them
            self.put(sink_records(batch))
            return
        mark = len(self._batches)
        self._batches.append(batch)
        self._stream_batch()
        if self._batched_rows >= self.config.batch_size:
            if self._stream is not None and self._streamed == len(self._batches):
                self._commit_due = True
            else:
                self._write_now(restore_to=mark)

    def _write_now(self, restore_to: int) -> None:
        try:
            self._write_batches(restore_to=restore_to)
        except ConnectError:
            self._failure = None  # raised right here already
            raise

    def flush(self, offsets: Offsets) -> None:
        """Write everything buffered (one transaction; task runner thread). Raises as
        :meth:`put`, except that on error the buffer is kept for the next attempt (those
        records were accepted by earlier ``put`` calls and will not be redelivered).

        A non-retriable error is also kept for the next :meth:`put` to raise: the runtime
        only logs a failed ``pre_commit`` (as Kafka Connect does), and the task must fail
        (a missing table or column, a permission error) rather than retry forever."""
        try:
            if self._batches:
                self._write_batches(restore_to=len(self._batches))
            else:
                self._write(restore_to=len(self._buffer))
        except RetriableError:
            raise
        except DataError as exc:
            if exc.records is None and self._failure is None:
                self._failure = exc
            raise
        except ConnectError as exc:
            if self._failure is None:
                self._failure = exc
            raise

    def pre_commit(self, offsets: Offsets) -> Offsets:
        """Write the buffer, then return what Kafka may commit: ``offsets`` unchanged
        (every record passed to ``put`` is now committed in PostgreSQL), or ``{}`` with
        ``exactly.once`` (offsets live in ``offsets.table``). Task runner thread, every
        ``offset.flush.interval.ms`` and, with ``context.is_closing()`` true, before
        partitions close; both write everything.

        Raises:
            RetriableError / ConnectError: as :meth:`flush`; the runtime then commits
                nothing this time.
            DataError: PostgreSQL refused a row of the write, ``records`` as from :meth:`put`;
                the runtime writes them but for the refused ones, then calls this again.
        """
        self.flush(offsets)
        return {} if self.config.exactly_once else dict(offsets)

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """Forget ``partitions``: drop their buffered records (uncommitted: whoever gets
        the partitions next re-reads them) and their stored-offset cache. Task runner
        thread; no I/O."""
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._abort_stream()
        self._assigned.difference_update(partitions)
        for key in gone:
            self._stored.pop(key, None)
        if self._buffer:
            self._buffer = [r for r in self._buffer if (r.original_topic, r.original_kafka_partition) not in gone]
        if self._batches:
            self._batches = [kept for batch in self._batches if (kept := _without(batch, gone)).num_rows]

    def stop(self, connector_deleted: bool = False) -> None:
        """Close the connection (task runner thread, last hook). Buffered records are
        dropped: never committed, so their offsets were not either. Nothing is provisioned
        per task, so ``connector_deleted`` changes nothing here (the connector deletes the
        stored offsets)."""
        self._buffer = []
        self._abort_stream()
        self._batches = []
        self._drop_connection()

    # -- internals ------------------------------------------------------------------------

    def _raise_failure(self) -> None:
        """A write of ``pre_commit``/``flush`` that failed for good fails the task here."""
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def _connection(self) -> psycopg.Connection:
        """The open connection, reconnecting if needed; with ``exactly.once`` a new
        connection first re-reads the stored offsets of the assigned partitions (a commit
        whose outcome was unknown may have succeeded).

        Raises:
            psycopg.OperationalError: the database cannot be reached (transient here).
        """
        if self._conn is not None and not self._conn.closed:
            return self._conn
        self._drop_connection()
        try:
            conn = db.connect(self.config)
        except ConnectError as exc:
            raise psycopg.OperationalError(str(exc)) from None
        if self.config.exactly_once:
            try:
                stored = offsets.load(conn, self.config.offsets_table, self.config.name or "", self._assigned)
            except BaseException:
                conn.close()
                raise
            self._stored = {(tp.topic, tp.partition): offset for tp, offset in stored.items()}
        self._conn = conn
        return conn

    def _load_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        cfg = self.config
        stored = offsets.load(self._connection(), cfg.offsets_table, cfg.name or "", partitions)
        for tp, offset in stored.items():
            self._stored[(tp.topic, tp.partition)] = offset
        return stored

    def _drop_connection(self) -> None:
        self._abort_stream()
        conn, self._conn = self._conn, None
        if self._writer is not None:
            self._writer.reset()
        if conn is not None:
            with contextlib.suppress(Exception):  # closing a broken connection
                conn.close()

    def _retriable(self, doing: str, exc: BaseException) -> RetriableError | ConnectError:
        """A :class:`RetriableError` after ``retry.backoff.ms``, or once ``max.retries``
        transient errors came in a row, a :class:`ConnectError` that fails the task."""
        detail = db.scrub(self.config, " ".join(str(exc).split()))
        self._transient_in_a_row += 1
        what = f"transient PostgreSQL error while {doing} ({db.describe(self.config)}): {detail}"
        if self._transient_in_a_row > self.config.max_retries:
            return ConnectError(f"{what}; {self._transient_in_a_row} in a row, more than max.retries="
                                f"{self.config.max_retries}: nothing of the batch was committed")
        return RetriableError(f"{what}; nothing was committed, the batch will be retried",
                              delay=timedelta(milliseconds=self.config.retry_backoff_ms))

    def _pending(self) -> tuple[list[SinkRecord], dict[tuple[str, int], int]]:
        """Buffered records not yet committed, and (``exactly.once``) the next offset per
        partition they reach. Records below a partition's stored offset were committed
        before (redelivered) and are left out."""
        buffer = self._buffer
        if not self.config.exactly_once or not buffer:
            return buffer, {}
        stored = self._stored
        partitions = set(map(_partition_key, buffer))
        if len(partitions) == 1:  # the common case, checked with whole-list operations
            (key,) = partitions
            offsets_ = list(map(_offset, buffer))
            floor = stored.get(key)
            if floor is None or min(offsets_) >= floor:
                return buffer, {key: max(offsets_) + 1}
        next_offsets: dict[tuple[str, int], int] = {}
        keep: list[SinkRecord] = []
        for record in buffer:
            key = (record.original_topic, record.original_kafka_partition)  # type: ignore[assignment]
            offset = record.original_kafka_offset
            floor = stored.get(key)
            if floor is not None and offset < floor:  # type: ignore[operator]
                continue
            keep.append(record)
            if offset >= next_offsets.get(key, -1):  # type: ignore[operator]
                next_offsets[key] = offset + 1  # type: ignore[operator]
        return keep, next_offsets

    def _write(self, restore_to: int) -> None:
        """Write the whole buffer in one transaction (rows, and offsets with ``exactly.once``).

        On failure the buffer is truncated back to ``restore_to`` records (the ones not
        handed over by the failing ``put``) and the connection's caches are reset.
        """
        if not self._buffer:
            return
        cfg = self.config
        writer = self._writer
        assert writer is not None
        try:
            conn = self._connection()
            records, next_offsets = self._pending()
            plan = writer.prepare(conn, records) if records else None
            if plan is not None:
                self._reject(plan.rejects)
            if (plan is None or not plan.batches) and not next_offsets:
                self._buffer = []  # nothing to write (e.g. only skipped tombstones)
                return
            try:
                try:
                    self._transaction(conn, plan, next_offsets)
                except ShapeChanged:  # rolled back; plan again, checking every record's keys
                    writer.reset()
                    self._transaction(conn, writer.prepare(conn, records, trust_shape=False), next_offsets)
            except _REJECTED as exc:  # rolled back: the runtime finds the record(s) refused
                writer.reset()
                rejected = {id(record) for record, _ in plan.rejects} if plan is not None else set()
                held, self._buffer = [r for r in self._buffer if id(r) not in rejected], []
                raise _refused(exc, held) from exc
        except _TRANSIENT as exc:
            self._drop_connection()
            del self._buffer[restore_to:]
            raise self._retriable("writing", exc) from exc
        except psycopg.Error as exc:
            writer.reset()
            del self._buffer[restore_to:]
            detail = db.scrub(cfg, " ".join(str(exc).split()))
            raise ConnectError(f"PostgreSQL rejected the write ({type(exc).__name__}): {detail}") from exc
        except ConnectError:
            writer.reset()
            del self._buffer[restore_to:]
            raise
        self._buffer = []
        self._stored.update(next_offsets)
        self._failure = None
        self._transient_in_a_row = 0

    def _transaction(
        self, conn: psycopg.Connection, plan: Plan | None, next_offsets: dict[tuple[str, int], int]
    ) -> None:
        """One transaction: the plan's rows and, with ``exactly.once``, the offsets."""
        writer = self._writer
        assert writer is not None
        self._commit(conn, None if plan is None else lambda cur: writer.execute(cur, plan), next_offsets)

    def _commit(self, conn: psycopg.Connection, write: Callable[[psycopg.Cursor], None] | None,
                next_offsets: dict[tuple[str, int], int]) -> None:
        """One transaction: ``write``, then, with ``exactly.once``, the offsets."""
        with conn.transaction(), conn.cursor() as cur:
            if write is not None:
                write(cur)
            if self.config.exactly_once:
                self._store_offsets(cur, next_offsets)

    def _store_offsets(self, cur: psycopg.Cursor, next_offsets: dict[tuple[str, int], int]) -> None:
        cfg = self.config
        offsets.store(cur, cfg.offsets_table, cfg.name or "",
                      {TopicPartition(t, p): o for (t, p), o in next_offsets.items()})

    def _write_batches(self, restore_to: int) -> None:
        """Write every buffered batch in one transaction from their columns; where
        :mod:`.columnar` cannot, or the database refuses a row, move them to the record
        buffer and write them as records (:meth:`_write`). On failure the batches are
        truncated back to ``restore_to`` (those not handed over by the failing ``put_batch``).
        Raises as :meth:`_write`."""
        cfg = self.config
        writer = self._writer
        assert writer is not None
        if self._commit_stream():
            return
        try:
            conn = self._connection()
            batches, next_offsets = self._pending_batches(self._batches)
            try:
                copies = columnar.plan(writer, conn, cfg, batches) if batches else []
                self._commit(conn, lambda cur: columnar.execute(writer, cur, cfg, copies), next_offsets)
            except columnar.NotColumnar as exc:
                self._fall_back(str(exc), restore_to)
                return
            except _REJECTED as exc:  # rolled back: the runtime finds the row(s) refused
                writer.reset()
                held, self._batches = self._batches, []
                self._no_stream = self._commit_due = False
                raise _refused(exc, held) from exc
        except _TRANSIENT as exc:
            self._drop_connection()
            self._truncate_batches(restore_to)
            raise self._retriable("writing", exc) from exc
        except psycopg.Error as exc:
            writer.reset()
            self._truncate_batches(restore_to)
            detail = db.scrub(cfg, " ".join(str(exc).split()))
            raise ConnectError(f"PostgreSQL rejected the write ({type(exc).__name__}): {detail}") from exc
        self._written(next_offsets)

    def _written(self, next_offsets: dict[tuple[str, int], int]) -> None:
        self._batches = []
        self._no_stream = self._commit_due = False
        self._stored.update(next_offsets)
        self._failure = None
        self._transient_in_a_row = 0

    def _stream_batch(self, min_rows: int | None = None) -> None:
        """Send the buffered batches not streamed yet to the open COPY (opening it), once they
        hold ``min_rows`` rows (default :attr:`stream_rows`), insert mode. Whatever keeps them
        out of the stream (:class:`~.columnar.NotColumnar`, another table or columns, a
        database error) rolls the stream back and leaves every buffered batch to the next
        write, which raises what must be raised."""
        cfg = self.config
        if self._no_stream or self._buffer or cfg.insert_mode is not InsertMode.INSERT:
            return
        pending = self._batches[self._streamed:]
        if not pending or sum(batch.num_rows for batch in pending) < (min_rows or self.stream_rows):
            return
        writer = self._writer
        assert writer is not None
        try:
            kept, _ = self._pending_batches(pending)
            copies = columnar.plan(writer, self._connection(), cfg, kept, cached=self._stream is not None) \
                if kept else []
            if len(copies) > 1 or (self._stream is not None and copies and
                                   (copies[0].table.display, copies[0].columns) !=
                                   (self._stream.table, self._stream.columns)):
                raise columnar.NotColumnar("rows of another table or other columns")
            if copies:
                if self._stream is None:
                    self._stream = columnar.CopyStream(self._connection(), copies[0])
                self._stream.write(copies[0])
            self._streamed = len(self._batches)
        except (columnar.NotColumnar, psycopg.Error) as exc:
            log.debug("postgres-sink stops streaming until the next write: %s", exc)
            self._abort_stream()
            self._no_stream = True

    def _commit_stream(self) -> bool:
        """Stream the batches not streamed yet, then commit the open stream (with the offsets,
        under ``exactly.once``); ``False`` when there is none, or it fails (rolled back: the
        caller writes the batches again, and raises what must be raised)."""
        if self._stream is not None:
            self._stream_batch(min_rows=1)
        stream = self._stream
        if stream is None or self._streamed != len(self._batches):
            self._abort_stream()
            return False
        cfg = self.config
        _, next_offsets = self._pending_batches(self._batches)
        self._stream = None
        try:
            stream.commit(lambda cur: self._store_offsets(cur, next_offsets) if cfg.exactly_once else None)
        except psycopg.Error as exc:
            log.debug("postgres-sink's streamed write failed, writing the batches again: %s", exc)
            self._streamed = 0
            if isinstance(exc, _TRANSIENT):
                self._drop_connection()
            return False
        log.debug("postgres-sink committed %d row(s) of %d batch(es) streamed", self._batched_rows, len(self._batches))
        self._streamed = 0
        self._written(next_offsets)
        return True

    def _abort_stream(self) -> None:
        stream, self._stream = self._stream, None
        self._streamed = 0
        self._commit_due = False
        if stream is not None:
            stream.abort()

    def _fall_back(self, why: str, restore_to: int) -> None:
        """Write the buffered batches as records (their order kept), ``why`` logged at
        INFO the first time."""
        (log.info if why not in self._fallbacks else log.debug)(
            "postgres-sink writes %d buffered row(s) as records: %s", self._batched_rows, why)
        self._fallbacks.add(why)
        kept = sum(batch.num_rows for batch in self._batches[:restore_to])
        self._buffer = [record for batch in self._batches for record in sink_records(batch)]
        self._batches = []
        self._write(restore_to=kept)

    def _truncate_batches(self, restore_to: int) -> None:
        del self._batches[restore_to:]

    @property
    def _batched_rows(self) -> int:
        return sum(batch.num_rows for batch in self._batches)

    def _pending_batches(
        self, batches: list[pa.RecordBatch]
    ) -> tuple[list[pa.RecordBatch], dict[tuple[str, int], int]]:
        """:meth:`_pending` for ``batches``: rows below a partition's stored offset
        (redelivered, ``exactly.once``) left out, and the next offset per partition."""
        if not self.config.exactly_once:
            return batches, {}
        stored = self._stored
        kept: list[pa.RecordBatch] = []
        next_offsets: dict[tuple[str, int], int] = {}
        for batch in batches:
            for tp, start, stop in partition_runs(batch):
                offsets_ = batch.column(OFFSET).slice(start, stop - start)
                key = (tp.topic, tp.partition)
                floor = stored.get(key, -1)
                skip = pc.sum(pc.less(offsets_, floor)).as_py() if offsets_[0].as_py() < floor else 0
                if start + skip < stop:
                    kept.append(batch.slice(start + skip, stop - start - skip))
                    next_offsets[key] = max(next_offsets.get(key, -1), offsets_[-1].as_py() + 1)
        return kept, next_offsets

    def _reject(self, rejects: Rejects) -> None:
        """Report records that cannot be written to the errant record reporter and wait
        until each report is durable; without a reporter raise :class:`DataError`. Either
        failure is also kept for the next :meth:`put` to raise (see ``_failure``)."""
        if not rejects:
            return
        reporter = self.context.errant_record_reporter()
        if reporter is None:
            record, message = rejects[0]
            self._failure = DataError(
                f"record {record.topic}-{record.kafka_partition}@{record.kafka_offset} cannot be written:"
                f" {message} ({len(rejects)} such record(s) in the batch)"
            )
            raise self._failure
        try:
            futures = [reporter.report(record, DataError(message)) for record, message in rejects]
        except ConnectError as exc:  # errors.tolerance=none: the runtime's reporter refuses
            self._failure = exc
            raise
        for future in futures:
            future.result()


def _refused(exc: psycopg.Error, held: list[Any]) -> DataError:
    """The :class:`DataError` of a write PostgreSQL refused for a row's data, handing the
    runtime ``held`` (the records or batches the write held, no longer buffered) to find the
    row(s) in; the message names the error's class and PostgreSQL's primary message."""
    primary = getattr(getattr(exc, "diag", None), "message_primary", None) or type(exc).__name__
    return DataError(f"PostgreSQL refused a row of the write ({type(exc).__name__}): {primary}", records=held)


def _without(batch: pa.RecordBatch, gone: set[tuple[str, int]]) -> pa.RecordBatch:
    """``batch`` without the rows of the ``gone`` partitions (by the topic they were read from)."""
    if not gone:
        return batch
    topics, partitions = original_topics(batch), batch.column(PARTITION)
    drop = None
    for topic, partition in gone:
        mask = pc.and_(pc.equal(topics, topic), pc.equal(partitions, partition))
        drop = mask if drop is None else pc.or_(drop, mask)
    return batch.filter(pc.invert(drop))
