"""The runner's implementation of :class:`~conveyor.api.SinkTaskContext` and the
errant record reporter (KIP-610)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from conveyor.api import ErrantRecordReporter, Header, SinkRecord, SinkTaskContext, TimestampType, TopicPartition
from conveyor.runtime.errors.tolerance import FailedRecord, Stage, ToleranceOperator, class_name

if TYPE_CHECKING:
    from confluent_kafka import Message


@dataclass(slots=True)
class InternalSinkRecord(SinkRecord):
    """A :class:`SinkRecord` that remembers the Kafka message it came from, so a
    reported failure sends the original bytes to the dead-letter queue."""

    raw: Message | None = field(default=None, repr=False, compare=False)


TIMESTAMP_TYPES = {0: TimestampType.NO_TIMESTAMP_TYPE, 1: TimestampType.CREATE_TIME, 2: TimestampType.LOG_APPEND_TIME}
"""librdkafka's ``Message.timestamp()`` type codes."""
_LAZY_FIELDS = ("timestamp", "timestamp_type", "headers", "original_topic", "original_kafka_partition",
                "original_kafka_offset")


class LazySinkRecord(InternalSinkRecord):
    """What the runner hands to ``put``: an :class:`InternalSinkRecord` whose timestamp,
    headers and original coordinates are read from the Kafka message the first time any of
    them is used (most sinks never read them). The first use turns the record into a plain
    :class:`InternalSinkRecord` in place, so later reads cost what a field read costs.

    The sink runner makes them without ``__init__`` (``object.__new__`` and a store per
    eager field: a third of a dataclass construction); ``dataclasses.replace``
    (``new_record``) of one makes an eager :class:`InternalSinkRecord`.
    """

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__class__ = InternalSinkRecord  # type: ignore[assignment]
        InternalSinkRecord.__init__(self, *args, **kwargs)

    def materialize(self) -> None:
        """Read the lazy fields from the message; the record becomes an :class:`InternalSinkRecord`."""
        msg = self.raw
        ts_type, ts = msg.timestamp()  # type: ignore[union-attr]
        self.__class__ = InternalSinkRecord  # type: ignore[assignment]
        self.timestamp = ts if ts_type else None
        self.timestamp_type = TIMESTAMP_TYPES[ts_type]
        raw_headers = msg.headers()  # type: ignore[union-attr]
        self.headers = tuple([Header(k, v) for k, v in raw_headers]) if raw_headers else ()
        self.original_topic = msg.topic()  # type: ignore[union-attr]
        self.original_kafka_partition = msg.partition()  # type: ignore[union-attr]
        self.original_kafka_offset = msg.offset()  # type: ignore[union-attr]

    def __eq__(self, other: object) -> bool:
        self.materialize()
        return self == other

    __hash__ = None  # type: ignore[assignment]  # mutable, as every SinkRecord


def _lazy_field(name: str) -> property:
    def get(self: LazySinkRecord) -> Any:
        self.materialize()
        return getattr(self, name)

    def set_(self: LazySinkRecord, value: Any) -> None:
        self.materialize()
        setattr(self, name, value)

    return property(get, set_, doc=f"``{name}``, read from the Kafka message on first use.")


for _name in _LAZY_FIELDS:
    setattr(LazySinkRecord, _name, _lazy_field(_name))


def failed_record(msg: Message) -> FailedRecord:
    """The :class:`FailedRecord` of a consumed message."""
    ts_type, ts = msg.timestamp()
    return FailedRecord(
        msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers(), ts if ts_type else None
    )


class RunnerSinkContext(SinkTaskContext):
    """State the task can change through its context; read by the runner's loop."""

    def __init__(self, configs: Mapping[str, Any], reporter: ErrantRecordReporter) -> None:
        self._configs = dict(configs)
        self._reporter = reporter
        self.assigned: set[TopicPartition] = set()
        self.rewinds: dict[TopicPartition, int] = {}
        self.paused_by_task: set[TopicPartition] = set()
        self.retry_timeout: timedelta | None = None
        self.commit_requested = False
        self.closing = False

    def configs(self) -> Mapping[str, Any]:
        return self._configs

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        for tp, off in offsets.items():
            if not isinstance(tp, TopicPartition) or not isinstance(off, int) or off < 0:
                raise ValueError(f"offset() takes {{TopicPartition: int >= 0}}, got {tp!r}: {off!r}")
        self.rewinds.update(offsets)

    def timeout(self, timeout: timedelta) -> None:
        self.retry_timeout = timeout

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self.assigned)

    def pause(self, *partitions: TopicPartition) -> None:
        self._check_assigned("pause", partitions)
        self.paused_by_task.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._check_assigned("resume", partitions)
        self.paused_by_task.difference_update(partitions)

    def request_commit(self) -> None:
        self.commit_requested = True

    def errant_record_reporter(self) -> ErrantRecordReporter:
        return self._reporter

    def is_closing(self) -> bool:
        return self.closing

    def _check_assigned(self, what: str, partitions: tuple[TopicPartition, ...]) -> None:
        unknown = [str(tp) for tp in partitions if tp not in self.assigned]
        if unknown:
            raise ValueError(f"cannot {what} partitions not assigned to this task: {', '.join(unknown)}")


class RunnerErrantRecordReporter(ErrantRecordReporter):
    """Routes ``report(record, error)`` through the task's tolerance settings."""

    def __init__(self, tolerance: ToleranceOperator, task: object,
                 find_message: Callable[[str, int, int], Message | None] | None = None) -> None:
        self._tolerance = tolerance
        self._task_class = class_name(task)
        self.find_message = find_message

    def report(self, record: SinkRecord, error: BaseException) -> Future[None]:
        """Hand ``record`` to ``errors.tolerance`` at stage ``TASK_PUT``: with its original
        message's bytes when the record came from one (the record path's records, and rows of
        the batch path found through ``find_message``), else as the task made it."""
        raw = getattr(record, "raw", None)
        if raw is None and self.find_message is not None and record.original_kafka_offset is not None:
            raw = self.find_message(record.original_topic, record.original_kafka_partition,  # type: ignore[arg-type]
                                    record.original_kafka_offset)
        failed = (
            failed_record(raw)
            if raw is not None
            else FailedRecord(
                record.original_topic or record.topic,
                record.original_kafka_partition if record.original_kafka_partition is not None else -1,
                record.original_kafka_offset if record.original_kafka_offset is not None else -1,
                None, None, None, record.timestamp,
            )
        )
        return self._tolerance.failed(failed, Stage.TASK_PUT, self._task_class, error)
