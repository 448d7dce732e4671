"""The chart's metrics values (metrics.*): the operator's metrics port, the scrapers the
NetworkPolicies admit, the PodMonitors of the drivers and the operator, and the Grafana dashboard
ConfigMap; rendered with helm (a built binary, as in test_chart.py: a missing helm fails)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration  # helm is a built binary: not the unit tier (tests/README.md)

CHART = Path(__file__).resolve().parents[2] / "charts" / "conveyor"
NAMESPACE = "conveyor-system"
RELEASE = "rel"
PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


def _run(helm: str, *sets: str) -> subprocess.CompletedProcess[str]:
    args = [helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for s in sets:
        args += ["--set-json" if s.startswith("json:") else "--set", s.removeprefix("json:")]
    return subprocess.run(args, check=False, capture_output=True, text=True, timeout=120)


def render(helm: str, *sets: str) -> list[dict]:
    result = _run(helm, *sets)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def kinds(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def operator_container(docs: list[dict]) -> dict:
    (deployment,) = kinds(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_defaults_serve_operator_metrics_without_podmonitors_or_dashboard(helm):
    docs = render(helm)
    assert not kinds(docs, "PodMonitor") and not kinds(docs, "ConfigMap")
    container = operator_container(docs)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8080, "metrics": 8081}, "kopf's liveness keeps 8080"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CONVEYOR_OPERATOR_METRICS_PORT"] == "8081"
    assert env["CONVEYOR_OPERATOR_NETWORK_POLICY_METRICS_PEERS"] == "[]"
    from conveyor_operator.settings import PREFIX, OperatorSettings

    settings = OperatorSettings.from_env({k: v for k, v in env.items() if k.startswith(PREFIX) and v is not None})
    assert settings.network_policy_metrics_peers == []


def test_the_operator_metrics_can_be_moved_or_turned_off(helm):
    container = operator_container(render(helm, "metrics.operator.port=9102"))
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"] == 9102
    assert {e["name"]: e.get("value") for e in container["env"]}["CONVEYOR_OPERATOR_METRICS_PORT"] == "9102"
    docs = render(helm, "metrics.operator.enabled=false")
    container = operator_container(docs)
    assert [p["name"] for p in container["ports"]] == ["http"]
    assert {e["name"]: e.get("value") for e in container["env"]}["CONVEYOR_OPERATOR_METRICS_PORT"] == "0"
    (policy,) = kinds(docs, "NetworkPolicy")
    assert policy["spec"]["ingress"] == []


def test_scrapers_reach_the_operator_metrics_port_and_the_drivers_control_port(helm):
    docs = render(helm, f"json:metrics.scrapers={json.dumps([PROMETHEUS])}")
    (policy,) = kinds(docs, "NetworkPolicy")
    assert policy["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8081}], "from": [PROMETHEUS]}]
    env = {e["name"]: e.get("value") for e in operator_container(docs)["env"]}
    from conveyor_operator.reconcile import network_policy
    from conveyor_operator.settings import PREFIX, OperatorSettings

    from conveyor.manifest import ConnectorManifest

    settings = OperatorSettings.from_env({k: v for k, v in env.items() if k.startswith(PREFIX) and v is not None})
    assert settings.network_policy_metrics_peers == [PROMETHEUS]
    manifest = ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "orders", "namespace": "data"},
        "spec": {"class": "noop-sink", "tasksMax": 1, "kafka": {"bootstrapServers": "k:9092"},
                 "config": {"topics": "t"}}})
    driver_policy = network_policy.network_policies(manifest, "uid", settings)[0]
    control = driver_policy["spec"]["ingress"][0]
    assert control["ports"] == [{"protocol": "TCP", "port": settings.control_port}]
    assert PROMETHEUS in control["from"]


def _driver_pod(namespace: str = "data") -> dict:
    """The driver pod template the operator renders for a connector."""
    from conveyor_operator.reconcile import render as operator_render
    from conveyor_operator.settings import OperatorSettings

    from conveyor.manifest import ConnectorManifest

    manifest = ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
        "metadata": {"name": "orders", "namespace": namespace},
        "spec": {"class": "noop-sink", "tasksMax": 1, "kafka": {"bootstrapServers": "k:9092"},
                 "config": {"topics": "t"}}})
    objects = operator_render.objects(manifest, "uid", 1, OperatorSettings(), None, "secret-uid")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    return deployment["spec"]["template"]


def test_podmonitors_select_every_driver_on_its_control_port_and_the_operator(helm):
    docs = render(helm, "metrics.podMonitor.enabled=true", "metrics.podMonitor.labels.release=kps")
    monitors = {m["metadata"]["name"]: m for m in kinds(docs, "PodMonitor")}
    assert set(monitors) == {f"{RELEASE}-conveyor-connectors", f"{RELEASE}-conveyor-operator"}
    for monitor in monitors.values():
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["metadata"]["namespace"] == NAMESPACE
        assert monitor["metadata"]["labels"]["release"] == "kps"
        assert monitor["metadata"]["labels"]["app.kubernetes.io/component"] == "metrics"
    drivers = monitors[f"{RELEASE}-conveyor-connectors"]["spec"]
    assert drivers["namespaceSelector"] == {"any": True}
    assert drivers["podMetricsEndpoints"] == [{"port": "control", "path": "/metrics", "interval": "30s"}]
    pod = _driver_pod()
    assert drivers["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(), "selects the drivers"
    executor_labels = {**pod["metadata"]["labels"], "conveyor.dev/component": "executor"}
    assert not drivers["selector"]["matchLabels"].items() <= executor_labels.items(), "and not the executors"
    ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    assert "control" in ports
    operator = monitors[f"{RELEASE}-conveyor-operator"]["spec"]
    (deployment,) = kinds(docs, "Deployment")
    assert operator["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert operator["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert operator["podMetricsEndpoints"][0]["port"] == "metrics"


def test_podmonitors_follow_watch_namespaces_their_namespace_and_the_operator_switch(helm):
    docs = render(helm, "metrics.podMonitor.enabled=true", "watchNamespaces={data,etl}",
                  "metrics.podMonitor.namespace=monitoring", "metrics.podMonitor.interval=",
                  "metrics.podMonitor.scrapeTimeout=10s", "metrics.operator.enabled=false")
    (monitor,) = kinds(docs, "PodMonitor")
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["data", "etl"]}
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "control", "path": "/metrics", "scrapeTimeout": "10s"}]


def test_the_grafana_dashboard_configmap_holds_the_charts_dashboard(helm):
    docs = render(helm, "metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.annotations.grafana_folder=Conveyor",
                  "metrics.grafanaDashboard.namespace=grafana")
    (config_map,) = kinds(docs, "ConfigMap")
    assert config_map["metadata"]["namespace"] == "grafana"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Conveyor"}
    (key,) = config_map["data"]
    assert key == "conveyor-kafka-connect.json"
    shipped = (CHART / "dashboards" / "conveyor-kafka-connect.json").read_text()
    assert json.loads(config_map["data"][key]) == json.loads(shipped)
    assert "{{connector}}" in config_map["data"][key], "legends are not templated by helm"
    docs = render(helm, "metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.labels.grafana_dashboard=null",
                  "metrics.grafanaDashboard.labels.team=data")
    (config_map,) = kinds(docs, "ConfigMap")
    assert config_map["metadata"]["labels"]["team"] == "data" and "grafana_dashboard" not in config_map["metadata"]["labels"]


@pytest.mark.parametrize("sets", [
    ["metrics.operator.port=8080"], ["metrics.operator.port=0"], ["metrics.podMonitor.enabled=yes"],
    ["metrics.podMonitor.interval=30"], ["json:metrics.scrapers=[{\"namespace\": \"monitoring\"}]"],
    ["metrics.grafanaDashboard.labels.grafana_dashboard=1"], ["metrics.unknown=1"],
], ids=["kopf-port", "port-0", "enabled-not-boolean", "interval-no-unit", "scraper-not-a-peer",
        "label-not-string", "unknown-key"])
def test_the_schema_rejects_bad_metrics_values(helm, sets):
    result = _run(helm, *sets)
    assert result.returncode != 0, f"helm accepted {sets}"
    assert "schema" in result.stderr, result.stderr


def test_lint_strict_with_everything_on(helm):
    args = [helm, "lint", "--strict", str(CHART), "--set", "metrics.podMonitor.enabled=true",
            "--set", "metrics.grafanaDashboard.enabled=true", "--set-json", f"metrics.scrapers={json.dumps([PROMETHEUS])}"]
    result = subprocess.run(args, check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "[WARNING]" not in result.stdout, result.stdout + result.stderr
