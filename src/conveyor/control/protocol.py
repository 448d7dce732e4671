"""What the driver and the task runners exchange.

A :class:`TaskSpec` travels to the executor inside the Spark job (pickled). While the
task runs, its runner syncs with the driver's control API: it posts a
:class:`TaskReport` and receives the current :class:`Directive` (long-poll).
"""

from __future__ import annotations

import enum
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

from conveyor.api.redaction import resolved_values


class TaskState(str, enum.Enum):
    """Kafka Connect's task states, plus Conveyor's ``DRAINED`` (closed for re-placement)
    and ``FENCED`` (a newer generation of the connector's tasks took over, KIP-618)."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    STOPPED = "STOPPED"
    DRAINED = "DRAINED"
    FENCED = "FENCED"

    @property
    def is_final(self) -> bool:
        """The runner has returned (its Spark job is over) in this state."""
        return self in (TaskState.FAILED, TaskState.STOPPED, TaskState.DRAINED, TaskState.FENCED)


class Action(str, enum.Enum):
    """What the driver wants a running task to do."""

    RUN = "run"
    PAUSE = "pause"
    STOP = "stop"
    DRAIN = "drain"


@dataclass(frozen=True)
class Directive:
    """The driver's current wish for one task; ``version`` grows with every change."""

    action: Action = Action.RUN
    version: int = 0
    connector_deleted: bool = False
    log_levels: tuple[tuple[str, str], ...] = ()
    """``(logger, Log4j level)`` set on the driver through ``/admin/loggers``, in the order set:
    the task's process follows them."""

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action.value, "version": self.version, "connector_deleted": self.connector_deleted,
                "log_levels": [list(pair) for pair in self.log_levels]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Directive:
        return cls(Action(data["action"]), int(data["version"]), bool(data.get("connector_deleted", False)),
                   tuple((str(name), str(level)) for name, level in data.get("log_levels") or ()))


@dataclass(frozen=True)
class TaskSpec:
    """Everything an executor needs to run one task.

    Attributes:
        connector: connector name.
        namespace: Kubernetes namespace (``default`` locally).
        task_id: 0-based task id.
        attempt: grows each time the driver (re)launches this task.
        connector_class: entry-point name or dotted path, resolved on the executor.
        connector_config: the connector's whole ``spec.config`` (runtime keys included).
        task_config: what ``task_configs`` returned for this task, plus ``name``.
        kafka: base librdkafka properties of every Kafka client the task opens
            (``bootstrap.servers`` plus ``security.protocol``, ``ssl.*``, ``sasl.*`` from
            ``spec.kafka``; see :mod:`conveyor.runtime.kafka.clients`). Holds the SASL
            password, so it is left out of ``repr``.
        control_url: base URL of the driver's control API.
        control_token: the driver's *task* token, which this task's runner sends to the control
            API (:mod:`conveyor.control.auth`); never shown by ``repr``.
        closing_timeout_s: seconds a closing commit may take (``shutdown.gracePeriodSeconds``).
        generation: the task generation (exactly-once sources: the task-count record's
            generation this task belongs to; 0 otherwise).
        resolved_values: ``(value, reference)`` of every value the driver resolved from
            ``${env:}``, ``${secret:}``, ``configFrom``... (default: this process's); the task's
            logs and errors show the reference instead (:mod:`conveyor.api.redaction`). Left
            out of ``repr``.
    """

    connector: str
    namespace: str
    task_id: int
    attempt: int
    connector_class: str
    connector_config: dict[str, Any]
    task_config: dict[str, Any]
    kafka: dict[str, str] = field(repr=False)
    control_url: str
    control_token: str = field(default="", repr=False)
    closing_timeout_s: float = 60.0
    generation: int = 0
    resolved_values: list[tuple[str, str]] = field(default_factory=resolved_values, repr=False)

    @property
    def bootstrap_servers(self) -> str:
        """``bootstrap.servers`` of :attr:`kafka`."""
        return self.kafka["bootstrap.servers"]


@dataclass
class TaskReport:
    """A runner's account of its task, posted to the driver about once a second.

    Offsets are next-offsets keyed ``"topic:partition"``; counters are totals since the
    runner started. ``last_closing_commit`` is what the latest closing commit left committed
    for the partitions it closed; ``closing_commit_error`` says why the latest closing commit
    did not land (``None`` when it did), in which case those partitions resume from
    ``committed``.

    The fields after ``source_offsets`` feed Kafka Connect's task metrics
    (:mod:`conveyor.runtime.rest.connect_metrics`); each has a default, so a report of an older
    runner still parses. ``batch_*``, ``commit_time_*`` and ``transaction_size_*`` are over the
    runner's last minute (:mod:`conveyor.runtime.task.meter`), ``None`` when nothing happened
    in it: a batch is one ``put()`` (sink) or one ``poll()`` (source), its time in
    milliseconds; ``records_dropped`` are source records polled but never written (a
    transformation dropped them, or their error was tolerated); ``retries``,
    ``errors_logged``, ``dlq_failures`` and ``last_error_ms`` (epoch milliseconds, 0: none)
    come from the task's error handling (:mod:`conveyor.runtime.errors.tolerance`).
    ``running_time_ms`` is how long the task's loop has run, ``busy_time_ms`` how much of it was
    not spent waiting for records (:class:`conveyor.runtime.task.meter.TaskMeter`; both totals,
    0 before the loop begins).
    ``batch_path`` is whether a sink task takes its records as Arrow record batches
    (``SinkTask.put_batch``) rather than through ``put``, or a source task returns them as
    batches (``SourceTask.poll_batch``) rather than from ``poll``.
    """

    task_id: int
    attempt: int
    state: TaskState
    worker_id: str
    trace: str | None = None
    pod: str = ""
    assignment: list[str] = field(default_factory=list)
    committed: dict[str, int] = field(default_factory=dict)
    consumed: dict[str, int] = field(default_factory=dict)
    lag: dict[str, int] = field(default_factory=dict)
    records_read: int = 0
    records_put: int = 0
    records_skipped: int = 0
    dlq_records: int = 0
    commits: int = 0
    closing_commits: int = 0
    last_closing_commit: dict[str, int] | None = None
    closing_commit_error: str | None = None
    records_written: int = 0
    transactions: int = 0
    batch_path: bool = False
    source_offsets: dict[str, Any] = field(default_factory=dict)
    batch_size_avg: float | None = None
    batch_size_max: float | None = None
    batch_time_avg_ms: float | None = None
    batch_time_max_ms: float | None = None
    commit_time_avg_ms: float | None = None
    commit_time_max_ms: float | None = None
    transaction_size_avg: float | None = None
    transaction_size_max: float | None = None
    transaction_size_min: float | None = None
    records_dropped: int = 0
    retries: int = 0
    errors_logged: int = 0
    dlq_failures: int = 0
    last_error_ms: int = 0
    running_time_ms: int = 0
    busy_time_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskReport:
        data = dict(data)
        data["state"] = TaskState(data["state"])
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


def trace_of(exc: BaseException) -> str:
    """``exc`` with its traceback, as Kafka Connect's ``trace`` of a failed task or connector."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def current_pod() -> str:
    """The Kubernetes pod this process runs in (``POD_NAME`` from the downward API, Spark's
    ``SPARK_EXECUTOR_POD_NAME``), else the host name (a pod's host name is its name)."""
    import os
    import socket

    return os.environ.get("POD_NAME") or os.environ.get("SPARK_EXECUTOR_POD_NAME") or socket.gethostname()


def tp_key(topic: str, partition: int) -> str:
    """The ``"topic:partition"`` form used in reports and status."""
    return f"{topic}:{partition}"
