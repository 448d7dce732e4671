"""Source throughput, measured side by side in one run.

* A no-op source (``conveyor.testing.sources``: numbered records built in memory, JSON
  values of about 60 bytes) writing ``--records`` records through Conveyor, 2 tasks:
  at least once (idempotent producer), exactly once with ``transaction.boundary=poll``,
  and with ``transaction.boundary=interval`` every 1 s. Records/s from the first
  ``poll`` to the ``commit_record`` of the last record (exactly once: after its
  transaction committed).
* The PostgreSQL audit source reading ``--audit-rows`` captured changes, against a plain
  ``SELECT * FROM <audit table> WHERE id > 0 ORDER BY id`` of the same rows: the
  connector's read path (its task's ``poll`` loop) and the whole connector on Conveyor
  (changes arriving in Kafka, at least once, 1 task; from the first change's arrival to the
  last one's).

``--rounds N`` repeats the audit measurements N times, interleaved, and reports medians.
Targets (issue 3): ``interval`` at least 0.8x at-least-once; the audit source at least
0.5x the plain read. Run: ``python benchmarks/source_throughput.py``. Uses
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
from contextlib import ExitStack
from typing import Any

import psycopg
from confluent_kafka.admin import AdminClient, NewTopic

from conveyor.api import OffsetStorageReader, SourceTaskContext, TransactionContext
from conveyor.connectors.postgres_audit.config import AuditNames, load_config
from conveyor.connectors.postgres_audit.source import PostgresAuditSourceConnector, PostgresAuditSourceTask
from conveyor.manifest import ConnectorManifest
from conveyor.runtime.driver.driver import Driver
from conveyor.testing.kafka import start_or_reuse as start_or_reuse_kafka
from conveyor.testing.postgres import start_or_reuse as start_or_reuse_postgres


def _manifest(name: str, cls: str, bootstrap: str, tasks: int, config: dict[str, Any]) -> ConnectorManifest:
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name},
        "spec": {"class": cls, "tasksMax": tasks, "kafka": {"bootstrapServers": bootstrap}, "config": config},
    })


def no_op_source(bootstrap: str, spark: Any, records: int, extra: dict[str, Any]) -> float:
    topic = f"bench-src-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    with tempfile.TemporaryDirectory() as tmp:
        timing = f"{tmp}/timing.jsonl"
        config = {"topic": topic, "records.per.stream": str(records // 2), "batch.size": "2000",
                  "value.converter": "json", "value.converter.schemas.enable": "false",
                  "offset.flush.interval.ms": "1000", "timing.path": timing, **extra}
        driver = Driver(_manifest(f"bench-{uuid.uuid4().hex[:6]}", "conveyor.testing.sources:SequenceSourceConnector",
                                  bootstrap, 2, config), spark=spark, control_port=0)
        driver.start()
        try:
            deadline = time.monotonic() + 600
            while sum(t.get("records_written", 0) for t in driver.status()["tasks"]) < records:
                if time.monotonic() > deadline or any(t["state"] == "FAILED" for t in driver.status()["tasks"]):
                    raise RuntimeError(json.dumps(driver.status(), indent=2))
                time.sleep(0.1)
            time.sleep(2)  # the last transaction commits
        finally:
            driver.stop()
            driver.close()
        with open(timing) as lines:
            rows = [json.loads(line) for line in lines]
    assert sum(r["records"] for r in rows) == records, rows
    return records / (max(r["last_done"] for r in rows) - min(r["first_poll"] for r in rows))


class _NoOffsets(OffsetStorageReader):
    def offset(self, partition: Any) -> None:
        return None


class _Context(SourceTaskContext):
    def configs(self) -> dict[str, Any]:
        return {}

    def offset_storage_reader(self) -> OffsetStorageReader:
        return _NoOffsets()

    def transaction_context(self) -> TransactionContext | None:
        return None


def audit_source(bootstrap: str, spark: Any, pg: Any, rows: int) -> tuple[float, float, float, float]:
    """(poll loop rows/s, plain SELECT rows/s, whole connector on Conveyor rows/s on the record
    path, and on the batch path): the two connector runs read the same audit rows, each into
    its own topic with its own offsets."""
    url = pg.create_database(f"bench_{uuid.uuid4().hex[:6]}")
    name = f"bench-audit-{uuid.uuid4().hex[:4]}"
    config = {"name": name, "connection.url": url, "tables": "public.orders", "poll.interval.ms": "100",
              "poll.max.rows": "5000", "topic.prefix": f"{name}.",
              "audit.retention": "keep"}  # both connector runs read the same rows
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, item text, qty int, price numeric(10,2))")
        connector = PostgresAuditSourceConnector()
        connector.start(config)
        conn.execute(f"INSERT INTO orders SELECT g, 'item-' || g, g % 7, g * 1.5 FROM generate_series(1, {rows}) g")
        audit_table = AuditNames.of(load_config(config)).table
        conn.execute(f"VACUUM ANALYZE conveyor_audit.{audit_table}")

    task = PostgresAuditSourceTask()
    task.initialize(_Context())
    task.start(config)
    start, seen = time.perf_counter(), 0
    while seen < rows:
        seen += len(task.poll() or [])
    poll_rate = rows / (time.perf_counter() - start)
    task.stop()

    with psycopg.connect(url, autocommit=True) as conn:
        start = time.perf_counter()
        fetched = conn.execute(f"SELECT * FROM conveyor_audit.{audit_table} WHERE id > 0 ORDER BY id").fetchall()
        plain_rate = len(fetched) / (time.perf_counter() - start)

    rates = []
    for path in ("records", "batches"):
        prefix = f"{name}-{path}."
        driver = Driver(_manifest(name, "postgres-audit-source", bootstrap, 1, {
            **config, "value.converter": "json", "value.converter.schemas.enable": "false", "topic.prefix": prefix,
            "key.converter": "json", "key.converter.schemas.enable": "false", "offset.flush.interval.ms": "1000",
            "offsets.storage.topic": f"bench-offsets-{uuid.uuid4().hex[:6]}",
            "conveyor.batch.path.enable": str(path == "batches").lower(),
        }), spark=spark, control_port=0)
        driver.start()
        try:
            rates.append(_arrival_rate(bootstrap, f"{prefix}public.orders", rows))
        finally:
            driver.stop(connector_deleted=path == "batches")
            driver.close()
    return poll_rate, plain_rate, rates[0], rates[1]


def _arrival_rate(bootstrap: str, topic: str, expected: int) -> float:
    """Records/s from the first record's arrival in ``topic`` to the last one's."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 10, "topic.metadata.refresh.interval.ms": 500})
    deadline = time.monotonic() + 600
    while topic not in consumer.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(topic)
        time.sleep(0.1)
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    seen, first = 0, None
    try:
        while seen < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.1):
                if msg.error() is None:
                    first = first or time.perf_counter()
                    seen += 1
        last = time.perf_counter()
    finally:
        consumer.close()
    return seen / (last - first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--audit-rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=1,
                        help="audit part: rounds of (poll loop, plain SELECT, connector), medians reported")
    parser.add_argument("--parts", default="no-op,audit",
                        help="comma-separated: no-op (the three delivery modes), audit (the PostgreSQL audit source)")
    args = parser.parse_args()
    parts = {part.strip() for part in args.parts.split(",")}
    unknown = parts - {"no-op", "audit"}
    if unknown:
        parser.error(f"--parts: unknown {', '.join(sorted(unknown))} (known: no-op, audit)")
    with ExitStack() as stack:
        kafka = stack.enter_context(start_or_reuse_kafka())
        pg = stack.enter_context(start_or_reuse_postgres())
        from conveyor.testing.spark import local_spark_session

        spark = local_spark_session(cores=4)
        bootstrap = kafka.bootstrap_servers
        if "no-op" in parts:
            plain = no_op_source(bootstrap, spark, args.records, {})
            poll = no_op_source(bootstrap, spark, args.records, {"exactly.once.support": "required",
                                                                 "transaction.boundary": "poll"})
            interval = no_op_source(bootstrap, spark, args.records, {"exactly.once.support": "required",
                                                                     "transaction.boundary": "interval",
                                                                     "transaction.boundary.interval.ms": "1000"})
        if "audit" in parts:
            rounds = [audit_source(bootstrap, spark, pg, args.audit_rows) for _ in range(max(1, args.rounds))]
            audit_poll, audit_plain, audit_records, audit_batches = (statistics.median(column)
                                                                     for column in zip(*rounds))
        spark.stop()
    print()
    print(f"{'measurement':<58}{'records/s':>12}{'ratio':>8}  target")
    if "no-op" in parts:
        _print_no_op(plain, poll, interval)
    if "audit" in parts:
        _print_audit(audit_plain, audit_poll, audit_records, audit_batches)
        print("rounds (poll loop, plain, connector on records, on batches): "
              + "; ".join(", ".join(f"{rate:,.0f}" for rate in r) for r in rounds))


def _print_no_op(plain: float, poll: float, interval: float) -> None:
    print(f"{'no-op source, at least once (idempotent producer)':<58}{plain:>12,.0f}{1.0:>8.2f}")
    print(f"{'no-op source, exactly once, transaction.boundary=poll':<58}{poll:>12,.0f}{poll / plain:>8.2f}")
    print(f"{'no-op source, exactly once, boundary=interval (1 s)':<58}{interval:>12,.0f}{interval / plain:>8.2f}"
          "  >= 0.80 x at least once")


def _print_audit(audit_plain: float, audit_poll: float, audit_records: float, audit_batches: float) -> None:
    print(f"{'plain SELECT of the audit rows':<58}{audit_plain:>12,.0f}{1.0:>8.2f}")
    print(f"{'audit source, poll loop (the read path)':<58}{audit_poll:>12,.0f}{audit_poll / audit_plain:>8.2f}"
          "  >= 0.50 x plain")
    print(f"{'audit source on Conveyor into Kafka, record path':<58}{audit_records:>12,.0f}"
          f"{audit_records / audit_plain:>8.2f}  >= 0.50 x plain (issue 14)")
    print(f"{'audit source on Conveyor into Kafka, batch path':<58}{audit_batches:>12,.0f}"
          f"{audit_batches / audit_plain:>8.2f}  ({audit_batches / audit_records:.2f} x the record path)")


if __name__ == "__main__":
    main()
