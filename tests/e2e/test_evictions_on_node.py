"""Evictions on a real node become closing-aware commits: an executor pod or the driver pod
evicted through the Eviction API mid-stream (the kubelet runs the pod's preStop drain, then
SIGTERM), and ``kubectl drain`` of the node under the rendered PodDisruptionBudget, lose no
record and write none twice. The driver's eviction happens while the operator is down (killed
just before): the pod's own preStop drain does the closing commits, and the restarted operator
reports the successor.

The executor eviction and the drain use the archive sink with a ``flush.size`` no partition
reaches (KIP-275's case): only closing commits (eviction, drain, rebalance, stop) write files,
so every offset a closing commit committed must be in a file. The driver eviction uses postgres-sink in plain
insert mode with no primary key, so a record read twice shows up as a second row and a record
lost as a missing id."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import uuid

import pytest
from _connectors import (
    apply,
    connector,
    create_topic,
    diagnostics,
    eventually,
    evict,
    get,
    kill_operator,
    operator_restarted,
    pods,
    stopped,
)

from conveyor.testing.runs import produce

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TOTAL = 12_000
BATCH = 300


class SteadyProducer(threading.Thread):
    """``TOTAL`` records with ids 0..TOTAL-1, ``BATCH`` every ``interval_s`` (0.2 s: about 15 s in all)."""

    def __init__(self, bootstrap: str, topic: str, interval_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.interval_s = bootstrap, topic, interval_s
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while self.sent < TOTAL:
                batch = range(self.sent, min(self.sent + BATCH, TOTAL))
                produce(self.bootstrap, self.topic, [(str(i), json.dumps({"id": i})) for i in batch])
                self.sent = batch[-1] + 1
                time.sleep(self.interval_s)
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


def test_an_evicted_driver_commits_every_task_and_its_successor_resumes_with_the_operator_killed_meanwhile(
        kube_node, node_kafka, node_postgres, conveyor_release, node_namespace):
    ns = node_namespace
    table, producer = start_sink(kube_node, node_kafka, node_postgres, ns, executors=2)
    (driver,) = pods(kube_node, ns, "conveyor.dev/component=driver")
    old = driver["metadata"]["name"]
    restarts = kill_operator(kube_node, conveyor_release)  # mid-eviction: the pod's preStop drain needs no operator
    evict(kube_node, ns, old)
    operator_restarted(kube_node, conveyor_release, restarts)

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


# --- the archive sink: an executor eviction, then a node drain ------------------------------------

ARCHIVE_MOUNT = "/archive"


ARCHIVE_CLAIM = "archive"


@pytest.fixture
def archive_dir(kube_node, node_namespace):
    """A host directory the driver and executor pods mount as ``/archive``, through the
    PersistentVolumeClaim ``archive`` of a ``hostPath`` PersistentVolume (Pod Security
    "restricted" refuses ``hostPath`` volumes in pods, and Conveyor refuses them in Spark's
    properties); world-writable, the pods' UID is the image's or the platform's."""
    path = f"/tmp/conveyor-e2e-archive-{uuid.uuid4().hex[:8]}"
    os.makedirs(path)
    os.chmod(path, 0o777)
    volume = kube_node.host_directory_claim(node_namespace, ARCHIVE_CLAIM, path)
    yield path
    kube_node.delete_host_directory_claim(volume)
    shutil.rmtree(path, ignore_errors=True)


def archive_volume(claim: str = ARCHIVE_CLAIM) -> dict[str, str]:
    """Spark's volume properties mounting the PersistentVolumeClaim ``claim`` at ``/archive`` in
    the driver and executors."""
    conf = {}
    for role in ("driver", "executor"):
        prefix = f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.archive"
        conf |= {f"{prefix}.mount.path": ARCHIVE_MOUNT, f"{prefix}.options.claimName": claim}
    return conf


def archived(root: str, topic: str, field: str = "id") -> dict[int, list[int]]:
    """``{partition: [record ids (or, field="offset", offsets)]}`` of every file the sink has written."""
    out: dict[int, list[int]] = {}
    base = os.path.join(root, "topics", topic)  # the archive sink's default topics.dir
    for directory in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        partition = int(directory.removeprefix("partition="))
        for name in sorted(n for n in os.listdir(os.path.join(base, directory)) if n.endswith(".jsonl")):
            with open(os.path.join(base, directory, name)) as f:
                lines = [json.loads(line) for line in f]
                out.setdefault(partition, []).extend(x["offset"] if field == "offset" else x["value"]["id"] for x in lines)
    return out


def tasks_of(node, namespace: str, name: str) -> list[dict]:
    return ((get(node, "connector", name, namespace) or {}).get("status") or {}).get("tasks") or []


def test_an_evicted_executor_and_a_node_drain_commit_what_they_consumed_before_the_pods_go(
        kube_node, node_kafka, conveyor_release, node_namespace, archive_dir):
    ns = node_namespace
    topic = f"archive_{uuid.uuid4().hex[:8]}"
    create_topic(node_kafka.bootstrap_servers, topic, partitions=4)
    body = connector("archive", ns, "archive-sink", node_kafka.bootstrap_servers, {
        "topics": topic, "archive.url": f"file://{ARCHIVE_MOUNT}", "format": "jsonl",
        "flush.size": "1000000",  # never reached: files come from closing commits only
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "60000",
    }, tasksMax=2, shutdown={"gracePeriodSeconds": 30})
    body["spec"]["spark"] = {**body["spec"]["spark"],
                             "executor": {"instances": 3, "cores": 1, "memory": "512m"},  # one spare slot
                             "sparkConf": {**body["spec"]["spark"]["sparkConf"], **archive_volume()}}
    apply(kube_node, body)
    try:
        eventually(lambda: (t := tasks_of(kube_node, ns, "archive")) and len(t) == 2
                   and all(x["state"] == "RUNNING" and x.get("pod") for x in t), 300, "two RUNNING tasks")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
    producer = SteadyProducer(node_kafka.bootstrap_servers, topic, interval_s=0.6)  # about 30 s
    producer.start()
    eventually(lambda: producer.sent >= TOTAL // 3, 60, "a third of the records produced")
    time.sleep(2)

    # 1. the Eviction API on the executor pod of task 0, mid-stream
    victim_task = tasks_of(kube_node, ns, "archive")[0]
    victim = victim_task["pod"]
    evict(kube_node, ns, victim)

    def recorded():
        entries = ((get(kube_node, "connector", "archive", ns) or {}).get("status") or {}).get("evictions") or []
        return next((e for e in entries if e["pod"] == victim), None)

    entry = eventually(recorded, 120, f"the eviction of {victim} in status.evictions")
    assert entry["trigger"] == "DisruptionTarget" and entry["complete"] is True, entry
    assert victim_task["id"] in entry["tasks"] and entry["committed"], entry
    written = archived(archive_dir, topic, field="offset")
    for committed in entry["committed"]:  # what the closing commit committed is in files (flush.size never is)
        assert committed["offset"] > 0, entry
        missing = set(range(committed["offset"])) - set(written.get(committed["partition"], []))
        assert not missing, f"partition {committed['partition']}: committed up to {committed['offset']}, " \
                            f"{len(missing)} of those offsets in no file"

    def resumed():
        task = next((t for t in tasks_of(kube_node, ns, "archive") if t["id"] == victim_task["id"]), None)
        return task if task and task["state"] == "RUNNING" and task.get("pod") not in (None, victim) else None

    moved = eventually(resumed, 180, f"task {victim_task['id']} RUNNING on another executor than {victim}")
    assert re.fullmatch(r"archive-exec-\d+", moved["pod"]), moved  # Spark's <prefix>-exec-<id>, prefix the name

    # 2. kubectl drain under the budget: one pod goes (after its closing commits), the others wait
    pdb = get(kube_node, "poddisruptionbudget", "archive-pods", ns)
    assert pdb["spec"]["minAvailable"] == 3, pdb["spec"]  # a driver + three executors: one may go
    eventually(lambda: (get(kube_node, "poddisruptionbudget", "archive-pods", ns)["status"]
                        .get("disruptionsAllowed") == 1), 180, "the budget allowing one disruption again")
    try:
        drained = kube_node.kubectl("drain", kube_node.node_name, "--pod-selector", "conveyor.dev/connector=archive",
                                    "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s",
                                    check=False, timeout=120)
    finally:
        kube_node.kubectl("uncordon", kube_node.node_name)
    output = drained.stdout + drained.stderr
    assert "evicted" in output, output  # one pod went
    if drained.returncode == 0:
        # only when the driver went first: its stop commits every task, then Spark deletes the
        # executor pods it owns, so nothing is left to drain
        assert re.search(r"pod/archive-driver-\S+ evicted", output), output
    else:
        assert "violate the pod's disruption budget" in output, output  # the budget held the others

    # 3. everything consumed, then stopped: the stop's closing commits write the rest
    producer.join(120)
    assert producer.error is None and producer.sent == TOTAL, producer.error
    try:
        eventually(lambda: (t := tasks_of(kube_node, ns, "archive")) and len(t) == 2
                   and all(x["state"] == "RUNNING" and x.get("lag") == 0 for x in t), 300,
                   "both tasks RUNNING with lag 0")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
    kube_node.kubectl("patch", "connector", "archive", "-n", ns, "--type=merge", "-p", '{"spec":{"state":"stopped"}}')
    eventually(lambda: stopped(kube_node, ns, "archive"), 120, "the connector STOPPED")
    ids = sorted(i for partition in archived(archive_dir, topic).values() for i in partition)
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} records written twice"
    assert ids == list(range(TOTAL)), f"{TOTAL - len(set(ids))} records lost"
