"""Conveyor side by side with Apache Kafka Connect 4.1.1 on the same work, in one run.

One broker, one Connect 4.1.1 distributed worker (:class:`conveyor.testing.connect.ConnectWorker`,
jars from Maven Central, its harness defaults: 256 MiB heap, JSON converters without schemas,
``offset.flush.interval.ms=1000``) for the whole run, and Conveyor's drivers beside it:

* **Sink**: ``--records`` records (1M) of about 200 bytes (JSON values as in
  ``sink_throughput.py``) on a 6-partition topic, written to a local file by Kafka Connect's
  ``FileStreamSinkConnector`` and by Conveyor's ``file-sink`` (``StringConverter`` for keys
  and values on both sides: each line is the record's value), with 1 task and with 2 tasks.
  With 2 tasks both append to *one* file on both sides (each does that with ``tasks.max=2``:
  every task gets the connector's ``file``); lines of the two tasks interleave.
* **archive-sink**, ``format=jsonl`` and ``format=parquet``, 1 task, ``JsonConverter`` without
  schemas, on the same topic, against a FileStreamSink run with ``JsonConverter`` without
  schemas in the same round (what a Connect user has who turns JSON records into a file), and
  against a plain Python loop writing the archive's ``jsonl`` lines (:data:`JSON_LOOP`): the
  ratio the archive could reach here if its framework cost nothing.
* **Source**: a file of ``--records`` lines of about 200 bytes (plus 16 more, see below) into
  a fresh 1-partition topic: Kafka Connect's ``FileStreamSourceConnector`` against Conveyor's
  ``file-source`` (one task each: both are single-task).

Each run uses a fresh connector name, hence a fresh consumer group (every sink run reads the
whole topic from the start) or a fresh source-offsets key (every source run reads the file
from byte 0), and a fresh output file / archive directory / topic.

How each figure is measured, the same way on both sides:

* Progress is observed from outside, every 20 ms, by a thread of this process: the
  newlines in the sink's output file (read incrementally; counted, so interleaved lines of
  two tasks count right), the lines of the complete ``.jsonl`` files of the archive
  (archive files appear whole, by rename), or the high watermark of the source's topic.
* **Steady state** (records/s): ``(N - n0) / (t_N - t0)`` where ``(t0, n0)`` is the first
  observation with any record and ``t_N`` the first with all N: from the first records
  written to the last. Start-up (Spark, group joins) is left out on both sides; the
  rebalance a second sink task causes when it joins is inside it on both sides.
* **End to end** (seconds): from the submission to ``t_N``. Kafka Connect: the
  ``PUT /connectors/<name>/config`` to the already running worker. Conveyor, two ways:
  *fresh*: ``python -m conveyor.cli run <manifest>`` started as a new process, i.e. the
  interpreter, the imports, a new SparkSession (its JVM, ``local[N]`` with a slot per task,
  as ``conveyor run`` does), the connector and its tasks: what a user pays to start a
  connector, since Conveyor has no standing worker; and *reused*: ``Driver(...)`` construction
  plus ``start()`` in this process on a SparkSession already running (``local[4]``, as the
  other benchmarks), the closest analogue of submitting to a running Connect worker. The
  ratio is Connect's time / Conveyor's (above 1: Conveyor done sooner).
  The steady-state figure of a Conveyor connector is taken from its *reused* run; the fresh
  run's steady state is printed too. The issue's end-to-end target compares a fresh
  ``conveyor run`` with a *fresh Connect worker*: a new ``ConnectDistributed`` JVM launched, its
  group joined, then the connector submitted, timed from the launch (file sink x1 and file
  source); against the running worker the figure is printed for reference.

Settings that differ, none tuned here for this benchmark (each side at its own defaults):

* Conveyor's ``offset.flush.interval.ms`` is set to 1000 to match the worker's (the
  harness's; Kafka Connect's stock default is 60000). Conveyor's ``file-sink`` writes each
  ``put``'s lines in one write; Connect's ``PrintStream`` writes each line as it is printed.
  Both are measured at the file.
* Consumers: Connect's worker consumer defaults (``max.poll.records=500``, eager range
  assignor first); Conveyor's runtime defaults (librdkafka, ``max.poll.records`` 500,
  ``fetch.queue.backoff.ms=10``, cooperative-sticky). Producers: Connect's worker producer
  defaults (``acks=all``, idempotent, ``linger.ms=5``); Conveyor's (librdkafka, idempotent,
  ``linger.ms=5``).
* Converters: set explicitly in every connector's configuration, the same on both sides
  (strings for the file sink and the file source: each record is the line; JSON without
  schemas for the archive comparison).
* archive-sink: ``rotate.interval.ms=1000`` (and the default ``flush.size`` 100000), so that
  every record is in a complete file about a second after it was put (without rotation the
  last partial file of each partition is written only when the task closes).
* FileStreamSource returns a full ``batch.size`` (2000) batch leaving the lines already in its
  1024-char read buffer for the next ``poll``, which reads only when the file grows: at the end
  of a file up to ~5 lines can wait for ever. The input file therefore has 16 lines more than
  N; both sides read the same file and the figures stop at the N-th record.

* **CPU seconds** (informational), from submission to the last record, of the processes doing
  the work: Connect's worker JVM; Conveyor's Spark JVM and its Python workers (reused: the
  driver's threads in this process are left out) or the whole ``conveyor run`` process tree
  (fresh). The broker's CPU, shared by both, is in neither.

Before the measured rounds, a warm-up pass (``min(N, 200000)`` records, every run but the
fresh processes, not counted) lets Connect's JVM compile its hot paths and Spark start the
Python workers the reused session keeps; a long-running Connect worker is warm, and so is a
Conveyor driver after its first seconds.

The machine's speed drifts (shared cores), so everything runs ``--rounds`` times (3),
interleaved (Connect first in odd rounds, Conveyor first in even ones), and medians are
compared; every round's ratio is printed.

Targets (issue 31): file sink >= 1.5x Kafka Connect in steady state and >= 1.0x end to end,
with 1 and with 2 tasks; file source >= 1.0x; archive-sink (jsonl and parquet) >= 1.5x
FileStreamSink with JsonConverter.

Run: ``python benchmarks/vs_kafka_connect.py [--records N] [--rounds R]``. Uses
``CONVEYOR_KAFKA_BOOTSTRAP`` when set, otherwise starts a local broker. Needs Java 17+ and
Maven (first run: the Connect jars) and pyspark.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from sink_throughput import PAD, PARTITIONS, make_topic  # the same topic as the sink benchmark's

from conveyor.runtime.driver.driver import Driver
from conveyor.testing.connect import JSON_CONVERTER, ConnectWorker
from conveyor.testing.kafka import start_or_reuse as start_or_reuse_kafka
from conveyor.testing.runs import connector_manifest

SOURCE_EXTRA_LINES = 16
WARMUP_RECORDS = 200_000
POLL_S = 0.02
RUN_TIMEOUT_S = 900.0
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
JSON = {"key.converter": JSON_CONVERTER, "key.converter.schemas.enable": "false",
        "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false"}
STRING = {"key.converter": STRING_CONVERTER, "value.converter": STRING_CONVERTER}
CONVEYOR = {"offset.flush.interval.ms": "1000"}


# -------------------------------------------------------------------------------- progress


@dataclass
class Run:
    """One connector run, as observed: times are ``time.perf_counter()`` seconds."""

    submitted: float
    first_at: float
    first_count: int
    done_at: float
    expected: int
    final: int
    cpu_s: float = float("nan")

    @property
    def steady(self) -> float:
        """Records/s from the first observation with records to the first with all of them."""
        span = self.done_at - self.first_at
        return (self.expected - self.first_count) / span if span > 0 else float("nan")

    @property
    def end_to_end(self) -> float:
        """Seconds from the submission to the last record."""
        return self.done_at - self.submitted


class FileLines:
    """Newlines in one file, read incrementally (the file may not exist yet)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: Any = None
        self._count = 0

    def __call__(self) -> int:
        if self._handle is None:
            try:
                self._handle = open(self.path, "rb")  # noqa: SIM115 - closed by close()
            except FileNotFoundError:
                return 0
        while chunk := self._handle.read(1 << 22):
            self._count += chunk.count(b"\n")
        return self._count

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


class ArchiveLines:
    """Records in the complete ``.jsonl`` (lines) or ``.parquet`` (rows, from the footer)
    files under an archive directory (a file appears whole, by rename; hidden names are
    temporary files), each file counted once."""

    def __init__(self, root: Path, fmt: str = "jsonl") -> None:
        self.root = root
        self._suffix = f".{fmt}"
        self._seen: dict[str, int] = {}

    def __call__(self) -> int:
        for directory, _dirs, files in os.walk(self.root):
            for name in files:
                if name.startswith(".") or not name.endswith(self._suffix):
                    continue
                path = os.path.join(directory, name)
                if path not in self._seen:
                    self._seen[path] = _records_in(path)
        return sum(self._seen.values())

    def close(self) -> None:
        pass


def _records_in(path: str) -> int:
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    with open(path, "rb") as fh:
        return fh.read().count(b"\n")


class TopicRecords:
    """Records in a non-transactional topic: the sum of its partitions' high watermarks."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-hwm-{uuid.uuid4().hex[:6]}",
                                   "enable.auto.commit": False})
        self._tps = [KafkaTopicPartition(topic, p) for p in range(partitions)]
        deadline = time.monotonic() + 30
        while len(getattr(self._consumer.list_topics(topic, timeout=10).topics.get(topic), "partitions", ())) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} not in the metadata after 30s")
            time.sleep(0.1)

    def __call__(self) -> int:
        total = 0
        for tp in self._tps:
            try:
                total += max(0, self._consumer.get_watermark_offsets(tp, timeout=5, cached=False)[1])
            except KafkaException as exc:
                if exc.args[0].code() not in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART):
                    raise
        return total

    def close(self) -> None:
        self._consumer.close()


class Watch:
    """Polls ``count`` every :data:`POLL_S` in a thread, until it reaches ``expected``."""

    def __init__(self, count: Callable[[], int], expected: int) -> None:
        self._count = count
        self.expected = expected
        self.first: tuple[float, int] | None = None
        self.done_at: float | None = None
        self.last = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-watch", daemon=True)

    def __enter__(self) -> Watch:  # noqa: PYI034 - returns self, started
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                n = self._count()
                at = time.perf_counter()
                self.last = n
                if n and self.first is None:
                    self.first = (at, n)
                if n >= self.expected:
                    self.done_at = at
                    return
                self._stop.wait(POLL_S)
        except BaseException as exc:  # noqa: BLE001 - reported by wait()
            self.error = exc

    def wait(self, submitted: float, failed: Callable[[], str | None], what: str,
             timeout_s: float = RUN_TIMEOUT_S) -> Run:
        """Until every record is observed; ``failed()`` (checked every second) says why not."""
        deadline = time.monotonic() + timeout_s
        next_check = time.monotonic() + 1.0
        while self.done_at is None:
            if self.error is not None:
                raise RuntimeError(f"{what}: observing progress failed: {self.error!r}") from self.error
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: {self.last:,} of {self.expected:,} records after {timeout_s:.0f}s")
            if time.monotonic() >= next_check:
                reason = failed()
                if reason:
                    raise RuntimeError(f"{what} failed: {reason}")
                next_check = time.monotonic() + 1.0
            time.sleep(0.05)
        assert self.first is not None
        return Run(submitted, self.first[0], self.first[1], self.done_at, self.expected, self.last)


# -------------------------------------------------------------------------------- Kafka Connect


def _connect_failed(worker: ConnectWorker, name: str) -> str | None:
    if not worker.is_running():
        return "the Connect worker exited"
    status, body, _ = worker.rest("GET", f"/connectors/{name}/status", timeout=10)
    if status != 200:
        return None
    states = [body["connector"], *body.get("tasks", [])]
    failed = [s for s in states if s.get("state") == "FAILED"]
    return json.dumps(failed)[:2000] if failed else None


def _delete_connect(worker: ConnectWorker, name: str) -> None:
    """Delete and wait (bounded) until the worker no longer knows the connector."""
    worker.delete_connector(name)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, _, _ = worker.rest("GET", f"/connectors/{name}/status", timeout=10)
        if status == 404:
            break
        time.sleep(0.2)
    time.sleep(1.0)  # the tasks' consumers/producers close


def connect_run(worker: ConnectWorker, config: dict[str, str], count: Callable[[], int], expected: int,
                what: str) -> Run:
    name = f"bench-connect-{uuid.uuid4().hex[:8]}"
    try:
        with Watch(count, expected) as watch:
            assert worker.pid is not None
            cpu = CpuMeter(worker.pid).start()
            submitted = time.perf_counter()
            worker.put_connector(name, config)
            run = watch.wait(submitted, lambda: _connect_failed(worker, name), what)
            run.cpu_s = cpu.stop()
            return run
    finally:
        _delete_connect(worker, name)


def connect_fresh(bootstrap: str, config: dict[str, str], count: Callable[[], int], expected: int,
                  what: str) -> Run:
    """A new Kafka Connect worker, launched now (its JVM, joining its group: what a user pays
    to start Connect), then the connector submitted to it: the analogue of a fresh
    ``conveyor run``. Its CPU is the worker's since launch."""
    name = f"bench-connect-{uuid.uuid4().hex[:8]}"
    with Watch(count, expected) as watch:
        launched = time.perf_counter()
        worker = ConnectWorker(bootstrap).start()
        try:
            worker.put_connector(name, config)
            run = watch.wait(launched, lambda: _connect_failed(worker, name), what)
            assert worker.pid is not None
            run.cpu_s = _cpu_ticks(worker.pid) / _CLOCK_TICKS
            return run
        finally:
            worker.stop()


# -------------------------------------------------------------------------------- Conveyor


def _driver_failed(driver: Driver) -> str | None:
    status = driver.status()
    failed = [t for t in [status["connector"], *status["tasks"]] if t.get("state") == "FAILED"]
    return json.dumps(failed)[:2000] if failed else None


def conveyor_reused(spark: Any, bootstrap: str, cls: str, tasks: int, config: dict[str, Any],
                    count: Callable[[], int], expected: int, what: str) -> Run:
    """A driver in this process on the SparkSession already running."""
    manifest = connector_manifest(f"bench-conveyor-{uuid.uuid4().hex[:8]}", cls, bootstrap, config, tasks_max=tasks)
    with Watch(count, expected) as watch:
        cpu = CpuMeter(spark.sparkContext._gateway.proc.pid).start()  # Spark's JVM and its Python workers
        submitted = time.perf_counter()
        driver = Driver(manifest, spark=spark, control_port=0)
        try:
            driver.start()
            run = watch.wait(submitted, lambda: _driver_failed(driver), what)
            run.cpu_s = cpu.stop()
            return run
        finally:
            driver.stop(timeout_s=60)
            driver.close()


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return 0
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


class CpuMeter:
    """CPU seconds used by processes ``roots`` and everything below them, between
    :meth:`start` and :meth:`stop` (a process started in between counts from zero)."""

    def __init__(self, *roots: int) -> None:
        self.roots = roots
        self._start: dict[int, int] = {}

    def _snapshot(self) -> dict[int, int]:
        pids = [p for root in self.roots for p in (root, *_descendants(root))]
        return {p: _cpu_ticks(p) for p in pids}

    def start(self) -> CpuMeter:
        self._start = self._snapshot()
        return self

    def stop(self) -> float:
        end = self._snapshot()
        return sum(ticks - self._start.get(p, 0) for p, ticks in end.items()) / _CLOCK_TICKS


@contextmanager
def conveyor_process(bootstrap: str, cls: str, tasks: int, config: dict[str, Any], workdir: Path
                     ) -> Iterator[tuple[subprocess.Popen, float, Path]]:
    """``conveyor run <manifest>`` as a new process (its own SparkSession, ``local[tasks]``);
    yields it, the time it was started and its log; stopped with SIGTERM (a graceful stop), then
    every process it started is waited for (and killed by pid if still there after 60 s)."""
    manifest = connector_manifest(f"bench-conveyor-{uuid.uuid4().hex[:8]}", cls, bootstrap, config, tasks_max=tasks)
    path = workdir / f"{manifest.name}.json"
    path.write_text(json.dumps({"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
                                "metadata": {"name": manifest.name},
                                "spec": {"class": cls, "tasksMax": tasks, "kafka": {"bootstrapServers": bootstrap},
                                         "config": config}}))
    log_path = workdir / f"{manifest.name}.log"
    with open(log_path, "wb") as log_file:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "conveyor.cli", "run", str(path), "--control-port", "0", "--no-progress",
             "--log-level", "WARNING"],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        yield proc, started, log_path
    finally:
        below = _descendants(proc.pid)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        deadline = time.monotonic() + 60
        while any(_alive(p) for p in below) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in below:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def conveyor_fresh(bootstrap: str, cls: str, tasks: int, config: dict[str, Any], count: Callable[[], int],
                   expected: int, workdir: Path, what: str) -> Run:
    with Watch(count, expected) as watch, conveyor_process(bootstrap, cls, tasks, config, workdir) as (
            proc, started, log_path):
        def failed() -> str | None:
            if proc.poll() is None:
                return None
            log = log_path.read_text(errors="replace")
            return f"conveyor run exited with {proc.returncode}: {log[-3000:]}"

        cpu = CpuMeter(proc.pid)  # counted from zero: the process has just been started
        run = watch.wait(started, failed, what)
        run.cpu_s = cpu.stop()
        return run


JSON_LOOP = """
import sys, uuid
import orjson
from confluent_kafka import Consumer
bootstrap, topic, path, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"loop-{uuid.uuid4().hex[:8]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
consumer.subscribe([topic])
loads, dumps = orjson.loads, orjson.dumps
seen = 0
with open(path, "ab") as out:
    while seen < expected:
        lines = [dumps({"topic": m.topic(), "partition": m.partition(), "offset": m.offset(),
                        "timestamp": m.timestamp()[1], "key": loads(m.key()), "value": loads(m.value()),
                        "headers": []})
                 for m in consumer.consume(500, 1.0) if m.error() is None]
        if lines:
            out.write(b"\\n".join(lines) + b"\\n")
            out.flush()
            seen += len(lines)
consumer.close()
"""
"""The least a Python program does to write the archive's ``jsonl`` lines: consume, read each
key and value as JSON (orjson, the fastest parser here) and write the record's line (topic,
partition, offset, timestamp, key, value, headers), compact, as the archive does; no
framework, no files per partition, no offsets committed. What the archive's ratio could be
on this machine if the framework cost nothing."""


def python_json_loop(bootstrap: str, topic: str, count: Callable[[], int], path: Path, expected: int) -> Run:
    """:data:`JSON_LOOP` as a new process writing ``path``; its CPU from its start."""
    with Watch(count, expected) as watch:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", JSON_LOOP, bootstrap, topic, str(path), str(expected)],
                                stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            cpu = CpuMeter(proc.pid)
            run = watch.wait(started, lambda: None if proc.poll() in (None, 0) else
                             f"exited with {proc.returncode}: {proc.stderr.read()[-2000:]!r}",  # type: ignore[union-attr]
                             "Python JSON loop")
            run.cpu_s = cpu.stop()
            return run
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)


# -------------------------------------------------------------------------------- data


def make_source_file(path: Path, records: int) -> None:
    """``records`` + :data:`SOURCE_EXTRA_LINES` lines of ~200 bytes."""
    with open(path, "w", encoding="ascii") as fh:
        fh.writelines(f"line {i:09d} name=order-{i} pad={PAD}{'q' * (20 - len(str(i)))}\n"
                      for i in range(records + SOURCE_EXTRA_LINES))


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    topic = f"bench-src-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the result
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([topic])[topic].result(30)
    except Exception as exc:  # noqa: BLE001 - only disk space
        print(f"  (could not delete topic {topic}: {exc})", flush=True)


def line_digest(path: Path) -> tuple[int, int]:
    """(lines, sum of their CRC32s): equal for two files holding the same lines in any order."""
    lines = total = 0
    with open(path, "rb") as fh:
        for line in fh:
            lines += 1
            total += zlib.crc32(line)
    return lines, total


# -------------------------------------------------------------------------------- one round


class Bench:
    def __init__(self, bootstrap: str, worker: ConnectWorker, spark: Any, topic: str, source_file: Path,
                 records: int, workdir: Path) -> None:
        self.bootstrap = bootstrap
        self.worker = worker
        self.spark = spark
        self.topic = topic
        self.source_file = source_file
        self.n = records
        self.workdir = workdir
        self.notes: list[str] = []

    def _out(self, label: str) -> Path:
        return self.workdir / f"{label}-{uuid.uuid4().hex[:6]}.txt"

    def _sink_file(self, label: str, run: Callable[[Path, FileLines], Run]) -> tuple[Run, tuple[int, int]]:
        path = self._out(label)
        counter = FileLines(path)
        try:
            result = run(path, counter)
            time.sleep(0.2)
            digest = line_digest(path)
        finally:
            counter.close()
            path.unlink(missing_ok=True)
        return result, digest

    def connect_sink(self, tasks: int, converters: dict[str, str] = STRING,
                     fresh: bool = False) -> tuple[Run, tuple[int, int]]:
        kind = "JSON" if converters is JSON else "strings"

        def run(path: Path, counter: FileLines) -> Run:
            config = {"connector.class": FILE_SINK, "tasks.max": str(tasks), "topics": self.topic,
                      "file": str(path), **converters}
            what = f"FileStreamSink x{tasks} ({kind}{', fresh worker' if fresh else ''})"
            if fresh:
                return connect_fresh(self.bootstrap, config, counter, self.n, what)
            return connect_run(self.worker, config, counter, self.n, what)

        return self._sink_file(f"connect{tasks}{'f' if fresh else ''}", run)

    def conveyor_sink(self, tasks: int, fresh: bool) -> tuple[Run, tuple[int, int]]:
        def run(path: Path, counter: FileLines) -> Run:
            config = {"topics": self.topic, "file": str(path), **CONVEYOR, **STRING}
            what = f"file-sink x{tasks} ({'fresh' if fresh else 'reused'})"
            if fresh:
                return conveyor_fresh(self.bootstrap, "file-sink", tasks, config, counter, self.n, self.workdir, what)
            return conveyor_reused(self.spark, self.bootstrap, "file-sink", tasks, config, counter, self.n, what)

        return self._sink_file(f"conveyor{tasks}{'f' if fresh else 'r'}", run)

    def json_loop(self) -> Run:
        return self._sink_file("loop", lambda path, counter: python_json_loop(
            self.bootstrap, self.topic, counter, path, self.n))[0]

    def archive(self, fmt: str) -> Run:
        root = self.workdir / f"archive-{fmt}-{uuid.uuid4().hex[:6]}"
        root.mkdir()
        try:
            config = {"topics": self.topic, "archive.url": str(root), "format": fmt, "rotate.interval.ms": "1000",
                      **CONVEYOR, **JSON}
            return conveyor_reused(self.spark, self.bootstrap, "archive-sink", 1, config, ArchiveLines(root, fmt),
                                   self.n, f"archive-sink {fmt} x1")
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def source(self, side: str) -> Run:
        topic = new_topic(self.bootstrap)
        counter = TopicRecords(self.bootstrap, topic, 1)
        try:
            if side.startswith("connect"):
                config = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(self.source_file),
                          "topic": topic, **STRING}
                if side == "connect fresh":
                    return connect_fresh(self.bootstrap, config, counter, self.n, "FileStreamSource (fresh worker)")
                return connect_run(self.worker, config, counter, self.n, "FileStreamSource")
            config = {"file": str(self.source_file), "topic": topic, **CONVEYOR, **STRING}
            if side == "fresh":
                return conveyor_fresh(self.bootstrap, "file-source", 1, config, counter, self.n, self.workdir,
                                      "file-source (fresh)")
            return conveyor_reused(self.spark, self.bootstrap, "file-source", 1, config, counter, self.n,
                                   "file-source (reused)")
        finally:
            counter.close()
            delete_topic(self.bootstrap, topic)

    def round(self, connect_first: bool, fresh: bool = True) -> dict[str, float]:
        """Every measurement once; Connect's run before Conveyor's when ``connect_first``;
        without ``fresh``, no ``conveyor run`` process (the warm-up)."""
        r: dict[str, float] = {}

        def pair(connect: Callable[[], Any], conveyor: list[Callable[[], Any]]) -> tuple[Any, list[Any]]:
            if connect_first:
                c = connect()
                return c, [f() for f in conveyor]
            others = [f() for f in conveyor]
            return connect(), others

        def record(prefix: str, run: Run) -> None:
            r[f"{prefix}_steady"], r[f"{prefix}_e2e"], r[f"{prefix}_cpu"] = run.steady, run.end_to_end, run.cpu_s

        def show(label: str, runs: list[tuple[str, Run]]) -> None:
            print(f"  {label}: " + "; ".join(f"{who} {run.steady:,.0f}/s, {run.end_to_end:.1f}s, {run.cpu_s:.1f} CPU-s"
                                            for who, run in runs), flush=True)

        for tasks in (1, 2):
            conveyor = [lambda t=tasks: self.conveyor_sink(t, fresh=False)]
            if fresh:
                conveyor.append(lambda t=tasks: self.conveyor_sink(t, fresh=True))
                if tasks == 1:  # a fresh Connect worker, against the fresh conveyor run
                    conveyor.append(lambda: self.connect_sink(1, fresh=True))
            (c, c_digest), others = pair(lambda t=tasks: self.connect_sink(t), conveyor)
            for label, (_run, digest) in zip(("reused", "fresh", "fresh Connect worker"), others):
                if digest != c_digest:
                    self.notes.append(f"file sink x{tasks} ({label}): output lines differ from FileStreamSink's "
                                      f"(lines, crc sum) {digest} vs {c_digest}")
            if c_digest[0] != self.n:
                self.notes.append(f"FileStreamSink x{tasks} wrote {c_digest[0]:,} lines for {self.n:,} records")
            record(f"c_sink{tasks}", c)
            record(f"v_sink{tasks}", others[0][0])
            runs = [("Connect", c), ("Conveyor reused", others[0][0])]
            if fresh:
                record(f"v_sink{tasks}_fresh", others[1][0])
                runs.append(("fresh", others[1][0]))
            if fresh and tasks == 1:
                record("c_sink1_fresh", others[2][0])
                runs.append(("fresh Connect worker", others[2][0]))
            show(f"file sink x{tasks}", runs)
        (cj, _), archives = pair(lambda: self.connect_sink(1, JSON), [lambda: self.archive("jsonl"),
                                                                        lambda: self.archive("parquet"),
                                                                        self.json_loop])
        record("c_sinkjson1", cj)
        for label, a in zip(("archive_jsonl", "archive_parquet", "json_loop"), archives, strict=True):
            record(f"v_{label}", a)
        show("archive-sink x1 (JSON)", [("FileStreamSink", cj), ("jsonl", archives[0]), ("parquet", archives[1]),
                                        ("plain Python loop", archives[2])])
        conveyor = [lambda: self.source("reused")] + (
            [lambda: self.source("fresh"), lambda: self.source("connect fresh")] if fresh else [])
        c, others = pair(lambda: self.source("connect"), conveyor)
        record("c_source", c)
        record("v_source", others[0])
        runs = [("Connect", c), ("Conveyor reused", others[0])]
        if fresh:
            record("v_source_fresh", others[1])
            record("c_source_fresh", others[2])
            runs += [("fresh", others[1]), ("fresh Connect worker", others[2])]
        show("file source", runs)
        return r


# -------------------------------------------------------------------------------- report

CPU_TARGET = 1 / 0.7
"""Issue 31: Conveyor's CPU seconds at most 0.7x Connect's, i.e. Connect/Conveyor >= 1.43."""

# label, Connect key, Conveyor key, kind ("rate": ratio = conveyor/connect; "time": connect/conveyor), target
FIGURES: tuple[tuple[str, str, str, str, float | None], ...] = (
    ("file sink x1, steady records/s", "c_sink1_steady", "v_sink1_steady", "rate", 2.0),
    ("file sink x1, steady records/s, fresh driver", "c_sink1_steady", "v_sink1_fresh_steady", "rate", None),
    ("file sink x1, end to end s, fresh run vs fresh worker", "c_sink1_fresh_e2e", "v_sink1_fresh_e2e", "time",
     1.0),
    ("file sink x1, end to end s, fresh run vs running worker", "c_sink1_e2e", "v_sink1_fresh_e2e", "time", None),
    ("file sink x1, CPU s, fresh run vs fresh worker", "c_sink1_fresh_cpu", "v_sink1_fresh_cpu", "time", None),
    ("file sink x1, end to end s, reused Spark", "c_sink1_e2e", "v_sink1_e2e", "time", 1.0),
    ("file sink x1, CPU s (reused Spark)", "c_sink1_cpu", "v_sink1_cpu", "time", CPU_TARGET),
    ("file sink x2, steady records/s", "c_sink2_steady", "v_sink2_steady", "rate", 2.0),
    ("file sink x2, steady records/s, fresh driver", "c_sink2_steady", "v_sink2_fresh_steady", "rate", None),
    ("file sink x2, end to end s, fresh run vs running worker", "c_sink2_e2e", "v_sink2_fresh_e2e", "time", None),
    ("file sink x2, end to end s, reused Spark", "c_sink2_e2e", "v_sink2_e2e", "time", 1.0),
    ("file sink x2, CPU s (reused Spark)", "c_sink2_cpu", "v_sink2_cpu", "time", CPU_TARGET),
    ("archive-sink jsonl vs FileStreamSink (JSON), steady", "c_sinkjson1_steady", "v_archive_jsonl_steady", "rate",
     1.5),
    ("archive-sink parquet vs FileStreamSink (JSON), steady", "c_sinkjson1_steady", "v_archive_parquet_steady",
     "rate", 1.5),
    ("archive lines, plain Python loop vs FileStreamSink (JSON)", "c_sinkjson1_steady", "v_json_loop_steady", "rate",
     None),
    ("archive lines, plain Python loop, CPU s", "c_sinkjson1_cpu", "v_json_loop_cpu", "time", None),
    ("archive-sink jsonl vs FileStreamSink (JSON), CPU s", "c_sinkjson1_cpu", "v_archive_jsonl_cpu", "time",
     CPU_TARGET),
    ("archive-sink parquet vs FileStreamSink (JSON), CPU s", "c_sinkjson1_cpu", "v_archive_parquet_cpu", "time",
     CPU_TARGET),
    ("file source, steady records/s", "c_source_steady", "v_source_steady", "rate", 1.5),
    ("file source, steady records/s, fresh driver", "c_source_steady", "v_source_fresh_steady", "rate", None),
    ("file source, end to end s, fresh run vs fresh worker", "c_source_fresh_e2e", "v_source_fresh_e2e", "time",
     1.0),
    ("file source, end to end s, fresh run vs running worker", "c_source_e2e", "v_source_fresh_e2e", "time", None),
    ("file source, end to end s, reused Spark", "c_source_e2e", "v_source_e2e", "time", 1.0),
    ("file source, CPU s (reused Spark)", "c_source_cpu", "v_source_cpu", "time", CPU_TARGET),
)


def _ratio(kind: str, connect: float, conveyor: float) -> float:
    return conveyor / connect if kind == "rate" else connect / conveyor


def report(rounds: list[dict[str, float]], records: int) -> None:
    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    print()
    print(f"{records:,} records, median of {len(rounds)} interleaved rounds. ratio: Conveyor/Connect for records/s, "
          "Connect/Conveyor for seconds (above 1: Conveyor better)")
    print(f"{'figure':<52}{'Connect':>10}{'Conveyor':>10}{'ratio':>7}  {'target':<8}{'':<7}rounds' ratios")
    for label, c_key, v_key, kind, target in FIGURES:
        fmt = "{:>10,.0f}" if kind == "rate" else "{:>10.1f}"
        ratio = _ratio(kind, median[c_key], median[v_key])
        verdict = "" if target is None else ("met" if ratio >= target else "MISSED")
        each = " ".join(f"{_ratio(kind, r[c_key], r[v_key]):.2f}" for r in rounds)
        goal = f">= {target:.2f}" if target is not None else ""
        print(f"{label:<52}{fmt.format(median[c_key])}{fmt.format(median[v_key])}{ratio:>7.2f}  {goal:<8}"
              f"{verdict:<7}{each}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of every measurement, interleaved; the medians are compared")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s [%(name)s] %(message)s")
    n = args.records
    rounds: list[dict[str, float]] = []
    began = time.monotonic()
    with ExitStack() as stack:
        kafka = stack.enter_context(start_or_reuse_kafka())
        bootstrap = kafka.bootstrap_servers
        worker = stack.enter_context(ConnectWorker(bootstrap))
        print(f"Kafka Connect {worker.version} worker at {worker.url} (heap {worker.heap}), joined in "
              f"{worker.joined_seconds:.1f}s", flush=True)
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-vs-connect-")))
        from conveyor.testing.spark import local_spark_session

        spark = local_spark_session(cores=4)
        stack.callback(spark.stop)
        print(f"producing {n:,} records (~200 bytes) to {PARTITIONS} partitions, writing a {n:,}-line file ...",
              flush=True)
        topic = make_topic(bootstrap, n)
        source_file = workdir / "input.txt"
        make_source_file(source_file, n)
        warm = min(n, WARMUP_RECORDS)
        print(f"warm-up ({warm:,} records, not counted): every run once but the fresh processes", flush=True)
        warm_topic = make_topic(bootstrap, warm)
        warm_file = workdir / "warm.txt"
        make_source_file(warm_file, warm)
        Bench(bootstrap, worker, spark, warm_topic, warm_file, warm, workdir).round(True, fresh=False)
        delete_topic(bootstrap, warm_topic)
        warm_file.unlink()
        bench = Bench(bootstrap, worker, spark, topic, source_file, n, workdir)
        for i in range(args.rounds):
            connect_first = i % 2 == 0
            print(f"round {i + 1}/{args.rounds} ({'Connect' if connect_first else 'Conveyor'} first)", flush=True)
            rounds.append(bench.round(connect_first))
        delete_topic(bootstrap, topic)
    report(rounds, n)
    for note in dict.fromkeys(bench.notes):
        print(f"note: {note}")
    print(f"(whole run: {(time.monotonic() - began) / 60:.1f} min)")


if __name__ == "__main__":
    main()
