"""``spec.autoscaler``: the operator's own autoscaler of a sink connector's task count.

It decides as the Flink Kubernetes operator's autoscaler does (FLIP-271): the rate the tasks
could take at full load is their observed rate divided by their busy fraction; the rate they
must take is the records arriving plus the lag to work off over ``catchUpSeconds``; the task
count is the one that takes it at ``targetUtilization``. Its recommendations pass through
stabilization windows as a HorizontalPodAutoscaler's do (the lowest recommendation of the
scale-up window, the highest of the scale-down window). It never goes above the topics'
partitions (a sink task without a partition has nothing to do).

While it is enabled the task count is its own: the CRD refuses a change of ``spec.tasksMax``
(``kubectl scale``, an HPA, an edit) with a message that says so, and ``spec.tasksMax`` is the
count it starts from.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from conveyor.manifest.base import StrictModel

DEFAULT_TARGET_LAG_RECORDS = 1000

OWNERSHIP_RULE = {
    "rule": "!(has(self.autoscaler) && has(self.autoscaler.enabled) && self.autoscaler.enabled"
            " && has(oldSelf.autoscaler) && has(oldSelf.autoscaler.enabled) && oldSelf.autoscaler.enabled)"
            " || self.tasksMax == oldSelf.tasksMax",
    "message": "spec.tasksMax belongs to spec.autoscaler while spec.autoscaler.enabled is true, so kubectl scale, "
               "a HorizontalPodAutoscaler and edits of it are refused: change spec.autoscaler.minTasks and "
               "maxTasks, or set spec.autoscaler.enabled to false to set the task count by hand",
}
"""The CRD's transition rule on ``spec`` that gives ``tasksMax`` to an enabled autoscaler."""


class AutoscalerSpec(StrictModel):
    """``spec.autoscaler`` (sink connectors). Rates are records per second, durations seconds."""

    model_config = ConfigDict(
        populate_by_name=True, extra="forbid",
        json_schema_extra={"x-kubernetes-validations": [{
            "rule": "!has(self.minTasks) || self.minTasks <= self.maxTasks",
            "message": "spec.autoscaler.minTasks must not be above spec.autoscaler.maxTasks",
        }, {
            "rule": "!(has(self.targetLagRecords) && has(self.targetLagSeconds))",
            "message": "spec.autoscaler takes one of targetLagRecords and targetLagSeconds, not both",
        }]},
    )

    enabled: bool = Field(True, description="Let the autoscaler set the task count (spec.tasksMax is then its start).")
    min_tasks: int = Field(1, alias="minTasks", ge=1, le=1000, description="Fewest tasks it scales down to.")
    max_tasks: int = Field(
        alias="maxTasks", ge=1, le=1000,
        description="Most tasks it scales up to; never more than the subscribed topics' partitions. Without "
                    "executor pods (spark.executor.instances 0) the driver pod is sized for this many tasks.",
    )
    target_lag_records: int | None = Field(
        None, alias="targetLagRecords", ge=0,
        description="Consumer lag (records behind over all partitions) left standing; lag above it is worked "
                    "off within catchUpSeconds. 1000 when neither this nor targetLagSeconds is set. The lag counts "
                    "from the group's committed offsets, so it is at least the records arriving over "
                    "offset.flush.interval.ms: a target below that is never met.",
    )
    target_lag_seconds: float | None = Field(
        None, alias="targetLagSeconds", ge=0, le=86400,
        description="The lag left standing as time: this many seconds of the records arriving (lag over the "
                    "rate records are produced at, the age of the oldest unread record at a steady rate). "
                    "Instead of targetLagRecords.",
    )
    catch_up_seconds: float = Field(
        300.0, alias="catchUpSeconds", ge=1, le=86400,
        description="Time to work off lag above its target, as Flink's job.autoscaler.catch-up.duration.",
    )
    target_utilization: float = Field(
        0.7, alias="targetUtilization", ge=0.05, le=1,
        description="Busy fraction the tasks are sized for, as Flink's job.autoscaler.target.utilization.",
    )
    utilization_boundary: float = Field(
        0.3, alias="utilizationBoundary", ge=0, le=1,
        description="No change while the tasks' busy fraction is within targetUtilization ± this and the lag is "
                    "within its target (Flink's job.autoscaler.target.utilization.boundary).",
    )
    metrics_window_seconds: float = Field(
        30.0, alias="metricsWindowSeconds", ge=5, le=3600,
        description="Rates are measured over this long; no decision before the tasks have run this long since "
                    "the last change of the task count.",
    )
    scale_up_stabilization_seconds: float = Field(
        0.0, alias="scaleUpStabilizationSeconds", ge=0, le=3600,
        description="Scale up to the lowest recommendation of this window (a HorizontalPodAutoscaler's "
                    "behavior.scaleUp.stabilizationWindowSeconds).",
    )
    scale_down_stabilization_seconds: float = Field(
        300.0, alias="scaleDownStabilizationSeconds", ge=0, le=3600,
        description="Scale down to the highest recommendation of this window (a HorizontalPodAutoscaler's "
                    "behavior.scaleDown.stabilizationWindowSeconds).",
    )

    @model_validator(mode="after")
    def _bounds_in_order(self) -> AutoscalerSpec:
        if self.min_tasks > self.max_tasks:
            raise ValueError(f"minTasks {self.min_tasks} is above maxTasks {self.max_tasks}")
        if self.target_lag_records is not None and self.target_lag_seconds is not None:
            raise ValueError("targetLagRecords and targetLagSeconds are both set: set one")
        return self

    def target_lag(self, input_rate: float) -> float:
        """The lag in records left standing when records arrive at ``input_rate`` a second:
        ``targetLagSeconds × input_rate``, else ``targetLagRecords`` (default 1000)."""
        if self.target_lag_seconds is not None:
            return self.target_lag_seconds * max(0.0, input_rate)
        return DEFAULT_TARGET_LAG_RECORDS if self.target_lag_records is None else self.target_lag_records

    def clamp(self, tasks: int) -> int:
        """``tasks`` within ``[minTasks, maxTasks]``."""
        return max(self.min_tasks, min(self.max_tasks, tasks))


def autoscaling(autoscaler: AutoscalerSpec | None) -> bool:
    """Whether ``spec.autoscaler`` is there and enabled."""
    return autoscaler is not None and autoscaler.enabled
