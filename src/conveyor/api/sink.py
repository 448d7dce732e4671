"""Sink tasks: Kafka → external system.

Lifecycle of one sink task, as Kafka Connect's ``WorkerSinkTask`` with KIP-275's
``is_closing()`` implemented::

    initialize(context) → start(config)
    → open(partitions)                         on each assignment
    → put(records) … put(records)              after conversion and transformations
      (or put_batch(batch) …: the same records as Arrow columns, :mod:`conveyor.api.batches`)
    → pre_commit(offsets) → commit             every offset.flush.interval.ms and on
                                               context.request_commit()
    → pre_commit(offsets) [is_closing() True] → commit (synchronous) → close(partitions)
                                               before partitions or the task go away
                                               (revoke, shutdown, drain, stop, pause
                                               to ``stopped``, reconfiguration)
    → close(partitions) without commit         when partitions are *lost*
    → stop(connector_deleted)

All hooks run on the task's runner thread. Offsets are "next offset to consume".
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from conveyor.api.errors import ConnectError
from conveyor.api.records import SinkRecord, TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa
from conveyor.api.tasks import Task

Offsets = Mapping[TopicPartition, int]


class ErrantRecordReporter(abc.ABC):
    """Reports records a sink task could not process (KIP-610).

    Each report follows ``errors.tolerance``: with ``none`` the task fails; with ``all``
    the original record goes to the dead-letter queue (when configured) with the
    ``__connect.errors.*`` context headers, and processing continues. The runtime
    waits for every reported record's future before committing offsets past it.
    """

    @abc.abstractmethod
    def report(self, record: SinkRecord, error: BaseException) -> Future[None]:
        """Report ``record`` as failed with ``error``. Callable from any thread.

        Returns a future that completes when the report is durable (written to the
        dead-letter queue, or logged when no queue is configured).

        Raises:
            ConnectError: when ``errors.tolerance=none`` (the task then fails).
        """


class SinkTaskContext(abc.ABC):
    """The runtime as seen by a sink task. Methods are called from the task's thread
    unless they say otherwise."""

    @abc.abstractmethod
    def configs(self) -> Mapping[str, Any]:
        """The task's configuration."""

    @abc.abstractmethod
    def offset(self, offsets: Offsets) -> None:
        """Rewind (or skip) partitions to the given next-offsets.

        Applied right after ``open`` when called from ``open``, otherwise before the
        next poll. The runtime's current offsets follow, so ``pre_commit`` sees them.
        """

    @abc.abstractmethod
    def timeout(self, timeout: timedelta) -> None:
        """Set how long to wait before redelivering a batch whose ``put`` raised
        :class:`~conveyor.api.errors.RetriableError` without a delay of its own."""

    @abc.abstractmethod
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this task."""

    @abc.abstractmethod
    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching from ``partitions`` (group membership continues)."""

    @abc.abstractmethod
    def resume(self, *partitions: TopicPartition) -> None:
        """Resume fetching from ``partitions`` paused by :meth:`pause`."""

    @abc.abstractmethod
    def request_commit(self) -> None:
        """Ask for ``pre_commit`` and a commit as soon as the current ``put`` returns,
        instead of waiting for ``offset.flush.interval.ms``."""

    @abc.abstractmethod
    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        """The reporter for records the task could not process. Never ``None`` in
        Conveyor (kept optional for Kafka Connect parity)."""

    @abc.abstractmethod
    def is_closing(self) -> bool:
        """True while ``pre_commit`` runs because its partitions or the task are about
        to close (KIP-275); false at every other time, including plain periodic
        commits. A task that buffers (e.g. 100,000 records per file) writes its partial
        buffer when this is true, so no progress is lost."""


class SinkTask(Task, abc.ABC):
    """Writes records consumed from Kafka to an external system."""

    _context: SinkTaskContext | None = None

    poison_errors: tuple[type[BaseException], ...] = ()
    """Exception classes that, raised from :meth:`put` or :meth:`put_batch`, blame a record of
    the call rather than the external system (a value its column cannot hold, a key it
    refuses), as :class:`~conveyor.api.errors.DataError` always does: e.g. a client library's
    ``IntegrityError``. The runtime then finds the records refused (see :meth:`put`). Never a
    :class:`~conveyor.api.errors.RetriableError`."""

    def initialize(self, context: SinkTaskContext) -> None:
        """Receive the task context; called once, before ``start``."""
        self._context = context

    @property
    def context(self) -> SinkTaskContext:
        """The context given to ``initialize``.

        Raises:
            RuntimeError: when read before ``initialize``.
        """
        if self._context is None:
            raise RuntimeError(f"{type(self).__name__}.context read before initialize()")
        return self._context

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        """Partitions were assigned; set up writers for them. With the cooperative
        assignor only the *newly* assigned partitions are passed. A task storing its
        offsets externally reads them here and calls ``context.offset(...)``."""

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Write (or buffer) a batch of records; may be empty.

        A task implements this, :meth:`put_batch`, or both. One that implements only
        :meth:`put_batch` fails at start wherever its records could not come as batches
        (the runtime says why), and this default raises :class:`ConnectError`.

        Raises:
            RetriableError: the runtime pauses consumption and redelivers the same
                batch after the delay, keeping group membership.
            DataError: (or one of :attr:`poison_errors`) a record of the call cannot be
                written, and the task kept none of the call's records. The runtime puts
                them again in halves, each followed by :meth:`pre_commit` (what it returns
                is committed at the next commit), halving a refused half again down to one
                record, which follows ``errors.tolerance`` at stage ``TASK_PUT`` (the
                dead-letter queue under ``all``, with Kafka Connect's context headers; under
                ``none`` the task fails naming it). The other records are written once, and
                offsets move past both. A task needs no code of its own for it.
            Exception: anything else fails the task after a closing commit of the
                records already processed by earlier ``put`` calls.
        """
        raise ConnectError(f"{type(self).__name__} takes records as batches only (put_batch); it has no put()")

    def put_batch(self, batch: pa.RecordBatch) -> None:
        """Write (or buffer) records in columnar form: an Arrow record batch, one row per
        record, its columns described in :mod:`conveyor.api.batches`; may have no rows.

        Optional: a task that overrides it gets its records here instead of through
        :meth:`put` whenever the batch path applies (converters with a columnar form:
        ``StringConverter``, ``ByteArrayConverter``, ``JsonConverter``, and those that give
        Connect schemas, whose columns are typed; a transformation chain whose every stage has a batch form
        (``TransformationChain.batch_unsupported``); no ``header.converter``;
        ``conveyor.batch.path.enable`` true) and :meth:`takes_batches` says yes, and through :meth:`put` otherwise.
        Every other contract is the same on both paths: the offsets ``pre_commit`` sees,
        ``is_closing()``, rewinds, pause and resume, retries, and the errant record
        reporter: a row reported as a record with its coordinates (as
        :func:`~conveyor.api.batches.sink_records` makes it) reaches the dead-letter queue with
        its original message's key, value and headers while the runtime still holds that
        message (the last 100,000 messages, up to 64 MiB of keys and values).
        The default hands the rows to :meth:`put` as records.

        Records read in one poll (up to ``conveyor.batch.max.records``, 5000; ``put`` gets up
        to ``max.poll.records``) come as one batch, or with typed columns as one batch per run
        of records of one key schema and value schema, called in order.

        Raises:
            RetriableError: as from :meth:`put`: the same batch is delivered again (and the
                poll's batches after it).
            DataError: (or one of :attr:`poison_errors`) as from :meth:`put`: the batch's rows
                (and the poll's batches after it) are put again in slices until the rows
                refused are found.
            Exception: as from :meth:`put`: the task fails.
        """
        from conveyor.api.batches import sink_records

        self.put(sink_records(batch))

    def takes_batches(self, key_type: pa.DataType | None, value_type: pa.DataType | None) -> bool:
        """Whether the task wants :meth:`put_batch` for batches whose ``key`` and ``value``
        columns have these Arrow types (:mod:`conveyor.api.batches`; ``None``: typed by
        the records' Connect schemas, one type per batch); asked once, after
        :meth:`start`, on the task's thread, when the batch path applies. A task that
        would only turn such batches back into records says no, and gets :meth:`put`.
        The default: whether the task's class overrides :meth:`put_batch`."""
        return type(self).put_batch is not SinkTask.put_batch

    def batch_columns(self) -> Collection[str] | None:
        """The columns of :mod:`conveyor.api.batches` this task reads, of ``timestamp``,
        ``key``, ``value`` and ``headers``; the batches it gets then hold only those, besides
        ``topic``, ``partition`` and ``offset``, which always come (the runtime does not
        build what no one reads). ``None`` (the default): every column. Asked once, after
        :meth:`takes_batches` says yes, on the task's thread. Through
        :func:`~conveyor.api.batches.sink_records`, a column left out reads as null."""
        return None

    def flush(self, offsets: Offsets) -> None:
        """Make everything up to ``offsets`` durable; called by the default ``pre_commit``."""

    def pre_commit(self, offsets: Offsets) -> Offsets:
        """Decide what to commit.

        Args:
            offsets: for each assigned partition with records already passed to
                ``put``, the next offset to consume.

        Returns:
            The offsets to commit. The runtime commits only partitions currently
            assigned and never beyond ``offsets`` (others are ignored with a warning);
            ``{}`` commits nothing, the way an exactly-once sink keeps its offsets in
            the external system. The default calls ``flush(offsets)`` and returns
            ``offsets``.

        ``context.is_closing()`` tells a closing commit from a periodic one. Raising
        skips this commit (logged); a closing commit that raises commits nothing.
        """
        self.flush(offsets)
        return offsets

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """Partitions were revoked or lost; release their writers. After a closing
        commit on revoke, or without one when lost (they belong to another task now)."""
