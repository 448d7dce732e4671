"""Typed columns on the sink's batch path: keys and values of converters that give Connect
schemas (``JsonConverter`` with schemas here; Avro, Protobuf and JSON Schema in
``tests/integration/test_typed_batches_registry.py``) become Arrow columns of their schema's
type, one batch per run of one schema, and the archive writes the same Parquet files from
them as from records."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest
from confluent_kafka import Message

from conveyor.api import Schema, SchemaType, TopicPartition
from conveyor.api.arrow_types import field_schema, schema_field, schema_from_text, schema_text
from conveyor.api.batches import JSON_TYPE, column_schema, record_batches, sink_records
from conveyor.connectors.archive.sink import ArchiveSinkTask
from conveyor.converters import load_converter
from conveyor.converters.columnar import TypedColumns, columnar
from conveyor.converters.json_converter import JsonConverter
from conveyor.converters.logical import decimal_schema, timestamp_schema
from conveyor.converters.number_converters import IntegerConverter
from conveyor.runtime.errors.tolerance import Stage
from conveyor.runtime.task.sink.batches import BatchBuilder
from conveyor.transforms.chain import NoBatchForm, TransformationChain

ORDER = {"type": "struct", "name": "shop.Order", "version": 2, "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "note", "type": "string", "optional": True, "doc": "free text"},
    {"field": "price", "type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
     "version": 1, "parameters": {"scale": "2"}},
    {"field": "at", "type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
    {"field": "day", "type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "version": 1},
    {"field": "tags", "type": "array", "optional": True, "items": {"type": "string", "optional": False}},
    {"field": "attrs", "type": "map", "optional": True, "keys": {"type": "string", "optional": False},
     "values": {"type": "int32", "optional": True}},
    {"field": "ratio", "type": "float", "optional": True},
    {"field": "line", "type": "struct", "optional": True, "fields": [
        {"field": "sku", "type": "string", "optional": False}, {"field": "qty", "type": "int16", "optional": True}]},
]}
ORDER_V3 = {**ORDER, "version": 3, "fields": [*ORDER["fields"],  # a default: transformations take the record form
                                               {"field": "extra", "type": "boolean", "optional": True, "default": False}]}
KEY = {"type": "int32", "optional": False}


def _price(cents: int) -> str:
    return base64.b64encode(cents.to_bytes(4, "big", signed=True)).decode()


def _envelope(schema, payload) -> bytes:
    return json.dumps({"schema": schema, "payload": payload}).encode()


def _order(i: int, schema=ORDER) -> bytes:
    payload = {"id": i, "note": None if i % 3 else f"n{i}", "price": _price(i * 101 - 500), "at": 1_700_000_000_000 + i,
               "day": 19_000 + i, "tags": [f"t{i}"] * (i % 3), "attrs": {"a": i, "b": None} if i % 2 else None,
               "ratio": 0.5 + i, "line": {"sku": f"s{i}", "qty": i} if i % 4 else None}
    if schema is ORDER_V3:
        payload["extra"] = bool(i % 2)
    return _envelope(schema, payload)


def _json(schemas: bool = True) -> JsonConverter:
    converter = JsonConverter()
    converter.configure({"schemas.enable": str(schemas).lower()}, False)
    return converter


def _msgs(values: list[bytes | None], partitions: int = 1) -> list[Message]:
    return [Message(topic="orders", partition=i % partitions, offset=i, key=_envelope(KEY, i) if i % 5 else None,
                    value=v, timestamp=(1, 1_700_000_000_000 + i), headers=[("h", b"%d" % i)] if i % 7 == 0 else None)
            for i, v in enumerate(values)]


STREAM = [*(_order(i) for i in range(6)), None, _order(7), _envelope(None, {"free": [1, 2]}), _order(9),
          *(_order(i, ORDER_V3) for i in range(10, 14)), b"{broken", _envelope(ORDER, {"id": "not a number"}),
          _order(16)]


def _build(msgs: list[Message], builder: BatchBuilder | None = None) -> tuple[list[pa.RecordBatch], list]:
    failures: list = []
    builder = builder or BatchBuilder(columnar(_json()), columnar(_json()))
    batches, _last = builder.build(msgs, lambda msg, stage, error: failures.append((msg.offset(), stage)))
    return batches, failures


def test_typed_columns_carry_the_records_schemas_one_batch_per_run_of_one_schema():
    batches, failures = _build(_msgs(STREAM))
    assert failures == [(14, Stage.VALUE_CONVERTER), (15, Stage.VALUE_CONVERTER)]
    runs = [(b.column("offset").to_pylist(), column_schema(b.schema.field("value"))) for b in batches]
    order = schema_from_text(schema_text(_json().to_connect_data("t", (), _order(0)).schema))
    # the key changes from none (offset 0: a null) to int32 (1-4) and back; the value from ORDER to none (6: a
    # tombstone; 8: an envelope with a null schema) to ORDER_V3 (10-13) and back
    assert [offsets for offsets, _ in runs] == [[0], [1, 2, 3, 4], [5], [6], [7], [8], [9], [10], [11, 12, 13], [16]]
    assert runs[1][1] == order and runs[3][1] is None and runs[5][1] is None
    v3 = runs[8][1]
    assert [f.name for f in v3.fields][-1] == "extra" and v3.version == 3
    assert batches[3].schema.field("value").type == JSON_TYPE, "a run without a schema is JSON text"
    assert batches[1].schema.field("key").type == pa.int32() and batches[0].schema.field("key").type == JSON_TYPE
    value_type = batches[1].schema.field("value").type
    assert value_type.field("price").type == pa.decimal128(38, 2)
    assert value_type.field("at").type == pa.timestamp("ms", tz="UTC")
    assert value_type.field("day").type == pa.date32()
    assert value_type.field("attrs").type == pa.map_(pa.string(), pa.int32())
    assert value_type.field("ratio").type == pa.float32()


def test_sink_records_of_typed_batches_are_the_record_paths_records():
    converter = _json()
    batches, _ = _build(_msgs(STREAM))
    records = [r for b in batches for r in sink_records(b)]
    assert [r.kafka_offset for r in records] == [i for i in range(len(STREAM)) if i not in (14, 15)]
    for record in records:
        expected = converter.to_connect_data("orders", (), STREAM[record.kafka_offset])
        value = expected.value
        if isinstance(value, dict) and value.get("ratio") is not None:  # float32 in Arrow, as in Kafka Connect
            value = {**value, "ratio": float(pa.scalar(value["ratio"], pa.float32()).as_py())}
        assert record.value == value, record.kafka_offset
        assert record.value_schema == (None if expected.schema is None else schema_from_text(schema_text(expected.schema)))
        key = converter.to_connect_data("orders", (), _envelope(KEY, record.kafka_offset) if record.kafka_offset % 5 else None)
        assert (record.key, record.key_schema) == (key.value, key.schema)
    by_offset = {r.kafka_offset: r for r in records}
    assert by_offset[1].value["price"] == decimal.Decimal("-3.99")
    assert by_offset[1].value["at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 1000, tzinfo=dt.timezone.utc)
    assert by_offset[1].value["attrs"] == {"a": 1, "b": None}
    assert by_offset[6].value is None and by_offset[6].value_schema is None


def test_a_schemas_text_round_trips_with_its_scalar_defaults_only():
    schema = Schema(SchemaType.STRUCT, name="x.Y", version=7, doc="d", parameters={"p": "1"}, fields=(
        *Schema.struct(("a", decimal_schema(3, optional=True)), ("b", timestamp_schema())).fields,))
    field = schema_field("value", schema)
    assert field_schema(field) == schema
    assert field_schema(pa.field("value", pa.string())) is None
    for kept in (Schema(SchemaType.INT32, optional=True, default=5), Schema(SchemaType.STRING, default="é"),
                 Schema(SchemaType.FLOAT64, default=0.1), Schema(SchemaType.BOOLEAN, default=False)):
        assert schema_from_text(schema_text(kept)) == kept
    for dropped in (Schema(SchemaType.BYTES, default=b"x"), decimal_schema(2, optional=True),
                    Schema(SchemaType.INT64, default=True)):
        with_default = dataclasses.replace(dropped, default=dropped.default or decimal.Decimal("1.50"))
        assert schema_from_text(schema_text(with_default)) == dataclasses.replace(dropped, default=None)


def test_a_null_read_with_a_schema_is_a_null_cell_of_that_schema():
    optional = {**ORDER, "optional": True}
    msgs = _msgs([_order(0, optional), _envelope(optional, None), _order(2, optional)])
    batches, failures = _build(msgs, BatchBuilder(columnar(_json()), columnar(_json()), columns=("value",)))
    assert not failures and len(batches) == 1 and batches[0].column("value").null_count == 1
    [middle] = [r for b in _build(msgs)[0] for r in sink_records(b) if r.kafka_offset == 1]
    assert middle.value is None and middle.value_schema == column_schema(batches[0].schema.field("value"))


def test_projection_leaves_out_typed_columns_the_task_does_not_read_and_does_not_cut_runs_for_them():
    builder = BatchBuilder(columnar(_json()), columnar(_json()), columns=("value",))
    batches, failures = _build(_msgs(STREAM[:6]), builder)
    assert len(batches) == 1 and "key" not in batches[0].schema.names and not failures
    assert batches[0].column("offset").to_pylist() == list(range(6))


def test_number_converters_give_typed_columns():
    converter = load_converter({}, "value", "org.apache.kafka.connect.converters.IntegerConverter")
    assert isinstance(converter, IntegerConverter) and isinstance(columnar(converter), TypedColumns)
    msgs = [Message(topic="t", partition=0, offset=i, key=None, value=v, timestamp=(1, 1))
            for i, v in enumerate([(5).to_bytes(4, "big"), None, b"\x01", (7).to_bytes(4, "big")])]
    builder = BatchBuilder(columnar(load_converter({}, "key", "org.apache.kafka.connect.storage.StringConverter")),
                           columnar(converter))
    batches, failures = _build(msgs, builder)
    assert failures == [(2, Stage.VALUE_CONVERTER)]
    assert [b.column("value").to_pylist() for b in batches] == [[5], [None], [7]]
    assert [b.schema.field("value").type for b in batches] == [pa.int32(), JSON_TYPE, pa.int32()]


class _ClosingContext:
    def is_closing(self) -> bool:
        return True

    def errant_record_reporter(self):
        return None


def test_the_archive_writes_the_same_parquet_files_from_typed_batches_as_from_records(tmp_path):
    msgs = _msgs([*STREAM, *(_order(i) for i in range(17, 40))], partitions=2)
    batches = [b for i in range(0, len(msgs), 9) for b in _build(msgs[i:i + 9])[0]]
    written = {}
    for path in ("records", "batches"):
        task = ArchiveSinkTask()
        task.initialize(_ClosingContext())
        task.start({"archive.url": str(tmp_path / path), "format": "parquet", "flush.size": "5"})
        assert task.takes_batches(None, None)
        task.open([TopicPartition("orders", 0), TopicPartition("orders", 1)])
        for batch in [*batches, batches[2]]:  # the third again: redelivered, skipped
            task.put_batch(batch) if path == "batches" else task.put(sink_records(batch))
        task.pre_commit({TopicPartition("orders", 0): 40, TopicPartition("orders", 1): 40})
        written[path] = {str(f.relative_to(tmp_path / path)): f.read_bytes() for f in (tmp_path / path).rglob("*.*")}
    assert written["batches"] == written["records"]
    assert len(written["records"]) >= 10


def test_the_archive_takes_typed_batches_for_parquet_only(tmp_path):
    task = ArchiveSinkTask()
    task.initialize(_ClosingContext())
    task.start({"archive.url": str(tmp_path), "format": "jsonl"})
    assert not task.takes_batches(None, None) and task.takes_batches(pa.string(), JSON_TYPE)


@pytest.mark.parametrize("bad", [Schema(SchemaType.STRUCT), Schema(SchemaType.BYTES, name=decimal_schema(0).name,
                                                                    parameters={"scale": "-1"})])
def test_a_schema_without_an_arrow_form_takes_the_tolerance_path(bad):
    class Gives(JsonConverter):
        def to_connect_data(self, topic, headers, data):
            return (bad, {}) if data == b"bad" else super().to_connect_data(topic, headers, data)

    converter = Gives()
    converter.configure({}, False)
    msgs = [Message(topic="t", partition=0, offset=i, key=None, value=v, timestamp=(1, 1))
            for i, v in enumerate([_order(0), b"bad", _order(2)])]
    batches, failures = _build(msgs, BatchBuilder(columnar(_json()), columnar(converter)))
    assert failures == [(1, Stage.VALUE_CONVERTER)]
    assert [b.column("offset").to_pylist() for b in batches] == [[0], [2]]  # its run is refused as a whole


TYPED_TRANSFORMS = {
    "replace": {"transforms": "r", "transforms.r.type": "ReplaceField$Value", "transforms.r.exclude": "note",
                "transforms.r.renames": "id:order_id,tags:labels"},
    "replace-where-key-is-null": {
        "transforms": "r", "transforms.r.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
        "transforms.r.include": "id,price", "transforms.r.predicate": "h", "predicates": "h",
        "predicates.h.type": "HasHeaderKey", "predicates.h.name": "h"},
    "replace-keys-that-are-no-structs": {"transforms": "r", "transforms.r.type": "ReplaceField$Key",
                                         "transforms.r.exclude": "x"},
    "extract": {"transforms": "e", "transforms.e.type": "ExtractField$Value", "transforms.e.field": "line"},
    "extract-nested": {"transforms": "e", "transforms.e.type": "ExtractField$Value", "transforms.e.field": "line.sku",
                       "transforms.e.field.syntax.version": "V2"},
    "extract-unknown": {"transforms": "e", "transforms.e.type": "ExtractField$Value", "transforms.e.field": "nope"},
    "hoist": {"transforms": "h", "transforms.h.type": "HoistField$Value", "transforms.h.field": "order"},
    "hoist-key": {"transforms": "h", "transforms.h.type": "HoistField$Key", "transforms.h.field": "k"},
    "insert": {"transforms": "i", "transforms.i.type": "InsertField$Value", "transforms.i.topic.field": "t",
               "transforms.i.partition.field": "p", "transforms.i.offset.field": "o!",
               "transforms.i.timestamp.field": "ts", "transforms.i.static.field": "s",
               "transforms.i.static.value": "v"},
    "mask": {"transforms": "m", "transforms.m.type": "MaskField$Value",
             "transforms.m.fields": "id,note,price,at,day,tags,attrs,ratio,ok"},
    "mask-with-a-replacement": {"transforms": "m", "transforms.m.type": "MaskField$Value", "transforms.m.fields": "id,note",
                                "transforms.m.replacement": "42"},
    "mask-a-struct-fails": {"transforms": "m", "transforms.m.type": "MaskField$Value", "transforms.m.fields": "line"},
    "flatten": {"transforms": "f", "transforms.f.type": "Flatten$Value", "transforms.f.delimiter": "_"},
    "cast": {"transforms": "c", "transforms.c.type": "Cast$Value",
             "transforms.c.spec": "id:int8,ratio:float64,note:int32"},
    "cast-columnar": {"transforms": "c", "transforms.c.type": "Cast$Value", "transforms.c.spec": "id:string,ratio:float64"},
    "cast-keys": {"transforms": "c", "transforms.c.type": "Cast$Key", "transforms.c.spec": "boolean"},
    "value-to-key": {"transforms": "v", "transforms.v.type": "ValueToKey", "transforms.v.fields": "id,note"},
    "chain": {"transforms": "v,k,r,i,route", "transforms.v.type": "ValueToKey", "transforms.v.fields": "id,line",
              "transforms.v.predicate": "t", "transforms.v.negate": "true", "predicates": "t",
              "predicates.t.type": "RecordIsTombstone", "transforms.k.type": "ExtractField$Key",
              "transforms.k.field": "id", "transforms.r.type": "ReplaceField$Value",
              "transforms.r.include": "id,price,at,extra", "transforms.i.type": "InsertField$Value",
              "transforms.i.offset.field": "offset", "transforms.route.type": "RegexRouter",
              "transforms.route.regex": "orders", "transforms.route.replacement": "archived"},
}


def _apply_both(chain: TransformationChain, batches: list[pa.RecordBatch]):
    failed_batches: list = []
    out = [b for batch in batches for b in chain.apply_batch(
        batch, lambda row, cls, error: failed_batches.append((row.column("offset")[0].as_py(), cls, str(error))))]
    failed_records: list = []
    kept = []
    for record in (r for batch in batches for r in sink_records(batch)):
        try:
            result = chain.apply(record)
        except Exception as exc:  # noqa: BLE001 - as the runtime tolerates it
            failed_records.append((record.kafka_offset, exc.transformation_class, str(exc)))
            continue
        if result is not None:
            kept.append(result)
    return out, failed_batches, kept, failed_records


def _shape(record):
    return (record.topic, record.original_topic, record.kafka_offset, record.key, record.key_schema, record.value,
            record.value_schema, record.headers)


@pytest.mark.parametrize("name", TYPED_TRANSFORMS)
def test_typed_batch_transforms_leave_what_the_record_forms_leave(name, tmp_path):
    chain = TransformationChain.from_config(TYPED_TRANSFORMS[name])
    assert chain.batch_types(None, None)[1] is None
    batches = [b for i in range(0, len(STREAM), 6) for b in _build(_msgs(STREAM)[i:i + 6])[0]]
    out, failed_batches, kept, failed_records = _apply_both(chain, batches)
    assert sorted(failed_batches) == sorted(failed_records)
    # kept records as Arrow gives them back: a struct's absent fields are its nulls (Flatten leaves them out)
    normalized = [r for b in record_batches(kept) for r in sink_records(b)]
    assert [_shape(r) for b in out for r in sink_records(b)] == [_shape(r) for r in normalized]
    assert (failed_records or kept) and [_shape(r) for r in kept] != [_shape(r) for b in batches
                                                                       for r in sink_records(b)], "it did something"
    written = {}
    for path in ("records", "batches"):
        task = ArchiveSinkTask()
        task.initialize(_ClosingContext())
        task.start({"archive.url": str(tmp_path / path), "format": "parquet", "flush.size": "4"})
        task.open([TopicPartition("orders", 0)])
        for batch in out:
            task.put_batch(batch) if path == "batches" else task.put(sink_records(batch))
        task.pre_commit({TopicPartition("orders", 0): len(STREAM)})
        written[path] = {str(f.relative_to(tmp_path / path)): f.read_bytes() for f in (tmp_path / path).rglob("*.*")}
    assert written["batches"] == written["records"]


def test_value_transformations_take_typed_columns_only():
    chain = TransformationChain.from_config(TYPED_TRANSFORMS["replace"])
    with pytest.raises(NoBatchForm, match="ReplaceFieldValue takes batches of values with Connect schemas"):
        chain.batch_types(pa.string(), JSON_TYPE)
    assert TransformationChain.from_config(TYPED_TRANSFORMS["value-to-key"]).batch_types(pa.string(), None) == \
        (None, None)


def test_a_value_its_schemas_column_refuses_leaves_the_batch_alone():
    lone = json.dumps({"schema": ORDER, "payload": {"id": 1, "note": "\ud800"}}).encode()  # no UTF-8 form
    batches, failures = _build(_msgs([_order(0), lone, _order(2)]), BatchBuilder(columnar(_json()), columnar(_json()),
                                                                                 columns=("value",)))
    assert [(offset, stage) for offset, stage in failures] == [(1, Stage.VALUE_CONVERTER)]
    assert [b.column("offset").to_pylist() for b in batches] == [[0, 2]]
