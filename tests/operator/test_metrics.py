"""The operator's Prometheus metrics (conveyor_operator.metrics): each reconciliation counted by
result and timed, served on the metrics port that `conveyor-operator` opens."""

from __future__ import annotations

import urllib.request

import kopf
import pytest
from conveyor_operator import metrics
from conveyor_operator.handlers import connector as handlers
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families


def sample(name: str, **labels: str) -> float:
    value = metrics.REGISTRY.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


def counts() -> dict[str, float]:
    return {result: sample("conveyor_operator_reconciles_total", result=result) for result in metrics.RESULTS} | {
        "failures": sample("conveyor_operator_reconcile_failures_total"),
        "observed": sample("conveyor_operator_reconcile_duration_seconds_count")}


def delta(before: dict[str, float]) -> dict[str, float]:
    return {k: v - before[k] for k, v in counts().items() if v != before[k]}


def test_each_result_is_counted_and_timed():
    @metrics.observe_reconcile
    def reconcile(outcome: str) -> None:
        if outcome == "rejected":
            metrics.reject()
        elif outcome == "retry":
            raise kopf.TemporaryError("a Secret is missing", delay=30)
        elif outcome == "error":
            raise RuntimeError("the API server went away")

    before = counts()
    reconcile("applied")
    assert delta(before) == {"applied": 1, "observed": 1}
    before = counts()
    reconcile("rejected")
    assert delta(before) == {"rejected": 1, "observed": 1}
    before = counts()
    with pytest.raises(kopf.TemporaryError):
        reconcile("retry")
    assert delta(before) == {"retry": 1, "failures": 1, "observed": 1}
    before = counts()
    with pytest.raises(RuntimeError):
        reconcile("error")
    assert delta(before) == {"error": 1, "failures": 1, "observed": 1}
    reconcile("applied")  # a result does not leak into the next reconciliation
    assert reconcile.__name__ == "reconcile" and reconcile.__wrapped__  # kopf's handler id is unchanged


def test_the_reconcile_handler_is_observed_and_an_invalid_spec_counts_as_rejected(monkeypatch):
    assert handlers.reconcile.__wrapped__.__name__ == "reconcile"
    sent: list = []
    monkeypatch.setattr(handlers, "shared_kube", lambda: type("K", (), {
        "event": lambda *a, **k: sent.append(("event", a, k)),
        "patch_connector_status": lambda *a, **k: sent.append(("status", a, k))})())
    body = {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": "orders", "namespace": "data", "generation": 1},
            "spec": {"class": "noop-sink", "tasksMax": 0}}
    before = counts()
    handlers.reconcile(body=body, meta=body["metadata"], status={}, uid="u1", patch=kopf.Patch())
    assert delta(before) == {"rejected": 1, "observed": 1}
    assert any(kind == "event" and "InvalidSpec" in args for kind, args, _ in sent)


def test_every_family_is_exposed_from_the_start():
    names = {s.name for f in text_string_to_metric_families(generate_latest(metrics.REGISTRY).decode())
             for s in f.samples}
    for result in metrics.RESULTS:
        assert metrics.REGISTRY.get_sample_value("conveyor_operator_reconciles_total", {"result": result}) is not None
    assert {"conveyor_operator_reconciles_total", "conveyor_operator_reconcile_failures_total",
            "conveyor_operator_reconcile_duration_seconds_bucket", "conveyor_operator_reconcile_duration_seconds_sum",
            "process_cpu_seconds_total"} <= names


def test_the_metrics_port_serves_them():
    server = metrics.serve(0, "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert 'conveyor_operator_reconciles_total{result="applied"}' in text
    assert "conveyor_operator_reconcile_duration_seconds_bucket" in text


def test_the_command_opens_the_metrics_port_from_its_variable(monkeypatch):
    """conveyor-operator serves metrics on CONVEYOR_OPERATOR_METRICS_PORT (the chart's), 0 serving none."""
    import conveyor_operator.__main__ as main

    served: list[int] = []
    monkeypatch.setattr(metrics, "serve", lambda port: served.append(port))
    monkeypatch.setattr(main.asyncio, "run", lambda coroutine: coroutine.close())
    monkeypatch.setenv("CONVEYOR_OPERATOR_METRICS_PORT", "9123")
    main.main([])
    monkeypatch.setenv("CONVEYOR_OPERATOR_METRICS_PORT", "0")
    main.main([])
    monkeypatch.delenv("CONVEYOR_OPERATOR_METRICS_PORT")
    main.main([])
    assert served == [9123, 8081]
