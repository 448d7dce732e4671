"""postgres-sink's batch path (``put_batch``: schemaless JSON written from Arrow with
``COPY (FORMAT csv)``) against its record path (``put``), driven directly against a real
PostgreSQL: for the same records, the same rows in the tables (as PostgreSQL prints them),
the same records reported, the same offsets returned and stored, the same errors raised.
Each case also says whether the batch path writes from the columns or hands the batch to
the record path, so a fall-back everywhere (which would trivially agree) fails the test."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from conveyor.api import SinkRecord, TopicPartition
from conveyor.api.batches import KEY, OFFSET, PARTITION, TOPIC, record_batches
from conveyor.connectors.postgres.sink import PostgresSinkConnector, PostgresSinkTask
from conveyor.testing.contexts import RecordingReporter, start_sink_task
from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    dead_letter_context,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
FALLBACK = "as records"


def rec(offset: int, value: Any, key: Any = None, *, partition: int = 0, topic: str = "orders") -> SinkRecord:
    return SinkRecord(topic=topic, kafka_partition=partition, key=key, value=value, kafka_offset=offset)


@dataclass
class Case:
    config: dict[str, Any]
    setup: Sequence[str]
    puts: Sequence[Sequence[SinkRecord]]
    columnar: bool  # whether every write of the batch path is made from the columns
    tables: Sequence[str] = ("orders",)
    string_keys: bool = False  # keys as StringConverter gives them (else JSON)
    partitions: Sequence[TopicPartition] = (TP0, TP1)
    reporter: bool = True
    stored: Mapping[TopicPartition, int] = field(default_factory=dict)  # exactly.once: stored before
    commit_each: bool = True  # pre_commit after each put (else once, after the last)
    close: Sequence[TopicPartition] = ()  # closed after put number close_after (default: the last)
    close_after: int = -1
    streamed: bool | None = None  # whether a write commits batches streamed into a COPY (None: either)
    stream_rows: int = 1  # PostgresSinkTask.stream_rows: 1 sends each batch to the stream as it comes
    # A streamed COPY's commit waits for the next put_batch, so a row PostgreSQL refuses fails a later
    # call than on the record path. Both runs then stop at their first error, as the runtime fails the
    # task, and the errors must be the same ones, in order.
    error_may_come_later: bool = False


TYPED_TABLE = ("CREATE TABLE orders (id bigint, item text, price double precision, paid boolean, doc jsonb,"
               " at timestamptz, day date, note text DEFAULT 'none', qty integer)")
ODD_STRINGS = ["", "a,b", 'say "hi"', "line\nbreak\r\n", "tab\there", "back\\slash", "é ü 日本 🚀", "NULL", "\\N"]


def _typed_values(n: int, partition: int = 0) -> list[SinkRecord]:
    out = []
    for i in range(n):
        value: dict[str, Any] = {"id": i, "item": ODD_STRINGS[i % len(ODD_STRINGS)], "price": i / 7 if i % 3 else i,
                                 "paid": [True, False, None][i % 3], "at": f"2026-11-{1 + i % 28:02d}T10:00:00Z",
                                 "day": f"2026-01-{1 + i % 28:02d}", "qty": None if i % 5 == 0 else -i}
        if i % 4 == 0:
            del value["qty"]  # absent: NULL, as null is
        if i % 6 == 0:
            value["doc"] = "{\"k\": 1}"  # a JSON string into jsonb: its text is the document
        out.append(rec(i, value, partition=partition))
    return out


CASES = {
    "insert-scalars-into-typed-columns": Case(
        {}, [TYPED_TABLE], [_typed_values(40), _typed_values(25, partition=1)], columnar=True),
    "a-default-kept-where-no-record-has-the-field": Case(
        {}, [TYPED_TABLE], [[rec(0, {"id": 1, "item": "x"}), rec(1, {"id": 2})]], columnar=True),
    "fractions-into-a-numeric-column": Case(
        {}, ["CREATE TABLE orders (id bigint, amount numeric)"],
        [[rec(0, {"id": 1, "amount": 100.0}), rec(1, {"id": 2, "amount": 0.1})]], columnar=False),
    "integers-and-fractions-into-a-text-column": Case(
        {}, ["CREATE TABLE orders (id bigint, v text)"],
        [[rec(0, {"id": 1, "v": 1e16}), rec(1, {"id": 2, "v": 12})]], columnar=False),
    "integers-beyond-64-bits": Case(
        {}, ["CREATE TABLE orders (id numeric, v double precision)"],
        [[rec(0, {"id": 12345678901234567890123, "v": 12345678901234567890123})]], columnar=False),
    "nested-objects-into-jsonb": Case(
        {}, ["CREATE TABLE orders (id bigint, doc jsonb)"],
        [[rec(0, {"id": 1, "doc": {"a": [1, 2]}}), rec(1, {"id": 2, "doc": None})]], columnar=False),
    "booleans-and-integers-into-text": Case(
        {}, ["CREATE TABLE orders (id text, flag text)"],
        [[rec(0, {"id": 1, "flag": True}), rec(1, {"id": 2, "flag": False})]], columnar=True),
    "poison-values-reported": Case(
        {"errors.tolerance": "all"}, ["CREATE TABLE orders (id bigint, item text)"],
        [[rec(0, {"id": 1}), rec(1, "not an object"), rec(2, [1, 2]), rec(3, {"id": 4, "item": "x\u0000y"}),
          rec(4, {"id": 5})]], columnar=False),
    "a-row-the-database-refuses-is-reported": Case(
        {}, ["CREATE TABLE orders (id bigint NOT NULL, item text)"],
        [[rec(0, {"id": 1}), rec(1, {"id": None, "item": "no id"}), rec(2, {"id": 3})]], columnar=True),
    "a-refused-row-without-a-reporter-fails": Case(
        {}, ["CREATE TABLE orders (id bigint NOT NULL, item text)"],
        [[rec(0, {"id": 1}), rec(1, {"item": "no id"})]], columnar=True, reporter=False),
    "a-streamed-row-the-database-refuses-is-found-at-the-next-put": Case(
        {"batch.size": "2"}, ["CREATE TABLE orders (id bigint NOT NULL, item text)"],
        [[rec(0, {"id": 1}), rec(1, {"id": None, "item": "no id"})], [rec(2, {"id": 3}), rec(3, {"id": 4})],
         [rec(4, {"id": 5})]], columnar=True, commit_each=False),
    "a-streamed-refused-row-without-a-reporter-fails-the-next-put": Case(
        {"batch.size": "2"}, ["CREATE TABLE orders (id bigint NOT NULL, item text)"],
        [[rec(0, {"id": 1}), rec(1, {"item": "no id"})], [rec(2, {"id": 3})]],
        columnar=True, reporter=False, commit_each=False, error_may_come_later=True),
    "a-missing-column-is-an-error": Case(
        {}, ["CREATE TABLE orders (id bigint)"], [[rec(0, {"id": 1, "extra": "x"})]], columnar=False),
    "auto-create-then-columns": Case(
        {"auto.create": "true"}, [],
        [[rec(0, {"id": 1, "item": "a", "price": 1.5, "ok": True})],
         [rec(1, {"id": 2, "item": "b", "price": 2.25, "ok": False})]], columnar=False),
    "auto-evolve-adds-a-column": Case(
        {"auto.evolve": "true"}, ["CREATE TABLE orders (id bigint)"],
        [[rec(0, {"id": 1})], [rec(1, {"id": 2, "added": "x"})], [rec(2, {"id": 3, "added": "y"})]],
        columnar=False),
    "upsert-by-json-keys-last-wins": Case(
        {"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id"},
        ["CREATE TABLE orders (id bigint PRIMARY KEY, item text, qty integer)",
         "INSERT INTO orders VALUES (1, 'old', 0), (9, 'kept', 9)"],
        [[rec(i, {"item": f"v{i}", "qty": i}, key=i % 3) for i in range(10)],
         [rec(10 + i, {"item": f"w{i}"}, key=i) for i in range(3)]], columnar=True),
    "update-by-json-keys-last-wins-and-missing-keys-left-out": Case(
        {"insert.mode": "update", "pk.mode": "record_key", "pk.fields": "id"},
        ["CREATE TABLE orders (id bigint PRIMARY KEY, item text, qty integer)",
         "INSERT INTO orders VALUES (1, 'old', 0), (2, 'old', 0), (9, 'kept', 9)"],
        [[rec(i, {"item": f"v{i}", "qty": i}, key=i % 4) for i in range(10)]], columnar=True),
    "kafka-coordinates-as-the-key": Case(
        {"insert.mode": "upsert", "pk.mode": "kafka"},
        ["CREATE TABLE orders (__connect_topic text, __connect_partition integer, __connect_offset bigint, "
         "item text, PRIMARY KEY (__connect_topic, __connect_partition, __connect_offset))"],
        [[rec(i, {"item": f"v{i}"}) for i in range(4)], [rec(2, {"item": "again"})]], columnar=False),
    "upsert-by-string-keys": Case(
        {"insert.mode": "upsert", "pk.mode": "record_key"},
        ["CREATE TABLE orders (__connect_key text PRIMARY KEY, item text)"],
        [[rec(i, {"item": f"v{i}"}, key=f"k{i % 4}") for i in range(9)]], columnar=True, string_keys=True),
    "insert-with-record-keys-and-a-value-field-of-the-key-name": Case(
        {"pk.mode": "record_key", "pk.fields": "id"}, ["CREATE TABLE orders (id bigint, item text)"],
        [[rec(i, {"id": 100 + i, "item": f"v{i}"}, key=i) for i in range(5)]], columnar=True),
    "a-null-record-key-is-reported": Case(
        {"pk.mode": "record_key", "pk.fields": "id"}, ["CREATE TABLE orders (id bigint, item text)"],
        [[rec(0, {"item": "a"}, key=1), rec(1, {"item": "b"}, key=None)]], columnar=False),
    "upsert-by-value-fields": Case(
        {"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id,item"},
        ["CREATE TABLE orders (id bigint, item text, qty integer, PRIMARY KEY (id, item))"],
        [[rec(i, {"id": i % 2, "item": "x" if i % 3 else "y", "qty": i}) for i in range(12)]], columnar=True),
    "whitelist-leaves-out-unknown-fields": Case(
        {"fields.whitelist": "id,item"}, ["CREATE TABLE orders (id bigint, item text)"],
        [[rec(i, {"id": i, "item": f"v{i}", "ignored": {"nested": i}}) for i in range(4)]], columnar=True),
    "tombstones-skipped": Case(
        {}, ["CREATE TABLE orders (id bigint)"], [[rec(0, {"id": 1}), rec(1, None), rec(2, {"id": 3})]],
        columnar=True),
    "tombstones-delete": Case(
        {"delete.enabled": "true", "pk.mode": "record_key", "pk.fields": "id", "insert.mode": "upsert"},
        ["CREATE TABLE orders (id bigint PRIMARY KEY, item text)", "INSERT INTO orders VALUES (1, 'gone')"],
        [[rec(0, {"item": "a"}, key=2), rec(1, None, key=1), rec(2, None, key=2), rec(3, {"item": "b"}, key=2)]],
        columnar=False),
    "two-topics-two-tables": Case(
        {"table.name.format": "t_${topic}"},
        ["CREATE TABLE t_orders (id bigint)", "CREATE TABLE t_refunds (id bigint, why text)"],
        [[rec(0, {"id": 1}), rec(0, {"id": 2, "why": "late"}, topic="refunds"), rec(1, {"id": 3})]],
        columnar=True, tables=("t_orders", "t_refunds"),
        partitions=(TP0, TopicPartition("refunds", 0))),
    "many-batches-streamed-into-one-copy-per-batch-size": Case(
        {"batch.size": "350"}, [TYPED_TABLE],
        [_typed_values(1000)[i:i + 100] for i in range(0, 1000, 100)], columnar=True, commit_each=False,
        streamed=True),
    "batches-streamed-a-few-at-a-time": Case(
        {"batch.size": "350"}, [TYPED_TABLE],
        [_typed_values(1000)[i:i + 100] for i in range(0, 1000, 100)], columnar=True, commit_each=False,
        streamed=True, stream_rows=250),
    "a-close-midway-through-unsent-batches": Case(
        {"batch.size": "10000"}, ["CREATE TABLE orders (id bigint, p integer)"],
        [[rec(i + 50 * n, {"id": i + 50 * n, "p": p}, partition=p) for i in range(50)]
         for n, p in enumerate((0, 1, 0, 1, 0))],
        columnar=True, commit_each=False, close=(TP1,), close_after=3, stream_rows=120),
    "a-partition-closed-while-its-rows-are-streamed": Case(
        {"batch.size": "10000"}, ["CREATE TABLE orders (id bigint, p integer)"],
        [[rec(i, {"id": i, "p": p}, partition=p) for i in range(50)] for p in (0, 1, 0)],
        columnar=True, commit_each=False, close=(TP1,), streamed=False),
    "batches-after-a-close-aborted-the-stream-are-all-written": Case(
        {"batch.size": "10000"}, ["CREATE TABLE orders (id bigint, p integer)"],
        [[rec(i + 50 * n, {"id": i + 50 * n, "p": p}, partition=p) for i in range(50)]
         for n, p in enumerate((0, 1, 0, 0, 0))],
        columnar=True, commit_each=False, close=(TP1,), close_after=1),
    "another-table-midway-ends-the-stream": Case(
        {"table.name.format": "t_${topic}", "batch.size": "10000"},
        ["CREATE TABLE t_orders (id bigint)", "CREATE TABLE t_refunds (id bigint)"],
        [[rec(0, {"id": 1})], [rec(0, {"id": 2}, topic="refunds")], [rec(1, {"id": 3})]],
        columnar=True, commit_each=False, tables=("t_orders", "t_refunds"),
        partitions=(TP0, TopicPartition("refunds", 0)), streamed=False),
    "exactly-once-streamed-skips-what-was-stored": Case(
        {"exactly.once": "true", "name": "eo", "batch.size": "10000"}, ["CREATE TABLE orders (id bigint)"],
        [[rec(i, {"id": i})] for i in range(10)], columnar=True, stored={TP0: 6}, commit_each=False, streamed=True),
    "exactly-once-skips-what-was-stored": Case(
        {"exactly.once": "true", "name": "eo"}, ["CREATE TABLE orders (id bigint)"],
        [[rec(i, {"id": i}) for i in range(10)] + [rec(i, {"id": 100 + i}, partition=1) for i in range(4)],
         [rec(10, {"id": 10})]], columnar=True, stored={TP0: 6, TP1: 2}),
}


@dataclass
class Outcome:
    returned: list[Any]
    tables: dict[str, list[str]]
    reported: list[tuple[int, int, str, str]]
    stored: list[tuple[Any, ...]]
    fell_back: bool
    streamed: bool


def _batches(records: Sequence[SinkRecord], string_keys: bool) -> list[pa.RecordBatch]:
    """The records as the runtime hands them to put_batch (string keys as StringConverter's)."""
    batches = record_batches(records)
    if not string_keys:
        return batches
    return [b.set_column(b.schema.get_field_index(KEY), KEY,
                         pa.array([None if k is None else json.loads(k) for k in b.column(KEY).storage.to_pylist()],
                                  pa.string()))
            for b in batches]


def _project(batch: pa.RecordBatch, columns: frozenset[str]) -> pa.RecordBatch:
    return batch.select([name for name in batch.schema.names if name in {TOPIC, PARTITION, OFFSET, *columns}])


def _run(case: Case, url: str, batched: bool, caplog: pytest.LogCaptureFixture) -> Outcome:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in case.setup:
            conn.execute(statement)
    config = {"connection.url": url, **case.config}
    if case.stored:
        _store(url, config, case.stored)
    reporter = RecordingReporter() if case.reporter else None
    task, _ = start_sink_task(PostgresSinkTask(), config, case.partitions, reporter)
    task.stream_rows = case.stream_rows
    returned: list[Any] = []
    caplog.clear()
    try:
        assert task.takes_batches(pa.string() if case.string_keys else pa.json_(pa.string()), pa.json_(pa.string()))
        columns = task.batch_columns()
        all_offsets: dict[TopicPartition, int] = {}
        for i, records in enumerate(case.puts):
            offsets: dict[TopicPartition, int] = {}
            for r in records:
                tp = TopicPartition(r.topic, r.kafka_partition)
                offsets[tp] = max(offsets.get(tp, 0), r.kafka_offset + 1)
            returned.append(_outcome(lambda: [task.put_batch(_project(b, columns))
                                              for b in _batches(records, case.string_keys)]  # noqa: B023
                                     if batched else task.put(records)))  # noqa: B023
            if case.commit_each:
                returned.append(_outcome(lambda: task.pre_commit(offsets)))  # noqa: B023
            if case.error_may_come_later and isinstance(returned[-1], tuple):
                break
            all_offsets.update(offsets)
            if case.close and i == case.close_after % len(case.puts):
                task.close(case.close)
                all_offsets = {tp: o for tp, o in all_offsets.items() if tp not in case.close}
        if not case.commit_each and not (case.error_may_come_later and isinstance(returned[-1], tuple)):
            returned.append(_outcome(lambda: task.pre_commit(all_offsets)))
    finally:
        task.stop()
    with psycopg.connect(url, autocommit=True) as conn:
        tables = {t: [row[0] for row in conn.execute(f"SELECT x::text FROM {t} x ORDER BY 1").fetchall()]
                  for t in case.tables}
        stored = conn.execute(
            "SELECT topic, \"partition\", next_offset FROM conveyor_sink_offsets ORDER BY 1, 2").fetchall() \
            if "exactly.once" in case.config else []
        for t in case.tables:
            conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute("DROP TABLE IF EXISTS conveyor_sink_offsets")
    reported = [(r.kafka_partition, r.kafka_offset, type(e).__name__, str(e)) for r, e in reporter.reported] \
        if reporter else []
    return Outcome(returned, tables, reported, stored, FALLBACK in caplog.text, "streamed" in caplog.text)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - the error is part of what both paths must agree on
        return (type(exc).__name__, str(exc))
    return result if isinstance(result, dict) else None


def _store(url: str, config: Mapping[str, Any], stored: Mapping[TopicPartition, int]) -> None:
    PostgresSinkConnector().alter_offsets(config, dict(stored))


@pytest.mark.parametrize("name", list(CASES))
def test_the_batch_path_writes_what_the_record_path_writes(pg_database: str, caplog: pytest.LogCaptureFixture,
                                                           name: str) -> None:
    case = CASES[name]
    caplog.set_level(logging.DEBUG, logger="conveyor.connectors.postgres.sink")
    records = _run(case, pg_database, batched=False, caplog=caplog)
    batches = _run(case, pg_database, batched=True, caplog=caplog)
    assert batches.tables == records.tables
    assert batches.reported == records.reported
    if case.error_may_come_later:
        assert [r for r in batches.returned if r is not None] == [r for r in records.returned if r is not None]
        assert any(isinstance(r, tuple) for r in records.returned)
    else:
        assert batches.returned == records.returned
    assert batches.stored == records.stored
    if case.streamed is not None:
        assert batches.streamed is case.streamed
    assert batches.fell_back is not case.columnar, "the batch path wrote from the columns" if case.columnar \
        else "the batch path handed the batch to the record path"


def _items(partition: int, n: int) -> list[tuple[bytes, bytes | None]]:
    """Rows of JSON objects, and among them on partition 0: a value the converter cannot
    read, one that is no object, one PostgreSQL refuses (a NUL character), a tombstone."""
    poison = [b"{oops", b'"just a string"', b'{"id": -1, "item": "nul \\u0000 here"}', None]
    return [(f'"k{i}"'.encode(), poison[(i // 10) % len(poison)] if partition == 0 and i % 10 == 5 else
             f'{{"id": {partition * 1000 + i}, "item": "it\\"em, {i}", "price": {i / 4}}}'.encode())
            for i in range(n)]


def test_a_connector_writes_the_same_rows_dead_letters_and_offsets_on_both_paths(
    kafka_bootstrap, topic_factory, spark, pg_database
):
    """Through the runtime (a real broker, Spark): the same table, the same dead-letter
    records with the same context headers, the same committed offsets, each path once."""
    topic = topic_factory(partitions=2)
    for p in range(2):
        produce(kafka_bootstrap, topic, _items(p, 400), partition=p)
    poison = sum(1 for _, v in _items(0, 400) if v is not None and (v.startswith((b"{oops", b'"')) or b"\\u0000" in v))
    tables, dead, offsets = {}, {}, {}
    for path in ("records", "batches"):
        name, dlq = f"pgb-{path}-{uuid.uuid4().hex[:6]}", f"dlq-{uuid.uuid4().hex[:8]}"
        table = f"t_{path}"
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {table} (id bigint, item text, price double precision)")
        config = {"topics": topic, "connection.url": pg_database, "table.name.format": table, "batch.size": "150",
                  "key.converter": "json", "key.converter.schemas.enable": "false",
                  "value.converter": "json", "value.converter.schemas.enable": "false",
                  "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                  "errors.deadletterqueue.topic.replication.factor": "1",
                  "errors.deadletterqueue.context.headers.enable": "true",
                  "offset.flush.interval.ms": "300", "conveyor.batch.path.enable": str(path == "batches").lower()}
        with running_connector(connector_manifest(name, "postgres-sink", kafka_bootstrap, config), spark) as d:
            task = wait_until(lambda: next((t for t in d.status()["tasks"] if t.get("records_read") == 800), None),
                              message=f"every record read through {path}")
            assert task["batch_path"] is (path == "batches")
            wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2)  # noqa: B023
                       == {0: 400, 1: 400}, message=f"every offset committed through {path}")
        offsets[path] = committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2)
        with psycopg.connect(pg_database, autocommit=True) as conn:
            tables[path] = [r[0] for r in conn.execute(f"SELECT x::text FROM {table} x ORDER BY id").fetchall()]
        dead[path] = sorted((m.key(), m.value(), sorted(dead_letter_context(m.headers()).items()))
                            for m in consume_all(kafka_bootstrap, dlq, expected=poison))  # the order depends on when each path writes
    assert tables["batches"] == tables["records"] and len(tables["records"]) == 800 - poison - 10
    assert dead["batches"] == dead["records"] and len(dead["records"]) == poison
    assert {dict(h)["__connect.errors.stage"] for *_, h in dead["records"]} == {"VALUE_CONVERTER", "TASK_PUT"}
    assert offsets["batches"] == offsets["records"] == {0: 400, 1: 400}
