"""The driver's last minute of one task's reports: Kafka Connect's ``*-rate``, ``*-ratio``
and windowed ``*-avg`` / ``*-max`` of values a runner reports as totals or snapshots.

A runner posts a :class:`~conveyor.control.protocol.TaskReport` about once a second; each
one the driver takes (:meth:`~conveyor.runtime.herder.task_handles.TaskHandle.take_report`) is a
sample here. Kafka Connect computes its rates and ratios over its metrics window
(``metrics.sample.window.ms`` 30 s × ``metrics.num.samples`` 2), so samples are kept for
:data:`~conveyor.runtime.task.meter.WINDOW_S` seconds, plus the newest one older than
that, the base of a rate over the whole window. A report of a new attempt (whose counters
start again from 0) starts the window again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from conveyor.control.protocol import TaskReport, TaskState
from conveyor.runtime.task.meter import WINDOW_S

COUNTERS = ("records_read", "records_put", "records_written", "commits")
"""The report's totals whose per-second rates the metrics show."""


def active_records(report: TaskReport, source: bool) -> int:
    """Records the task has but has not finished with (Connect's ``*-record-active-count``).

    Sink: on each partition committed in this run, its consumed offset less its committed
    one, summed (Connect computes it from the same two offsets). Source: records polled but
    neither written nor dropped."""
    if source:
        return max(0, report.records_read - report.records_written - report.records_dropped)
    return sum(max(0, offset - report.committed[tp]) for tp, offset in report.consumed.items()
               if tp in report.committed)


@dataclass(frozen=True)
class _Sample:
    at: float
    attempt: int
    state: TaskState
    counters: tuple[int, ...]
    active: tuple[int, int]  # (as a sink's, as a source's)


class ReportWindow:
    """Samples of one task's reports over the last ``window_s`` seconds; thread-safe (the
    driver adds under its lock, a scrape reads from the control API's threads)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S) -> None:
        self._clock = clock
        self._window_s = window_s
        self._samples: list[_Sample] = []
        self._lock = threading.Lock()

    def add(self, report: TaskReport) -> None:
        sample = _Sample(self._clock(), report.attempt, report.state,
                         tuple(int(getattr(report, name)) for name in COUNTERS),
                         (active_records(report, source=False), active_records(report, source=True)))
        with self._lock:
            last = self._samples[-1] if self._samples else None
            if last is not None and (last.attempt != sample.attempt or
                                     any(n < o for n, o in zip(sample.counters, last.counters))):
                self._samples = []
            self._samples.append(sample)
            self._prune(sample.at)

    def _prune(self, now: float) -> None:
        """Drop samples older than the window, but the newest of them (a rate's base)."""
        cutoff = now - self._window_s
        while len(self._samples) >= 2 and self._samples[1].at <= cutoff:
            self._samples.pop(0)

    def _current(self) -> tuple[float, list[_Sample]]:
        now = self._clock()
        with self._lock:
            self._prune(now)
            return now, list(self._samples)

    def rates(self) -> dict[str, float]:
        """Per-second rate of each of :data:`COUNTERS` over the window (0 with fewer than two
        samples, or when the newest is older than the window: the task stopped reporting)."""
        now, samples = self._current()
        if len(samples) < 2 or samples[-1].at < now - self._window_s:
            return dict.fromkeys(COUNTERS, 0.0)
        base, last = samples[0], samples[-1]
        elapsed = max(now - base.at, 1e-9)
        return {name: (last.counters[i] - base.counters[i]) / elapsed for i, name in enumerate(COUNTERS)}

    def active(self, source: bool) -> tuple[int | None, float | None, int | None]:
        """``(latest, avg, max)`` of the active-record count (:func:`active_records`) in the
        window; ``None`` without samples."""
        now, samples = self._current()
        inside = [s.active[source] for s in samples if s.at >= now - self._window_s]
        if not inside:
            return (samples[-1].active[source] if samples else None), None, None
        return inside[-1], sum(inside) / len(inside), max(inside)

    def ratios(self) -> dict[TaskState, float]:
        """Fraction of the window each state held, a sample's state lasting until the next
        sample (the last one's until now); empty without samples."""
        now, samples = self._current()
        start = now - self._window_s
        spans: dict[TaskState, float] = {}
        for sample, following in zip(samples, [*samples[1:], None]):
            begin, end = max(sample.at, start), (following.at if following is not None else now)
            if end > begin:
                spans[sample.state] = spans.get(sample.state, 0.0) + end - begin
        covered = sum(spans.values())
        return {state: span / covered for state, span in spans.items()} if covered > 0 else {}
