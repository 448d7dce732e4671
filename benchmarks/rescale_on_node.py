"""Rescaling a sink on the real node, both consumer group protocols side by side, and the
operator's autoscaler from a lag breach to the new tasks consuming (issue 34).

Set-up as ``benchmarks/real_node.py`` (the node, Kafka and PostgreSQL on its IP, both images,
the chart). Then ``--rounds`` rounds, the protocols interleaved, of:

* **rescale**: a ``postgres-sink`` (insert mode, ``batch.size`` 20, so each consumed batch is
  written at once) on executor pods over an 8-partition topic that
  :class:`~conveyor.testing.runs.SteadyLoad` writes at ``--rate`` records/s, record n to
  partition n % 8. ``kubectl scale`` takes it 1 -> 2 -> 4 -> 2 -> 1, ``--hold`` seconds a step.
  The table's ``written_at`` column (``clock_timestamp()``, per row) times every write; the
  driver's ``GET /status``, read every 0.5 s, says which task holds which partition. Per round:
  rows written twice (``count - count distinct``) and lost (produced - distinct), both targets 0;
  per step, the stall of the partitions that stayed with one task all through it (their longest
  gap between two writes, less the longest of any partition in the steady state before the
  first step; target 0 s with KIP-848); seconds from the scale to the last new task's first put.
* **autoscale**: ``conveyor.testing.throttled`` (150 records/s a task, puts of at most 150
  records) with ``spec.autoscaler`` (1 to 3 tasks, target lag 300 records, 10 s metrics window),
  caught up at 60 records/s for 15 s, then 350: seconds from the driver first seeing the group's
  lag above 300 to three tasks putting records (target < 30 s on the node), the decision's Event
  and its time.

Medians over rounds come last, with every round's figures. The machine is 2 shared cores: Kafka,
PostgreSQL, the control plane, the operator, the driver and executors share them.

Run as root: ``python benchmarks/rescale_on_node.py [--rounds 2] [--rate 200] [--hold 20]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from datetime import datetime
from typing import Any

import psycopg
from confluent_kafka.admin import AdminClient, NewTopic
from real_node import NAMESPACE, SMALL_SPARK, admin_token, delete, driver_ip, driver_status, node_stack

from conveyor.testing.node import KubeNode
from conveyor.testing.runs import SteadyLoad, group_protocol_config, wait_until

PARTITIONS = 8
STEPS = (2, 4, 2, 1)
PROTOCOLS = ("classic", "consumer")
JSON_VALUES = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
               "value.converter": "org.apache.kafka.connect.json.JsonConverter",
               "value.converter.schemas.enable": "false"}


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _topic_and_table(bootstrap: str, pg_url: str) -> str:
    topic = f"rescale_{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic, PARTITIONS)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{topic}" (id bigint, p int, written_at timestamptz DEFAULT clock_timestamp())')
    return topic


def _body(name: str, cls: str, bootstrap: str, config: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"class": cls, "tasksMax": 1, "kafka": {"bootstrapServers": bootstrap}, "config": config,
                     "spark": SMALL_SPARK, "deletionPolicy": {"cleanup": False, "offsets": "retain"}, **spec}}


class StatusLog:
    """The driver's ``GET /status`` of connector ``name``, read when :meth:`read` is called, kept
    with the time of the read."""

    def __init__(self, node: KubeNode, name: str) -> None:
        self.node, self.name = node, name
        self.token = admin_token(node, name)
        self.ip: str | None = None
        self.reads: list[tuple[float, dict[str, Any]]] = []

    def read(self) -> dict[str, Any]:
        """The driver's status now (``{}`` while it does not answer); its pod IP is looked up
        once, and again after a read that failed."""
        self.ip = self.ip or driver_ip(self.node, self.name)
        status = driver_status(self.ip, self.token) if self.ip else {}
        if status:
            self.reads.append((time.time(), status))
        else:
            self.ip = None
        return status

    def owners_between(self, start: float, end: float) -> dict[int, set[int | None]]:
        """``{partition: every task id seen holding it}`` over the reads in ``[start, end)``."""
        seen: dict[int, set[int | None]] = {p: set() for p in range(PARTITIONS)}
        for at, status in self.reads:
            if start <= at < end:
                held = {int(tp.rsplit(":", 1)[1]): t["id"] for t in status.get("tasks", [])
                        if t["state"] == "RUNNING" for tp in t.get("assignment", [])}
                for p in seen:
                    seen[p].add(held.get(p))
        return seen

    def first_put(self, task: int, after: float) -> float | None:
        return next((at for at, status in self.reads if at >= after and any(
            t["id"] == task and t["state"] == "RUNNING" and t.get("records_put", 0) > 0
            for t in status.get("tasks", []))), None)


def _writes(pg_url: str, table: str) -> dict[int, list[float]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(f'SELECT p, extract(epoch FROM written_at) FROM "{table}" ORDER BY 2').fetchall()
    times: dict[int, list[float]] = {p: [] for p in range(PARTITIONS)}
    for p, at in rows:
        times[p].append(float(at))
    return times


def _longest_gap(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start <= t < end]
    return max(b - a for a, b in zip([start, *inside], [*inside, end], strict=True))


def rescale_round(node: KubeNode, bootstrap: str, pg_url: str, protocol: str, rate: float,
                  hold_s: float) -> dict[str, Any]:
    topic = _topic_and_table(bootstrap, pg_url)
    name = f"rs-{protocol[:4]}-{uuid.uuid4().hex[:4]}"
    config = {"topics": topic, "connection.url": pg_url, "insert.mode": "insert", "auto.create": "false",
              "batch.size": "20", "offset.flush.interval.ms": "2000", **JSON_VALUES,
              **group_protocol_config(protocol)}
    node.kubectl("apply", "-f", "-", input=json.dumps(_body(name, "postgres-sink", bootstrap, config)))
    steps: list[tuple[int, int, float]] = []
    try:
        with SteadyLoad(bootstrap, topic, rate, partitions=PARTITIONS) as load:
            log = StatusLog(node, name)
            wait_until(lambda: any(t.get("records_put", 0) > 0 for t in log.read().get("tasks", [])), 300,
                       f"{name}: the first records put", interval_s=0.5)

            def hold(seconds: float) -> None:
                until = time.monotonic() + seconds
                while time.monotonic() < until:
                    log.read()
                    time.sleep(0.5)

            hold(hold_s)
            tasks = 1
            for target in STEPS:
                at = time.time()
                node.kubectl("scale", f"connector/{name}", "-n", NAMESPACE, f"--replicas={target}")
                steps.append((tasks, target, at))
                tasks = target
                hold(hold_s)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            count = lambda what: conn.execute(f'SELECT count({what}) FROM "{topic}"').fetchone()[0]  # noqa: E731
            wait_until(lambda: count("DISTINCT id") >= load.produced, 180, f"{load.produced} rows", interval_s=1)
            time.sleep(3)  # a write twice would come after the last first one
            rows, distinct = count("*"), count("DISTINCT id")
    finally:
        delete(node, name)
    writes = _writes(pg_url, topic)
    first = steps[0][2]
    baseline = max(_longest_gap(ts, first - hold_s, first) for ts in writes.values())
    figures: dict[str, Any] = {"produced": load.produced, "twice": rows - distinct, "lost": load.produced - distinct,
                               "baseline_gap_s": baseline, "steps": []}
    for i, (was, now, at) in enumerate(steps):
        end = steps[i + 1][2] if i + 1 < len(steps) else at + hold_s
        owners = log.owners_between(at - 1.0, end)
        stayed = [p for p, held in owners.items() if len(held) == 1 and None not in held]
        stall = max((_longest_gap(writes[p], at, end) for p in stayed), default=0.0) - baseline
        firsts = [log.first_put(task, at) for task in range(was, now)]
        figures["steps"].append({
            "step": f"{was}->{now}", "stayed": len(stayed), "stall_s": max(0.0, stall),
            "to_first_put_s": max((f - at for f in firsts if f is not None), default=None)
            if all(f is not None for f in firsts) else None,
        })
    return figures


def autoscale_round(node: KubeNode, bootstrap: str, pg_url: str) -> dict[str, Any]:
    topic = f"auto_{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic, 6)
    name = f"as-{uuid.uuid4().hex[:6]}"
    config = {"topics": topic, "connection.url": pg_url, "insert.mode": "insert", "auto.create": "true",
              "throttle.records.per.second": "150", "offset.flush.interval.ms": "2000", **JSON_VALUES,
              # a put of at most a second's records: a task's counters reach the driver between its hooks
              "conveyor.batch.max.records": "150", "consumer.override.max.poll.records": "150"}
    autoscaler = {"minTasks": 1, "maxTasks": 3, "targetLagRecords": 300, "catchUpSeconds": 30,
                  "metricsWindowSeconds": 10}
    node.kubectl("apply", "-f", "-", input=json.dumps(_body(
        name, "conveyor.testing.throttled:ThrottledPostgresSinkConnector", bootstrap, config, autoscaler=autoscaler)))
    try:
        with SteadyLoad(bootstrap, topic, 0) as load:  # a backlog from the start-up would breach the target
            log = StatusLog(node, name)
            wait_until(lambda: [t["state"] for t in log.read().get("tasks", [])] == ["RUNNING"], 300,
                       f"{name}: the task RUNNING", interval_s=0.5)
            load.set_rate(60)
            wait_until(lambda: (load_now := log.read().get("load") or {}).get("tasks") == 1
                       and load_now["records_put"] > 0 and load_now["lag"] < 300, 300,
                       f"{name}: one task putting records, caught up", interval_s=0.5)
            time.sleep(15)
            load.set_rate(350)
            breached = wait_until(lambda: (log.read().get("load") or {}).get("lag", 0) > 300 and time.time(), 120,
                                  "the lag above 300", interval_s=0.5)
            print(f"    {name}: lag above 300 at {datetime.fromtimestamp(breached).isoformat(timespec='seconds')}",
                  flush=True)

            def putting() -> float | None:
                tasks = log.read().get("tasks", [])
                ok = len(tasks) == 3 and all(t["state"] == "RUNNING" and t.get("records_put", 0) > 0 for t in tasks)
                return time.time() if ok else None

            consuming = wait_until(putting, 180, "three tasks putting records", interval_s=0.5)
        events = json.loads(node.kubectl("get", "events", "-n", NAMESPACE, "-o", "json").stdout)["items"]
        scaled = [e for e in events if e["involvedObject"].get("name") == name and e["reason"] == "AutoscalerScaledUp"]
    finally:
        delete(node, name)
    decided = None
    if scaled:  # the Event's time has whole seconds
        stamp = scaled[0].get("eventTime") or scaled[0].get("firstTimestamp") or scaled[0]["lastTimestamp"]
        decided = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return {"breach_to_consuming_s": consuming - breached, "event": scaled[0]["message"] if scaled else None,
            "breach_to_decision_s": None if decided is None else decided - breached}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rate", type=float, default=200.0, help="records/s written throughout a rescale")
    parser.add_argument("--hold", type=float, default=20.0, help="seconds between steps")
    parser.add_argument("--parts", default="rescale,autoscale", help="comma-separated: rescale, autoscale")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if os.geteuid() != 0:
        sys.exit("run as root: the node needs bridges, iptables and mounts")
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in PROTOCOLS}
    breaches: list[float] = []
    with ExitStack() as stack:
        node, kafka, pg = node_stack(stack)
        print(f"rescale 1->{'->'.join(map(str, STEPS))} of a postgres sink on executor pods under {args.rate:.0f} "
              f"records/s, {PARTITIONS} partitions, {args.hold:.0f} s a step", flush=True)
        for index in range(1, args.rounds + 1):
            for protocol in (PROTOCOLS if index % 2 else PROTOCOLS[::-1]) if "rescale" in parts else ():
                figures = rescale_round(node, kafka.bootstrap_servers, pg.url, protocol, args.rate, args.hold)
                results[protocol].append(figures)
                print(f"  round {index} {protocol:8}: produced {figures['produced']}, twice {figures['twice']}, "
                      f"lost {figures['lost']}, steady-state longest gap {figures['baseline_gap_s']:.2f} s", flush=True)
                for step in figures["steps"]:
                    first = step["to_first_put_s"]
                    print(f"    {step['step']:5} {step['stayed']} partitions stayed, their stall {step['stall_s']:5.2f} s"
                          + (f", new tasks' first put after {first:5.2f} s" if first is not None else ""), flush=True)
            if "autoscale" not in parts:
                continue
            auto = autoscale_round(node, kafka.bootstrap_servers, pg.url)
            breaches.append(auto["breach_to_consuming_s"])
            decision = auto["breach_to_decision_s"]
            print(f"  round {index} autoscale: lag breach -> 3 tasks putting {auto['breach_to_consuming_s']:.1f} s"
                  + (f" (the decision's Event after {decision:.0f} s, to the second)" if decision is not None else "")
                  + f"; Event: {auto['event']}", flush=True)
    print("medians over rounds")
    for protocol, rounds in results.items() if "rescale" in parts else ():
        print(f"  {protocol:8}: twice {statistics.median(r['twice'] for r in rounds):g}, "
              f"lost {statistics.median(r['lost'] for r in rounds):g}")
        for i in range(len(STEPS)):
            stall = statistics.median(r["steps"][i]["stall_s"] for r in rounds)
            firsts = [r["steps"][i]["to_first_put_s"] for r in rounds if r["steps"][i]["to_first_put_s"] is not None]
            print(f"    {rounds[0]['steps'][i]['step']:5} stall of partitions that stayed {stall:5.2f} s"
                  + (f", new tasks' first put {statistics.median(firsts):5.2f} s" if firsts else ""))
    if breaches:
        print(f"  lag breach -> new tasks consuming: median {statistics.median(breaches):.1f} s, rounds "
              + ", ".join(f"{b:.1f}" for b in breaches))


if __name__ == "__main__":
    main()
