"""Conveyor on a real single-node Kubernetes (conveyor.testing.node), measured side by side.

Starts the node, Kafka and PostgreSQL on the node IP, builds and imports both images, ``helm
install``s the chart, then runs ``--rounds`` interleaved rounds of:

* **start-up**: a ``postgres-sink`` Connector (tasksMax 2, driver and executors requesting 250m) applied
  over a topic holding 1,000 records: apply -> driver pod Ready -> every executor pod Running ->
  the first row in PostgreSQL, in seconds (target: first row < 30 s with images cached);
* **throughput**: ``--records`` records (about 200 bytes, 4 partitions) through ``noop-sink``
  (bytes converters, so the figure is the runtime's own overhead), 1 and 2 tasks on executor
  pods, and the same connector with ``conveyor run`` in local mode on this machine, against the
  same broker. Records/s from the first committed offset to the last (the consumer group's
  committed offsets, polled every 0.25 s; offsets committed every second), so Spark's start-up is
  left out of both alike (targets: node >= 0.8x local at equal tasks; 2 tasks >= 1.6x 1 task);
* **drain latency**: ``POST /drain?task=<id>`` on a running 2-task sink, ``--drains`` times
  alternating tasks: request -> answer, which comes once the task's closing commit is done
  (target p99 < 2 s).

Medians over rounds are printed with every round's figures. The machine is 2 shared cores:
Kafka, PostgreSQL, the control plane, the driver and executors all share them.

Run as root: ``python benchmarks/real_node.py [--rounds 3] [--records 300000] [--drains 20]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka.admin import AdminClient, NewTopic

from conveyor.testing.images import build_images
from conveyor.testing.kafka import KafkaBroker
from conveyor.testing.node import KubeNode
from conveyor.testing.postgres import PostgresServer
from conveyor.testing.runs import committed_offsets, produce, wait_until

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"
PARTITIONS = 4
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
    topic = make_topic(bootstrap, 1000, b'{"id": ID}')
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


def rate_from_commits(bootstrap: str, group: str, topic: str, records: int, timeout_s: float = 600) -> float:
    first: tuple[float, int] | None = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = sum(committed_offsets(bootstrap, group, topic, PARTITIONS).values())
        now = time.monotonic()
        if done > 0 and first is None:
            first = (now, done)
            if done >= records:  # everything read before the first commit: nothing to time
                raise ValueError(f"group {group} committed all {records} records in its first commit: "
                                 "too few records to measure a rate (raise --records)")
        if done >= records and first is not None:
            return (records - first[1]) / max(now - first[0], 1e-3)
        time.sleep(0.25)
    raise TimeoutError(f"group {group} did not commit {records} records within {timeout_s:.0f}s")


def noop_config(topic: str) -> dict[str, str]:
    return {"topics": topic, "offset.flush.interval.ms": "1000",
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"}


def throughput_on_node(node: KubeNode, bootstrap: str, topic: str, records: int, tasks: int) -> float:
    name = f"tp-{uuid.uuid4().hex[:6]}"
    body = connector(name, "noop-sink", bootstrap, noop_config(topic), tasks)
    body["spec"]["spark"] = {**SMALL_SPARK, "executor": {"instances": tasks, "cores": 1, "memory": "512m"}}
    node.kubectl("apply", "-f", "-", input=json.dumps(body))
    try:
        return rate_from_commits(bootstrap, f"connect-{name}", topic, records)
    finally:
        delete(node, name)


def throughput_local(bootstrap: str, topic: str, records: int, tasks: int) -> float:
    name = f"tp-local-{uuid.uuid4().hex[:6]}"
    manifest = {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name},
                "spec": {"class": "noop-sink", "tasksMax": tasks, "kafka": {"bootstrapServers": bootstrap},
                         "config": noop_config(topic)}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "connector.json"
        path.write_text(json.dumps(manifest))
        proc = subprocess.Popen([sys.executable, "-m", "conveyor.cli", "run", str(path), "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            return rate_from_commits(bootstrap, f"connect-{name}", topic, records)
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


def drain_latencies(node: KubeNode, bootstrap: str, count: int) -> list[float]:
    topic = make_topic(bootstrap, 10_000, b"ID")
    name = f"drain-{uuid.uuid4().hex[:6]}"
    body = connector(name, "noop-sink", bootstrap, noop_config(topic), tasks=2)
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
        out = []
        for i in range(count):
            request = urllib.request.Request(f"http://{ip}:8083/drain?task={i % 2}&timeout_s=30", method="POST",
                                             data=b"")
            t0 = time.monotonic()
            with urllib.request.urlopen(request, timeout=60) as resp:
                result = json.loads(resp.read())
            out.append(time.monotonic() - t0)
            assert result.get("complete"), result
            wait_until(running_driver_ip, 120, "both tasks RUNNING again")
        return out
    finally:
        delete(node, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--drains", type=int, default=20)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the node needs bridges, iptables and mounts")

    with ExitStack() as stack:
        t0 = time.monotonic()
        node = stack.enter_context(KubeNode())
        print(f"node Ready in {node.ready_seconds:.1f}s")
        kafka = stack.enter_context(KafkaBroker(host=node.node_ip, sasl_plain=False, heap="512m"))
        pg = stack.enter_context(PostgresServer(host=node.node_ip, client_cidrs=[node.network.pod_cidr]))
        images = build_images()
        for image in images.values():
            node.import_image(image.archive, image.ref)
        operator, runtime = images["operator"], images["runtime"]
        node.helm("install", "conveyor", str(ROOT / "charts" / "conveyor"), "-n", "conveyor-system",
                  "--create-namespace", "--set", f"image.repository={operator.repository}",
                  "--set", f"image.tag={operator.tag}", "--set", "image.pullPolicy=Never",
                  "--set", f"runtimeImage.repository={runtime.repository}",
                  "--set", f"runtimeImage.tag={runtime.tag}", "--set", "statusIntervalSeconds=2",
                  "--wait", "--timeout=180s", timeout=240)
        node.create_namespace(NAMESPACE)
        print(f"set-up (node, Kafka, PostgreSQL, images, helm install) in {time.monotonic() - t0:.0f}s; "
              f"images: {', '.join(f'{i.ref} {i.size_bytes / 1e6:.0f} MB' for i in images.values())}")
        value = json.dumps({"id": "ID", "pad": "p" * 180}).encode()
        topic = make_topic(kafka.bootstrap_servers, args.records, value)

        rounds: list[dict[str, float]] = []
        for r in range(args.rounds):
            figures: dict[str, float] = {}
            for label, seconds in startup(node, kafka.bootstrap_servers, pg.url).items():
                figures[f"start-up: {label} (s)"] = seconds
            for tasks in (1, 2):
                figures[f"node, {tasks} task(s) (rec/s)"] = throughput_on_node(
                    node, kafka.bootstrap_servers, topic, args.records, tasks)
                figures[f"local, {tasks} task(s) (rec/s)"] = throughput_local(
                    kafka.bootstrap_servers, topic, args.records, tasks)
            for tasks in (1, 2):
                figures[f"ratio node/local, {tasks} task(s)"] = \
                    figures[f"node, {tasks} task(s) (rec/s)"] / figures[f"local, {tasks} task(s) (rec/s)"]
            figures["ratio node 2 tasks / 1 task"] = \
                figures["node, 2 task(s) (rec/s)"] / figures["node, 1 task(s) (rec/s)"]
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
