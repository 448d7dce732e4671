"""Sink throughput, measured side by side in one run.

1M records of about 200 bytes on a 6-partition topic, then:

* raw ceiling: one confluent-kafka consumer in this Python process reading everything
  (``consume(500)``, touching key and value), the best a Python sink could do;
* Conveyor with the no-op sink, 1 task and 2 tasks (bytes converters: no decoding, so
  the figure is the runtime's own overhead), and with 1 task on the record path
  (``conveyor.batch.path.enable=false``);
* the file sink with ``StringConverter`` on the record path and on the batch path;
* the archive sink, ``format=jsonl`` on local disk (``flush.size`` 50,000: files are written
  inside ``put``), ``JsonConverter`` without schemas for keys and values, on both paths;
  ``format=parquet`` the same way; and ``format=parquet`` with ``JsonConverter`` *with*
  schemas (a second topic of the same records in Connect's schema envelope: typed columns on
  the batch path), without and with transformations (``ReplaceField`` dropping ``pad``,
  ``InsertField`` adding the offset), on both paths;
* the PostgreSQL sink (JSON values, insert mode, 1 and 2 tasks) against a plain psycopg
  load of the same rows: one process consuming the topic, decoding the JSON and COPYing
  batches of the same size into an identical table, committing offsets after each. A
  COPY of the rows already decoded in memory is printed too, as PostgreSQL's ceiling, and the
  fastest serial loader I could write by hand (Arrow's JSON reader and CSV writer, one COPY
  per batch, no check per message: :func:`arrow_kafka_to_postgres`).

CPU seconds per million records of the consuming process (the raw loop's; a task's Python
worker's, librdkafka's threads included, Spark's JVM and the driver left out) are printed for
the raw consume, no-op and file sink runs, from their first record to their last.

Every figure is steady-state records/s from the first record to the last (for the
PostgreSQL sink: until the last row is committed), so fixed costs such as the Spark job
launch and the consumer-group join are left out of all of them alike: the connectors
start paused and are resumed once every task holds its settled share of the partitions.

The machine's speed drifts by tens of percent within a minute (shared cores), so every
measurement runs ``--rounds`` times (3), interleaved, and the medians are compared; each
round's ratios are printed too.

Targets (issue 2): no-op sink >= 0.7x the raw ceiling; PostgreSQL sink >= 0.6x the plain
load. Run: ``python benchmarks/sink_throughput.py [--records N] [--rounds R]``. Uses
``CONVEYOR_KAFKA_BOOTSTRAP`` / ``CONVEYOR_POSTGRES_URL`` when set, otherwise starts a
local broker and PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from conveyor.manifest import ConnectorManifest
from conveyor.runtime.driver.driver import Driver
from conveyor.testing.kafka import start_or_reuse as start_or_reuse_kafka
from conveyor.testing.postgres import start_or_reuse as start_or_reuse_postgres
from conveyor.testing.runs import produce
from conveyor.testing.timing import read_timings

PARTITIONS = 6
PAD = "p" * 150


def make_topic(bootstrap: str, records: int) -> str:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    items = [(str(i).encode(), json.dumps({"id": i, "name": f"order-{i}", "pad": PAD}).encode())
             for i in range(records)]
    produce(bootstrap, topic, items)
    return topic


ORDER_SCHEMA = {"type": "struct", "name": "bench.Order", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False}, {"field": "name", "type": "string", "optional": False},
    {"field": "pad", "type": "string", "optional": True}]}
KEY_SCHEMA = {"type": "int64", "optional": False}


def make_typed_topic(bootstrap: str, records: int) -> str:
    """The records of :func:`make_topic` in ``JsonConverter``'s schema envelope."""
    topic = f"bench-typed-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    items = [(json.dumps({"schema": KEY_SCHEMA, "payload": i}).encode(),
              json.dumps({"schema": ORDER_SCHEMA, "payload": {"id": i, "name": f"order-{i}", "pad": PAD}}).encode())
             for i in range(records)]
    produce(bootstrap, topic, items)
    return topic


def raw_ceiling(bootstrap: str, topic: str, records: int, cpu: list[float] | None = None) -> float:
    """From the first message received to the last: the steady-state ceiling. With ``cpu``,
    appends the CPU seconds per million records in that window."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"raw-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "partition.assignment.strategy": "cooperative-sticky",
        "fetch.queue.backoff.ms": 10,  # the same fetch tuning as Conveyor's sink consumers
    })
    consumer.subscribe([topic])
    start = None
    seen = 0
    size = 0
    while seen < records:
        for msg in consumer.consume(500, 1.0):
            if msg.error() is None:
                if start is None:
                    start, cpu_start = time.perf_counter(), time.process_time()
                size += len(msg.value()) + len(msg.key() or b"")
                seen += 1
    elapsed = time.perf_counter() - start
    if cpu is not None:
        cpu.append((time.process_time() - cpu_start) / records * 1e6)
    consumer.close()
    return records / elapsed


def run_connector(bootstrap: str, topic: str, records: int, cls: str, tasks: int, config: dict[str, Any],
                  spark: Any, durable: bool, cpu: list[float] | None = None) -> float:
    """Records/s from the first ``put`` to the last ``put`` (``durable=False``) or to the
    first ``pre_commit`` after it, when the sink has made everything durable. With ``cpu``,
    appends the CPU seconds per million records of the tasks' processes from their first
    ``put`` to the end of their last (librdkafka's threads included; the driver and Spark's
    JVM left out)."""
    with tempfile.TemporaryDirectory() as tmp:
        timings_path = f"{tmp}/timings.jsonl"
        manifest = ConnectorManifest.from_dict({
            "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": f"bench-{uuid.uuid4().hex[:6]}"},
            "spec": {"class": "conveyor.testing.timing:TimedSinkConnector", "tasksMax": tasks, "state": "paused",
                     "kafka": {"bootstrapServers": bootstrap},
                     "config": {"topics": topic, "offset.flush.interval.ms": "1000", "timed.connector.class": cls,
                                "timed.path": timings_path,
                                **({"timed.records": str(records)} if tasks == 1 else {}), **config}},
        })
        driver = Driver(manifest, spark=spark, control_port=0)
        driver.start()
        try:
            wait_for_settled_assignment(lambda: driver.status()["tasks"], tasks)
            driver.resume()
            while sum(t.get("records_put", 0) for t in driver.status()["tasks"]) < records:
                if any(t["state"] == "FAILED" for t in driver.status()["tasks"]):
                    raise RuntimeError(json.dumps(driver.status(), indent=2))
                time.sleep(0.05)
            time.sleep(1.5)  # let a periodic pre_commit make the tail durable
        finally:
            driver.stop()
            driver.close()
        timings = [t for t in read_timings(timings_path) if t["records"]]
    assert sum(t["records"] for t in timings) == records, timings
    if cpu is not None:
        cpu.append(sum(t["cpu_last_put_end"] - t["cpu_first_put"] for t in timings) / records * 1e6)
    start = min(t["first_put"] for t in timings)
    if durable:
        end = max(next(at for at, seen in t["pre_commit_ends"] if seen == t["records"]) for t in timings)
    else:
        end = max(t["last_put_end"] for t in timings)
    return records / (end - start)


def file_sink(bootstrap: str, topic: str, records: int, config: dict[str, Any], spark: Any,
              cpu: list[float]) -> float:
    """The file sink with one task, until every line is flushed (a ``pre_commit``)."""
    with tempfile.TemporaryDirectory() as tmp:
        return run_connector(bootstrap, topic, records, "file-sink", 1, {**config, "file": f"{tmp}/out.txt"}, spark,
                             durable=True, cpu=cpu)


def archive_sink(bootstrap: str, topic: str, records: int, config: dict[str, Any], spark: Any,
                 cpu: list[float], fmt: str = "jsonl") -> float:
    """The archive sink (``fmt``, local disk) with one task, until its last ``put`` returns."""
    with tempfile.TemporaryDirectory() as tmp:
        return run_connector(bootstrap, topic, records, "archive-sink", 1,
                             {**config, "archive.url": f"{tmp}/archive", "format": fmt, "flush.size": "50000"},
                             spark, durable=False, cpu=cpu)


def wait_for_settled_assignment(task_statuses: Callable[[], list[dict[str, Any]]], tasks: int,
                                timeout_s: float = 120.0) -> None:
    """Until every task has its share of the partitions, unchanged for a second: the
    connector starts paused, so the consumer-group joins (and the rebalance each later
    member causes) happen before any record is read. ``task_statuses`` returns the
    ``tasks`` of the driver's status document."""
    deadline = time.monotonic() + timeout_s
    last: list[tuple[str, ...]] | None = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        status = task_statuses()
        if any(t["state"] == "FAILED" for t in status):
            raise RuntimeError(json.dumps(status, indent=2))
        assignment = sorted(tuple(sorted(t.get("assignment") or ())) for t in status)
        if assignment != last:
            last, since = assignment, time.monotonic()
        elif (len(status) == tasks and all(assignment) and sum(map(len, assignment)) == PARTITIONS
              and time.monotonic() - since >= 1.0):
            return
        time.sleep(0.1)
    raise RuntimeError(f"tasks did not settle on an assignment of all {PARTITIONS} partitions: {last}")


def plain_copy_from_memory(url: str, records: int) -> float:
    """PostgreSQL's own ceiling here: one COPY of rows already decoded, in one transaction."""
    rows = [(i, f"order-{i}", PAD) for i in range(records)]
    table = f"plain_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(url) as conn:
        conn.execute(f'CREATE TABLE "{table}" (id bigint, name text, pad text)')
        conn.commit()
        start = time.perf_counter()
        with conn.cursor() as cur, cur.copy(f'COPY "{table}" (id, name, pad) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)
        conn.commit()
        return records / (time.perf_counter() - start)


def plain_kafka_to_postgres(bootstrap: str, topic: str, url: str, records: int, batch: int) -> float:
    """What a user would write without Conveyor: one consumer, JSON decode, COPY per
    ``batch`` rows in its own transaction, then a synchronous offset commit. From the first
    record to the last commit."""
    loads = _fastest_json_loads()

    def copy(cur: psycopg.Cursor, table: str, values: list[bytes]) -> None:
        with cur.copy(f'COPY "{table}" (id, name, pad) FROM STDIN') as stream:
            for value in map(loads, values):
                stream.write_row((value["id"], value["name"], value["pad"]))

    return _serial_load(bootstrap, topic, url, records, batch, "plain", copy)


def arrow_kafka_to_postgres(bootstrap: str, topic: str, url: str, records: int, batch: int) -> float:
    """The fastest serial loader of these rows I could write by hand: the values of ``batch``
    rows joined and decoded by Arrow's JSON reader (no check per message), rendered by Arrow's
    CSV writer into one ``COPY (FORMAT csv)``; otherwise as :func:`plain_kafka_to_postgres`."""
    read = pa_json.ReadOptions(use_threads=False, block_size=1 << 24)
    write = pa_csv.WriteOptions(include_header=False, quoting_style="needed")

    def copy(cur: psycopg.Cursor, table: str, values: list[bytes]) -> None:
        rows = pa_json.read_json(pa.BufferReader(b"\n".join(values)), read_options=read)
        csv = pa.BufferOutputStream()
        pa_csv.write_csv(rows.select(["id", "name", "pad"]), csv, write)
        with cur.copy(f'COPY "{table}" (id, name, pad) FROM STDIN (FORMAT csv)') as stream:
            stream.write(csv.getvalue())

    return _serial_load(bootstrap, topic, url, records, batch, "arrow", copy)


def _serial_load(bootstrap: str, topic: str, url: str, records: int, batch: int, name: str,
                 copy: Callable[[psycopg.Cursor, str, list[bytes]], None]) -> float:
    """One consumer; every ``batch`` values, ``copy(cursor, table, values)`` into a new table
    ``<name>load_*`` in its own transaction, then a synchronous offset commit. Records/s from
    the first record to the last commit."""
    table = f"{name}load_{uuid.uuid4().hex[:6]}"
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"{name}-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
    })
    consumer.subscribe([topic])
    with psycopg.connect(url) as conn:
        conn.execute(f'CREATE TABLE "{table}" (id bigint, name text, pad text)')
        conn.commit()
        start = None
        done = 0
        values: list[bytes] = []
        while done < records:
            for msg in consumer.consume(500, 1.0):
                if msg.error() is None:
                    start = start or time.perf_counter()
                    values.append(msg.value())
            if len(values) >= batch or (values and done + len(values) >= records):
                with conn.cursor() as cur:
                    copy(cur, table, values)
                conn.commit()
                consumer.commit(asynchronous=False)
                done += len(values)
                values = []
        elapsed = time.perf_counter() - start
    consumer.close()
    return records / elapsed


def _fastest_json_loads() -> Any:
    try:
        import orjson

        return orjson.loads
    except ImportError:
        return json.loads


MEASUREMENTS = (
    # key, label, baseline key, target ratio
    ("raw", "raw confluent-kafka consume (1 consumer)", None, None),
    ("noop1r", "conveyor no-op sink, 1 task, record path", "raw", 0.70),
    ("noop1", "conveyor no-op sink, 1 task", "raw", 0.70),
    ("noop2", "conveyor no-op sink, 2 tasks", "raw", 0.70),
    ("file1r", "file-sink (strings), 1 task, record path", None, None),
    ("file1", "file-sink (strings), 1 task, batch path", "file1r", 1.00),
    ("arch1r", "archive-sink jsonl (JSON), 1 task, record path", None, None),
    ("arch1", "archive-sink jsonl (JSON), 1 task, batch path", "arch1r", 1.00),
    ("parq1r", "archive-sink parquet (JSON), record path", None, None),
    ("parq1", "archive-sink parquet (JSON), batch path", "parq1r", 1.00),
    ("typed1r", "archive parquet (JSON, schemas), record path", None, None),
    ("typed1", "archive parquet (JSON, schemas), batch path", "typed1r", 1.00),
    ("smt1r", "typed + ReplaceField, InsertField, record path", None, None),
    ("smt1", "typed + ReplaceField, InsertField, batch path", "smt1r", 1.00),
    ("copy", "PostgreSQL COPY of decoded rows from memory", None, None),
    ("plain", "plain psycopg load from Kafka (1 process)", None, None),
    ("arrow", "hand-written Arrow load (serial)", "plain", None),
    ("pg1r", "conveyor postgres-sink, 1 task, record path", "plain", None),
    ("pg1", "conveyor postgres-sink, 1 task", "plain", 1.50),
    ("pg2", "conveyor postgres-sink, 2 tasks", "plain", 0.60),
)


CPU_MEASURED = ("raw", "noop1r", "noop1", "file1r", "file1", "arch1r", "arch1", "parq1r", "parq1", "typed1r", "typed1",
                "smt1r", "smt1", "pg1r", "pg1")
TYPED = ("typed1r", "typed1", "smt1r", "smt1")
"""The measurements whose CPU per record is printed: the consuming process's (the raw loop's,
a task's Python worker's), from the first record to the last; PostgreSQL's is elsewhere."""


def one_round(bootstrap: str, topic: str, pg_url: str, n: int, spark: Any,
              only: set[str] | None = None, typed_topic: str | None = None) -> dict[str, float]:
    """Every measurement once, in the order of :data:`MEASUREMENTS`; ``cpu:<key>`` is the CPU
    seconds per million records of the measurements in :data:`CPU_MEASURED`, in their
    steady window."""
    bytes_conv = {"key.converter": "bytes", "value.converter": "bytes"}
    records_path = {"conveyor.batch.path.enable": "false"}
    strings = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
               "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
    json_conv = {"key.converter": "json", "key.converter.schemas.enable": "false",
                 "value.converter": "json", "value.converter.schemas.enable": "false"}
    pg_sink_config = {"connection.url": pg_url, "auto.create": "true", "batch.size": "5000",
                      "value.converter": "json", "value.converter.schemas.enable": "false"}
    typed_json = {"key.converter": "json", "value.converter": "json"}  # schemas.enable: true, the default
    smts = {"transforms": "drop,offset", "transforms.drop.type": "ReplaceField$Value", "transforms.drop.exclude": "pad",
            "transforms.offset.type": "InsertField$Value", "transforms.offset.offset.field": "kafka_offset"}
    cpu: dict[str, list[float]] = {key: [] for key in CPU_MEASURED}
    runs: dict[str, Callable[[], float]] = {
        "raw": lambda: raw_ceiling(bootstrap, topic, n, cpu["raw"]),
        "noop1r": lambda: run_connector(bootstrap, topic, n, "noop-sink", 1, {**bytes_conv, **records_path},
                                        spark, durable=False, cpu=cpu["noop1r"]),
        "noop1": lambda: run_connector(bootstrap, topic, n, "noop-sink", 1, bytes_conv, spark, durable=False,
                                       cpu=cpu["noop1"]),
        "noop2": lambda: run_connector(bootstrap, topic, n, "noop-sink", 2, bytes_conv, spark, durable=False),
        "file1r": lambda: file_sink(bootstrap, topic, n, {**strings, **records_path}, spark, cpu["file1r"]),
        "file1": lambda: file_sink(bootstrap, topic, n, strings, spark, cpu["file1"]),
        "arch1r": lambda: archive_sink(bootstrap, topic, n, {**json_conv, **records_path}, spark, cpu["arch1r"]),
        "arch1": lambda: archive_sink(bootstrap, topic, n, json_conv, spark, cpu["arch1"]),
        "parq1r": lambda: archive_sink(bootstrap, topic, n, {**json_conv, **records_path}, spark, cpu["parq1r"],
                                       "parquet"),
        "parq1": lambda: archive_sink(bootstrap, topic, n, json_conv, spark, cpu["parq1"], "parquet"),
        "typed1r": lambda: archive_sink(bootstrap, typed_topic, n, {**typed_json, **records_path}, spark,
                                        cpu["typed1r"], "parquet"),
        "typed1": lambda: archive_sink(bootstrap, typed_topic, n, typed_json, spark, cpu["typed1"], "parquet"),
        "smt1r": lambda: archive_sink(bootstrap, typed_topic, n, {**typed_json, **smts, **records_path}, spark,
                                      cpu["smt1r"], "parquet"),
        "smt1": lambda: archive_sink(bootstrap, typed_topic, n, {**typed_json, **smts}, spark, cpu["smt1"], "parquet"),
        "copy": lambda: plain_copy_from_memory(pg_url, n),
        "plain": lambda: plain_kafka_to_postgres(bootstrap, topic, pg_url, n, batch=5000),
        "arrow": lambda: arrow_kafka_to_postgres(bootstrap, topic, pg_url, n, batch=5000),
        "pg1r": lambda: run_connector(bootstrap, topic, n, "postgres-sink", 1, {**pg_sink_config, **records_path},
                                      spark, durable=True, cpu=cpu["pg1r"]),
        "pg1": lambda: run_connector(bootstrap, topic, n, "postgres-sink", 1, pg_sink_config, spark, durable=True,
                                     cpu=cpu["pg1"]),
        "pg2": lambda: run_connector(bootstrap, topic, n, "postgres-sink", 2, pg_sink_config, spark, durable=True),
    }
    figures = {key: run() for key, run in runs.items() if only is None or key in only}
    return {**figures, **{f"cpu:{key}": values[0] for key, values in cpu.items() if values}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of every measurement, interleaved; the medians are compared")
    parser.add_argument("--only", help="comma-separated measurement keys to run (with their baselines)")
    args = parser.parse_args()
    only = None
    if args.only:
        only = set(args.only.split(","))
        only |= {baseline for key, _, baseline, _ in MEASUREMENTS if key in only and baseline}
    n = args.records
    rounds: list[dict[str, float]] = []
    with ExitStack() as stack:
        kafka = stack.enter_context(start_or_reuse_kafka())
        pg = stack.enter_context(start_or_reuse_postgres())
        bootstrap = kafka.bootstrap_servers
        pg_url = pg.create_database(f"bench_{uuid.uuid4().hex[:6]}")
        from conveyor.testing.spark import local_spark_session

        spark = local_spark_session(cores=4)
        print(f"producing {n:,} records (~200 bytes) to {PARTITIONS} partitions ...", flush=True)
        topic = make_topic(bootstrap, n)
        typed_topic = make_typed_topic(bootstrap, n) if only is None or only & set(TYPED) else None
        for i in range(args.rounds):
            rounds.append(one_round(bootstrap, topic, pg_url, n, spark, only, typed_topic))
            print(f"round {i + 1}/{args.rounds}: " + ", ".join(f"{k} {v:,.1f}" if k.startswith("cpu:") else
                                                               f"{k} {v:,.0f}" for k, v in rounds[-1].items()),
                  flush=True)
        spark.stop()
    measured = [m for m in MEASUREMENTS if m[0] in rounds[0]]
    median = {key: statistics.median(r[key] for r in rounds) for key, *_ in measured}
    print()
    print(f"records/s, median of {len(rounds)} interleaved rounds; ratio = median / median of its baseline")
    print(f"{'measurement':<44}{'records/s':>12}{'ratio':>9}  target   rounds' ratios")
    for key, label, baseline, target in measured:
        if baseline is None:
            ratio = "1.00" if key in ("raw", "plain") else ""
            print(f"{label:<44}{median[key]:>12,.0f}{ratio:>9}")
            continue
        each = " ".join(f"{r[key] / r[baseline]:.2f}" for r in rounds)
        goal = f"  >= {target:.2f} x {baseline} {'PASS' if median[key] / median[baseline] >= target else 'MISS'}" \
            if target is not None else f"  (x {baseline})"
        print(f"{label:<44}{median[key]:>12,.0f}{median[key] / median[baseline]:>9.2f}{goal}   {each}")
    if "pg1" in median and "copy" in median:
        print(f"{'postgres-sink, 1 task / COPY from memory':<44}{'':>12}{median['pg1'] / median['copy']:>9.2f}   "
              + " ".join(f"{r['pg1'] / r['copy']:.2f}" for r in rounds))
    labels = {key: label for key, label, *_ in MEASUREMENTS}
    print()
    print("CPU seconds per million records (the consuming process, librdkafka's threads included, first record "
          "to last), median and rounds")
    for key in (k for k in CPU_MEASURED if k in median):
        each = [r[f"cpu:{key}"] for r in rounds if f"cpu:{key}" in r]
        if not each:
            continue
        print(f"{labels[key]:<44}{statistics.median(each):>12.1f}   " + " ".join(f"{c:.1f}" for c in each))


if __name__ == "__main__":
    main()
