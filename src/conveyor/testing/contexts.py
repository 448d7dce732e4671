"""A stand-in runtime for driving a connector's task directly in a test: a sink task
context that remembers what the task asked of it, an errant record reporter that
keeps what was reported, and the runtime's search for the records a write refuses
(:class:`IsolatingSinkTask`, the runtime's own :mod:`conveyor.runtime.task.sink.isolation`).
For tests of a connector's own behaviour against its real external system; the runtime's
behaviour is tested through the real runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from datetime import timedelta
from typing import Any, TypeVar, cast

import pyarrow as pa

from conveyor.api import DataError, ErrantRecordReporter, SinkRecord, SinkTask, SinkTaskContext, TopicPartition
from conveyor.runtime.task.sink.isolation import Isolation, Part, record_error


class RecordingReporter(ErrantRecordReporter):
    """Keeps ``(record, error)`` of every report; each report completes at once."""

    def __init__(self) -> None:
        self.reported: list[tuple[SinkRecord, BaseException]] = []

    def report(self, record: SinkRecord, error: BaseException) -> Future[None]:
        self.reported.append((record, error))
        future: Future[None] = Future()
        future.set_result(None)
        return future


class StubSinkTaskContext(SinkTaskContext):
    """Remembers rewinds, retry timeouts, pauses and commit requests; a test sets
    ``assigned`` and toggles ``closing`` (what ``is_closing()`` answers)."""

    def __init__(self, config: Mapping[str, Any], reporter: ErrantRecordReporter | None = None) -> None:
        self._config = dict(config)
        self._reporter = reporter
        self.rewinds: list[dict[TopicPartition, int]] = []
        self.timeouts: list[timedelta] = []
        self.paused: set[TopicPartition] = set()
        self.commit_requests = 0
        self.closing = False
        self.assigned: set[TopicPartition] = set()

    def configs(self) -> Mapping[str, Any]:
        return self._config

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.rewinds.append(dict(offsets))

    def timeout(self, timeout: timedelta) -> None:
        self.timeouts.append(timeout)

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self.assigned)

    def pause(self, *partitions: TopicPartition) -> None:
        self.paused.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.paused.difference_update(partitions)

    def request_commit(self) -> None:
        self.commit_requests += 1

    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        return self._reporter

    def is_closing(self) -> bool:
        return self.closing


T = TypeVar("T", bound=SinkTask)


class IsolatingSinkTask:
    """``task`` called as the runtime calls it: a record error from ``put``, ``put_batch`` or
    (naming the records its write held) ``pre_commit`` has the refused records found by the
    runtime's :class:`~conveyor.runtime.task.sink.isolation.Isolation` and reported to the
    context's errant record reporter, then (from ``pre_commit``) ``pre_commit`` called again;
    without a reporter, the first refused record raises :class:`DataError` naming it. Every
    other attribute is the task's own (read and set)."""

    def __init__(self, task: SinkTask) -> None:
        object.__setattr__(self, "_task", task)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._task, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._task, name, value)

    def put(self, records: Sequence[SinkRecord]) -> None:
        self._call(lambda: self._task.put(records), list(records))

    def put_batch(self, batch: pa.RecordBatch) -> None:
        self._call(lambda: self._task.put_batch(batch), [batch])

    def pre_commit(self, offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        try:
            return self._task.pre_commit(offsets)
        except Exception as exc:
            if getattr(exc, "records", None) is None or not record_error(exc, self._task.poison_errors):
                raise
            self._isolate(list(exc.records), exc)  # type: ignore[attr-defined]
        return self._task.pre_commit(offsets)

    def _call(self, call: Any, part: Part) -> None:
        try:
            call()
        except Exception as exc:
            if not record_error(exc, self._task.poison_errors):
                raise
            held = getattr(exc, "records", None)
            self._isolate(list(held) if held is not None else part, exc)

    def _isolate(self, part: Part, error: BaseException) -> None:
        task = self._task

        def put(piece: Part) -> None:
            if piece and isinstance(piece[0], pa.RecordBatch):
                for batch in piece:
                    task.put_batch(batch)  # type: ignore[arg-type]
            else:
                task.put(piece)  # type: ignore[arg-type]

        def probe(offsets: dict[tuple[str, int], int]) -> None:
            task.pre_commit({TopicPartition(t, p): o for (t, p), o in offsets.items()})

        def report(record: SinkRecord, refused: BaseException) -> None:
            reporter = task.context.errant_record_reporter()
            if reporter is None:
                raise DataError(f"record {record.original_topic}-{record.original_kafka_partition}@"
                                f"{record.original_kafka_offset} cannot be written: {refused}") from refused
            reporter.report(record, refused).result()

        Isolation(put, probe, report, task.poison_errors).run(part, error)


def start_sink_task(
    task: T,
    config: Mapping[str, Any],
    partitions: Sequence[TopicPartition],
    reporter: ErrantRecordReporter | None = None,
) -> tuple[T, StubSinkTaskContext]:
    """What the runtime does to start ``task`` on ``partitions``: ``initialize`` with a
    :class:`StubSinkTaskContext` (with ``reporter`` as its errant record reporter), ``start``,
    then ``open``. Returns the task, called through :class:`IsolatingSinkTask` as the runtime
    calls it, and its context."""
    context = StubSinkTaskContext(config, reporter)
    task.initialize(context)
    task.start(config)
    context.assigned.update(partitions)
    task.open(list(partitions))
    return cast(T, IsolatingSinkTask(task)), context


def closing_commit(
    task: SinkTask, context: StubSinkTaskContext, offsets: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """What the runtime does before partitions close (KIP-275): ``pre_commit`` with
    ``is_closing()`` true. Returns what the task says may be committed."""
    context.closing = True
    try:
        return dict(task.pre_commit(dict(offsets)))
    finally:
        context.closing = False
