"""Source tasks: external system → Kafka.

Lifecycle: ``initialize(context)`` → ``start(config)`` → ``poll()`` … in a loop on the
task's runner thread → ``commit_record(record, metadata)`` for each record once it is
acknowledged (or dropped) → ``commit()`` after source offsets are flushed →
``stop(connector_deleted)``.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from conveyor.api.records import RecordMetadata, SourceRecord
from conveyor.api.tasks import Task

if TYPE_CHECKING:
    import pyarrow as pa

    from conveyor.api.batches import SourceBatch

SourcePartition = Mapping[str, Any]
SourceOffset = Mapping[str, Any]


class OffsetStorageReader(abc.ABC):
    """Reads committed source offsets from the offsets topic (Kafka Connect's format)."""

    @abc.abstractmethod
    def offset(self, partition: SourcePartition) -> SourceOffset | None:
        """The last committed offset of ``partition``, or ``None`` if there is none."""

    def offsets(self, partitions: Collection[SourcePartition]) -> dict[Any, SourceOffset | None]:
        """Committed offsets of several partitions, keyed by each partition as a
        hashable tuple of its sorted items."""
        return {tuple(sorted(p.items())): self.offset(p) for p in partitions}


class TransactionContext(abc.ABC):
    """Lets a task define transaction boundaries (``transaction.boundary=connector``,
    KIP-618). Called from the task's thread."""

    @abc.abstractmethod
    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit the transaction after the next batch, or right after ``record`` is sent."""

    @abc.abstractmethod
    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort the transaction after the next batch, or right after ``record`` is sent
        (``record`` included in what is aborted)."""


class SourceTaskContext(abc.ABC):
    """The runtime as seen by a source task."""

    @abc.abstractmethod
    def configs(self) -> Mapping[str, Any]:
        """The task's configuration."""

    @abc.abstractmethod
    def offset_storage_reader(self) -> OffsetStorageReader:
        """Reader of committed source offsets; use it in ``start`` to resume."""

    @abc.abstractmethod
    def transaction_context(self) -> TransactionContext | None:
        """The transaction context when ``transaction.boundary=connector`` and
        exactly-once delivery is on; ``None`` otherwise."""


class SourceTask(Task, abc.ABC):
    """Reads from an external system and returns records to write to Kafka."""

    _context: SourceTaskContext | None = None

    def initialize(self, context: SourceTaskContext) -> None:
        """Receive the task context; called once, before ``start``."""
        self._context = context

    @property
    def context(self) -> SourceTaskContext:
        """The context given to ``initialize``.

        Raises:
            RuntimeError: when read before ``initialize``.
        """
        if self._context is None:
            raise RuntimeError(f"{type(self).__name__}.context read before initialize()")
        return self._context

    @abc.abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """Return new records, or ``None``/``[]`` when there are none yet.

        Should block briefly (up to about a second) rather than spin. Called on the
        task's thread; ``stop`` is called from the same thread after ``poll`` returns.

        Raises:
            RetriableError: ``poll`` is called again after the error's delay.
            Exception: anything else fails the task.
        """

    def batch_types(self) -> tuple[pa.DataType, pa.DataType | None]:
        """The Arrow types of the values and of the keys (``None``: no keys) of the batches
        :meth:`poll_batch` returns (:class:`~conveyor.api.batches.SourceBatch`): ``string``
        values and no keys unless a task says otherwise. The batch path applies only where
        the converters write them as they are (``StringConverter`` with UTF-8 writes
        ``string``, ``JsonConverter`` ``arrow.json``). Asked once, before :meth:`initialize`
        and :meth:`start` (the producer is set up for the path first), on the task's thread:
        an answer of the class, not of its configuration."""
        import pyarrow as pa

        return pa.string(), None

    def poll_batch(self) -> SourceBatch | None:
        """Optional: :meth:`poll`, but rows in columnar form (:class:`SourceBatch`), which the
        runtime writes without a Python object per record; ``None`` when there are none yet.

        The runtime calls it instead of :meth:`poll` when the task overrides it and the batch
        path applies: the converters write the types of :meth:`batch_types` as they are
        (``StringConverter`` with UTF-8 for ``string``, ``JsonConverter`` for ``arrow.json``),
        no transformation chain, no
        ``exactly.once.support``, and :meth:`commit_record` not overridden (a batch has no
        records to hand it). Otherwise :meth:`poll` is called. The batch's source offset is
        committed once every one of its rows is written; the offsets are flushed every
        ``offset.flush.interval.ms``, after the producer has written everything sent before.

        Called on the task's thread; should block briefly, as :meth:`poll`.

        Raises:
            As :meth:`poll`.
        """
        return None

    def commit(self) -> None:
        """Source offsets up to the last acknowledged records were just committed to the
        offsets topic (or the transaction committed). Called on the task's thread."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """One record is done (KIP-416), called on the task's thread, in send order per
        partition:

        * ``metadata`` set: the broker acknowledged ``record`` (with exactly-once
          delivery: its transaction committed); ``metadata`` is what a consumer sees.
        * ``metadata`` is ``None``: the record was dropped by a transformation or
          skipped under ``errors.tolerance=all``; it was never written.

        Records of an aborted transaction get no call. Raising is logged and ignored.
        """
