"""Conveyor on a real single-node Kubernetes (conveyor.testing.node), measured side by side.

Starts the node, Kafka and PostgreSQL on the node IP, builds and imports both images, ``helm
install``s the chart, then runs ``--rounds`` interleaved rounds of:

* **start-up**: a ``postgres-sink`` Connector (tasksMax 2, driver and executors requesting 250m) applied
  over a topic holding 5,000 records: apply -> driver pod Ready -> every executor pod Running ->
  the first row in PostgreSQL, in seconds (target: first row < 30 s with images cached). The
  sink writes a transaction once ``batch.size`` (3,000) records are buffered, or at a commit
  (``offset.flush.interval.ms``, 60 s): with fewer records than that the figure would be the
  flush interval, not the start-up;
* **throughput**: ``--records`` records (about 200 bytes, 6 partitions) through ``noop-sink``
  (bytes converters, so the figure is the runtime's own overhead) wrapped in
  ``conveyor.testing.timing:TimedSinkConnector``, 1 and 2 tasks on executor pods (timings written
  to a host directory), and the same connector in a local-mode driver in this process, as
  ``benchmarks/sink_throughput.py`` runs it, against the same broker. Both start paused and run
  once every task holds its settled share of the partitions; records/s from the first ``put`` to
  the end of the last, so Spark's start-up and the group joins are left out of both alike
  (targets: node >= 0.8x local at equal tasks; 2 tasks >= 1.6x 1 task);
* **drain latency**: ``POST /drain?task=<id>`` on a running 2-task sink, ``--drains`` times
  alternating tasks: request -> answer, which comes once the task's closing commit is done
  (target p99 < 2 s).

Medians over rounds are printed with every round's figures. The machine is 2 shared cores:
Kafka, PostgreSQL, the control plane, the driver and executors all share them.

Run as root: ``python benchmarks/real_node.py [--rounds 3] [--records 2000000] [--drains 20]
[--converters bytes|json]``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka.admin import AdminClient, NewTopic
from sink_throughput import PARTITIONS, run_connector, wait_for_settled_assignment
from sink_throughput import make_topic as make_throughput_topic

from conveyor.testing.images import build_images
from conveyor.testing.kafka import KafkaBroker
from conveyor.testing.node import KubeNode
from conveyor.testing.postgres import PostgresServer
from conveyor.testing.runs import control_request, produce, wait_until
from conveyor.testing.spark import local_spark_session
from conveyor.testing.timing import read_timings

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"
STARTUP_RECORDS = 5000
TIMINGS_MOUNT = "/timings"
TIMINGS_CLAIM = "timings"
TIMED_SINK = "conveyor.testing.timing:TimedSinkConnector"
BYTES = {"key.converter": "bytes", "value.converter": "bytes"}
#: ``--converters``: bytes (the runtime's own overhead; a fetch-bound figure on 2 cores shared
#: with the broker) or json (JSON values decoded per record: CPU-bound work per task).
CONVERTERS = {"bytes": BYTES,
              "json": {"key.converter": "string", "value.converter": "json", "value.converter.schemas.enable": "false"}}
SMALL_SPARK = {"driver": {"cores": 1, "memory": "512m"},
               "executor": {"instances": 1, "cores": 1, "memory": "512m"},
               "sparkConf": {"spark.kubernetes.executor.request.cores": "250m",
                             "spark.kubernetes.driver.request.cores": "250m"}}


def kubectl_json(node: KubeNode, *args: str) -> dict[str, Any]:
    return json.loads(node.kubectl(*args, "-o", "json").stdout)


def make_topic(bootstrap: str, records: int, value: bytes) -> str:
    topic = f"bench_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    for start in range(0, records, 50_000):
        produce(bootstrap, topic, [(str(i).encode(), value.replace(b"ID", str(i).encode()))
                                   for i in range(start, min(start + 50_000, records))])
    return topic


def connector(name: str, cls: str, bootstrap: str, config: dict[str, Any], tasks: int) -> dict[str, Any]:
    return {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"class": cls, "tasksMax": tasks, "kafka": {"bootstrapServers": bootstrap},
                     "config": config, "spark": SMALL_SPARK,
                     "deletionPolicy": {"cleanup": False, "offsets": "retain"}}}


def delete(node: KubeNode, name: str) -> None:
    node.kubectl("delete", "connector", name, "-n", NAMESPACE, "--wait=true", "--timeout=120s", check=False,
                 timeout=150)
    wait_until(lambda: not kubectl_json(node, "get", "pods", "-n", NAMESPACE, "-l",
                                  f"conveyor.dev/connector={name}")["items"], 120, "pods gone")


def startup(node: KubeNode, bootstrap: str, pg_url: str) -> dict[str, float]:
    topic = make_topic(bootstrap, STARTUP_RECORDS, b'{"id": ID}')
    name = f"start-{uuid.uuid4().hex[:6]}"
    body = connector(name, "postgres-sink", bootstrap, {
        "topics": topic, "connection.url": pg_url, "auto.create": "true",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false"}, tasks=2)
    t0 = time.monotonic()
    node.kubectl("apply", "-f", "-", input=json.dumps(body))
    marks: dict[str, float] = {}

    def driver_ready() -> bool:
        for pod in kubectl_json(node, "get", "pods", "-n", NAMESPACE, "-l",
                                f"conveyor.dev/connector={name},conveyor.dev/component=driver")["items"]:
            if any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", [])):
                return True
        return False

    def executors_running() -> bool:
        items = kubectl_json(node, "get", "pods", "-n", NAMESPACE, "-l",
                             f"conveyor.dev/connector={name},conveyor.dev/component=executor")["items"]
        return len(items) >= 2 and all(p["status"].get("phase") == "Running" for p in items)

    def first_row() -> bool:
        try:
            with psycopg.connect(pg_url, autocommit=True, connect_timeout=5) as conn:
                return conn.execute(f'SELECT count(*) FROM "{topic}"').fetchone()[0] > 0
        except psycopg.errors.UndefinedTable:
            return False

    pending = {"driver Ready": driver_ready, "executors Running": executors_running, "first row": first_row}
    deadline = time.monotonic() + 300
    while pending and time.monotonic() < deadline:
        for label, probe in list(pending.items()):
            if probe():
                marks[label] = time.monotonic() - t0
                del pending[label]
        time.sleep(0.25)
    delete(node, name)
    if pending:
        raise TimeoutError(f"start-up: no {', '.join(pending)} within 300s")
    return marks


def timings_volume() -> dict[str, str]:
    """Spark's volume properties mounting the claim :data:`TIMINGS_CLAIM` (the host directory of
    the timings, ``KubeNode.host_directory_claim``: Conveyor refuses ``hostPath`` volumes) at
    ``/timings`` in the executors."""
    prefix = "spark.kubernetes.executor.volumes.persistentVolumeClaim.timings"
    return {f"{prefix}.mount.path": TIMINGS_MOUNT, f"{prefix}.options.claimName": TIMINGS_CLAIM}


def put_rate(timings: list[dict[str, Any]], records: int) -> float:
    """Records/s from the first ``put`` of any task to the end of the last one."""
    timings = [t for t in timings if t["records"]]
    assert sum(t["records"] for t in timings) == records, timings
    return records / (max(t["last_put_end"] for t in timings) - min(t["first_put"] for t in timings))


def admin_token(node: KubeNode, name: str) -> str:
    """The connector's control API admin token, from the ``<name>-control`` Secret the operator made."""
    secret = wait_until(lambda: node.kubectl("get", "secret", f"{name}-control", "-n", NAMESPACE, "-o",
                                             "jsonpath={.data.admin-token}", check=False).stdout, 120,
                        "the connector's control Secret")
    return base64.b64decode(secret).decode()


def driver_status(ip: str, token: str) -> dict[str, Any]:
    """The driver's ``GET /status`` over the pod network; ``{}`` while it does not answer."""
    try:
        code, body = control_request(f"http://{ip}:8083", "/status", token=token, timeout_s=5)
    except OSError:
        return {}
    return body if code == 200 else {}


def driver_ip(node: KubeNode, name: str) -> str | None:
    pods = kubectl_json(node, "get", "pods", "-n", NAMESPACE, "-l",
                        f"conveyor.dev/connector={name},conveyor.dev/component=driver")["items"]
    return pods[0]["status"].get("podIP") if pods else None


def set_state(node: KubeNode, name: str, state: str) -> None:
    node.kubectl("patch", "connector", name, "-n", NAMESPACE, "--type=merge",
                 "-p", json.dumps({"spec": {"state": state}}))


def throughput_on_node(node: KubeNode, bootstrap: str, topic: str, records: int, tasks: int,
                       timings_dir: str, converters: dict[str, str]) -> float:
    """noop-sink wrapped in TimedSinkConnector on ``tasks`` executor pods: it starts paused,
    runs once every task holds its settled share of the partitions, and is stopped (each task
    then writes its timings to the host directory) once every record was put."""
    name = f"tp-{uuid.uuid4().hex[:6]}"
    config = {"topics": topic, "offset.flush.interval.ms": "1000", "timed.connector.class": "noop-sink",
              "timed.path": f"{TIMINGS_MOUNT}/{name}.jsonl", **converters}
    body = connector(name, TIMED_SINK, bootstrap, config, tasks)
    body["spec"]["state"] = "paused"
    body["spec"]["spark"] = {**SMALL_SPARK, "executor": {"instances": tasks, "cores": 1, "memory": "512m"},
                             "sparkConf": {**SMALL_SPARK["sparkConf"], **timings_volume()}}
    node.kubectl("apply", "-f", "-", input=json.dumps(body))
    try:
        ip = wait_until(lambda: driver_ip(node, name), 300, "the driver pod's IP")
        token = admin_token(node, name)
        wait_for_settled_assignment(lambda: driver_status(ip, token).get("tasks") or [], tasks, timeout_s=300)
        set_state(node, name, "running")
        wait_until(lambda: sum(t.get("records_put", 0) for t in driver_status(ip, token).get("tasks") or []) >= records,
                   600, f"{records} records put", interval_s=0.5)
        set_state(node, name, "stopped")
        path = Path(timings_dir) / f"{name}.jsonl"
        wait_until(lambda: path.exists() and len(read_timings(str(path))) >= tasks, 120, "every task's timings")
        return put_rate(read_timings(str(path)), records)
    finally:
        delete(node, name)


def throughput_local(spark: Any, bootstrap: str, topic: str, records: int, tasks: int,
                     converters: dict[str, str]) -> float:
    """The same connector in this process's driver with Spark in local mode (as ``conveyor run``)."""
    return run_connector(bootstrap, topic, records, "noop-sink", tasks, converters, spark, durable=False)


def drain_latencies(node: KubeNode, bootstrap: str, count: int) -> list[float]:
    topic = make_topic(bootstrap, 10_000, b"ID")
    name = f"drain-{uuid.uuid4().hex[:6]}"
    body = connector(name, "noop-sink", bootstrap, {"topics": topic, "offset.flush.interval.ms": "1000", **BYTES},
                     tasks=2)
    node.kubectl("apply", "-f", "-", input=json.dumps(body))
    try:
        def running_driver_ip() -> str | None:
            status = kubectl_json(node, "get", "connector", name, "-n", NAMESPACE).get("status") or {}
            tasks = status.get("tasks") or []
            if len(tasks) != 2 or any(t["state"] != "RUNNING" for t in tasks):
                return None
            pods = kubectl_json(node, "get", "pods", "-n", NAMESPACE, "-l",
                                f"conveyor.dev/connector={name},conveyor.dev/component=driver")["items"]
            return pods[0]["status"].get("podIP") if pods else None

        ip = wait_until(running_driver_ip, 300, "a running 2-task connector")
        token = admin_token(node, name)
        out = []
        for i in range(count):
            t0 = time.monotonic()
            code, result = control_request(f"http://{ip}:8083", f"/drain?task={i % 2}&timeout_s=30", "POST",
                                           token=token, timeout_s=60)
            out.append(time.monotonic() - t0)
            assert result.get("complete"), result
            wait_until(running_driver_ip, 120, "both tasks RUNNING again")
        return out
    finally:
        delete(node, name)


def node_stack(stack: ExitStack) -> tuple[KubeNode, KafkaBroker, PostgresServer]:
    """The node, Kafka and PostgreSQL on its IP, both images built and imported, the chart
    installed (status read every 2 s) and the namespace :data:`NAMESPACE`, all stopped with
    ``stack``. Prints how long it took."""
    t0 = time.monotonic()
    node = stack.enter_context(KubeNode())
    print(f"node Ready in {node.ready_seconds:.1f}s")
    kafka = stack.enter_context(KafkaBroker(host=node.node_ip, sasl_plain=False, heap="512m"))
    pg = stack.enter_context(PostgresServer(host=node.node_ip, client_cidrs=[node.network.pod_cidr]))
    images = build_images()
    for image in images.values():
        node.import_image(image.archive, image.ref)
    operator, runtime = images["operator"], images["runtime"]
    node.restricted_namespace("conveyor-system")  # Pod Security "restricted", as in the e2e tier
    node.helm("install", "conveyor", str(ROOT / "charts" / "conveyor"), "-n", "conveyor-system",
              "--create-namespace", "--set", f"image.repository={operator.repository}",
              "--set", f"image.tag={operator.tag}", "--set", "image.pullPolicy=Never",
              "--set", f"runtimeImage.repository={runtime.repository}",
              "--set", f"runtimeImage.tag={runtime.tag}", "--set", "statusIntervalSeconds=2",
              "--wait", "--timeout=180s", timeout=240)
    node.restricted_namespace(NAMESPACE)
    print(f"set-up (node, Kafka, PostgreSQL, images, helm install) in {time.monotonic() - t0:.0f}s; "
          f"images: {', '.join(f'{i.ref} {i.size_bytes / 1e6:.0f} MB' for i in images.values())}")
    return node, kafka, pg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--drains", type=int, default=20)
    parser.add_argument("--converters", choices=sorted(CONVERTERS), default="bytes")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the node needs bridges, iptables and mounts")

    with ExitStack() as stack:
        node, kafka, pg = node_stack(stack)
        topic = make_throughput_topic(kafka.bootstrap_servers, args.records)
        spark = local_spark_session(cores=4)
        stack.callback(spark.stop)
        timings_dir = tempfile.mkdtemp(prefix="conveyor-bench-timings-")
        os.chmod(timings_dir, 0o777)  # the executors run as the image's uid (10001)
        stack.callback(shutil.rmtree, timings_dir, True)
        stack.callback(node.delete_host_directory_claim, node.host_directory_claim(NAMESPACE, TIMINGS_CLAIM,
                                                                                   timings_dir))

        rounds: list[dict[str, float]] = []
        for r in range(args.rounds):
            figures: dict[str, float] = {}
            for label, seconds in startup(node, kafka.bootstrap_servers, pg.url).items():
                figures[f"start-up: {label} (s)"] = seconds
            for tasks in (1, 2):
                figures[f"node, {tasks} task(s) (rec/s)"] = throughput_on_node(
                    node, kafka.bootstrap_servers, topic, args.records, tasks, timings_dir, CONVERTERS[args.converters])
                figures[f"local, {tasks} task(s) (rec/s)"] = throughput_local(
                    spark, kafka.bootstrap_servers, topic, args.records, tasks, CONVERTERS[args.converters])
            for tasks in (1, 2):
                figures[f"ratio node/local, {tasks} task(s)"] = \
                    figures[f"node, {tasks} task(s) (rec/s)"] / figures[f"local, {tasks} task(s) (rec/s)"]
            for where in ("node", "local"):  # local's shows what the machine itself allows
                figures[f"ratio {where} 2 tasks / 1 task"] = \
                    figures[f"{where}, 2 task(s) (rec/s)"] / figures[f"{where}, 1 task(s) (rec/s)"]
            rounds.append(figures)
            print(f"round {r + 1}: " + "; ".join(f"{k} {v:,.2f}" for k, v in figures.items()), flush=True)

        drains = sorted(drain_latencies(node, kafka.bootstrap_servers, args.drains))
        print("\nmedians over rounds:")
        for key in rounds[0]:
            print(f"  {key:40s} {statistics.median(r[key] for r in rounds):>12,.2f}")
        p99 = drains[min(len(drains) - 1, round(0.99 * (len(drains) - 1)))]
        print(f"  {'drain -> closing commit p50 (s)':40s} {statistics.median(drains):>12,.3f}")
        print(f"  {'drain -> closing commit p99 (s)':40s} {p99:>12,.3f}   (n={len(drains)})")


if __name__ == "__main__":
    main()
