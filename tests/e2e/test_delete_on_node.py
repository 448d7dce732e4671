"""``kubectl delete connector`` on a real node drives the connector-deleted stop path
(KAFKA-14651): the postgres-audit-source's triggers, function and audit table are gone from
PostgreSQL's catalog, and the finalizer lets the Connector go. Whether the running driver does
it or, with none running, a one-shot cleanup Job; and with the operator killed half-way."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid

import psycopg
import pytest
from _connectors import (
    apply,
    condition,
    connector,
    diagnostics,
    eventually,
    get,
    kill_operator,
    operator_pod,
    operator_restarted,
    pods,
)

from conveyor.testing.postgres import audit_catalog, holding_audit_schema_lock

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

NOTHING_LEFT = {"triggers": [], "functions": [], "tables": []}


@pytest.fixture
def audit_database(node_postgres):
    name = f"audit_{uuid.uuid4().hex[:8]}"
    url = node_postgres.create_database(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, item text)")
    yield url
    node_postgres.drop_database(name)


def start_audit_source(node, kafka, database: str, namespace: str, **config: str) -> None:
    apply(node, connector("audit", namespace, "postgres-audit-source", kafka.bootstrap_servers, {
        "connection.url": database, "tables": "public.orders", "topic.prefix": "audit.",
        "value.converter": "json", "value.converter.schemas.enable": "false",
        "key.converter": "json", "key.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "500", "poll.interval.ms": "200", **config,
    }))
    try:
        provisioned = eventually(lambda: (o := audit_catalog(database))["triggers"] and o, 300,
                                 "the audit trigger in PostgreSQL")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(node, namespace)}") from None
    assert provisioned["functions"] and provisioned["tables"], provisioned


def wait_gone(node, namespace: str) -> None:
    try:
        eventually(lambda: get(node, "connector", "audit", namespace) is None, 300,
                   "the Connector gone (finalizer removed)")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(node, namespace)}") from None


def test_deleting_an_audit_source_removes_its_triggers_function_and_table_even_if_the_operator_dies_half_way(
        kube_node, node_kafka, audit_database, conveyor_release, node_namespace):
    """The cleanup is held half-way (the test holds the audit schema's advisory lock, which the
    cleanup transaction takes first) while the operator is killed, then let go: without the hold a
    fast cleanup could end, and the Connector go, before the test saw it start."""
    ns = node_namespace
    start_audit_source(kube_node, node_kafka, audit_database, ns, **{"ddl.lock.timeout.ms": "180000"})
    with holding_audit_schema_lock(audit_database):
        kube_node.kubectl("delete", "connector", "audit", "-n", ns, "--wait=false")
        eventually(lambda: (condition(get(kube_node, "connector", "audit", ns), "Deleting") or {}).get("status")
                   == "True", 60, "the Deleting condition")
        assert audit_catalog(audit_database)["triggers"], "the cleanup waits for the lock the test holds"
        restarts = kill_operator(kube_node, conveyor_release)  # mid-delete
    wait_gone(kube_node, ns)
    assert audit_catalog(audit_database) == NOTHING_LEFT
    operator_restarted(kube_node, conveyor_release, restarts)


class PodWatch(threading.Thread):
    """Polls the namespace's pods every 0.3 s and records any moment when a cleanup Job's pod
    was running while a driver or executor pod still existed (terminating or not)."""

    def __init__(self, node, namespace: str) -> None:
        super().__init__(daemon=True)
        self.node, self.namespace = node, namespace
        self.done = threading.Event()
        self.overlaps: list[str] = []
        self.cleanup_pods: set[str] = set()

    def run(self) -> None:
        while not self.done.wait(0.3):
            listed = pods(self.node, self.namespace, "conveyor.dev/connector=audit")
            by_component: dict[str, list[dict]] = {}
            for pod in listed:
                by_component.setdefault(pod["metadata"]["labels"].get("conveyor.dev/component"), []).append(pod)
            started = [p for p in by_component.get("cleanup", []) if p["status"].get("phase") != "Pending"
                       or any(s.get("state", {}).get("running") for s in p["status"].get("containerStatuses") or [])]
            self.cleanup_pods.update(p["metadata"]["name"] for p in by_component.get("cleanup", []))
            others = by_component.get("driver", []) + by_component.get("executor", [])
            if started and others:
                self.overlaps.append(f"{[p['metadata']['name'] for p in started]} beside "
                                     f"{[p['metadata']['name'] for p in others]}")


def test_deleting_an_audit_source_whose_driver_is_gone_runs_a_cleanup_job_after_the_driver_pod_has_terminated(
        kube_node, node_kafka, audit_database, conveyor_release, node_namespace):
    """The node is cordoned and the driver pod deleted (as a node problem would): its successor
    stays Pending, and then ``kubectl delete`` comes. No driver can run the connector-deleted
    path, so a cleanup Job's pod runs ``conveyor cleanup`` -- and never while a driver or
    executor pod of the connector still exists (the Pending successor, executors terminating).
    (A delete while the old driver is still stopping is answered by that driver: it runs the
    connector-deleted path after its plain stop.)"""
    ns = node_namespace
    start_audit_source(kube_node, node_kafka, audit_database, ns)
    (driver,) = pods(kube_node, ns, "conveyor.dev/component=driver")
    watch = PodWatch(kube_node, ns)
    watch.start()
    kube_node.kubectl("cordon", kube_node.node_name)
    try:
        old = driver["metadata"]["name"]
        kube_node.kubectl("delete", "pod", old, "-n", ns, "--wait=false")
        # a driver still stopping would answer the delete and clean up itself: wait until it is gone
        eventually(lambda: all(p["metadata"]["name"] != old and p["status"].get("phase") == "Pending"
                               for p in pods(kube_node, ns, "conveyor.dev/component=driver")), 120,
                   f"{old} gone, its successor Pending on the cordoned node")
        kube_node.kubectl("delete", "connector", "audit", "-n", ns, "--wait=false")
        eventually(lambda: get(kube_node, "job", "audit-cleanup", ns), 180, "the cleanup Job")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
    finally:
        kube_node.kubectl("uncordon", kube_node.node_name)
    try:
        wait_gone(kube_node, ns)
    finally:
        watch.done.set()
        watch.join(30)
    assert watch.cleanup_pods, "no cleanup Job pod ran"
    assert not watch.overlaps, watch.overlaps
    assert audit_catalog(audit_database) == NOTHING_LEFT
    events = kube_node.kubectl("get", "events", "-n", ns, "-o", "jsonpath={.items[*].reason}").stdout.split()
    assert "CleanupJobStarted" in events and "CleanedUp" in events, events


def test_deleting_the_namespace_of_a_running_audit_source_cleans_up_through_its_driver_and_does_not_hang(
        kube_node, node_kafka, audit_database, conveyor_release, node_namespace, tmp_path):
    """``kubectl delete namespace``: Kubernetes deletes the pods first (KEP-5080) and the
    Connector only once they are gone. The driver, told by SIGTERM, sees its namespace
    terminating and runs the connector-deleted stop path itself; the operator, finding no
    driver and unable to create a cleanup Job there, lets the finalizer go. (Before, the
    triggers stayed and the namespace stayed Terminating: every e2e teardown waited 150 s.)"""
    ns = node_namespace
    start_audit_source(kube_node, node_kafka, audit_database, ns)
    driver_log = tmp_path / "driver.log"
    with open(driver_log, "wb") as out:  # the pod and its log go with the namespace
        follower = subprocess.Popen([str(kube_node.binaries.kubectl), "logs", "-f", "-n", ns, "-l",
                                     "conveyor.dev/component=driver", "--tail=-1"], stdout=out,
                                    stderr=subprocess.STDOUT, env={**os.environ, "KUBECONFIG": str(kube_node.admin_kubeconfig)})
    time.sleep(1)
    started = time.monotonic()
    kube_node.kubectl("delete", "namespace", ns, "--wait=false")

    def namespace_gone() -> bool:
        return not kube_node.kubectl("get", "namespace", ns, "--ignore-not-found", "-o", "name").stdout.strip()

    try:
        eventually(namespace_gone, 120, f"namespace {ns} deleted")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}\n{operator_log(kube_node, conveyor_release)}") from None
    took = time.monotonic() - started
    follower.terminate()
    follower.wait(10)
    assert audit_catalog(audit_database) == NOTHING_LEFT, (
        f"{operator_log(kube_node, conveyor_release)}\n--- the driver ---\n{driver_log.read_text()[-6000:]}")
    assert took < 120, took


def operator_log(node, operator_namespace: str) -> str:
    pod = operator_pod(node, operator_namespace)
    lines = node.kubectl("logs", "-n", operator_namespace, pod["metadata"]["name"], "--tail", "400").stdout.splitlines()
    return "\n".join([line for line in lines if "/healthz" not in line][-40:])
