"""Kafka Connect's metrics of a driver's connector and tasks, named as Strimzi's JMX exporter
rules name them (``packaging/examples/metrics/kafka-connect-metrics.yaml`` of
strimzi-kafka-operator: ``lowercaseOutputName``, ``-`` → ``_``), so dashboards and alerts
written for Kafka Connect on Strimzi work on Conveyor's drivers.

=============================================================  ==================================
series                                                         from
=============================================================  ==================================
``kafka_connect_connector_status{connector,status}`` = 1       the connector's state, lower-case
``kafka_connect_connector_connector_class|_type|_version``     ``spec.class``, sink/source,
``{connector,connector_class|connector_type|connector_version}``  the connector's ``version()``
``kafka_connect_connector_task_status{connector,task,status}``  each task's state, lower-case
``kafka_connect_connector_task_*{connector,task}``             batches, commit times, ratios
``kafka_connect_sink_task_*`` / ``kafka_connect_source_task_*``  records, rates, commits, lag
``kafka_connect_task_error_*{connector,task}``                 the task's error handling
``kafka_connect_worker_*``                                     the driver as the connector's worker
=============================================================  ==================================

As Strimzi's rules type them, ``*_total`` are counters and everything else gauges. Rates,
ratios and windowed ``*_avg`` / ``*_max`` cover the last minute, as Connect's default
metrics window (:mod:`conveyor.runtime.herder.report_window`, :mod:`conveyor.runtime.task.meter`); a
windowed value with nothing in its window (no batch, no commit, no transaction) is left out,
as are the per-task series of a task that has not reported yet. What Conveyor cannot
measure is not produced: see :data:`NOT_PROVIDED`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from conveyor.control.protocol import TaskReport, TaskState
from conveyor.runtime.herder.protocol import Herder
from conveyor.runtime.herder.task_handles import TaskHandle

TASK_LABELS = ("connector", "task")

_Value = Callable[[TaskReport, "_TaskView"], "float | None"]


class _TaskView:
    """What one task's series are computed from besides its latest report: its window."""

    def __init__(self, handle: TaskHandle, source: bool) -> None:
        self.rates = handle.window.rates()
        self.active = handle.window.active(source)
        self.ratios = handle.window.ratios()


# (metric, help, value); metrics ending in _total are counters. Help texts are Connect's.
CONNECTOR_TASK: list[tuple[str, str, _Value]] = [
    ("batch_size_avg", "The average number of records in the batches the task has processed so far.",
     lambda r, v: r.batch_size_avg),
    ("batch_size_max", "The number of records in the largest batch the task has processed so far.",
     lambda r, v: r.batch_size_max),
    ("offset_commit_avg_time_ms", "The average time in milliseconds taken by this task to commit offsets.",
     lambda r, v: r.commit_time_avg_ms),
    ("offset_commit_max_time_ms", "The maximum time in milliseconds taken by this task to commit offsets.",
     lambda r, v: r.commit_time_max_ms),
    ("pause_ratio", "The fraction of time this task has spent in the pause state.",
     lambda r, v: v.ratios.get(TaskState.PAUSED, 0.0)),
    ("running_ratio", "The fraction of time this task has spent in the running state.",
     lambda r, v: v.ratios.get(TaskState.RUNNING, 0.0)),
]
SINK_TASK: list[tuple[str, str, _Value]] = [
    ("offset_commit_completion_rate", ("The average per-second number of offset commit completions that were "
     "completed successfully."), lambda r, v: v.rates["commits"]),
    ("offset_commit_completion_total", ("The total number of offset commit completions that were completed "
     "successfully."), lambda r, v: r.commits),
    ("offset_commit_seq_no", ("The current sequence number for offset commits (Conveyor commits synchronously: "
     "the number of commits)."), lambda r, v: r.commits),
    ("offset_commit_skip_rate", ("The average per-second number of offset commit completions that were received "
     "too late and skipped/ignored (never: Conveyor's commits are synchronous)."), lambda r, v: 0.0),
    ("offset_commit_skip_total", ("The total number of offset commit completions that were received too late and "
     "skipped/ignored (never: Conveyor's commits are synchronous)."), lambda r, v: 0.0),
    ("partition_count", "The number of topic partitions assigned to this task.", lambda r, v: len(r.assignment)),
    ("put_batch_avg_time_ms", "The average time taken by this task to put a batch of sinks records.",
     lambda r, v: r.batch_time_avg_ms),
    ("put_batch_max_time_ms", "The maximum time taken by this task to put a batch of sinks records.",
     lambda r, v: r.batch_time_max_ms),
    ("sink_record_active_count", ("The number of records that have been read from Kafka but not yet completely "
     "committed/flushed/acknowledged by the sink task."), lambda r, v: v.active[0]),
    ("sink_record_active_count_avg", ("The average number of records that have been read from Kafka but not yet "
     "completely committed/flushed/acknowledged by the sink task."), lambda r, v: v.active[1]),
    ("sink_record_active_count_max", ("The maximum number of records that have been read from Kafka but not yet "
     "completely committed/flushed/acknowledged by the sink task."), lambda r, v: v.active[2]),
    ("sink_record_lag_max", ("The maximum lag in terms of number of records that the sink task is behind the "
     "log end, for any topic partition."), lambda r, v: max(r.lag.values(), default=0)),
    ("sink_record_read_rate", ("The average per-second number of records read from Kafka for this task before "
     "transformations are applied."), lambda r, v: v.rates["records_read"]),
    ("sink_record_read_total", ("The total number of records read from Kafka by this task since it was last "
     "restarted."), lambda r, v: r.records_read),
    ("sink_record_send_rate", ("The average per-second number of records output from the transformations and "
     "sent/put to this task."), lambda r, v: v.rates["records_put"]),
    ("sink_record_send_total", ("The total number of records output from the transformations and sent/put to "
     "this task since it was last restarted."), lambda r, v: r.records_put),
]
SOURCE_TASK: list[tuple[str, str, _Value]] = [
    ("poll_batch_avg_time_ms", ("The average time in milliseconds taken by this task to poll for a batch of "
     "source records."), lambda r, v: r.batch_time_avg_ms),
    ("poll_batch_max_time_ms", ("The maximum time in milliseconds taken by this task to poll for a batch of "
     "source records."), lambda r, v: r.batch_time_max_ms),
    ("source_record_active_count", ("The number of records that have been produced by this task but not yet "
     "completely written to Kafka."), lambda r, v: v.active[0]),
    ("source_record_active_count_avg", ("The average number of records that have been produced by this task but "
     "not yet completely written to Kafka."), lambda r, v: v.active[1]),
    ("source_record_active_count_max", ("The maximum number of records that have been produced by this task but "
     "not yet completely written to Kafka."), lambda r, v: v.active[2]),
    ("source_record_poll_rate", ("The average per-second rate of records produced/polled (before "
     "transformation) by this task."), lambda r, v: v.rates["records_read"]),
    ("source_record_poll_total", ("The total number of records produced/polled (before transformation) by this "
     "task."), lambda r, v: r.records_read),
    ("source_record_write_rate", "The average per-second number of records written to Kafka for this task.",
     lambda r, v: v.rates["records_written"]),
    ("source_record_write_total", ("The number of records output written to Kafka for this task since it was "
     "last restarted."), lambda r, v: r.records_written),
    ("transaction_size_avg", "The average number of records in the transactions the task has committed so far.",
     lambda r, v: r.transaction_size_avg),
    ("transaction_size_max", "The number of records in the largest transaction the task has committed so far.",
     lambda r, v: r.transaction_size_max),
]
TASK_ERROR: list[tuple[str, str, _Value]] = [
    ("deadletterqueue_produce_failures", "The number of failed writes to the dead letter queue.",
     lambda r, v: r.dlq_failures),
    ("deadletterqueue_produce_requests", "The number of attempted writes to the dead letter queue.",
     lambda r, v: r.dlq_records),
    ("last_error_timestamp", "The epoch timestamp when this task last encountered an error (milliseconds).",
     lambda r, v: r.last_error_ms),
    ("total_errors_logged", "The number of errors that were logged.", lambda r, v: r.errors_logged),
    ("total_record_errors", "The number of record processing errors in this task.",
     lambda r, v: r.records_skipped),
    ("total_record_failures", ("The number of record processing failures in this task (errors and retried "
     "attempts)."), lambda r, v: r.records_skipped + r.retries),
    ("total_records_skipped", "The number of records skipped due to errors.", lambda r, v: r.records_skipped),
    ("total_retries", "The number of operations retried.", lambda r, v: r.retries),
]

WORKER_TASK_STATES: dict[str, TaskState | None] = {
    "running": TaskState.RUNNING, "paused": TaskState.PAUSED, "failed": TaskState.FAILED,
    "unassigned": TaskState.UNASSIGNED, "restarting": TaskState.RESTARTING,
    "destroyed": None,  # Connect's task of a deleted connector: a Conveyor task never is (always 0)
}
"""``kafka_connect_worker_connector_<state>_task_count``: the task state each counts."""

_GONE = (TaskState.STOPPED, TaskState.DRAINED, TaskState.FENCED)
"""Task states that Connect's worker no longer counts (no task runs)."""

NOT_PROVIDED: dict[str, str] = {
    "kafka_connect_connector_task_offset_commit_failure_percentage / _success_percentage":
        "not produced by Strimzi's rules (no pattern matches '-percentage')",
    "kafka_connect_source_task_transaction_size_min": "not produced by Strimzi's rules (no pattern matches '-min')",
    "kafka_connect_worker_connector_startup_* / _task_startup_* / worker_rebalance_* / coordinator_*":
        "a driver runs one connector and starts its tasks as Spark jobs: no Connect worker group, no rebalances "
        "of connectors and tasks between workers",
    "kafka_consumer_* / kafka_producer_* / kafka_admin_client_*": "librdkafka's client statistics are not exported",
    "jvm_*": "the connector runs in Python; the driver's JVM (Spark) has no JMX exporter",
}
"""Series of Strimzi's Kafka Connect metrics that Conveyor does not produce, and why."""


class _Families:
    """Metric families made on first use, yielded in that order."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def add(self, name: str, doc: str, labels: dict[str, str], value: float | None) -> None:
        if value is None:
            return
        family = self._families.get(name)
        if family is None:
            kind = CounterMetricFamily if name.endswith("_total") else GaugeMetricFamily
            family = self._families[name] = kind(name, doc, labels=list(labels))
        family.add_metric(list(labels.values()), float(value))

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())


def _version(driver: Herder) -> str | None:
    connector = driver.connector
    if connector is None:
        return None
    try:
        return str(connector.version())
    except Exception:  # noqa: BLE001 - a plugin's version() failing must not fail the scrape
        return None


class ConnectMetricsCollector(Collector):
    """Kafka Connect's metric families of one driver, built from its state at scrape time."""

    def __init__(self, driver: Herder) -> None:
        self._driver = driver

    def collect(self) -> Iterator[Metric]:
        driver, out = self._driver, _Families()
        connector = {"connector": driver.name}
        state = driver.connector_state
        out.add("kafka_connect_connector_status", "The status of the connector.",
                {**connector, "status": state.value.lower()}, 1)
        infos = {"connector_class": driver.manifest.spec.connector_class, "connector_type": driver.connector_type,
                 "connector_version": _version(driver)}
        for key, value in infos.items():
            if value is not None:
                out.add(f"kafka_connect_connector_{key}", f"The {key.replace('_', ' ')} of the connector.",
                        {**connector, key: value}, 1)
        handles = sorted(driver.tasks.values(), key=lambda h: h.task_id)
        running = [h for h in handles if h.state not in _GONE]
        out.add("kafka_connect_worker_connector_count", "The number of connectors run in this worker.", {},
                0 if state is TaskState.STOPPED else 1)
        out.add("kafka_connect_worker_task_count", "The number of tasks run in this worker.", {}, len(running))
        out.add("kafka_connect_worker_connector_total_task_count",
                "The number of tasks of the connector on the worker.", connector, len(running))
        for word, counted in WORKER_TASK_STATES.items():
            out.add(f"kafka_connect_worker_connector_{word}_task_count",
                    f"The number of {word} tasks of the connector on the worker.", connector,
                    sum(1 for h in running if h.state is counted))
        source = driver.connector_type == "source"
        groups = [("connector_task", CONNECTOR_TASK), ("task_error", TASK_ERROR)]
        if driver.connector_type in ("sink", "source"):
            groups.append(("source_task", SOURCE_TASK) if source else ("sink_task", SINK_TASK))
        for handle in handles:
            labels = {**connector, "task": str(handle.task_id)}
            out.add("kafka_connect_connector_task_status", "The status of the connector task.",
                    {**labels, "status": handle.state.value.lower()}, 1)
            report = handle.report
            if report is None:
                continue
            view = _TaskView(handle, source)
            for group, metrics in groups:
                for metric, doc, value in metrics:
                    out.add(f"kafka_connect_{group}_{metric}", doc, labels, value(report, view))
        yield from out


def metric_names() -> set[str]:
    """Every series name the collector can produce (counters with their ``_total``)."""
    names = {"kafka_connect_connector_status", "kafka_connect_connector_task_status",
             "kafka_connect_worker_connector_count", "kafka_connect_worker_task_count",
             "kafka_connect_worker_connector_total_task_count",
             *(f"kafka_connect_connector_{k}" for k in ("connector_class", "connector_type", "connector_version")),
             *(f"kafka_connect_worker_connector_{w}_task_count" for w in WORKER_TASK_STATES)}
    for group, metrics in (("connector_task", CONNECTOR_TASK), ("sink_task", SINK_TASK),
                           ("source_task", SOURCE_TASK), ("task_error", TASK_ERROR)):
        names.update(f"kafka_connect_{group}_{metric}" for metric, _, _ in metrics)
    return names
