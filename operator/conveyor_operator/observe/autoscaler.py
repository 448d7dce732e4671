"""The autoscaler's decisions (``spec.autoscaler``, :mod:`conveyor.manifest.autoscaler`): from
the driver's load counters (:class:`conveyor.control.load.SinkLoad`) read at each status read,
the task count a sink connector should run.

As the Flink Kubernetes operator's autoscaler (FLIP-271), over ``metricsWindowSeconds``:

* **processing rate** ``P`` = records put per second; **busy fraction** ``b`` = the tasks' time not
  waiting for records over their running time; so one task takes at most ``P / (b · n)`` records
  a second (``n`` the tasks running);
* **target rate** ``T`` = records produced per second (the growth of the log end offsets) plus
  the lag above the target lag (``targetLagRecords``, or ``targetLagSeconds`` of the records
  produced) spread over ``catchUpSeconds``;
* **recommendation** = ``ceil(T / (targetUtilization · P / (b · n)))``, clamped to
  ``[minTasks, min(maxTasks, partitions)]``; the current count while ``b`` is within
  ``targetUtilization ± utilizationBoundary`` and the lag within its target.

Recommendations pass through stabilization windows as a HorizontalPodAutoscaler's do: it scales
up to the lowest recommendation of the last ``scaleUpStabilizationSeconds``, down to the highest
of the last ``scaleDownStabilizationSeconds`` (and only once it has recommended for that long).
Measuring starts again after each change of the task count, so no rate spans two counts.

Pure: the operator's status reads keep a :class:`History` per Connector in memory (an operator
that restarts measures anew) and act on the :class:`Decision`.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field
from typing import Any

from conveyor.control.load import SinkLoad
from conveyor.manifest import ConnectorManifest
from conveyor.manifest.autoscaler import AutoscalerSpec, autoscaling

IDLE_BUSY = 0.01
"""A busy fraction below this is taken as this (a rate over an idle window is not a capacity)."""


@dataclass(frozen=True)
class Sample:
    at: float
    """``time.monotonic()`` seconds of the read."""
    load: SinkLoad


@dataclass
class History:
    """What the operator keeps of one Connector between its status reads."""

    samples: collections.deque[Sample] = field(default_factory=lambda: collections.deque(maxlen=400))
    recommendations: collections.deque[tuple[float, int]] = field(default_factory=lambda: collections.deque(maxlen=400))
    recommending_since: float | None = None
    """When the first recommendation since measuring began was made."""
    driver_differs_since: float | None = None
    """Since when the driver has run another task count than the autoscaler's (see :func:`driver_behind`)."""

    def restart(self) -> None:
        """Measure anew (the task count changed, or a counter went back)."""
        self.samples.clear()
        self.recommendations.clear()
        self.recommending_since = None


@dataclass(frozen=True)
class Evaluation:
    """The figures of one window, for ``status.autoscaler`` and the Events."""

    window_s: float
    tasks: int
    partitions: int
    lag: int
    input_rate: float
    """Records produced per second into the subscribed topics."""
    processing_rate: float
    """Records put per second by the running tasks."""
    busy: float
    """The running tasks' busy fraction, 0 to 1."""
    target_rate: float
    recommended: int
    reason: str

    def describe(self) -> str:
        return (f"{self.reason}: {self.input_rate:.0f} records/s produced, lag {self.lag} records, "
                f"{self.tasks} task(s) putting {self.processing_rate:.0f} records/s at {self.busy:.0%} busy "
                f"over {self.window_s:.0f} s; {self.partitions} partition(s)")

    def to_status(self) -> dict[str, Any]:
        return {"recommendedTasks": self.recommended, "reason": self.reason, "lagRecords": self.lag,
                "inputRecordsPerSecond": round(self.input_rate, 1),
                "processingRecordsPerSecond": round(self.processing_rate, 1),
                "busyFraction": round(self.busy, 3), "partitions": self.partitions}


@dataclass(frozen=True)
class Decision:
    tasks: int | None
    """The count to scale to now; ``None``: stay."""
    evaluation: Evaluation | None
    """``None`` while the window is not full yet."""


def running_tasks(manifest: ConnectorManifest, status: dict[str, Any]) -> int:
    """The task count the driver is to run: ``spec.tasksMax``, or with an enabled autoscaler
    its last decision (``status.autoscaler.tasks``; ``spec.tasksMax`` before the first),
    within ``[minTasks, maxTasks]``."""
    spec = manifest.spec
    if not autoscaling(spec.autoscaler):
        return spec.tasks_max
    assert spec.autoscaler is not None
    decided = (status.get("autoscaler") or {}).get("tasks")
    return spec.autoscaler.clamp(int(decided) if isinstance(decided, int) else spec.tasks_max)


def running_manifest(manifest: ConnectorManifest, status: dict[str, Any]) -> ConnectorManifest:
    """``manifest`` with the task count of :func:`running_tasks`: what the driver runs."""
    return with_tasks(manifest, running_tasks(manifest, status))


def with_tasks(manifest: ConnectorManifest, tasks: int) -> ConnectorManifest:
    if tasks == manifest.spec.tasks_max:
        return manifest
    return manifest.model_copy(update={"spec": manifest.spec.model_copy(update={"tasks_max": tasks})})


def evaluate(spec: AutoscalerSpec, samples: collections.deque[Sample], current: int) -> Evaluation | None:
    """The window's figures and recommendation; ``None`` until the samples span
    ``metricsWindowSeconds``."""
    if len(samples) < 2:
        return None
    last = samples[-1]
    first = next((s for s in reversed(samples) if last.at - s.at >= spec.metrics_window_seconds), None)
    if first is None:
        return None
    window_s = last.at - first.at
    a, b = first.load, last.load
    processing = (b.records_put - a.records_put) / window_s
    produced = (b.log_end - a.log_end) / window_s
    running_ms = b.running_time_ms - a.running_time_ms
    busy = min(1.0, (b.busy_time_ms - a.busy_time_ms) / running_ms) if running_ms > 0 else 0.0
    excess = max(0.0, b.lag - spec.target_lag(produced))
    target = produced + excess / spec.catch_up_seconds
    ceiling = min(spec.max_tasks, max(b.partitions, 1))
    if processing <= 0:
        if excess == 0 and produced <= 0:
            wanted, reason = spec.min_tasks, "idle"
        else:
            wanted, reason = current, "no records put in the window, so no capacity to size by"
    elif abs(busy - spec.target_utilization) <= spec.utilization_boundary and excess == 0:
        wanted, reason = current, "within the target utilization"
    else:
        per_task = processing / (max(busy, IDLE_BUSY) * max(b.tasks, 1))
        wanted = math.ceil(target / (spec.target_utilization * per_task))
        reason = "lag above target" if excess else "utilization off target"
    recommended = max(spec.min_tasks, min(ceiling, wanted))
    if wanted > ceiling:
        reason += f"; held at {ceiling} (" + ("maxTasks" if ceiling == spec.max_tasks else "partitions") + ")"
    return Evaluation(window_s=window_s, tasks=b.tasks, partitions=b.partitions, lag=b.lag, input_rate=produced,
                      processing_rate=processing, busy=busy, target_rate=target, recommended=recommended,
                      reason=reason)


def driver_behind(spec: AutoscalerSpec, history: History, driver_tasks: int, current: int, now: float) -> bool:
    """Whether the driver should be sent the autoscaler's count ``current`` again: it has run
    ``driver_tasks`` instead for a whole metrics window. That happens when a reconcile that read
    the status before the autoscaler's last write pushed the config with the count before it;
    without this the autoscaler would wait for the driver's count forever (no decision is made
    while the two differ)."""
    if driver_tasks == current:
        history.driver_differs_since = None
        return False
    if history.driver_differs_since is None:
        history.driver_differs_since = now
    if now - history.driver_differs_since < spec.metrics_window_seconds:
        return False
    history.driver_differs_since = None
    return True


def decide(spec: AutoscalerSpec, history: History, load: SinkLoad, current: int, now: float) -> Decision:
    """Take one read's ``load`` into ``history`` and say whether to scale from ``current``.

    A read whose running tasks are not ``current`` (a change under way, a task failed) or
    whose totals went back (a task or the driver restarted) starts measuring anew.
    """
    previous = history.samples[-1].load if history.samples else None
    went_back = previous is not None and (load.records_put < previous.records_put
                                          or load.running_time_ms < previous.running_time_ms
                                          or load.log_end < previous.log_end)
    if load.tasks != current or went_back:
        history.restart()
        if load.tasks != current:
            return Decision(None, None)
    history.samples.append(Sample(now, load))
    while len(history.samples) > 2 and history.samples[1].at <= now - spec.metrics_window_seconds:
        history.samples.popleft()  # the oldest kept is the newest a whole window back
    evaluation = evaluate(spec, history.samples, current)
    if evaluation is None:
        return Decision(None, None)
    history.recommendations.append((now, evaluation.recommended))
    if history.recommending_since is None:
        history.recommending_since = now
    keep = max(spec.scale_up_stabilization_seconds, spec.scale_down_stabilization_seconds)
    while history.recommendations and history.recommendations[0][0] < now - keep:
        history.recommendations.popleft()
    if evaluation.recommended > current:
        up = [r for t, r in history.recommendations if t >= now - spec.scale_up_stabilization_seconds]
        target = min(up)
        return Decision(target if target > current else None, evaluation)
    if evaluation.recommended < current:
        if now - history.recommending_since < spec.scale_down_stabilization_seconds:
            return Decision(None, evaluation)
        down = [r for t, r in history.recommendations if t >= now - spec.scale_down_stabilization_seconds]
        target = max(down)
        return Decision(target if target < current else None, evaluation)
    return Decision(None, evaluation)
