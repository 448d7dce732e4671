"""Rescaling a sink under steady load, on both consumer group protocols side by side (issue 34).

A recording sink (``conveyor.testing.recording``) reads an 8-partition topic that
:class:`~conveyor.testing.runs.SteadyLoad` writes at ``--rate`` records/s, while ``tasksMax``
goes 1 -> 2 -> 4 -> 2 -> 1 on the running driver (``Driver.reconfigure``, what ``PUT /config``
calls), ``--hold`` seconds each. Per protocol (classic cooperative-sticky, and KIP-848's
``consumer``) and round it prints:

* records put twice and records lost (targets 0);
* the stall of partitions that stay with their task across a step: the longest gap between
  two puts of such a partition in the step, less the longest gap of any partition in the steady
  state before the first step (target 0 s with KIP-848);
* seconds from the reconfigure to the first put of each task it starts.

Rounds interleave the protocols; medians over rounds come last. One driver on a local
SparkSession and the test harness's broker (``$CONVEYOR_KAFKA_BOOTSTRAP`` or one started here):
the tasks' Spark jobs, not executor pods (on Kubernetes a change that needs more executor pods
still rolls the driver).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from conveyor.manifest import ConnectorManifest
from conveyor.runtime.driver.driver import Driver
from conveyor.testing.kafka import start_or_reuse as start_or_reuse_kafka
from conveyor.testing.recording import read_journal
from conveyor.testing.runs import SteadyLoad, group_protocol_config, wait_until

PARTITIONS = 8
STEPS = (2, 4, 2, 1)
PROTOCOLS = ("classic", "consumer")


def _manifest(bootstrap: str, topic: str, journal: Path, protocol: str) -> ConnectorManifest:
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
        "metadata": {"name": f"rescale-{uuid.uuid4().hex[:6]}"},
        "spec": {"class": "conveyor.testing.recording:RecordingSinkConnector", "tasksMax": 1,
                 "kafka": {"bootstrapServers": bootstrap},
                 "config": {"topics": topic, "journal.path": str(journal), "value.converter": "json",
                            "value.converter.schemas.enable": "false", "offset.flush.interval.ms": "5000",
                            **group_protocol_config(protocol)},
                 "shutdown": {"gracePeriodSeconds": 60}},
    })


def _topic(bootstrap: str) -> str:
    topic = f"rescale-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    return topic


def _puts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "put"]


def _owners_at(events: list[dict[str, Any]], at: float) -> dict[str, int]:
    """Which task held each partition at ``at``, from the journal's open and close events."""
    owners: dict[str, int] = {}
    for e in events:
        if e["at"] >= at:
            break
        if e["event"] == "open":
            owners.update({p: e["task"] for p in e["partitions"]})
        elif e["event"] == "close":
            for p in e["partitions"]:
                if owners.get(p) == e["task"]:
                    del owners[p]
    return owners


def _longest_gaps(events: list[dict[str, Any]], start: float, end: float) -> dict[str, float]:
    """``{partition: longest gap in seconds between two of its puts}`` within ``[start, end)``,
    the window's edges counting as puts."""
    times: dict[str, list[float]] = defaultdict(list)
    for e in _puts(events):
        if start <= e["at"] < end:
            for p in {f"{r['topic']}:{r['partition']}" for r in e["records"]}:
                times[p].append(e["at"])
    return {p: max(b - a for a, b in zip([start, *ts], [*ts, end], strict=True)) for p, ts in times.items()}


def one_round(bootstrap: str, spark: Any, protocol: str, rate: float, hold_s: float) -> dict[str, Any]:
    """One run of 1 -> 2 -> 4 -> 2 -> 1 tasks on ``protocol``; the figures the module lists."""
    topic = _topic(bootstrap)
    with tempfile.TemporaryDirectory() as tmp:
        journal = Path(tmp) / "journal.jsonl"
        manifest = _manifest(bootstrap, topic, journal, protocol)
        driver = Driver(manifest, spark=spark, control_port=0)
        steps: list[tuple[int, int, float, float]] = []  # (from, to, at, took_s)
        with SteadyLoad(bootstrap, topic, rate) as load:
            driver.start()
            try:
                wait_until(lambda: len(_puts(read_journal(journal))) > 10, 120, "first puts")
                time.sleep(hold_s)
                tasks = 1
                for target in STEPS:
                    at = time.time()
                    driver.reconfigure(manifest.spec.model_copy(update={"tasks_max": target}))
                    steps.append((tasks, target, at, time.time() - at))
                    tasks = target
                    time.sleep(hold_s)
            except BaseException:
                driver.stop()
                raise
        try:
            wait_until(lambda: sum(len(e["records"]) for e in _puts(read_journal(journal))) >= load.produced,
                       120, "every record put")
        finally:
            driver.stop()
        events = read_journal(journal)
    ids = [r["value"]["id"] for e in _puts(events) for r in e["records"]]
    first_step = steps[0][2]
    baseline = max(_longest_gaps(events, first_step - hold_s, first_step).values())
    figures: dict[str, Any] = {"produced": load.produced, "twice": len(ids) - len(set(ids)),
                               "lost": load.produced - len(set(ids)), "baseline_gap_s": baseline, "steps": []}
    for i, (was, now, at, took) in enumerate(steps):
        end = steps[i + 1][2] if i + 1 < len(steps) else at + hold_s
        before, after = _owners_at(events, at), _owners_at(events, end)
        moved = {e_p for e in events if at <= e["at"] < end and e["event"] in ("open", "close")
                 for e_p in e["partitions"]}
        stayed = [p for p, task in before.items() if after.get(p) == task and p not in moved]
        gaps = _longest_gaps(events, at, end)
        stall = max((gaps.get(p, end - at) for p in stayed), default=0.0) - baseline
        started = [t for t in range(was, now)]
        first_puts = [min((e["at"] for e in _puts(events) if e["task"] == t and e["at"] >= at), default=None)
                      for t in started]
        figures["steps"].append({
            "step": f"{was}->{now}", "reconfigure_s": took, "stayed": len(stayed), "stall_s": max(0.0, stall),
            "to_first_put_s": max((fp - at for fp in first_puts if fp is not None), default=None),
            "never_put": [t for t, fp in zip(started, first_puts, strict=True) if fp is None],
        })
    return figures


def _print_round(protocol: str, index: int, figures: dict[str, Any]) -> None:
    print(f"  round {index} {protocol:8}: produced {figures['produced']}, twice {figures['twice']}, "
          f"lost {figures['lost']}, steady-state longest gap {figures['baseline_gap_s']:.2f} s")
    for step in figures["steps"]:
        first = step["to_first_put_s"]
        print(f"    {step['step']:5} reconfigure {step['reconfigure_s']:5.2f} s, {step['stayed']} partitions stayed, "
              f"their stall {step['stall_s']:5.2f} s" + (f", new tasks' first put after {first:5.2f} s"
                                                        if first is not None else "")
              + (f", tasks that never put: {step['never_put']}" if step["never_put"] else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=400.0, help="records/s written throughout")
    parser.add_argument("--hold", type=float, default=8.0, help="seconds between steps")
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in PROTOCOLS}
    with ExitStack() as stack:
        kafka = stack.enter_context(start_or_reuse_kafka())
        from conveyor.testing.spark import local_spark_session

        spark = local_spark_session(cores=max(STEPS) + 1)
        stack.callback(spark.stop)
        print(f"rescale 1->{'->'.join(map(str, STEPS))} of a sink under {args.rate:.0f} records/s, "
              f"{PARTITIONS} partitions, {args.hold:.0f} s a step")
        for index in range(1, args.rounds + 1):
            for protocol in (PROTOCOLS if index % 2 else PROTOCOLS[::-1]):
                figures = one_round(kafka.bootstrap_servers, spark, protocol, args.rate, args.hold)
                results[protocol].append(figures)
                _print_round(protocol, index, figures)
    print("medians over rounds")
    for protocol, rounds in results.items():
        twice = statistics.median(r["twice"] for r in rounds)
        lost = statistics.median(r["lost"] for r in rounds)
        print(f"  {protocol:8}: twice {twice:g}, lost {lost:g}")
        for i, step in enumerate(STEPS):
            stall = statistics.median(r["steps"][i]["stall_s"] for r in rounds)
            firsts = [r["steps"][i]["to_first_put_s"] for r in rounds if r["steps"][i]["to_first_put_s"] is not None]
            label = rounds[0]["steps"][i]["step"]
            print(f"    {label:5} stall of partitions that stayed {stall:5.2f} s"
                  + (f", new tasks' first put {statistics.median(firsts):5.2f} s" if firsts else ""))
    classic = statistics.median(s["stall_s"] for r in results["classic"] for s in r["steps"])
    consumer = statistics.median(s["stall_s"] for r in results["consumer"] for s in r["steps"])
    print(f"stall median over every step: classic {classic:.2f} s, consumer {consumer:.2f} s")


if __name__ == "__main__":
    main()
