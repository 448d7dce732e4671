"""A postgres-sink Connector installed the way users install it — images from the Dockerfile,
the operator from the Helm chart — runs as a driver pod and Spark executor pods on a real node,
and moves records from Kafka into PostgreSQL -- under a UID the image does not know, as OpenShift
assigns one."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

import pytest
from _connectors import apply, condition, connector, create_topic, diagnostics, eventually, get, pods, row_count

from conveyor.testing.runs import produce

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

RECORDS = 2000
CHART = Path(__file__).resolve().parents[2] / "charts" / "conveyor"


OPENSHIFT_UID = 1000650000
"""A UID from the range OpenShift assigns a project (restricted-v2): not in the image's /etc/passwd."""


@pytest.fixture
def pinned_uid_release(kube_node, conveyor_release, tmp_path):
    """The session's release upgraded so that the operator gives connector pods runAsUser and
    fsGroup :data:`OPENSHIFT_UID` (chart values ``connectorPods``); its values restored after."""
    args = ("--namespace", conveyor_release)
    saved = tmp_path / "values.json"
    saved.write_text(kube_node.helm("get", "values", "conveyor", *args, "--output", "json").stdout)
    kube_node.helm("upgrade", "conveyor", str(CHART), *args, "--reuse-values",
                   "--set", f"connectorPods.runAsUser={OPENSHIFT_UID}", "--set", f"connectorPods.fsGroup={OPENSHIFT_UID}",
                   "--wait", "--timeout", "180s", timeout=240)
    try:
        yield conveyor_release
    finally:
        kube_node.helm("upgrade", "conveyor", str(CHART), *args, "--reset-values", "--values", str(saved),
                       "--wait", "--timeout", "180s", timeout=240)


def test_a_postgres_sink_with_two_tasks_runs_on_executor_pods_under_a_uid_the_image_does_not_know(
        kube_node, node_kafka, node_postgres, pinned_uid_release, node_namespace):
    """As on OpenShift: an arbitrary UID with no passwd entry, the root filesystem read-only, the
    namespace enforcing Pod Security "restricted" -- the driver and two executors move records.
    (Every other e2e test runs under the image's own USER.)"""
    topic = f"orders_{uuid.uuid4().hex[:8]}"
    create_topic(node_kafka.bootstrap_servers, topic, partitions=4)
    produce(node_kafka.bootstrap_servers, topic,
            [(str(i), json.dumps({"id": i, "amount": i * 10})) for i in range(RECORDS)])
    body = connector("orders", node_namespace, "postgres-sink", node_kafka.bootstrap_servers, {
        "topics": topic,
        "connection.url": node_postgres.url,
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        # the sink writes what it buffered (< batch.size) at each offset commit: rows within 2 s, not 60
        "offset.flush.interval.ms": "2000",
    }, tasksMax=2)
    applied = time.monotonic()
    apply(kube_node, body)
    try:
        eventually(lambda: row_count(node_postgres.url, topic) > 0, 300, "the first row in PostgreSQL")
        first_row_s = time.monotonic() - applied
        eventually(lambda: row_count(node_postgres.url, topic) == RECORDS, 120, f"{RECORDS} rows")

        def tasks_running():
            status = (get(kube_node, "connector", "orders", node_namespace) or {}).get("status") or {}
            tasks = status.get("tasks") or []
            ready = condition({"status": status}, "Ready") or {}
            if ready.get("status") == "True" and len(tasks) == 2 and all(t["state"] == "RUNNING" for t in tasks):
                return tasks
            return None

        tasks = eventually(tasks_running, 60, "Ready and two RUNNING tasks")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, node_namespace)}") from None

    executors = {p["metadata"]["name"]: p for p in pods(kube_node, node_namespace, "conveyor.dev/component=executor")}
    drivers = pods(kube_node, node_namespace, "conveyor.dev/component=driver")
    assert len(drivers) == 1 and drivers[0]["status"]["phase"] == "Running"
    assert all(re.fullmatch(r"orders-exec-\d+", name) for name in executors), sorted(executors)
    assert all(p["status"]["phase"] == "Running" for p in executors.values())
    assert len(executors) == 2, sorted(executors)  # one task slot each (tasksMax 2, 1 core per executor)
    assert {t["pod"] for t in tasks} == set(executors), (tasks, sorted(executors))
    print(f"apply -> first row in PostgreSQL: {first_row_s:.1f}s")
    for pod in [*drivers, *executors.values()]:
        name = pod["metadata"]["name"]
        assert pod["spec"]["securityContext"]["runAsUser"] == OPENSHIFT_UID, (name, pod["spec"]["securityContext"])
        assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True, name
    # Spark created those executors through the chart's drivers' admission policy (issue 28,
    # item 3), which the controller manager has type-checked without a warning.
    policies = json.loads(kube_node.kubectl("get", "validatingadmissionpolicies", "-o", "json").stdout)["items"]
    drivers_policy = [p for p in policies if p["metadata"]["name"].endswith("-spark-drivers")]
    assert len(drivers_policy) == 1, [p["metadata"]["name"] for p in policies]

    def type_checked():
        checked = get(kube_node, "validatingadmissionpolicy", drivers_policy[0]["metadata"]["name"], "default")
        status = (checked or {}).get("status") or {}
        return status if "typeChecking" in status else None
    status = eventually(type_checked, 60, "the policy type-checked")
    assert not (status["typeChecking"] or {}).get("expressionWarnings"), status
