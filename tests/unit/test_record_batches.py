"""Record batches (``conveyor.api.batches``) and the runtime's batch builder, from Kafka
messages made in memory: columns, types and the record path's values."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Message

from conveyor.api import SinkTask, TimestampType, TopicPartition
from conveyor.api.batches import batch_schema, partition_runs, sink_records
from conveyor.connectors.archive.formats import JsonlBuffer
from conveyor.connectors.archive.jsonl_batches import jsonl_lines, line_data
from conveyor.connectors.archive.sink import ArchiveSinkTask
from conveyor.connectors.file.sink import FileSinkTask
from conveyor.connectors.noop import NoopSinkTask
from conveyor.converters.bytearray_converter import ByteArrayConverter
from conveyor.converters.columnar import JSON_TYPE, JsonColumns, TypedColumns, columnar, json_text
from conveyor.converters.json_converter import JsonConverter
from conveyor.converters.string_converter import StringConverter
from conveyor.runtime.errors.tolerance import Stage
from conveyor.runtime.task.sink.batches import BatchBuilder, drop_partitions
from conveyor.runtime.task.sink.context import InternalSinkRecord
from conveyor.testing.recording import RecordingBatchSinkTask, RecordingSinkTask
from conveyor.transforms.chain import NoBatchForm, TransformationChain

VALUES = [b"a", None, "é".encode(), b"x\xffy", b"", b'{"a": 1}']


def _messages() -> list[Message]:
    return [Message(topic="t", partition=i % 2, offset=10 + i, key=f"k{i}".encode() if i else None, value=v,
                    headers=[("h", b"1"), ("n", None)] if i == 1 else None,
                    timestamp=(1, 1_700_000_000_000 + i) if i else (0, -1))
            for i, v in enumerate(VALUES)]


def _string(converter_config: dict | None = None) -> StringConverter:
    converter = StringConverter()
    converter.configure(converter_config or {}, False)
    return converter


def _json(schemas: bool = False) -> JsonConverter:
    converter = JsonConverter()
    converter.configure({"schemas.enable": str(schemas).lower()}, False)
    return converter


def _builder(key_type: pa.DataType, value_type: pa.DataType) -> BatchBuilder:
    by_type = {pa.string(): _string(), pa.binary(): ByteArrayConverter(), JSON_TYPE: _json()}
    return BatchBuilder(columnar(by_type[key_type]), columnar(by_type[value_type]))


def _build(builder: BatchBuilder, msgs: list[Message], failures: list | None = None) -> pa.RecordBatch:
    def unconvertible(msg, stage, error):
        if failures is None:
            raise AssertionError(f"unexpected failure at offset {msg.offset()}: {error}")
        failures.append((msg.offset(), stage, error))

    batches, _last = builder.build(msgs, unconvertible)
    assert len(batches) == 1, "keys and values without schemas: one batch per poll"
    return batches[0]


def test_a_batch_holds_every_message_in_order_with_the_converters_values():
    batch = _build(_builder(pa.string(), pa.string()), _messages())
    assert batch.schema == batch_schema(pa.string(), pa.string())
    assert batch.column("offset").to_pylist() == [10, 11, 12, 13, 14, 15]
    assert batch.column("partition").to_pylist() == [0, 1, 0, 1, 0, 1]
    assert batch.column("key").to_pylist() == [None, "k1", "k2", "k3", "k4", "k5"]
    assert batch.column("value").to_pylist() == [_string().to_connect_data("t", (), v).value for v in VALUES]
    assert batch.column("value")[3].as_py() == "x\ufffdy", "malformed UTF-8 replaced, as the converter does"
    assert batch.column("timestamp").cast(pa.int64()).to_pylist()[:2] == [None, 1_700_000_000_001]
    assert batch.column("headers").to_pylist()[:2] == [None, [{"key": "h", "value": b"1"}, {"key": "n", "value": None}]]
    raw = _build(_builder(pa.binary(), pa.binary()), _messages())
    assert raw.column("value").to_pylist() == VALUES


@pytest.mark.parametrize("topics", [("t",), ("t", "u")])
def test_a_batch_gives_the_last_offset_of_each_partition_unconvertible_messages_included(topics):
    msgs = [Message(topic=topics[i % len(topics)], partition=i % 3, offset=100 + i, key=None,
                    value=b"{bad" if i >= 10 else b"1", timestamp=(1, 1)) for i in range(12)]
    failures: list = []
    [batch], last = _builder(JSON_TYPE, JSON_TYPE).build(msgs, lambda msg, stage, error: failures.append(msg.offset()))
    assert batch.num_rows == 10 and failures == [110, 111]
    assert last == {(m.topic(), m.partition()): m.offset() for m in msgs}
    assert _builder(pa.binary(), pa.binary()).build([], lambda *a: None) == ([_builder(pa.binary(), pa.binary()).empty], {})


def test_sink_records_gives_what_put_would_have_had():
    records = sink_records(_build(_builder(pa.binary(), pa.string()), _messages()))
    string = _string()
    for record, value in zip(records, VALUES, strict=True):
        expected = string.to_connect_data("t", (), value)
        assert (record.value, record.value_schema) == (expected.value, expected.schema)
    assert records[0].key is None and records[0].key_schema is None
    assert records[1].key == b"k1" and records[1].key_schema == ByteArrayConverter().to_connect_data("t", (), b"").schema
    assert (records[0].timestamp, records[0].timestamp_type) == (None, TimestampType.NO_TIMESTAMP_TYPE)
    assert (records[1].timestamp, records[1].timestamp_type) == (1_700_000_000_001, TimestampType.CREATE_TIME)
    assert [(h.key, h.value) for h in records[1].headers] == [("h", b"1"), ("n", None)]
    assert [r.kafka_offset for r in records] == [10, 11, 12, 13, 14, 15]


def test_dropping_partitions_keeps_the_other_rows():
    batch = _build(_builder(pa.string(), pa.string()), _messages())
    assert drop_partitions(batch, [TopicPartition("t", 0)]).column("offset").to_pylist() == [11, 13, 15]
    assert drop_partitions(batch, [TopicPartition("other", 1)]).num_rows == 6
    assert drop_partitions(batch, []).num_rows == 6


def test_the_batch_path_takes_bytes_utf8_strings_and_schemaless_json():
    assert columnar(ByteArrayConverter()).type == pa.binary()
    assert columnar(_string()).type == pa.string()
    assert columnar(_string({"converter.encoding": "ISO-8859-1"})) is None
    assert columnar(_json()).type == JSON_TYPE
    assert isinstance(columnar(_json(schemas=True)), TypedColumns) and columnar(_json(schemas=True)).type is None
    with pytest.raises(ValueError, match="value column is string, binary or arrow.json"):
        batch_schema(pa.string(), pa.int64())


BULK_JSON = [  # orjson reads all of these as the converter does: the batch is parsed in bulk
    b'{"id": 1, "name": "order-1", "tags": ["a", "b"], "ok": true, "none": null}',
    b'{\n  "pretty": [1,\n 2]\n}'.replace(b"\\n", b"\n"),
    '{"text": "caf\u00e9 \\u00e9 \\n \\" \\\\ /"}'.encode(),
    b'[1.5, -0.0, 1e-7, 1e15, 12.0, 0.1]', b'{"edge": 9223372036854775807, "low": -9223372036854775808}',
    b'"just a string"', b"42", b"true", b"null", None,
    b'{"dup": 1, "dup": 2}', b'{"k": {"nested": {"deeper": [{"topic": "x"}, {}]}}}',
]
PER_MESSAGE_JSON = [  # each makes the whole batch go through the converter, message by message
    b'[1e16]', b'{"wide": 123456789012345678901234567890}', b"-9223372036854775809", b"18446744073709551616",
    b"", b"   ", "\ufeff{\"bom\": 1}".encode(),
]


def _json_messages(values: list[bytes | None]) -> list[Message]:
    return [Message(topic="t", partition=0, offset=i, key=None, value=v, timestamp=(1, 1)) for i, v in enumerate(values)]


@pytest.mark.parametrize("values", [BULK_JSON, *([*BULK_JSON, odd] for odd in PER_MESSAGE_JSON)],
                         ids=["in-bulk", *(f"per-message-{i}" for i in range(len(PER_MESSAGE_JSON)))])
def test_json_cells_are_the_record_paths_values_as_compact_json(values):
    assert (JsonColumns._fast(values) is None) == (values is not BULK_JSON)
    batch = _build(_builder(pa.binary(), JSON_TYPE), _json_messages(values))
    converter = _json()
    expected = []
    for raw in values:
        value = converter.to_connect_data("t", (), raw).value
        expected.append(None if value is None else json_text(value).decode())
    assert batch.column("value").type == JSON_TYPE
    assert batch.column("value").storage.to_pylist() == expected
    assert [r.value for r in sink_records(batch)] == [converter.to_connect_data("t", (), raw).value for raw in values]
    assert all(r.value_schema is None for r in sink_records(batch))


def test_json_the_converter_cannot_read_leaves_the_batch_and_is_reported_once():
    values = [b'{"a": 1}', b'{"a": ', b"NaN", b'"unterminated', b'also"', b'{"b": 2}']
    msgs = [Message(topic="t", partition=0, offset=i, key=b"{bad" if i == 1 else b"1", value=v, timestamp=(1, 1))
            for i, v in enumerate(values)]
    failures: list = []
    batch = _build(_builder(JSON_TYPE, JSON_TYPE), msgs, failures)
    assert batch.column("offset").to_pylist() == [0, 5]
    assert batch.column("value").storage.to_pylist() == ['{"a":1}', '{"b":2}']
    assert [(offset, stage) for offset, stage, _ in failures] == [
        (1, Stage.KEY_CONVERTER), (2, Stage.VALUE_CONVERTER), (3, Stage.VALUE_CONVERTER), (4, Stage.VALUE_CONVERTER)]
    for offset, stage, error in failures:
        with pytest.raises(type(error)):
            _json().to_connect_data("t", (), values[offset] if stage is Stage.VALUE_CONVERTER else b"{bad")


def test_a_task_takes_the_batches_it_can_use_without_records(tmp_path):
    types = [(k, v) for k in (pa.string(), pa.binary(), JSON_TYPE) for v in (pa.string(), pa.binary(), JSON_TYPE)]
    assert all(NoopSinkTask().takes_batches(k, v) and RecordingBatchSinkTask().takes_batches(k, v) for k, v in types)
    assert not any(RecordingSinkTask().takes_batches(k, v) for k, v in types), "put only: the default says no"
    assert [FileSinkTask().takes_batches(k, v) for k, v in types] == [v == pa.string() for _, v in types]
    for fmt, partitioner, takes in (("jsonl", {}, True), ("avro", {}, False), ("parquet", {}, True),
                                    ("jsonl", {"partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner", "timestamp.extractor": "Record"}, False)):
        task = ArchiveSinkTask()
        task.start({"archive.url": str(tmp_path), "format": fmt, **partitioner})
        assert all(task.takes_batches(k, v) is takes for k, v in types), (fmt, partitioner)


def test_the_default_put_batch_hands_records_to_put():
    class Collecting(SinkTask):
        def __init__(self) -> None:
            self.got = []

        def start(self, config):
            pass

        def put(self, records):
            self.got.extend(records)

    task = Collecting()
    task.put_batch(_build(_builder(pa.string(), pa.string()), _messages()))
    assert [r.kafka_offset for r in task.got] == [10, 11, 12, 13, 14, 15]


@pytest.mark.parametrize("value_type", [pa.string(), pa.binary()])
def test_the_file_sink_writes_the_same_bytes_from_a_batch_as_from_records(tmp_path, value_type):
    converter = _string() if value_type == pa.string() else ByteArrayConverter()
    records = []
    for m in _messages():
        converted = converter.to_connect_data("t", (), m.value())
        records.append(InternalSinkRecord("t", m.partition(), None, converted.value, m.offset(),
                                          value_schema=converted.schema))
    written = {}
    for path in ("records", "batch"):
        task = FileSinkTask()
        task.start({"file": str(tmp_path / path)})
        if path == "batch":
            task.put_batch(_build(_builder(pa.binary(), value_type), _messages()))
        else:
            task.put(records)
        task.stop()
        written[path] = (tmp_path / path).read_bytes()
    if value_type == pa.binary():  # Java prints a byte[]'s identity: compare the shape only
        assert [line[:3] for line in written["batch"].split(b"\n")] == \
               [line[:3] for line in written["records"].split(b"\n")]
    else:
        assert written["batch"] == written["records"] == b"a\nnull\n\xc3\xa9\nx\xef\xbf\xbdy\n\n{\"a\": 1}\n"


@pytest.mark.parametrize("key_type,value_type", [(pa.string(), pa.string()), (pa.binary(), pa.binary()),
                                                 (JSON_TYPE, JSON_TYPE), (pa.string(), JSON_TYPE)])
def test_archive_jsonl_lines_from_a_batch_are_the_record_paths_lines(key_type, value_type):
    values = [b"plain", 'quote " backslash \\ tab \t nl \n bell \x07 del \x7f é \u2028 日本'.encode(), None, b"",
              b"x\xffy", b'{"a": [1, 2.5, null], "b": "c"}', b'"s"', b"7"]
    msgs = [Message(topic="orders.v1-x", partition=3, offset=100 + i,
                    key=None if i == 2 else f'"k{i} \\" q"'.encode() if key_type == JSON_TYPE else f'k{i} " q'.encode(),
                    value=v, headers=[("h", b"\x00\xff"), ("n", None)] if i % 2 else None,
                    timestamp=(1, 1_700_000_000_000 + i) if i != 4 else (0, -1))
            for i, v in enumerate(values)]
    if value_type == JSON_TYPE:  # JSON the converter can read (invalid JSON leaves the batch: tested above)
        msgs = [m for m in msgs if m.value() in (None, b"", b'{"a": [1, 2.5, null], "b": "c"}', b'"s"', b"7")]
    batch = _build(_builder(key_type, value_type), msgs)
    tp = TopicPartition("orders.v1-x", 3)
    data, ends = line_data(jsonl_lines(batch, tp), 0)
    records = JsonlBuffer(100, 0.0)
    for record in sink_records(batch):
        records.append(record, record.kafka_offset)
    assert bytes(data) == records.payload(records.count, tp.topic, tp.partition)
    assert list(ends) == list(records._ends)


class _ClosingContext:
    """Enough of a sink task's context for the archive task: a closing commit, no reporter."""

    def is_closing(self) -> bool:
        return True

    def errant_record_reporter(self):
        return None


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("types", [(pa.string(), pa.string()), (pa.binary(), pa.binary()), (JSON_TYPE, JSON_TYPE)],
                         ids=["string", "binary", "json"])
def test_the_archive_writes_the_same_files_from_batches_as_from_records(tmp_path, fmt, types):
    """Two partitions in interleaved runs, null keys and values mid-run (a Parquet file ends
    where a schema changes on the record path), redelivered rows, files cut by flush.size."""
    def value(i):
        return None if i % 9 == 4 else (b'{"n": %d, "s": "\\u00e9 \\"q\\""}' % i if types[1] == JSON_TYPE else b"v%d" % i)

    msgs = [Message(topic="t", partition=p, offset=o, key=None if o % 11 == 3 else b'"k%d"' % o, value=value(o),
                    headers=[("h", b"%d" % o)] if o % 5 == 0 else None, timestamp=(1, 1_700_000_000_000 + o))
            for start in range(0, 60, 10) for p in (0, 1) for o in range(start, start + 10)]
    batches = [_build(_builder(*types), msgs[i:i + 25]) for i in range(0, len(msgs), 25)]
    written = {}
    for path in ("records", "batches"):
        task = ArchiveSinkTask()
        task.initialize(_ClosingContext())
        task.start({"archive.url": str(tmp_path / path), "format": fmt, "flush.size": "7"})
        assert task.takes_batches(*types)
        task.open([TopicPartition("t", 0), TopicPartition("t", 1)])
        for batch in [*batches, batches[1]]:  # the last one again: redelivered, skipped
            task.put_batch(batch) if path == "batches" else task.put(sink_records(batch))
        committed = task.pre_commit({TopicPartition("t", 0): 60, TopicPartition("t", 1): 60})
        assert committed == {TopicPartition("t", 0): 60, TopicPartition("t", 1): 60}
        written[path] = {str(f.relative_to(tmp_path / path)): f.read_bytes() for f in (tmp_path / path).rglob("*.*")}
    assert written["batches"] == written["records"]
    assert len(written["records"]) > 2 * 60 // 7


FILTERS = {
    "filter-all": {"transforms": "f", "transforms.f.type": "Filter"},
    "tombstones": {"transforms": "f", "transforms.f.type": "Filter", "transforms.f.predicate": "t",
                   "predicates": "t", "predicates.t.type": "RecordIsTombstone"},
    "keep-tombstones": {"transforms": "f", "transforms.f.type": "Filter", "transforms.f.predicate": "t",
                        "transforms.f.negate": "true", "predicates": "t", "predicates.t.type": "RecordIsTombstone"},
    "topic": {"transforms": "f", "transforms.f.type": "org.apache.kafka.connect.transforms.Filter",
              "transforms.f.predicate": "p", "predicates": "p",
              "predicates.p.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
              "predicates.p.pattern": "orders-.*"},
    "header-then-tombstones": {"transforms": "h,t", "transforms.h.type": "Filter", "transforms.h.predicate": "hk",
                               "transforms.t.type": "Filter", "transforms.t.predicate": "ts",
                               "predicates": "hk,ts", "predicates.hk.type": "HasHeaderKey", "predicates.hk.name": "drop",
                               "predicates.ts.type": "RecordIsTombstone"},
}


HEADER_TRANSFORMS = {
    "insert": {"transforms": "i", "transforms.i.type": "InsertHeader", "transforms.i.header": "from",
               "transforms.i.value.literal": "conveyor é"},
    "drop": {"transforms": "d", "transforms.d.type": "org.apache.kafka.connect.transforms.DropHeaders",
             "transforms.d.headers": "drop,x"},
    "insert-where-topic": {"transforms": "i", "transforms.i.type": "InsertHeader", "transforms.i.header": "drop",
                           "transforms.i.value.literal": "", "transforms.i.predicate": "p", "predicates": "p",
                           "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "refunds"},
    "drop-unless-tombstone-then-insert-then-filter": {
        "transforms": "d,i,f", "transforms.d.type": "DropHeaders", "transforms.d.headers": "keep",
        "transforms.d.predicate": "t", "transforms.d.negate": "true", "transforms.i.type": "InsertHeader",
        "transforms.i.header": "keep", "transforms.i.value.literal": "1", "transforms.f.type": "Filter",
        "transforms.f.predicate": "h", "predicates": "t,h", "predicates.t.type": "RecordIsTombstone",
        "predicates.h.type": "HasHeaderKey", "predicates.h.name": "drop"},
}


def _no_failures(row, cls, error):
    raise AssertionError(f"unexpected failure of {row.to_pylist()} in {cls}: {error}")


ROUTERS = {
    "route": {"transforms": "r", "transforms.r.type": "RegexRouter", "transforms.r.regex": "orders-(.*)",
              "transforms.r.replacement": "archive-$1"},
    "route-by-the-hour": {"transforms": "r", "transforms.r.type": "TimestampRouter",
                          "transforms.r.topic.format": "${topic}_${timestamp}-${topic}",
                          "transforms.r.timestamp.format": "yyyy-MM-dd'T'HH 'h' a"},
    "route-by-the-day-where-tombstone": {"transforms": "r", "transforms.r.type": "TimestampRouter",
                                         "transforms.r.predicate": "t", "predicates": "t",
                                         "predicates.t.type": "RecordIsTombstone"},
    "route-where-header-then-match-the-routed-topic": {
        "transforms": "r,f", "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.r.regex": "(.*)", "transforms.r.replacement": "$1.x", "transforms.r.predicate": "h",
        "transforms.f.type": "Filter", "transforms.f.predicate": "t", "predicates": "h,t",
        "predicates.h.type": "HasHeaderKey", "predicates.h.name": "x", "predicates.t.type": "TopicNameMatches",
        "predicates.t.pattern": "refunds.x"},
}


@pytest.mark.parametrize("name", [*FILTERS, *HEADER_TRANSFORMS, *ROUTERS])
def test_batch_transforms_leave_the_rows_as_the_chain_leaves_the_records(name):
    msgs = [Message(topic="orders-eu" if i % 3 else "refunds", partition=i % 2, offset=i, key=f"k{i}".encode(),
                    value=None if i % 4 == 0 else f"v{i}".encode(), timestamp=(1, 1_700_000_000_000 + i * 1_900_000),
                    headers=[("drop", b"1")] if i % 5 == 0 else [("keep", None), ("x", b"")] if i % 5 == 1 else None)
            for i in range(40)]
    chain = TransformationChain.from_config({**FILTERS, **HEADER_TRANSFORMS, **ROUTERS}[name])
    assert chain.batch_types(pa.string(), pa.string()) == (pa.string(), pa.string())
    [batch] = chain.apply_batch(_build(_builder(pa.string(), pa.string()), msgs).slice(3), _no_failures)
    msgs = msgs[3:]  # a batch's slice: its lists' offsets do not start at 0
    kept = [out for r in sink_records(_build(_builder(pa.string(), pa.string()), msgs))
            if (out := chain.apply(r)) is not None]
    assert [(r.topic, r.original_topic, r.kafka_offset, r.value, r.headers) for r in sink_records(batch)] == \
        [(r.topic, r.original_topic, r.kafka_offset, r.value, r.headers) for r in kept]
    assert name == "filter-all" or name in HEADER_TRANSFORMS or name in ROUTERS or 0 < len(kept) < len(msgs)
    assert [(r.headers, r.topic) for r in sink_records(batch)] != [(r.headers, r.topic) for r in sink_records(
        _build(_builder(pa.string(), pa.string()), msgs)) if chain.apply(r) is not None] or name in FILTERS
    assert {tp for tp, _, _ in partition_runs(batch)} <= {TopicPartition(m.topic(), m.partition()) for m in msgs}


def test_a_chain_with_a_stage_without_a_batch_form_says_which():
    chain = TransformationChain.from_config({
        "transforms": "f,route", "transforms.f.type": "Filter", "transforms.f.predicate": "t", "predicates": "t",
        "predicates.t.type": "RecordIsTombstone", "transforms.route.type": "SetSchemaMetadata$Value",
        "transforms.route.schema.name": "x"})
    with pytest.raises(NoBatchForm, match=r"^transformation 'route' \(org.apache.kafka.connect.transforms."
                                          r"SetSchemaMetadata\$Value\) has no batch form$"):
        chain.batch_types(pa.string(), pa.string())


@pytest.mark.parametrize("columns", [frozenset(), frozenset({"value"}), frozenset({"key", "headers"}), None])
def test_a_task_gets_only_the_columns_it_reads_and_conversion_failures_still_count(columns):
    msgs = [Message(topic="t", partition=0, offset=i, key=b"{bad" if i == 2 else b'"k"', value=b"[%d]" % i,
                    timestamp=(1, 1), headers=[("h", b"1")]) for i in range(5)]
    failures: list = []
    full = _build(_builder(JSON_TYPE, JSON_TYPE), msgs, [])
    builder = BatchBuilder(columnar(_json()), columnar(_json()), columns)
    [batch], last = builder.build(msgs, lambda msg, stage, error: failures.append((msg.offset(), stage)))
    expected = [name for name in full.schema.names if columns is None or name in {"topic", "partition", "offset"}
                or name in columns]
    assert batch.schema.names == expected == builder.schema.names
    assert batch.equals(full.select(expected))
    assert failures == [(2, Stage.KEY_CONVERTER)], "a key that cannot be read leaves the batch, built or not"
    assert last == {("t", 0): 4}


def test_a_row_without_a_timestamp_fails_alone_in_the_timestamp_routers_batch_form():
    msgs = [Message(topic="t", partition=0, offset=i, key=None, value=b"v", timestamp=(0, -1) if i == 2 else (1, i))
            for i in range(4)]
    chain = TransformationChain.from_config({"transforms": "r", "transforms.r.type": "TimestampRouter"})
    failures: list = []
    [batch] = chain.apply_batch(_build(_builder(pa.string(), pa.string()), msgs),
                                lambda row, cls, error: failures.append((row.column("offset")[0].as_py(), cls, error)))
    assert batch.column("topic").to_pylist() == ["t-19700101"] * 3 and batch.column("offset").to_pylist() == [0, 1, 3]
    assert [(offset, cls) for offset, cls, _ in failures] == [(2, "org.apache.kafka.connect.transforms.TimestampRouter")]
    assert "Timestamp missing on record" in str(failures[0][2])
