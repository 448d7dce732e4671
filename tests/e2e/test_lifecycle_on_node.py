"""What a user does with a running Connector, on a real node: ``kubectl scale`` to three tasks
(three executor pods, the third asked for by the running driver), a config change (taken live), ``spec.state`` paused, running again, and
stopped — each with the effect the README describes. The operator is killed right after the
create and right after the scale: its successor finishes both."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from _connectors import (
    apply,
    connector,
    create_topic,
    diagnostics,
    eventually,
    get,
    kill_operator,
    operator_restarted,
    pods,
    row_count,
    running_pod,
    stopped,
    tasks_in,
)

from conveyor.testing.runs import produce

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

N = 500


def send(bootstrap: str, topic: str, start: int) -> None:
    produce(bootstrap, topic, [(str(i), json.dumps({"id": i})) for i in range(start, start + N)])


def patch(node, namespace: str, name: str, spec: dict) -> None:
    node.kubectl("patch", "connector", name, "-n", namespace, "--type=merge", "-p", json.dumps({"spec": spec}))


def test_scale_config_change_pause_resume_and_stop(kube_node, node_kafka, node_postgres, conveyor_release,
                                                   node_namespace):
    ns, kafka, pg = node_namespace, node_kafka.bootstrap_servers, node_postgres.url
    first, second = (f"life_{uuid.uuid4().hex[:8]}" for _ in range(2))
    for topic in (first, second):
        create_topic(kafka, topic, partitions=3)
    config = {"topics": first, "connection.url": pg, "insert.mode": "upsert", "pk.mode": "record_value",
              "pk.fields": "id", "auto.create": "true",
              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false",
              # the sink writes what it buffered (< batch.size) at each offset commit: rows within 2 s, not 60
              "offset.flush.interval.ms": "2000"}
    apply(kube_node, connector("life", ns, "postgres-sink", kafka, config, tasksMax=2))
    restarts = kill_operator(kube_node, conveyor_release)  # mid-create
    send(kafka, first, 0)
    try:
        eventually(lambda: row_count(pg, first) == N, 300, f"{N} rows of {first}")

        driver_pod = running_pod(kube_node, ns, "conveyor.dev/component=driver")
        kube_node.kubectl("scale", "connector/life", "-n", ns, "--replicas=3")
        operator_restarted(kube_node, conveyor_release, restarts)
        restarts = kill_operator(kube_node, conveyor_release)  # mid-scale
        tasks = eventually(lambda: tasks_in(kube_node, ns, "life", "RUNNING", 3), 300, "three RUNNING tasks")
        executors = {p["metadata"]["name"] for p in pods(kube_node, ns, "conveyor.dev/component=executor")
                     if p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp")}
        assert {t["pod"] for t in tasks} <= executors and len({t["pod"] for t in tasks}) == 3, (tasks, executors)
        # live (issue 34): the driver that ran two tasks asked Spark for the third one's executor pod
        assert running_pod(kube_node, ns, "conveyor.dev/component=driver") == driver_pod, "the driver rolled"
        log = kube_node.kubectl("logs", "-n", ns, driver_pod).stdout
        assert "2 task(s) kept, 0 stopped, 1 started" in log and "requested 1 more executor(s)" in log, log[-3000:]
        # status.tasksMax is written when the operator's reconcile of the scale ends, which the
        # killed operator's successor may finish after the driver already reports three tasks
        eventually(lambda: get(kube_node, "connector", "life", ns)["status"]["tasksMax"] == 3, 60,
                   "status.tasksMax 3")
        operator_restarted(kube_node, conveyor_release, restarts)

        patch(kube_node, ns, "life", {"config": {**config, "topics": second}})
        send(kafka, second, 0)
        eventually(lambda: row_count(pg, second) == N, 180, f"{N} rows of {second} after the config change")

        patch(kube_node, ns, "life", {"state": "paused"})
        eventually(lambda: tasks_in(kube_node, ns, "life", "PAUSED", 3), 120, "three PAUSED tasks")
        send(kafka, second, N)
        time.sleep(8)
        assert row_count(pg, second) == N, "a paused connector wrote rows"

        patch(kube_node, ns, "life", {"state": "running"})
        eventually(lambda: row_count(pg, second) == 2 * N, 180, "the records sent while paused")

        patch(kube_node, ns, "life", {"state": "stopped"})
        eventually(lambda: stopped(kube_node, ns, "life"), 120, "the connector STOPPED")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
