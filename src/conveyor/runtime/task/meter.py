"""What a task runner measures for Kafka Connect's windowed task metrics.

Kafka Connect's ``*-avg`` / ``*-max`` task metrics are sampled statistics over its metrics
window (``metrics.sample.window.ms`` 30 s × ``metrics.num.samples`` 2 by default): only what
happened in about the last minute counts. A runner sees every ``put()`` / ``poll()`` batch,
offset commit and transaction, so it keeps them here for :data:`WINDOW_S` seconds and puts
their average, maximum and minimum in each :class:`~conveyor.control.protocol.TaskReport`
(``None`` when nothing happened in the window). The driver turns them into
``kafka_connect_*`` metrics (:mod:`conveyor.runtime.rest.connect_metrics`).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

WINDOW_S = 60.0
"""Kafka Connect's default metrics window: 2 samples of 30 s."""

MAX_EVENTS = 10_000
"""Events kept per window at most (a task doing more than this a minute is measured on its latest ones)."""


class Window:
    """Values recorded in the last ``window_s`` seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S) -> None:
        self._clock = clock
        self._window_s = window_s
        self._events: collections.deque[tuple[float, float]] = collections.deque(maxlen=MAX_EVENTS)

    def record(self, value: float) -> None:
        self._events.append((self._clock(), float(value)))

    def values(self) -> list[float]:
        cutoff = self._clock() - self._window_s
        while self._events and self._events[0][0] < cutoff:
            self._events.popleft()
        return [value for _, value in self._events]

    def stats(self) -> tuple[float | None, float | None, float | None]:
        """``(avg, max, min)`` of the window; ``None`` each when it is empty."""
        values = self.values()
        if not values:
            return None, None, None
        return sum(values) / len(values), max(values), min(values)


class TaskMeter:
    """Batches, commits and transactions of one task run (called on the task's thread).

    * :meth:`batch` — one ``put()`` (sink) or one ``poll()`` that returned records (source):
      its size and duration (Connect's ``batch-size-*``, ``put-batch-*-time-ms``,
      ``poll-batch-*-time-ms``);
    * :meth:`commit` — one successful offset commit (``offset-commit-*-time-ms``);
    * :meth:`transaction` — the records of one committed transaction (``transaction-size-*``);
    * :attr:`records_dropped` — source records that were polled but are never written:
      dropped by a transformation or by a tolerated error (``source-record-active-count``
      is polled − written − dropped);
    * :meth:`running` and :meth:`idle` — since when the task's loop runs, and the time it spent
      waiting for records: the rest is its busy time (``busy_time_ms``), as Flink's
      ``busyTimeMsPerSecond``, which the operator's autoscaler reads
      (:mod:`conveyor.manifest.autoscaler`).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._batch_sizes = Window(clock)
        self._batch_ms = Window(clock)
        self._commit_ms = Window(clock)
        self._transaction_sizes = Window(clock)
        self.records_dropped = 0
        self._clock = clock
        self._running_since: float | None = None
        self._idle_s = 0.0

    def running(self) -> None:
        """The task's loop begins."""
        self._running_since = self._clock()

    def idle(self, seconds: float) -> None:
        """``seconds`` spent waiting for records (a consumer poll that found none buffered)."""
        self._idle_s += seconds

    def batch(self, size: int, seconds: float) -> None:
        self._batch_sizes.record(size)
        self._batch_ms.record(seconds * 1000)

    def commit(self, seconds: float) -> None:
        self._commit_ms.record(seconds * 1000)

    def transaction(self, size: int) -> None:
        self._transaction_sizes.record(size)

    def report_fields(self) -> dict[str, Any]:
        """The :class:`~conveyor.control.protocol.TaskReport` fields of this meter."""
        size_avg, size_max, _ = self._batch_sizes.stats()
        ms_avg, ms_max, _ = self._batch_ms.stats()
        commit_avg, commit_max, _ = self._commit_ms.stats()
        txn_avg, txn_max, txn_min = self._transaction_sizes.stats()
        running_ms = 0 if self._running_since is None else int((self._clock() - self._running_since) * 1000)
        return {"batch_size_avg": size_avg, "batch_size_max": size_max, "batch_time_avg_ms": ms_avg,
                "batch_time_max_ms": ms_max, "commit_time_avg_ms": commit_avg, "commit_time_max_ms": commit_max,
                "transaction_size_avg": txn_avg, "transaction_size_max": txn_max, "transaction_size_min": txn_min,
                "records_dropped": self.records_dropped, "running_time_ms": running_ms,
                "busy_time_ms": max(0, running_ms - int(self._idle_s * 1000))}
