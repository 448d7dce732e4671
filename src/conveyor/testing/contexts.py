"""A stand-in runtime for driving a connector's task directly in a test: a sink task
context that remembers what the task asked of it, and an errant record reporter that
keeps what was reported. For tests of a connector's own behaviour against its real
external system; the runtime's behaviour is tested through the real runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from datetime import timedelta
from typing import Any, TypeVar

from conveyor.api import ErrantRecordReporter, SinkRecord, SinkTask, SinkTaskContext, TopicPartition


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


def start_sink_task(
    task: T,
    config: Mapping[str, Any],
    partitions: Sequence[TopicPartition],
    reporter: ErrantRecordReporter | None = None,
) -> tuple[T, StubSinkTaskContext]:
    """What the runtime does to start ``task`` on ``partitions``: ``initialize`` with a
    :class:`StubSinkTaskContext` (with ``reporter`` as its errant record reporter), ``start``,
    then ``open``. Returns the task and its context."""
    context = StubSinkTaskContext(config, reporter)
    task.initialize(context)
    task.start(config)
    context.assigned.update(partitions)
    task.open(list(partitions))
    return task, context


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
