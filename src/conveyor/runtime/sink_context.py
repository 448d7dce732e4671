"""The runner's implementation of :class:`~conveyor.api.SinkTaskContext` and the
errant record reporter (KIP-610)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from conveyor.api import ErrantRecordReporter, SinkRecord, SinkTaskContext, TopicPartition
from conveyor.runtime.tolerance import FailedRecord, Stage, ToleranceOperator, class_name

if TYPE_CHECKING:
    from confluent_kafka import Message


@dataclass(slots=True)
class InternalSinkRecord(SinkRecord):
    """A :class:`SinkRecord` that remembers the Kafka message it came from, so a
    reported failure sends the original bytes to the dead-letter queue."""

    raw: Message | None = field(default=None, repr=False, compare=False)


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
        self.pause_requests: list[tuple[bool, tuple[TopicPartition, ...]]] = []
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
        self.pause_requests.append((True, partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        self._check_assigned("resume", partitions)
        self.paused_by_task.difference_update(partitions)
        self.pause_requests.append((False, partitions))

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

    def __init__(self, tolerance: ToleranceOperator, task: object) -> None:
        self._tolerance = tolerance
        self._task_class = class_name(task)

    def report(self, record: SinkRecord, error: BaseException) -> Future[None]:
        raw = getattr(record, "raw", None)
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
