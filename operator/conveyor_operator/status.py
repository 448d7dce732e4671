"""Typed ``status`` of a Connector, written only by the operator (the CRD's ``status``
subresource schema is generated from these models)."""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class ConditionType(str, enum.Enum):
    READY = "Ready"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    DELETING = "Deleting"
    CLEANUP_FAILED = "CleanupFailed"


class Condition(_Model):
    """A Kubernetes condition (``metav1.Condition``)."""

    type: str = Field(description="Ready, Progressing, Degraded, Deleting or CleanupFailed.")
    status: str = Field(pattern="^(True|False|Unknown)$", description="True, False or Unknown.")
    reason: str = Field(description="CamelCase reason of the last transition, for machines.")
    message: str = Field("", description="What happened, for people; names the field when the spec is invalid.")
    last_transition_time: str = Field(
        alias="lastTransitionTime", description="RFC 3339 time the status last changed."
    )
    observed_generation: int | None = Field(
        None, alias="observedGeneration", description="metadata.generation the condition was set for."
    )


class ConnectorStatusEntry(_Model):
    """The connector's state, as Kafka Connect's status API reports it."""

    state: str = Field(description="UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING or STOPPED (Kafka Connect's).")
    worker_id: str | None = Field(None, alias="workerId", description="Pod of the driver.")
    trace: str | None = Field(None, description="Error of a FAILED connector: the last line of its trace, at most "
                              "300 characters (the whole trace is in the driver pod's log).")


class TaskStatusEntry(_Model):
    """One task's state, as Kafka Connect's status API reports it."""

    id: int = Field(description="Task id, 0 to tasksMax-1.")
    state: str = Field(description="UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING, STOPPED, DRAINED or FENCED.")
    pod: str | None = Field(None, description="Pod the task runs on.")
    lag: int | None = Field(None, description="Records behind the end of its partitions (sink tasks).")
    trace: str | None = Field(None, description="Error of a FAILED task: the last line of its trace, at most 300 "
                              "characters (the whole trace is in the executor pod's log).")


class CommittedOffset(_Model):
    """One partition's committed offset."""

    topic: str = Field(description="Topic.")
    partition: int = Field(description="Partition.")
    offset: int = Field(description="Committed offset (the next record to read).")


class EvictionEntry(_Model):
    """A pod eviction the operator turned into a drain (closing-aware commits)."""

    pod: str = Field(description="Evicted or deleted pod.")
    time: str = Field(description="RFC 3339 time the drain finished.")
    trigger: str = Field(description="DisruptionTarget or Deletion.")
    tasks: list[int] = Field(default_factory=list, description="Tasks drained off the pod.")
    committed: list[CommittedOffset] = Field(default_factory=list, description="What their closing commits committed.")
    complete: bool = Field(description="Every task finished its closing commit in time.")


class AutoRestartStatus(_Model):
    """Automatic restarts so far (Strimzi's ``status.autoRestart``)."""

    count: int = Field(description="Automatic restarts since the connector last ran without failing.")
    connector_name: str = Field(alias="connectorName", description="The connector restarted.")
    last_restart_timestamp: str = Field(alias="lastRestartTimestamp", description="RFC 3339 time of the last one.")


class AutoscalerEvaluation(_Model):
    """The figures the autoscaler's last decision came from, over its metrics window."""

    recommended_tasks: int = Field(alias="recommendedTasks", description="Task count the window recommended.")
    reason: str = Field(description="Why (lag above target, utilization off target, idle, ...).")
    lag_records: int = Field(alias="lagRecords", description="Records behind over all partitions.")
    input_records_per_second: float = Field(
        alias="inputRecordsPerSecond", description="Records produced per second into the subscribed topics.")
    processing_records_per_second: float = Field(
        alias="processingRecordsPerSecond", description="Records put per second by the running tasks.")
    busy_fraction: float = Field(alias="busyFraction", description="The tasks' time not waiting for records, 0 to 1.")
    partitions: int = Field(description="Partitions of the subscribed topics (the most tasks that have work).")


class AutoscalerStatus(_Model):
    """The autoscaler's state (spec.autoscaler)."""

    tasks: int = Field(description="The task count it decided: what the driver runs.")
    last_scale_time: str | None = Field(
        None, alias="lastScaleTime", description="RFC 3339 time of its last change of the task count.")
    last_decision: AutoscalerEvaluation | None = Field(
        None, alias="lastDecision", description="What its last change of the task count came from.")


class StartingOffsetsStatus(_Model):
    """Where the connector started when its driver first started (spec.initialOffsets, KIP-995)."""

    initial: str = Field(
        description="NotGiven (no spec.initialOffsets), Applied (written before the first task started) or Kept "
                    "(existing: keep and stored offsets were found: nothing written).")
    found: int = Field(description="Partitions with stored offsets found (a Connector of this name ran before and "
                                   "its offsets were retained).")
    written: int = Field(0, description="Partitions whose offsets spec.initialOffsets wrote.")
    message: str = Field("", description="What happened, in words.")
    time: str = Field(description="RFC 3339 time the operator recorded it.")


class ConnectorStatus(_Model):
    """Observed state of a Connector."""

    observed_generation: int | None = Field(
        None, alias="observedGeneration", description="metadata.generation the operator last reconciled."
    )
    conditions: list[Condition] = Field(default_factory=list, description="Current conditions.")
    connector: ConnectorStatusEntry | None = Field(None, description="Connector state read from the driver.")
    tasks: list[TaskStatusEntry] = Field(default_factory=list, description="Task states read from the driver.")
    tasks_max: int | None = Field(
        None, alias="tasksMax",
        description="Task count last applied: spec.tasksMax, or the autoscaler's (the scale subresource's status "
                    "replicas).",
    )
    selector: str | None = Field(
        None, description="Label selector of the connector's driver and executor pods: the scale subresource's "
                          "labelSelectorPath, which a HorizontalPodAutoscaler (kubectl autoscale) and KEDA need.",
    )
    config_hash: str | None = Field(
        None, alias="configHash", description="Hash of the rendered connector manifest the driver runs."
    )
    control_secret_version: str | None = Field(
        None, alias="controlSecretVersion",
        description="Version of the values the operator last wrote to the <name>-control Secret (a public "
                    "fingerprint of its key, the Connector's uid and conveyor.dev/rotate-control-secret).",
    )
    auto_restart: AutoRestartStatus | None = Field(
        None, alias="autoRestart", description="Automatic restarts (spec.autoRestart); absent when none are counted."
    )
    autoscaler: AutoscalerStatus | None = Field(
        None, description="The autoscaler's decisions (spec.autoscaler); absent when it is not enabled.")
    starting_offsets: StartingOffsetsStatus | None = Field(
        None, alias="startingOffsets",
        description="Where the connector started: recorded once, from its driver's first start; from then on "
                    "spec.initialOffsets is left out of what a restarted driver runs.")
    evictions: list[EvictionEntry] = Field(
        default_factory=list, description="Latest pod evictions turned into closing-aware commits (newest last, 10 kept)."
    )
    last_handled_configuration: str | None = Field(
        None, alias="lastHandledConfiguration",
        description="The spec, labels and annotations the operator last handled, as JSON: what kopf compares the "
                    "next change with (kept in the status, written with the rest of it: one request per change).",
    )
