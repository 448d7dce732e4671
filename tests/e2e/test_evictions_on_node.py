"""Evictions on a real node become closing-aware commits: an executor pod or the driver pod
evicted through the Eviction API mid-stream (the kubelet runs the pod's preStop drain, then
SIGTERM) loses no record and writes none twice.

The sink is postgres-sink in plain insert mode with no primary key, so a record read twice
shows up as a second row and a record lost as a missing id."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from _connectors import apply, connector, create_topic, diagnostics, eventually, get, pods

from conveyor.testing.runs import produce

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TOTAL = 12_000
BATCH = 300


class SteadyProducer(threading.Thread):
    """``TOTAL`` records with ids 0..TOTAL-1, ``BATCH`` every 0.2 s (about 15 s in all)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while self.sent < TOTAL:
                batch = range(self.sent, min(self.sent + BATCH, TOTAL))
                produce(self.bootstrap, self.topic, [(str(i), json.dumps({"id": i})) for i in batch])
                self.sent = batch[-1] + 1
                time.sleep(0.2)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def rows(url: str, table: str) -> tuple[int, int]:
    """(rows, distinct ids) of ``table``."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(f'SELECT count(*), count(DISTINCT id) FROM "{table}"').fetchone()
    except psycopg.errors.UndefinedTable:
        return (0, 0)


def evict(node, namespace: str, pod: str) -> None:
    from kubernetes import client

    with node.api_client() as api:
        client.CoreV1Api(api).create_namespaced_pod_eviction(
            pod, namespace, client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=namespace)))


def start_sink(node, kafka, postgres, namespace: str, executors: int) -> tuple[str, SteadyProducer]:
    table = f"events_{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, table, partitions=4)
    body = connector("events", namespace, "postgres-sink", kafka.bootstrap_servers, {
        "topics": table, "connection.url": postgres.url,
        "insert.mode": "insert", "pk.mode": "none", "auto.create": "true",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "60000",  # no periodic commit in the test's window: only closing ones
    }, tasksMax=2, shutdown={"gracePeriodSeconds": 30})
    body["spec"]["spark"] = {**body["spec"]["spark"],
                             "executor": {"instances": executors, "cores": 1, "memory": "512m"}}
    apply(node, body)
    producer = SteadyProducer(kafka.bootstrap_servers, table)

    def tasks_running():
        status = (get(node, "connector", "events", namespace) or {}).get("status") or {}
        tasks = status.get("tasks") or []
        return len(tasks) == 2 and all(t["state"] == "RUNNING" and t.get("pod") for t in tasks) and tasks

    try:
        eventually(tasks_running, 300, "two RUNNING tasks")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(node, namespace)}") from None
    producer.start()
    eventually(lambda: rows(postgres.url, table)[0] > 1000, 120, "rows flowing")
    return table, producer


def finish(node, postgres, namespace: str, table: str, producer: SteadyProducer) -> None:
    producer.join(120)
    assert producer.error is None and producer.sent == TOTAL, producer.error
    try:
        eventually(lambda: rows(postgres.url, table)[0] >= TOTAL, 300, f"{TOTAL} rows")
        time.sleep(5)  # rows written twice would arrive a little after the last new one
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(node, namespace)}") from None
    count, distinct = rows(postgres.url, table)
    assert (count, distinct) == (TOTAL, TOTAL), f"{count - distinct} written twice, {TOTAL - distinct} lost"


def test_an_evicted_executor_commits_before_it_goes_and_its_task_resumes_elsewhere(
        kube_node, node_kafka, node_postgres, conveyor_release, node_namespace):
    ns = node_namespace
    table, producer = start_sink(kube_node, node_kafka, node_postgres, ns, executors=3)  # one spare slot
    status = get(kube_node, "connector", "events", ns)["status"]
    victim_task = status["tasks"][0]
    victim = victim_task["pod"]
    evict(kube_node, ns, victim)

    def recorded():
        entries = ((get(kube_node, "connector", "events", ns) or {}).get("status") or {}).get("evictions") or []
        return next((e for e in entries if e["pod"] == victim), None)

    entry = eventually(recorded, 120, f"the eviction of {victim} in status.evictions")
    assert entry["trigger"] == "DisruptionTarget" and entry["complete"] is True, entry
    assert victim_task["id"] in entry["tasks"] and entry["committed"], entry

    def resumed():
        tasks = ((get(kube_node, "connector", "events", ns) or {}).get("status") or {}).get("tasks") or []
        task = next((t for t in tasks if t["id"] == victim_task["id"]), None)
        return task if task and task["state"] == "RUNNING" and task.get("pod") not in (None, victim) else None

    moved = eventually(resumed, 180, f"task {victim_task['id']} RUNNING on another executor than {victim}")
    assert moved["pod"].startswith("events-exec-")
    finish(kube_node, node_postgres, ns, table, producer)


def test_an_evicted_driver_commits_every_task_and_its_successor_resumes(
        kube_node, node_kafka, node_postgres, conveyor_release, node_namespace):
    ns = node_namespace
    table, producer = start_sink(kube_node, node_kafka, node_postgres, ns, executors=2)
    (driver,) = pods(kube_node, ns, "conveyor.dev/component=driver")
    old = driver["metadata"]["name"]
    evict(kube_node, ns, old)

    def successor_running():
        status = (get(kube_node, "connector", "events", ns) or {}).get("status") or {}
        drivers = [p for p in pods(kube_node, ns, "conveyor.dev/component=driver") if p["metadata"]["name"] != old]
        tasks = status.get("tasks") or []
        running = len(tasks) == 2 and all(t["state"] == "RUNNING" for t in tasks)
        worker = (status.get("connector") or {}).get("workerId") or ""  # Kafka Connect's host:port
        return drivers and running and worker.rpartition(":")[0] == drivers[0]["metadata"]["name"]

    try:
        eventually(successor_running, 300, "a new driver pod with two RUNNING tasks")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
    finish(kube_node, node_postgres, ns, table, producer)


def test_a_node_drain_takes_one_connector_pod_at_a_time_and_loses_nothing(
        kube_node, node_kafka, node_postgres, conveyor_release, node_namespace):
    """``kubectl drain`` of the (only) node with the rendered PodDisruptionBudget: one pod of
    the connector goes (after its closing commits), the budget refuses the others, the drain
    times out; after ``uncordon`` everything runs again: 0 lost, 0 written twice."""
    ns = node_namespace
    table, producer = start_sink(kube_node, node_kafka, node_postgres, ns, executors=3)
    pdb = get(kube_node, "poddisruptionbudget", "events-pods", ns)
    assert pdb["spec"]["minAvailable"] == 3, pdb["spec"]  # a driver + three executors: one may go
    eventually(lambda: (get(kube_node, "poddisruptionbudget", "events-pods", ns)["status"]
                        .get("disruptionsAllowed") == 1), 60, "the budget allowing one disruption")
    try:
        drained = kube_node.kubectl("drain", kube_node.node_name, "--pod-selector", "conveyor.dev/connector=events",
                                    "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=45s",
                                    check=False, timeout=120)
    finally:
        kube_node.kubectl("uncordon", kube_node.node_name)
    output = drained.stdout + drained.stderr
    assert drained.returncode != 0, output  # the budget held the other pods until the timeout
    assert "violate the pod's disruption budget" in output, output
    assert "evicted" in output, output  # one went (when it is the driver, Spark removes its executors)
    finish(kube_node, node_postgres, ns, table, producer)
