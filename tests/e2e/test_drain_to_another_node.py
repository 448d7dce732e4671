"""Two nodes (issue 34, item 5): the session's cluster takes in a second kubelet on this machine
(``second_node``: its own containerd, pod bridge and range, cgroup root and node IP) for this
module's tests.

* Pods on the two nodes' bridges reach each other, and cluster DNS, through the host.
* ``kubectl drain`` of the node where a PostgreSQL sink's executors run, under a steady load:
  the eviction's preStop drain makes each task's closing commit, Spark's replacement executors
  come up on the other node and the tasks resume there. The sink inserts (no key), so a record
  read twice would be a second row: every record is a row exactly once (a record written but
  not committed before its task went would be read again). The driver is held on
  the first node by ``spark.kubernetes.driver.node.selector.*``, which the operator puts on the
  driver pod as Spark does on its executors.
"""

from __future__ import annotations

import json
import uuid

import pytest
from _connectors import (
    SMALL_SPARK,
    apply,
    busybox_pod,
    connector,
    create_topic,
    diagnostics,
    eventually,
    pods,
    row_count,
    run_pod,
    tasks_in,
)

from conveyor.testing.node import NODE_NAME
from conveyor.testing.runs import SteadyLoad

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def _pod_ip(node, namespace: str, name: str) -> str | None:
    pod = json.loads(node.kubectl("get", "pod", name, "-n", namespace, "-o", "json").stdout)
    return pod["status"].get("podIP") if pod["status"].get("phase") == "Running" else None


def test_pods_on_the_two_nodes_reach_each_other_and_cluster_dns(kube_node, second_node, node_namespace):
    ns = node_namespace
    kube_node.kubectl("apply", "-f", "-", input=json.dumps(
        busybox_pod(ns, "server", "echo pong | nc -l -p 8080", node_name=NODE_NAME)))
    ip = eventually(lambda: _pod_ip(kube_node, ns, "server"), 60, "the server pod's IP on the first node")
    phase, logs = run_pod(kube_node, ns, "client", f"nslookup kubernetes.default.svc.cluster.local && "
                                                   f"nc -w 5 {ip} 8080", node_name=second_node)
    assert phase == "Succeeded" and "pong" in logs, logs
    assert ip.startswith("10.88.") and int(ip.split(".")[2]) < 128, f"{ip}: not the first node's pod range"
    client_ip = json.loads(kube_node.kubectl("get", "pod", "client", "-n", ns, "-o", "json").stdout)["status"]["podIP"]
    assert int(client_ip.split(".")[2]) >= 128, f"{client_ip}: not the second node's pod range"


def _executor_nodes(node, namespace: str) -> dict[str, str]:
    """``{pod: node}`` of the connector's Running executors that are not terminating."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "")
            for p in pods(node, namespace, "conveyor.dev/component=executor")
            if p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp")}


def test_a_drained_node_moves_its_tasks_to_the_other_with_nothing_lost_or_written_twice(
        kube_node, second_node, node_kafka, node_postgres, conveyor_release, node_namespace):
    ns, kafka, pg = node_namespace, node_kafka.bootstrap_servers, node_postgres.url
    topic = f"drain_{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, partitions=4)
    config = {"topics": topic, "connection.url": pg, "insert.mode": "insert", "auto.create": "true",
              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false", "offset.flush.interval.ms": "2000"}
    spark = {**SMALL_SPARK, "executor": {**SMALL_SPARK["executor"], "instances": 2},
             "sparkConf": {**SMALL_SPARK["sparkConf"],
                           "spark.kubernetes.driver.node.selector.kubernetes.io/hostname": NODE_NAME}}
    apply(kube_node, connector("drained", ns, "postgres-sink", kafka, config, tasksMax=2, spark=spark))
    try:
        with SteadyLoad(kafka, topic, records_per_s=100) as load:
            tasks = eventually(lambda: tasks_in(kube_node, ns, "drained", "RUNNING", 2), 300, "two RUNNING tasks")
            eventually(lambda: row_count(pg, topic) > 0, 120, "the first rows")
            driver = pods(kube_node, ns, "conveyor.dev/component=driver")[0]
            assert driver["spec"]["nodeName"] == NODE_NAME, "the driver's node selector"
            placed = _executor_nodes(kube_node, ns)
            assert second_node in placed.values(), f"no executor on {second_node} to drain: {placed}"
            moving = {t["id"] for t in tasks if placed.get(t["pod"]) == second_node}

            drained = kube_node.kubectl("drain", second_node, "--ignore-daemonsets", "--delete-emptydir-data",
                                        "--timeout=240s", check=False, timeout=300)
            assert drained.returncode == 0, drained.stdout + drained.stderr

            def resumed() -> list[dict] | None:
                now = tasks_in(kube_node, ns, "drained", "RUNNING", 2)
                nodes = _executor_nodes(kube_node, ns)
                return now if now and all(nodes.get(t["pod"]) == NODE_NAME for t in now) else None

            after = eventually(resumed, 240, f"both tasks RUNNING on executors on {NODE_NAME}")
            assert {t["id"] for t in after} >= moving
            assert not [p for p in pods(kube_node, ns, "conveyor.dev/connector=drained")
                        if p["spec"].get("nodeName") == second_node], "a pod of the connector is left on the drained node"
            seen = row_count(pg, topic)
            eventually(lambda: row_count(pg, topic) >= seen + 200, 120, "rows written after the drain")
        eventually(lambda: row_count(pg, topic) >= load.produced, 180, f"{load.produced} rows")
        assert row_count(pg, topic) == row_count(pg, topic, distinct="id") == load.produced, \
            "every record a row, exactly once"
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
    finally:
        kube_node.kubectl("uncordon", second_node, check=False)
