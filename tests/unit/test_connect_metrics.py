"""Kafka Connect's metric names on a driver's /metrics (conveyor.runtime.rest.connect_metrics), scraped
with prometheus_client from a stand-in driver fed with task reports; the names checked against
Strimzi's JMX exporter rules, and the shipped Grafana dashboard checked to ask only for them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conveyor.control.protocol import TaskReport, TaskState
from conveyor.manifest import ConnectorManifest
from conveyor.runtime.herder.report_window import ReportWindow
from conveyor.runtime.herder.task_handles import TaskHandle
from conveyor.runtime.rest.connect_metrics import NOT_PROVIDED, metric_names
from conveyor.runtime.rest.metrics import register_collectors
from conveyor.runtime.task.meter import TaskMeter

DASHBOARD = Path(__file__).resolve().parents[2] / "charts" / "conveyor" / "dashboards" / "conveyor-kafka-connect.json"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Connector:
    def version(self) -> str:
        return "2.0.1"


class FakeDriver:
    """What the collectors read of a :class:`~conveyor.runtime.driver.driver.Driver`."""

    def __init__(self, connector_type: str, tasks: int, clock: Clock) -> None:
        self.manifest = ConnectorManifest.model_validate({
            "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "orders"},
            "spec": {"class": "postgres-sink" if connector_type == "sink" else "postgres-audit-source",
                     "tasksMax": tasks, "kafka": {"bootstrapServers": "127.0.0.1:1"}, "config": {"topics": ["t"]}}})
        self.name = "orders"
        self.connector_type = connector_type
        self.connector_state = TaskState.RUNNING
        self.connector: Any = _Connector()
        self.tasks = {i: TaskHandle(i, {}) for i in range(tasks)}
        for handle in self.tasks.values():
            handle.window = ReportWindow(clock=clock)

    def status(self) -> dict[str, Any]:
        return {}


def scrape(driver: FakeDriver) -> dict[str, list[tuple[dict[str, str], float]]]:
    """``{sample name: [(labels, value)]}`` of the driver's registry, through the text format."""
    registry = CollectorRegistry()
    register_collectors(registry, driver)
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def types(driver: FakeDriver) -> dict[str, str]:
    """``{sample name: "counter" | "gauge"}`` from the ``# TYPE`` lines."""
    registry = CollectorRegistry()
    register_collectors(registry, driver)
    return {s.name: f.type for f in text_string_to_metric_families(generate_latest(registry).decode())
            for s in f.samples}


def value(scraped: dict, name: str, **labels: str) -> float:
    found = [v for lab, v in scraped[name] if lab == labels]
    assert len(found) == 1, f"{name}{labels}: {scraped.get(name)}"
    return found[0]


def report(task_id: int, state: TaskState = TaskState.RUNNING, **fields: Any) -> TaskReport:
    return TaskReport(task_id, 0, state, "pod:8083", **fields)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sink(clock: Clock) -> FakeDriver:
    """A sink with task 0 reporting for 60 s (read 0 → 3000, put 0 → 2400, commits 0 → 6, running
    then paused for the last 15 s) and task 1 failed, never reported."""
    driver = FakeDriver("sink", 2, clock)
    handle = driver.tasks[0]
    for second in range(0, 61, 15):
        clock.now = 1000.0 + second
        state = TaskState.PAUSED if second == 60 else TaskState.RUNNING
        handle.state = state
        handle.take_report(report(
            0, state, assignment=["t:0", "t:1"], consumed={"t:0": 50 * second, "t:1": 10},
            committed={"t:0": 40 * second}, lag={"t:0": 7, "t:1": 19}, records_read=50 * second,
            records_put=40 * second, commits=second // 10, records_skipped=3, dlq_records=2, retries=4,
            errors_logged=3, dlq_failures=1, last_error_ms=1_700_000_000_000, batch_size_avg=12.5,
            batch_size_max=40, batch_time_avg_ms=3.5, batch_time_max_ms=9.0, commit_time_avg_ms=20.0,
            commit_time_max_ms=31.0))
    driver.tasks[1].state = TaskState.FAILED
    return driver


def test_connector_series_are_info_style_ones(sink):
    scraped = scrape(sink)
    assert scraped["kafka_connect_connector_status"] == [({"connector": "orders", "status": "running"}, 1.0)]
    assert scraped["kafka_connect_connector_connector_class"] == [
        ({"connector": "orders", "connector_class": "postgres-sink"}, 1.0)]
    assert scraped["kafka_connect_connector_connector_type"] == [
        ({"connector": "orders", "connector_type": "sink"}, 1.0)]
    assert scraped["kafka_connect_connector_connector_version"] == [
        ({"connector": "orders", "connector_version": "2.0.1"}, 1.0)]
    sink.connector = None  # not started: no version to show
    sink.connector_state = TaskState.PAUSED
    scraped = scrape(sink)
    assert "kafka_connect_connector_connector_version" not in scraped
    assert scraped["kafka_connect_connector_status"] == [({"connector": "orders", "status": "paused"}, 1.0)]


def test_task_status_and_worker_counts(sink):
    scraped = scrape(sink)
    assert sorted((lab["task"], lab["status"], v) for lab, v in scraped["kafka_connect_connector_task_status"]) == [
        ("0", "paused", 1.0), ("1", "failed", 1.0)]
    assert scraped["kafka_connect_worker_connector_count"] == [({}, 1.0)]
    assert scraped["kafka_connect_worker_task_count"] == [({}, 2.0)]
    counts = {name.removeprefix("kafka_connect_worker_connector_"): value(scraped, name, connector="orders")
              for name in scraped if name.startswith("kafka_connect_worker_connector_") and name.endswith("_task_count")}
    assert counts == {"total_task_count": 2, "running_task_count": 0, "paused_task_count": 1,
                      "failed_task_count": 1, "unassigned_task_count": 0, "restarting_task_count": 0,
                      "destroyed_task_count": 0}
    sink.connector_state = TaskState.STOPPED
    for handle in sink.tasks.values():
        handle.state = TaskState.STOPPED
    scraped = scrape(sink)
    assert scraped["kafka_connect_worker_connector_count"] == [({}, 0.0)]
    assert scraped["kafka_connect_worker_task_count"] == [({}, 0.0)]


def test_sink_task_series(sink, clock):
    clock.now = 1060.0
    scraped = scrape(sink)
    task = {"connector": "orders", "task": "0"}
    expected = {
        "kafka_connect_sink_task_sink_record_read_total": 3000, "kafka_connect_sink_task_sink_record_send_total": 2400,
        "kafka_connect_sink_task_sink_record_read_rate": 50.0, "kafka_connect_sink_task_sink_record_send_rate": 40.0,
        "kafka_connect_sink_task_offset_commit_completion_total": 6,
        "kafka_connect_sink_task_offset_commit_completion_rate": 0.1,
        "kafka_connect_sink_task_offset_commit_seq_no": 6,
        "kafka_connect_sink_task_offset_commit_skip_total": 0, "kafka_connect_sink_task_offset_commit_skip_rate": 0,
        "kafka_connect_sink_task_partition_count": 2,
        "kafka_connect_sink_task_put_batch_avg_time_ms": 3.5, "kafka_connect_sink_task_put_batch_max_time_ms": 9.0,
        # consumed - committed on committed partitions (t:0): 10 × second
        "kafka_connect_sink_task_sink_record_active_count": 600,
        "kafka_connect_sink_task_sink_record_active_count_avg": (0 + 150 + 300 + 450 + 600) / 5,
        "kafka_connect_sink_task_sink_record_active_count_max": 600,
        "kafka_connect_sink_task_sink_record_lag_max": 19,
        "kafka_connect_connector_task_batch_size_avg": 12.5, "kafka_connect_connector_task_batch_size_max": 40,
        "kafka_connect_connector_task_offset_commit_avg_time_ms": 20.0,
        "kafka_connect_connector_task_offset_commit_max_time_ms": 31.0,
        "kafka_connect_connector_task_running_ratio": 1.0,  # paused only at the newest sample, which is now
        "kafka_connect_connector_task_pause_ratio": 0.0,
        "kafka_connect_task_error_total_record_errors": 3, "kafka_connect_task_error_total_records_skipped": 3,
        "kafka_connect_task_error_total_record_failures": 7, "kafka_connect_task_error_total_retries": 4,
        "kafka_connect_task_error_total_errors_logged": 3,
        "kafka_connect_task_error_deadletterqueue_produce_requests": 2,
        "kafka_connect_task_error_deadletterqueue_produce_failures": 1,
        "kafka_connect_task_error_last_error_timestamp": 1_700_000_000_000,
    }
    for name, want in expected.items():
        assert value(scraped, name, **task) == pytest.approx(want), name
        assert [lab for lab, _ in scraped[name]] == [task], "only tasks that reported have task series"
    assert not [n for n in scraped if n.startswith("kafka_connect_source_task_")]
    clock.now = 1075.0  # 15 s later: paused for 15 of the last 60 s
    scraped = scrape(sink)
    assert value(scraped, "kafka_connect_connector_task_pause_ratio", **task) == pytest.approx(0.25)
    assert value(scraped, "kafka_connect_connector_task_running_ratio", **task) == pytest.approx(0.75)
    clock.now = 1200.0  # no report for two minutes: the rates fall to 0, the totals stay
    scraped = scrape(sink)
    assert value(scraped, "kafka_connect_sink_task_sink_record_read_rate", **task) == 0
    assert value(scraped, "kafka_connect_sink_task_sink_record_read_total", **task) == 3000


def test_totals_are_counters_and_the_rest_gauges(sink):
    for name, kind in types(sink).items():
        if name.startswith("kafka_connect_"):
            assert kind == ("counter" if name.endswith("_total") else "gauge"), name


def test_a_new_attempt_starts_the_rate_window_again(clock):
    driver = FakeDriver("sink", 1, clock)
    handle = driver.tasks[0]
    handle.take_report(report(0, records_read=5000))
    clock.now += 10
    handle.attempt = 1
    handle.take_report(TaskReport(0, 1, TaskState.RUNNING, "w", records_read=100))
    clock.now += 10
    handle.take_report(TaskReport(0, 1, TaskState.RUNNING, "w", records_read=300))
    assert value(scrape(driver), "kafka_connect_sink_task_sink_record_read_rate", connector="orders",
                 task="0") == pytest.approx(200 / 10)


def test_source_task_series(clock):
    driver = FakeDriver("source", 1, clock)
    driver.tasks[0].take_report(report(0, records_read=100, records_written=70, records_dropped=5,
                                       batch_time_avg_ms=2.0, batch_time_max_ms=8.0, transaction_size_avg=25.0,
                                       transaction_size_max=30, transaction_size_min=20))
    clock.now += 20
    driver.tasks[0].take_report(report(0, records_read=500, records_written=490, records_dropped=5))
    scraped = scrape(driver)
    task = {"connector": "orders", "task": "0"}
    assert value(scraped, "kafka_connect_source_task_source_record_poll_total", **task) == 500
    assert value(scraped, "kafka_connect_source_task_source_record_write_total", **task) == 490
    assert value(scraped, "kafka_connect_source_task_source_record_poll_rate", **task) == pytest.approx(20.0)
    assert value(scraped, "kafka_connect_source_task_source_record_write_rate", **task) == pytest.approx(21.0)
    assert value(scraped, "kafka_connect_source_task_source_record_active_count", **task) == 5  # 500-490-5
    assert value(scraped, "kafka_connect_source_task_source_record_active_count_max", **task) == 25  # 100-70-5
    assert "kafka_connect_source_task_poll_batch_avg_time_ms" not in scraped, "no poll in the latest report's window"
    assert "kafka_connect_source_task_transaction_size_min" not in scraped, "Strimzi's rules drop -min"
    assert not [n for n in scraped if n.startswith("kafka_connect_sink_task_")]


def test_an_older_runners_report_parses_and_leaves_windowed_series_out(clock):
    old = {"task_id": 0, "attempt": 0, "state": "RUNNING", "worker_id": "w", "records_read": 9, "commits": 1}
    parsed = TaskReport.from_json(old)
    assert parsed.batch_size_avg is None and parsed.retries == 0 and parsed.records_dropped == 0
    driver = FakeDriver("sink", 1, clock)
    driver.tasks[0].take_report(parsed)
    scraped = scrape(driver)
    assert "kafka_connect_sink_task_put_batch_avg_time_ms" not in scraped
    assert "kafka_connect_connector_task_batch_size_avg" not in scraped
    assert value(scraped, "kafka_connect_sink_task_sink_record_read_total", connector="orders", task="0") == 9
    assert TaskReport.from_json(report(0, batch_size_avg=1.5).to_json()).batch_size_avg == 1.5


def test_the_conveyor_families_stay(sink):
    scraped = scrape(sink)
    for name in ("conveyor_sink_record_read_total", "conveyor_task_lag_records", "conveyor_task_state",
                 "conveyor_connector_state", "conveyor_connector_unassigned_lag_records"):
        assert name in scraped, name


def test_the_runner_meter_keeps_the_last_minute(clock):
    meter = TaskMeter(clock=clock)
    assert meter.report_fields()["batch_size_avg"] is None
    meter.batch(10, 0.004)
    meter.commit(0.020)
    clock.now += 30
    meter.batch(30, 0.002)
    meter.transaction(7)
    meter.transaction(3)
    fields = meter.report_fields()
    assert (fields["batch_size_avg"], fields["batch_size_max"]) == (20.0, 30.0)
    assert (fields["batch_time_avg_ms"], fields["batch_time_max_ms"]) == (pytest.approx(3.0), pytest.approx(4.0))
    assert (fields["commit_time_avg_ms"], fields["commit_time_max_ms"]) == (pytest.approx(20.0), pytest.approx(20.0))
    assert (fields["transaction_size_avg"], fields["transaction_size_max"], fields["transaction_size_min"]) == (
        5.0, 7.0, 3.0)
    clock.now += 31  # the first batch and the commit leave the window
    fields = meter.report_fields()
    assert (fields["batch_size_avg"], fields["commit_time_avg_ms"]) == (30.0, None)
    assert set(fields) <= set(TaskReport.__dataclass_fields__)


def test_error_handling_counts_retries_logged_errors_and_dead_letter_failures():
    from conveyor.runtime.config.settings import parse_sink_settings
    from conveyor.runtime.errors.tolerance import FailedRecord, LogReporter, Stage, ToleranceOperator

    settings = parse_sink_settings({"topics": "t", "errors.tolerance": "all", "errors.log.enable": "true"})
    tolerance = ToleranceOperator(settings, [LogReporter("orders", 0, False)])
    assert tolerance.report_fields() == {"retries": 0, "last_error_ms": 0, "errors_logged": 0, "dlq_failures": 0}
    tolerance.failed(FailedRecord("t", 0, 5, b"k", b"v", [], None), Stage.VALUE_CONVERTER, "X", ValueError("bad"))
    fields = tolerance.report_fields()
    assert fields["errors_logged"] == 1 and fields["last_error_ms"] > 1_600_000_000_000


# --------------------------------------------------------------------------------------------
# the names, against Strimzi's rules


# The task-level rules of Strimzi's packaging/examples/metrics/kafka-connect-metrics.yaml (jmx exporter,
# lowercaseOutputName): COUNTER for "-total", GAUGE for these suffixes, nothing for any other attribute.
STRIMZI_TASK_COUNTER = re.compile(r".+-total")
STRIMZI_TASK_GAUGE = re.compile(r"(.+-count|.+-ms|.+-ratio|.+-seq-no|.+-rate|.+-max|.+-avg|.+-failures|.+-requests"
                                r"|.+-timestamp|.+-logged|.+-errors|.+-retries|.+-skipped)")

# Kafka Connect's numeric task metrics (the Connect docs' connector-task-, sink-task-, source-task- and
# task-error-metrics), by MBean type.
CONNECT_TASK_METRICS = {
    "connector-task": ["batch-size-avg", "batch-size-max", "offset-commit-avg-time-ms",
                       "offset-commit-failure-percentage", "offset-commit-max-time-ms",
                       "offset-commit-success-percentage", "pause-ratio", "running-ratio"],
    "sink-task": ["offset-commit-completion-rate", "offset-commit-completion-total", "offset-commit-seq-no",
                  "offset-commit-skip-rate", "offset-commit-skip-total", "partition-count", "put-batch-avg-time-ms",
                  "put-batch-max-time-ms", "sink-record-active-count", "sink-record-active-count-avg",
                  "sink-record-active-count-max", "sink-record-lag-max", "sink-record-read-rate",
                  "sink-record-read-total", "sink-record-send-rate", "sink-record-send-total"],
    "source-task": ["poll-batch-avg-time-ms", "poll-batch-max-time-ms", "source-record-active-count",
                    "source-record-active-count-avg", "source-record-active-count-max", "source-record-poll-rate",
                    "source-record-poll-total", "source-record-write-rate", "source-record-write-total",
                    "transaction-size-avg", "transaction-size-max", "transaction-size-min"],
    "task-error": ["deadletterqueue-produce-failures", "deadletterqueue-produce-requests", "last-error-timestamp",
                   "total-errors-logged", "total-record-errors", "total-record-failures", "total-records-skipped",
                   "total-retries"],
}


def strimzi_name(group: str, attribute: str) -> str | None:
    """What Strimzi's rules make of ``kafka.connect<type=<group>-metrics, connector=.., task=..><>attribute``."""
    if STRIMZI_TASK_COUNTER.fullmatch(attribute) or STRIMZI_TASK_GAUGE.fullmatch(attribute):
        return f"kafka_connect_{group}_{attribute}".lower().replace("-", "_")
    return None


def test_every_task_metric_strimzi_exports_is_produced_and_nothing_else():
    exported = {strimzi_name(g, a) for g, attrs in CONNECT_TASK_METRICS.items() for a in attrs} - {None}
    ours = {n for n in metric_names() if n.split("_")[2] in ("connector", "sink", "source", "task")
            and not n.startswith(("kafka_connect_connector_connector_", "kafka_connect_connector_status",
                                  "kafka_connect_connector_task_status"))}
    assert ours == exported
    dropped = {f"{g}:{a}" for g, attrs in CONNECT_TASK_METRICS.items() for a in attrs if strimzi_name(g, a) is None}
    assert dropped == {"connector-task:offset-commit-failure-percentage",
                       "connector-task:offset-commit-success-percentage", "source-task:transaction-size-min"}


def test_metric_names_are_what_the_collector_yields(sink, clock):
    source = FakeDriver("source", 1, clock)
    source.tasks[0].take_report(report(0, batch_size_avg=1.0, batch_size_max=1.0, batch_time_avg_ms=1.0,
                                       batch_time_max_ms=1.0, commit_time_avg_ms=1.0, commit_time_max_ms=1.0,
                                       transaction_size_avg=1.0, transaction_size_max=1.0))
    produced = {n for driver in (sink, source) for n in scrape(driver) if n.startswith("kafka_connect_")}
    assert produced == metric_names()


# --------------------------------------------------------------------------------------------
# the dashboard asks only for what Conveyor produces

DASHBOARD_ALLOWED_MISSING: dict[str, str] = {}
"""kafka_connect_* names the dashboard may use although Conveyor does not produce them, with the
reason; empty: every panel's query is answered by Conveyor's drivers (see NOT_PROVIDED for what
the dashboard leaves out of Strimzi's)."""


def _exprs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k in ("expr", "query", "definition") and isinstance(v, str)] + [
            e for v in node.values() for e in _exprs(v)]
    if isinstance(node, list):
        return [e for v in node for e in _exprs(v)]
    return []


def test_every_kafka_connect_name_in_the_dashboard_is_produced():
    board = json.loads(DASHBOARD.read_text())
    exprs = _exprs(board)
    assert len(exprs) >= 10, "the dashboard's queries were found"
    used = {m for e in exprs for m in re.findall(r"kafka_connect_[a-z_]+", e)}
    assert used, "the dashboard queries Kafka Connect's metrics"
    missing = used - metric_names() - set(DASHBOARD_ALLOWED_MISSING)
    assert not missing, f"the dashboard asks for metrics Conveyor does not produce: {sorted(missing)}"
    assert NOT_PROVIDED, "what is not provided is documented"
