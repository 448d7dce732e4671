"""The KIP-275 scenario, measured in one run: what closing-aware commits save.

Four archive-sink tasks (``flush.size=100000``, JSON lines to local files) read an
8-partition topic with Kafka Connect's default eager assignor (``range``). Each partition
holds fewer than ``flush.size`` records, so nothing is committed by a full file. Task 0
then fails; the group rebalances and every surviving task's partitions are revoked.

* With closing-aware commits (Conveyor): the closing ``pre_commit`` has
  ``is_closing()`` true, the archive sink writes its partial files and commits them.
* Without (``conveyor.closing.aware.commits=false``, Kafka Connect's behaviour, where
  ``isClosing`` does not exist): the sink cannot tell a rebalance from a periodic commit,
  keeps its buffers, commits nothing, and the new owners read everything again.

It prints the records the surviving tasks were given a second time in each case, then the
drain latency: p50/p99 from ``POST /drain?task=<id>`` to its closing commit being done,
over ``--drains`` drains of tasks holding buffered records.

Targets (issue 4): zero re-consumed with closing-aware commits; drain p99 under 2 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from contextlib import ExitStack
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from conveyor.manifest import ConnectorManifest
from conveyor.runtime.driver.driver import Driver
from conveyor.testing.faults import reconsumed, unique_given
from conveyor.testing.kafka import start_or_reuse as start_or_reuse_kafka
from conveyor.testing.runs import produce

PARTITIONS = 8
TASKS = 4


def _manifest(bootstrap: str, config: dict[str, Any]) -> ConnectorManifest:
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
        "metadata": {"name": f"kip275-{uuid.uuid4().hex[:6]}"},
        "spec": {"class": "conveyor.testing.faults:FaultySinkConnector", "tasksMax": TASKS,
                 "kafka": {"bootstrapServers": bootstrap}, "config": config,
                 "shutdown": {"gracePeriodSeconds": 60}},
    })


def _topic(bootstrap: str, records: int) -> str:
    topic = f"kip275-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    produce(bootstrap, topic, [(str(i).encode(), json.dumps({"id": i, "pad": "x" * 60}).encode())
                               for i in range(records)])
    return topic


def _base_config(topic: str, archive: str, journal: str) -> dict[str, Any]:
    return {
        "topics": topic, "faulty.connector.class": "archive-sink", "faulty.journal.path": journal,
        "archive.url": f"file://{archive}", "flush.size": "100000", "format": "jsonl",
        "value.converter": "json", "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "1000",
        "consumer.override.partition.assignment.strategy": "range",
        "consumer.override.session.timeout.ms": "6000", "consumer.override.heartbeat.interval.ms": "500",
    }


def failure_scenario(bootstrap: str, spark: Any, records: int, closing_aware: bool) -> tuple[int, int]:
    """(records re-consumed by the surviving tasks, records they were given in all)."""
    topic = _topic(bootstrap, 0)
    with tempfile.TemporaryDirectory() as tmp:
        journal = f"{tmp}/journal.jsonl"
        config = {**_base_config(topic, f"{tmp}/archive", journal),
                  "faulty.fail.task": "0", "faulty.fail.after.records": str(records // PARTITIONS),
                  "conveyor.closing.aware.commits": "true" if closing_aware else "false"}
        driver = Driver(_manifest(bootstrap, config), spark=spark, control_port=0)
        driver.start()
        try:
            deadline = time.monotonic() + 120
            while not all(len(t.get("assignment", [])) == PARTITIONS // TASKS for t in driver.status()["tasks"]):
                if time.monotonic() > deadline:
                    raise TimeoutError(json.dumps(driver.status(), indent=1))
                time.sleep(0.2)
            produce(bootstrap, topic, [(str(i).encode(), json.dumps({"id": i, "pad": "x" * 60}).encode())
                                       for i in range(records)])
            deadline = time.monotonic() + 300
            while True:
                status = driver.status()["tasks"]
                survivors = [t for t in status if t["id"] != 0]
                if status[0]["state"] == "FAILED" and sum(t.get("lag", {}) and sum(t["lag"].values()) or 0
                                                          for t in survivors) == 0 and \
                        sum(len(t.get("assignment", [])) for t in survivors) == PARTITIONS:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(json.dumps(status, indent=1))
                time.sleep(0.5)
            time.sleep(2)
        finally:
            driver.stop()
            driver.close()
        return reconsumed(journal, exclude_task=0)


def drain_latencies(bootstrap: str, spark: Any, drains: int, per_drain: int) -> list[float]:
    topic = _topic(bootstrap, 0)
    latencies = []
    with tempfile.TemporaryDirectory() as tmp:
        journal = f"{tmp}/journal.jsonl"
        config = _base_config(topic, f"{tmp}/archive", journal)
        driver = Driver(_manifest(bootstrap, config), spark=spark, control_port=0)
        driver.start()
        try:
            produced = 0
            for i in range(drains):
                produce(bootstrap, topic, [(None, json.dumps({"n": produced + j}).encode()) for j in range(per_drain)])
                produced += per_drain
                deadline = time.monotonic() + 120
                while unique_given(journal) < produced:
                    if time.monotonic() > deadline:
                        raise TimeoutError(json.dumps(driver.status(), indent=1))
                    time.sleep(0.1)
                start = time.perf_counter()
                result = driver.drain(task_id=i % TASKS)
                latencies.append(time.perf_counter() - start)
                assert result["complete"], result
                while any(t["state"] != "RUNNING" for t in driver.status()["tasks"]):
                    time.sleep(0.1)
        finally:
            driver.stop()
            driver.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000, help="records in the topic (< 100000 per partition)")
    parser.add_argument("--drains", type=int, default=20)
    parser.add_argument("--per-drain", type=int, default=20_000, help="records buffered before each drain")
    args = parser.parse_args()
    with ExitStack() as stack:
        kafka = stack.enter_context(start_or_reuse_kafka())
        from conveyor.testing.spark import local_spark_session

        spark = local_spark_session(cores=TASKS + 1)
        with_closing = failure_scenario(kafka.bootstrap_servers, spark, args.records, closing_aware=True)
        without = failure_scenario(kafka.bootstrap_servers, spark, args.records, closing_aware=False)
        latencies = drain_latencies(kafka.bootstrap_servers, spark, args.drains, args.per_drain)
        spark.stop()
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    print()
    print(f"KIP-275 scenario: {TASKS} archive-sink tasks, flush.size=100000, {args.records:,} records on "
          f"{PARTITIONS} partitions, task 0 fails, eager rebalance")
    print(f"{'':<48}{'re-consumed':>12}{'given':>12}")
    print(f"{'surviving tasks, closing-aware commits':<48}{with_closing[0]:>12,}{with_closing[1]:>12,}  target 0")
    print(f"{'surviving tasks, without (Kafka Connect)':<48}{without[0]:>12,}{without[1]:>12,}")
    print(f"drain latency over {len(latencies)} drains of ~{args.per_drain // TASKS:,} buffered records per task: "
          f"p50 {q[49]:.3f} s, p99 {q[98]:.3f} s, max {max(latencies):.3f} s  (target p99 < 2 s)")


if __name__ == "__main__":
    main()
