"""Graceful stops of multi-task sinks: every closing commit lands within the grace period.

A driver with two sink tasks on the session's SparkSession, a real broker, and a PostgreSQL
sink or a buffering archive sink (``flush.size`` far above the records, so only closing commits
write files and commit offsets: the KIP-275 case). Each case stops the connector with
``POST /stop`` at a moment where the group is rebalancing or one task holds no partitions, then
asserts: the stop ends within the grace period, every task ends STOPPED, the closing commits
committed exactly what reached the sink, and they committed everything on the topic, so the
next start has nothing to read again. One case runs a ``conveyor run`` process and stops it
with SIGTERM, as the kubelet does (the CLI's SIGTERM handler calls the same ``Driver.stop``).

The moment that used to lose the closing commit: a task without partitions stops while the
group rebalances. A cooperative librdkafka consumer with an empty assignment did not leave
the group on ``close()``, so the rebalance waited out its ``session.timeout.ms`` (45 s) with
every other member's ``JoinGroup`` parked at the coordinator, and their synchronous closing
commits queued behind it: the driver cancelled the task after the grace period, FAILED,
with nothing committed (the README's quickstart failed 7 runs in 9 this way).
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from conveyor.manifest import ConnectorManifest
from conveyor.testing.ports import free_port
from conveyor.testing.runs import (
    committed_offsets,
    control_request,
    end_offsets,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

GRACE_S = 20
"""``shutdown.gracePeriodSeconds`` of these connectors: shorter than the 45 s a lost
``LeaveGroup`` costs, so a closing commit parked behind it fails the test."""


# ---------------------------------------------------------------------------------------- sinks


class PostgresTarget:
    """Rows inserted (no key: a record written twice is a second row), with the Kafka
    partition and offset of each (InsertField)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def config(self) -> dict[str, str]:
        return {
            "connection.url": self.url, "table.name.format": "orders", "auto.create": "true", "insert.mode": "insert",
            "transforms": "position", "transforms.position.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.position.partition.field": "kafka_partition", "transforms.position.offset.field": "kafka_offset",
        }

    def offsets(self) -> list[tuple[int, int]]:
        """``(partition, offset)`` of every row, in no particular order."""
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                return [tuple(r) for r in conn.execute("SELECT kafka_partition, kafka_offset FROM orders")]
        except psycopg.errors.UndefinedTable:
            return []


class ArchiveTarget:
    """JSON-lines files ``topics/<topic>/partition=<p>/<topic>+<p>+<start offset>.jsonl``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def config(self) -> dict[str, str]:
        return {"archive.url": str(self.root), "format": "jsonl", "flush.size": "100000"}

    def offsets(self) -> list[tuple[int, int]]:
        found = []
        for path in sorted(self.root.glob("topics/*/partition=*/*.jsonl")):
            partition, start = (int(x) for x in path.stem.rsplit("+", 2)[1:])
            lines = path.read_text().count("\n")
            found += [(partition, start + i) for i in range(lines)]
        return found


@pytest.fixture(params=["postgres", "archive"])
def target(request, tmp_path):
    if request.param == "postgres":
        return PostgresTarget(request.getfixturevalue("pg_database"))
    return ArchiveTarget(tmp_path / "archive")


# ---------------------------------------------------------------------------------------- runs


def _orders(start: int, n: int) -> list[tuple[bytes, bytes]]:
    return [(str(i).encode(), json.dumps({"id": i, "amount": i * 1.25}).encode()) for i in range(start, start + n)]


def _manifest(name: str, bootstrap: str, topic: str, sink_config: dict[str, str], sink: str) -> dict[str, Any]:
    """The Connector manifest (as a document) of a two-task ``sink`` on ``topic``."""
    return {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name}, "spec": {
        "class": sink, "tasksMax": 2, "kafka": {"bootstrapServers": bootstrap},
        "shutdown": {"gracePeriodSeconds": GRACE_S},
        "config": {
            "topics": topic, "value.converter": "json", "value.converter.schemas.enable": "false",
            # Only closing commits commit: a lost one shows as offsets behind the sink.
            "offset.flush.interval.ms": "600000",
            **sink_config,
        },
    }}


class Run:
    """A connector's driver, through its control API: in-process on the session's SparkSession
    (:func:`driver_run`), or a ``conveyor run`` process (:func:`process_run`)."""

    url: str
    token: str | None = None

    def call(self, path: str, method: str = "GET", timeout_s: float = 120) -> dict[str, Any]:
        """The answer of a 2xx; raises ``OSError`` otherwise."""
        code, body = control_request(self.url, path, method, token=self.token, timeout_s=timeout_s)
        if code >= 300:
            raise OSError(f"{method} {path}: HTTP {code}: {body}")
        return body

    def status(self) -> dict[str, Any]:
        try:
            return self.call("/status", timeout_s=10)
        except OSError:
            return {}

    def tail(self) -> str:
        return ""

    def wait_running(self) -> None:
        wait_until(lambda: len(self.status().get("tasks", ())) == 2
                   and all(t["state"] == "RUNNING" for t in self.status()["tasks"]),
                   timeout_s=120, message=f"both tasks RUNNING{self.tail()}")

    def records_read(self) -> int:
        return sum(t.get("records_read", 0) for t in self.status().get("tasks", ()))

    def stop(self) -> dict[str, Any]:
        """Stop it as the platform would; the stop result once the driver has stopped."""
        return self.call("/stop", method="POST")


class DriverRun(Run):
    def __init__(self, driver: Any) -> None:
        self.driver, self.url, self.token = driver, driver.control_url, driver.control_tokens.admin


@contextmanager
def driver_run(spark: Any, name: str, bootstrap: str, topic: str, sink_config: dict[str, str],
               sink: str) -> Iterator[Run]:
    manifest = ConnectorManifest.from_dict(_manifest(name, bootstrap, topic, sink_config, sink))
    with running_connector(manifest, spark, stop_timeout_s=GRACE_S + 30) as driver:
        yield DriverRun(driver)


class ProcessRun(Run):
    """One ``conveyor run`` process (the token: the file it wrote for its port)."""

    def __init__(self, process: subprocess.Popen, port: int, log: Path, out: Path) -> None:
        self.process, self.url, self.log, self.out = process, f"http://127.0.0.1:{port}", log, out

    def tail(self) -> str:
        return "; log:\n" + self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> dict[str, Any]:
        """SIGTERM, as the kubelet sends it; the process exits 0 and prints the stop result."""
        self.process.send_signal(signal.SIGTERM)
        rc = self.process.wait(timeout=GRACE_S + 60)
        assert rc == 0, f"exit {rc}{self.tail()}"
        return json.loads(self.out.read_text() or "{}")


@contextmanager
def process_run(tmp_path: Path, name: str, bootstrap: str, topic: str, sink_config: dict[str, str],
                sink: str) -> Iterator[Run]:
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(yaml.safe_dump(_manifest(name, bootstrap, topic, sink_config, sink)))
    port = free_port()
    log, out = (tmp_path / f"{name}-{uuid.uuid4().hex[:6]}.{ext}" for ext in ("log", "out"))
    with open(log, "ab") as stderr, open(out, "ab") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "conveyor.cli", "run", str(manifest), "--control-port", str(port), "--no-progress"],
            stdout=stdout, stderr=stderr, start_new_session=True,
        )
    try:
        yield ProcessRun(process, port, log, out)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
            subprocess.run(["pkill", "-9", "-s", str(process.pid)], check=False)


def _group_state(bootstrap: str, group: str) -> tuple[str, int]:
    """``(state, members)`` of a consumer group, as the broker describes it."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return description.state.name, len(description.members)


def _stop(run: Run) -> dict[str, Any]:
    """Stop ``run`` and return its stop result, after asserting it took less than the grace period."""
    started = time.monotonic()
    result = run.stop()
    elapsed = time.monotonic() - started
    assert elapsed < GRACE_S, f"stopping took {elapsed:.1f}s, more than the {GRACE_S}s grace period{run.tail()}"
    return result


def _assert_closing_commits(result: dict[str, Any], target: Any, bootstrap: str, name: str, topic: str,
                            partitions: int) -> dict[int, int]:
    """Every task STOPPED; the offsets committed for each partition are exactly one past the
    last record the sink holds from it; the stop result shows them per task, and what each
    task's last closing commit wrote."""
    assert [t["state"] for t in result["tasks"]] == ["STOPPED", "STOPPED"], result
    batches = isinstance(target, ArchiveTarget)  # the archive (jsonl, JSON values) takes record batches
    assert [t.get("batch_path") for t in result["tasks"]] == [batches, batches], result
    held = target.offsets()
    assert len(held) == len(set(held)), "a record written twice"
    written: dict[int, int] = {}
    for partition, offset in held:
        written[partition] = max(written.get(partition, 0), offset + 1)
    committed = committed_offsets(bootstrap, f"connect-{name}", topic, partitions)
    assert committed == written, f"committed {committed}, sink holds up to {written}"
    reported: dict[str, int] = {}
    for task in result["tasks"]:
        for key, offset in task["committed"].items():
            reported[key] = max(reported.get(key, 0), offset)
        if task["committed"]:
            assert task["last_closing_commit"], f"task {task['id']} held partitions: no closing commit shown"
            assert task["last_closing_commit"].items() <= task["committed"].items(), task
    assert reported == {f"{topic}:{p}": off for p, off in written.items()}, f"reported {reported}"
    return committed


def _assert_the_next_start_has_nothing_to_read(bootstrap: str, name: str, topic: str, partitions: int) -> None:
    """The group is empty (every task left it) and committed every partition's end: a next
    start resumes from the committed offsets (a sink's ``open`` does not rewind here; resuming
    from them is ``test_lifecycle``'s and ``test_offsets_api``'s), so it reads nothing again."""
    group = f"connect-{name}"
    assert _group_state(bootstrap, group) == ("EMPTY", 0)
    assert committed_offsets(bootstrap, group, topic, partitions) == end_offsets(bootstrap, topic, partitions)


# ---------------------------------------------------------------------------------------- cases

SINKS = {PostgresTarget: "postgres-sink", ArchiveTarget: "archive-sink"}
HEARTBEAT_MS = 1000


def test_stop_after_an_idle_task_was_drained_commits_within_the_grace_period(
    target, kafka_bootstrap, topic_factory, spark
):
    """One partition, two tasks: one task is always idle. Draining it restarts it as a new
    member, so the group rebalances; the stop that follows must not wait for the member the
    drained task was (before the fix: 45 s, then FAILED with nothing committed)."""
    topic = topic_factory(partitions=1)
    name = f"stop-idle-{uuid.uuid4().hex[:8]}"
    sink = SINKS[type(target)]
    produce(kafka_bootstrap, topic, _orders(0, 200))
    config = {**target.config(), "consumer.override.heartbeat.interval.ms": str(HEARTBEAT_MS)}
    with driver_run(spark, name, kafka_bootstrap, topic, config, sink) as run:
        run.wait_running()
        wait_until(lambda: run.records_read() >= 200, message="200 records read")
        # Settled: a member that has not rejoined yet leaves on close even without the fix.
        wait_until(lambda: _group_state(kafka_bootstrap, f"connect-{name}") == ("STABLE", 2),
                   message="the group stable with both tasks")
        idle = next(t["id"] for t in run.status()["tasks"] if not t.get("assignment"))
        drained = run.call(f"/drain?task={idle}", method="POST")
        assert drained["complete"] is True, drained
        wait_until(lambda: next(t for t in run.status()["tasks"] if t["id"] == idle)["attempt"] == 2,
                   message="the drained task runs again")
        time.sleep(2.5 * HEARTBEAT_MS / 1000)  # the partition holder has heard of the rebalance and rejoined
        produce(kafka_bootstrap, topic, _orders(200, 100))
        wait_until(lambda: run.records_read() >= 300, message="300 records read")
        result = _stop(run)
    assert _assert_closing_commits(result, target, kafka_bootstrap, name, topic, 1) == {0: 300}
    _assert_the_next_start_has_nothing_to_read(kafka_bootstrap, name, topic, 1)


@contextmanager
def settling_run(runs: Callable[..., Any], bootstrap: str, topic: str, target: Any) -> Iterator[tuple[Run, str]]:
    """``(run, connector name)``: 600 records on ``topic`` (three
    partitions), a two-task connector started on them (``runs``: :func:`driver_run` or
    :func:`process_run` with its first argument bound), entered once every record is read."""
    name = f"settle-{uuid.uuid4().hex[:8]}"
    sink = SINKS[type(target)]
    produce(bootstrap, topic, _orders(0, 600))
    with runs(name, bootstrap, topic, target.config(), sink) as run:
        wait_until(lambda: run.records_read() >= 600, timeout_s=120, message=f"600 records read{run.tail()}")
        yield run, name


def _stop_while_settling(runs: Callable[..., Any], target: Any, bootstrap: str, topic: str) -> None:
    """Stop a :func:`settling_run` as soon as every record is read; every record is committed,
    by closing commits, once."""
    with settling_run(runs, bootstrap, topic, target) as (run, name):
        result = _stop(run)
    committed = _assert_closing_commits(result, target, bootstrap, name, topic, 3)
    assert sum(committed.values()) == 600
    _assert_the_next_start_has_nothing_to_read(bootstrap, name, topic, 3)


def test_stop_right_after_the_last_record_lands_while_the_group_settles(target, kafka_bootstrap, topic_factory,
                                                                        spark):
    """The quickstart's moment: three partitions, two tasks starting one after the other,
    the stop as soon as the sink holds every record, usually in the middle of the
    cooperative rebalances that move a partition from the first task to the second."""
    _stop_while_settling(functools.partial(driver_run, spark), target, kafka_bootstrap, topic_factory(partitions=3))


@pytest.mark.process_boundary("SIGTERM to a conveyor run process: it stops, prints the result and exits 0")
def test_sigterm_right_after_the_last_record_lands_while_the_group_settles_exits_0_with_closing_commits(
    pg_database, kafka_bootstrap, topic_factory, tmp_path
):
    """The quickstart's moment as the quickstart meets it: a ``conveyor run`` process, stopped by
    SIGTERM while the group settles."""
    _stop_while_settling(functools.partial(process_run, tmp_path), PostgresTarget(pg_database), kafka_bootstrap,
                         topic_factory(partitions=3))


def test_drain_of_a_task_right_after_the_last_record_lands_commits_and_resumes_from_there(
    target, kafka_bootstrap, topic_factory, spark
):
    """A drain (a pod's ``preStop``) of the task holding the most partitions while the group
    settles: its closing commit lands, it runs again from there, and nothing is written twice."""
    topic = topic_factory(partitions=3)
    with settling_run(functools.partial(driver_run, spark), kafka_bootstrap, topic, target) as (run, name):
        holder = max(run.status()["tasks"], key=lambda t: len(t.get("assignment") or ()))["id"]
        drained = run.call(f"/drain?task={holder}", method="POST", timeout_s=GRACE_S + 30)
        assert drained["complete"] is True and drained["tasks"][0]["state"] != "FAILED", drained
        assert drained["tasks"][0]["committed"], f"the drained task's closing commit: {drained}"
        wait_until(lambda: next(t for t in run.status()["tasks"] if t["id"] == holder)["attempt"] == 2
                   and all(t["state"] == "RUNNING" for t in run.status()["tasks"]),
                   message="the drained task runs again")
        before = run.records_read()  # the drained task's count starts again from 0
        produce(kafka_bootstrap, topic, _orders(600, 60))
        wait_until(lambda: run.records_read() >= before + 60, message="records after the drain")
        result = _stop(run)
    committed = _assert_closing_commits(result, target, kafka_bootstrap, name, topic, 3)
    assert sum(committed.values()) == 660
    assert len(target.offsets()) == 660, "every record once"


_MEMBER = """
import sys
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 60000,
                     "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": False})
consumer.subscribe([sys.argv[3]])
while True:
    consumer.poll(0.2)
"""


@contextmanager
def group_member(bootstrap: str, group: str, topic: str) -> Iterator[subprocess.Popen]:
    """Another consumer in ``group`` (a 60 s session), as a separate process."""
    process = subprocess.Popen([sys.executable, "-c", _MEMBER, bootstrap, group, topic])
    try:
        yield process
    finally:
        process.kill()
        process.wait(timeout=30)


def test_a_frozen_group_member_cannot_hold_a_stop_past_the_grace_period(
    kafka_bootstrap, topic_factory, pg_database, spark
):
    """A member that stops answering (a frozen executor, a partitioned node) parks the
    group's rebalance, and with it every member's commits and ``LeaveGroup``, for its
    ``session.timeout.ms``. The stop still ends within the grace period: the closing commit
    gives up at half of it and says so, the tasks are stopped, and the offsets committed
    never run ahead of what the sink holds (the next start reads the rest again)."""
    topic = topic_factory(partitions=1)
    name = f"stop-frozen-{uuid.uuid4().hex[:8]}"
    group = f"connect-{name}"
    target = PostgresTarget(pg_database)
    produce(kafka_bootstrap, topic, _orders(0, 100))
    config = {**target.config(), "consumer.override.heartbeat.interval.ms": str(HEARTBEAT_MS)}
    with driver_run(spark, name, kafka_bootstrap, topic, config, "postgres-sink") as run:
        run.wait_running()
        wait_until(lambda: run.records_read() >= 100, message="100 records read")
        with group_member(kafka_bootstrap, group, topic) as frozen:
            wait_until(lambda: _group_state(kafka_bootstrap, group) == ("STABLE", 3), message="a third member")
            frozen.send_signal(signal.SIGSTOP)
            with group_member(kafka_bootstrap, group, topic):
                wait_until(lambda: _group_state(kafka_bootstrap, group)[0] == "PREPARING_REBALANCING",
                           message="a rebalance waiting for the frozen member")
                time.sleep(2.5 * HEARTBEAT_MS / 1000)  # the tasks have heard of it and rejoined
                produce(kafka_bootstrap, topic, _orders(100, 50))
                wait_until(lambda: run.records_read() >= 150, message="150 records read")
                result = _stop(run)
    assert [t["state"] for t in result["tasks"]] == ["STOPPED", "STOPPED"], result
    holder = next(t for t in result["tasks"] if t["committed"] or t["closing_commit_error"])
    assert "not confirmed" in holder["closing_commit_error"], holder
    written = len(target.offsets())
    committed = committed_offsets(kafka_bootstrap, group, topic, 1).get(0, 0)
    assert committed <= written == 150, f"committed {committed}, sink holds {written}"
