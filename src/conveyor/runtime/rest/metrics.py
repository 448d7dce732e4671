"""Prometheus metrics of a driver, built from the task runners' latest reports at scrape time.

Two collectors (:func:`register_collectors`): Conveyor's own ``conveyor_*`` families here,
whose names follow Kafka Connect's sink-task metrics (``sink-record-read-total`` →
``conveyor_sink_record_read_total``), labelled ``connector`` and ``task``; and Kafka Connect's
``kafka_connect_*`` families as Strimzi's JMX exporter rules name them
(:mod:`conveyor.runtime.rest.connect_metrics`).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from conveyor.control.protocol import TaskState
from conveyor.runtime.herder.protocol import Herder
from conveyor.runtime.rest.connect_metrics import ConnectMetricsCollector

_COUNTERS = {
    "records_read": ("conveyor_sink_record_read", "Records read from Kafka by the task."),
    "records_put": ("conveyor_sink_record_send", "Records passed to put() and accepted."),
    "records_skipped": ("conveyor_record_errors", "Records that failed and were tolerated."),
    "dlq_records": ("conveyor_deadletterqueue_produce_requests", "Records sent to the dead-letter queue."),
    "commits": ("conveyor_offset_commit_completion", "Offset commits (pre_commit calls) completed."),
    "closing_commits": ("conveyor_offset_commit_closing", "Closing-aware commits (is_closing() true) completed."),
}


class TaskMetricsCollector(Collector):
    """Yields one family per metric from the driver's task reports."""

    def __init__(self, driver: Herder) -> None:
        self._driver = driver

    def collect(self) -> Iterator[Metric]:
        driver = self._driver
        labels = ["connector", "task"]
        counters = {attr: CounterMetricFamily(name, doc, labels=labels) for attr, (name, doc) in _COUNTERS.items()}
        lag = GaugeMetricFamily("conveyor_task_lag_records", "Records behind the log end, summed over partitions.",
                                labels=labels)
        partitions = GaugeMetricFamily("conveyor_task_partition_count", "Partitions assigned to the task.",
                                       labels=labels)
        state = GaugeMetricFamily("conveyor_task_state", "1 for the task's current state.",
                                  labels=[*labels, "state"])
        for handle in list(driver.tasks.values()):
            values = [driver.name, str(handle.task_id)]
            for s in TaskState:
                state.add_metric([*values, s.value], 1.0 if handle.state is s else 0.0)
            report = handle.report
            if report is None:
                continue
            for attr, family in counters.items():
                family.add_metric(values, float(getattr(report, attr)))
            lag.add_metric(values, float(sum(report.lag.values())))
            partitions.add_metric(values, float(len(report.assignment)))
        connector_state = GaugeMetricFamily("conveyor_connector_state", "1 for the connector's current state.",
                                            labels=["connector", "state"])
        for s in TaskState:
            connector_state.add_metric([driver.name, s.value], 1.0 if driver.connector_state is s else 0.0)
        unassigned = GaugeMetricFamily("conveyor_connector_unassigned_lag_records",
                                       "Records behind the log end on partitions no task holds.", labels=["connector"])
        unassigned.add_metric([driver.name], float(sum(driver.status().get("unassigned_lag", {}).values())))
        yield from counters.values()
        yield unassigned
        yield lag
        yield partitions
        yield state
        yield connector_state


def register_collectors(registry: CollectorRegistry, driver: Herder) -> None:
    """Register the driver's collectors: ``conveyor_*`` and ``kafka_connect_*``."""
    registry.register(TaskMetricsCollector(driver))
    registry.register(ConnectMetricsCollector(driver))
