"""Recovery of a sink connector after ``kill -9``, measured (issue 11 §4).

A ``conveyor run`` of ``noop-sink`` (``tasksMax`` 2, 4 partitions, records produced throughout)
is killed with SIGKILL (its whole process group: the driver, Spark's JVM and the Python
workers, as a crashed pod) once every partition is assigned and consumed, and started again
at once. Per round, in seconds:

* **cold start**: first start -> every partition assigned to a task (Spark start-up, group join);
* **restart -> assigned**: second start -> every partition assigned again. Before static
  membership the killed consumers stayed in the group until their ``session.timeout.ms``
  (45 s) and the new ones waited for them;
* **cold start -> spread**, **restart -> spread**: until each task holds its share of the
  partitions (2 of 4: issue 11 §5, one task used to hold them all);
* **restart -> consuming**: second start -> the group's committed offset of every partition
  past where it was at the kill (records flow again on every partition);
* **recovery over cold start**: restart -> assigned, less cold start: what the crash costs
  beyond an ordinary start (target: partitions reassigned < 10 s after the restart).

Each round runs the connector with the runtime's own consumer settings (``session.timeout.ms``
6 s), with 10 s (Kafka's default before 3.0, the runtime's before) and with 45 s (Kafka
Connect's default since Kafka 3.0), interleaved; ``--variant`` adds others, ``--no-baseline``
keeps only the defaults. Medians over ``--rounds`` (3). Uses ``CONVEYOR_KAFKA_BOOTSTRAP`` when set, otherwise starts a
local broker. Run: ``python benchmarks/recovery.py [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from conveyor.testing.kafka import start_or_reuse as start_or_reuse_kafka
from conveyor.testing.runs import committed_offsets, control_request, produce, wait_until

PARTITIONS = 4
TASKS = 2
VARIANTS = {"conveyor defaults": {},
            "session.timeout.ms 10000 (Kafka's before 3.0)": {"consumer.override.session.timeout.ms": "10000",
                                                               "consumer.override.heartbeat.interval.ms": "3000"},
            "session.timeout.ms 45000 (Kafka Connect's)": {"consumer.override.session.timeout.ms": "45000"}}


class Producer(threading.Thread):
    """100 records every 0.1 s to every partition until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            produce(self.bootstrap, self.topic, [(str(i).encode(), b"x" * 100) for i in range(100)])
            self.done.wait(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(port: int) -> dict[str, Any]:
    try:  # the token: the file `conveyor run` wrote for the port
        code, body = control_request(f"http://127.0.0.1:{port}", "/status", timeout_s=2)
    except (OSError, http.client.HTTPException, ValueError):  # not up yet, or killed mid-answer
        return {}
    return body if code == 200 else {}


def assignments(port: int) -> list[list[str]]:
    """Each RUNNING task's partitions."""
    return [list(t.get("assignment") or ()) for t in status(port).get("tasks") or [] if t.get("state") == "RUNNING"]


def all_assigned(port: int) -> bool:
    return len({p for held in assignments(port) for p in held}) == PARTITIONS


def spread(port: int) -> bool:
    """Every partition assigned and every task holding its share (2 of 4 each)."""
    held = assignments(port)
    return all_assigned(port) and len(held) == TASKS and all(len(h) == PARTITIONS // TASKS for h in held)


def start(manifest: Path, port: int, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "conveyor.cli", "run", str(manifest), "--no-progress",
                                 "--control-port", str(port)], stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(90)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)


def one_round(bootstrap: str, tmp: Path, overrides: dict[str, str]) -> dict[str, float]:
    name = f"recovery-{uuid.uuid4().hex[:6]}"
    topic = name
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    manifest = tmp / f"{name}.json"
    manifest.write_text(json.dumps({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name},
        "spec": {"class": "noop-sink", "tasksMax": TASKS, "kafka": {"bootstrapServers": bootstrap},
                 "config": {"topics": topic, "offset.flush.interval.ms": "500",
                            "key.converter": "bytes", "value.converter": "bytes", **overrides}}}))
    producer = Producer(bootstrap, topic)
    producer.start()
    port, log = free_port(), tmp / f"{name}.log"
    figures: dict[str, float] = {}
    try:
        t0 = time.monotonic()
        proc = start(manifest, port, log)
        wait_until(lambda: all_assigned(port), 180, "every partition assigned", interval_s=0.1)
        figures["cold start -> assigned (s)"] = time.monotonic() - t0
        wait_until(lambda: spread(port), 180, "the partitions spread over the tasks", interval_s=0.1)
        figures["cold start -> spread (s)"] = time.monotonic() - t0
        wait_until(lambda: len(committed_offsets(bootstrap, f"connect-{name}", topic, PARTITIONS)) == PARTITIONS,
                   60, "a commit on every partition")
        time.sleep(2)
        kill_group(proc)
        at_kill = committed_offsets(bootstrap, f"connect-{name}", topic, PARTITIONS)
        port = free_port()
        t1 = time.monotonic()
        proc = start(manifest, port, log)
        try:
            wait_until(lambda: all_assigned(port), 180, "every partition assigned after the restart", interval_s=0.1)
            figures["restart -> assigned (s)"] = time.monotonic() - t1
            wait_until(lambda: spread(port), 180, "the partitions spread after the restart", interval_s=0.1)
            figures["restart -> spread (s)"] = time.monotonic() - t1

            def consuming() -> bool:
                now = committed_offsets(bootstrap, f"connect-{name}", topic, PARTITIONS)
                return all(now.get(p, -1) > at_kill.get(p, -1) for p in range(PARTITIONS))

            wait_until(consuming, 180, "every partition consumed again", interval_s=0.1)
            figures["restart -> consuming (s)"] = time.monotonic() - t1
        finally:
            stop(proc)
    finally:
        producer.done.set()
        producer.join(30)
    figures["recovery over cold start (s)"] = figures["restart -> assigned (s)"] - figures["cold start -> assigned (s)"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                        help="also measure the defaults with these connector config keys (repeatable)")
    parser.add_argument("--no-baseline", action="store_true", help="measure only the defaults (and --variant)")
    args = parser.parse_args()
    variants = dict(VARIANTS)
    if args.no_baseline:
        variants = {label: o for label, o in variants.items() if not o}
    for spec in args.variant:
        variants[spec] = dict(item.split("=", 1) for item in spec.split(","))
    rounds: list[dict[str, float]] = []
    tmp = tempfile.mkdtemp(prefix="conveyor-recovery-")  # the drivers' logs are kept there
    print(f"drivers' logs in {tmp}", flush=True)
    with ExitStack() as stack:
        kafka = stack.enter_context(start_or_reuse_kafka())
        for r in range(args.rounds):
            figures = {}
            for label, overrides in variants.items():
                for key, value in one_round(kafka.bootstrap_servers, Path(tmp), overrides).items():
                    figures[f"{label}: {key}"] = value
            rounds.append(figures)
            print(f"round {r + 1}: " + "; ".join(f"{k} {v:.1f}" for k, v in figures.items()), flush=True)
    print(f"\nmedians over {len(rounds)} rounds:")
    for key in rounds[0]:
        print(f"  {key:64s} {statistics.median(r[key] for r in rounds):>8.1f}")


if __name__ == "__main__":
    main()
