"""No secret ever leaks (issue 13 §7): one canary value is a Kafka SASL password, part of
``connection.url`` and a ``configFrom`` Secret's key, through a connector's whole life on a real
node -- apply, an invalid config, a drain (executor pod evicted), a task failing with a
traceback, delete. Then the canary, and the connector's control tokens and Spark secret, are
searched for in the operator's, driver's and executor's logs, the Events, the Connectors'
status, every ConfigMap and Deployment, and the driver's ``/status`` and ``/metrics``: 0 hits.
(Spark's event log is not enabled by Conveyor, so there is none to search.)"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from _connectors import (
    apply,
    condition,
    connector,
    create_topic,
    diagnostics,
    driver_control,
    eventually,
    evict,
    get,
    pods,
    row_count,
)

from conveyor.testing.runs import control_request, produce

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

CANARY = f"Canary{uuid.uuid4().hex[:12]}"
RECORDS = 50


@pytest.fixture
def canary_kafka(kube_node) -> Iterator[object]:
    """A broker on the node IP whose SASL/PLAIN listener has a user ``canary`` with the canary password."""
    from conveyor.testing.kafka import KafkaBroker

    broker = KafkaBroker(host=kube_node.node_ip, heap="384m", extra_sasl_users={"canary": CANARY}).start()
    try:
        yield broker
    finally:
        broker.stop()


def _secret(node, namespace: str, name: str, data: dict[str, str]) -> None:
    apply(node, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                 "stringData": data})


def _body(name: str, namespace: str, kafka, postgres_url: str, topic: str, **config: str) -> dict:
    parts = urlsplit(postgres_url)  # the harness's PostgreSQL trusts the pod network: any password is taken
    url = urlunsplit(parts._replace(netloc=f"postgres:${{secret:pg:password}}@{parts.hostname}:{parts.port}"))
    body = connector(name, namespace, "postgres-sink", kafka.sasl_plain().bootstrap_servers, {
        "topics": topic, "connection.url": url, "auto.create": "true", "insert.mode": "insert",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false", "offset.flush.interval.ms": "1000", **config,
    }, tasksMax=1, configFrom=[{"secretRef": {"name": "pg"}, "prefix": "connection."}])
    body["spec"]["kafka"]["authentication"] = {"type": "plain", "username": "canary",
                                               "passwordSecret": {"name": "kafka-credentials", "key": "password"}}
    return body


def _logs(node, namespace: str, selector: str) -> list[str]:
    out = []
    for pod in pods(node, namespace, selector):
        name = pod["metadata"]["name"]
        for previous in ("--previous=false", "--previous=true"):
            out.append(node.kubectl("logs", name, "-n", namespace, "--all-containers", previous,
                                    check=False).stdout)
    return out


def test_a_canary_credential_appears_nowhere_through_a_connectors_life(
        kube_node, node_postgres, canary_kafka, conveyor_release, node_namespace):
    ns = node_namespace
    topic = f"leak_{uuid.uuid4().hex[:8]}"
    plain = canary_kafka.bootstrap_servers
    create_topic(plain, topic, partitions=1)
    produce(plain, topic, [(str(i), json.dumps({"id": i})) for i in range(RECORDS)])
    _secret(kube_node, ns, "kafka-credentials", {"password": CANARY})
    _secret(kube_node, ns, "pg", {"password": CANARY})
    outputs: dict[str, str] = {}
    try:
        # 1. apply: records move through SASL with the canary password, into PostgreSQL with it in the URL
        apply(kube_node, _body("leaky", ns, canary_kafka, node_postgres.url, topic))
        eventually(lambda: row_count(node_postgres.url, topic) == RECORDS, 300, f"{RECORDS} rows")
        control, admin = driver_control(kube_node, ns, "leaky")
        code, status = control_request(control, "/status", token=admin, timeout_s=10)
        assert code == 200 and status["tasks"][0]["state"] == "RUNNING", status
        assert control_request(control, "/status", token="wrong", timeout_s=10)[0] == 401
        for pod in pods(kube_node, ns, "conveyor.dev/connector=leaky"):  # Spark's secret comes from the file
            env = {e["name"] for c in pod["spec"]["containers"] for e in c.get("env") or []}
            assert "_SPARK_AUTH_SECRET" not in env, pod["metadata"]["name"]

        # 2. an invalid config that carries the canary too
        apply(kube_node, _body("leaky-bad", ns, canary_kafka, node_postgres.url, topic, **{"batch.size": "ten"}))
        eventually(lambda: (condition(get(kube_node, "connector", "leaky-bad", ns), "Degraded") or {}).get("reason")
                   == "InvalidConfig", 120, "leaky-bad Degraded InvalidConfig")

        # 3. a drain: the executor pod is evicted (its preStop drain authenticates with the task token)
        executor = pods(kube_node, ns, "conveyor.dev/connector=leaky,conveyor.dev/component=executor")[0]
        evict(kube_node, ns, executor["metadata"]["name"])
        eventually(lambda: (s := control_request(control, "/status", token=admin, timeout_s=10)[1])
                   and s["tasks"][0]["state"] == "RUNNING" and s["tasks"][0].get("pod") != executor["metadata"]["name"]
                   and s, 240, "the task RUNNING again on another executor")

        # 4. a task failure with a traceback: a record that is no JSON, errors.tolerance none
        produce(plain, topic, [("poison", "this is not json")])
        eventually(lambda: (condition(get(kube_node, "connector", "leaky", ns), "Degraded") or {}).get("reason")
                   == "Failed", 180, "leaky Degraded Failed")
        code, status = control_request(control, "/status", token=admin, timeout_s=10)
        assert status["tasks"][0]["state"] == "FAILED" and status["tasks"][0]["trace"], status
        outputs["GET /status"] = json.dumps(status)
        outputs["GET /metrics"] = _metrics(control)
        leaky = get(kube_node, "connector", "leaky", ns)
        assert leaky["status"]["tasks"][0]["trace"] and "\n" not in leaky["status"]["tasks"][0]["trace"]

        # what the cluster holds while it runs
        outputs["connectors"] = kube_node.kubectl("get", "connectors", "-n", ns, "-o", "yaml").stdout
        outputs["configmaps, deployments, services, pods"] = kube_node.kubectl(
            "get", "configmaps,deployments,services,pods,poddisruptionbudgets", "-n", ns, "-o", "yaml").stdout
        outputs["driver and executor logs"] = "\n".join(_logs(kube_node, ns, "conveyor.dev/connector=leaky"))
        tokens = _control_values(kube_node, ns, "leaky")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
    finally:
        # 5. delete: the connector-deleted stop path, then the operator's logs and every Event
        for name in ("leaky", "leaky-bad"):
            kube_node.kubectl("delete", "connector", name, "-n", ns, "--ignore-not-found", "--wait=true",
                              "--timeout=180s", check=False, timeout=200)
    outputs["events"] = kube_node.kubectl("get", "events", "-n", ns, "-o", "yaml").stdout
    outputs["operator events"] = kube_node.kubectl("get", "events", "-n", conveyor_release, "-o", "yaml").stdout
    outputs["operator log"] = "\n".join(_logs(kube_node, conveyor_release, "app.kubernetes.io/component=operator"))

    # the search can find what it looks for: the collected outputs are real, the values are in the Secrets
    assert "leaky" in outputs["operator log"] and "RUNNING" in outputs["GET /status"]
    assert "conveyor_" in outputs["GET /metrics"] and len(outputs["driver and executor logs"]) > 1000
    assert base64.b64encode(CANARY.encode()).decode() in kube_node.kubectl(
        "get", "secret", "pg", "-n", ns, "-o", "yaml").stdout
    needles = {"canary": CANARY, **tokens}
    leaks = [f"{what} in {where}: ...{text[max(0, i - 120):i + 40]}..." for where, text in outputs.items()
             for what, needle in needles.items() if (i := text.find(needle)) >= 0]
    assert not leaks, "\n".join(leaks)


def _metrics(control: str) -> str:
    import urllib.request

    with urllib.request.urlopen(f"{control}/metrics", timeout=10) as resp:  # open to scrapers, by design
        return resp.read().decode()


def _control_values(node, namespace: str, name: str) -> dict[str, str]:
    secret = json.loads(node.kubectl("get", "secret", f"{name}-control", "-n", namespace, "-o", "json").stdout)
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
