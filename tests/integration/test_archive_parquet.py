"""The archive sink's ``format=parquet``, the task driven directly (no Spark, no Kafka), on
local files and a real S3 server (S3Proxy, ``conveyor.testing.pytest_s3``'s ``s3_server`` /
``s3_bucket``); files are read back with ``pyarrow.parquet`` (row groups, schema, logical
types, values)."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conveyor.api import ConfigError, DataError, Header, Schema, SchemaType, SinkRecord, TopicPartition
from conveyor.connectors.archive import ArchiveSinkConnector, ArchiveSinkTask, parquet_format
from conveyor.testing.contexts import RecordingReporter, StubSinkTaskContext, closing_commit, start_sink_task

pytestmark = pytest.mark.integration

TOPIC = "orders"
TP0 = TopicPartition(TOPIC, 0)
DECIMAL = "org.apache.kafka.connect.data.Decimal"
UTC = dt.timezone.utc


# -- a minimal runtime and the archive's two backends ----------------------------------------


def start_task(
    config: Mapping[str, Any], reporter: RecordingReporter | None = None
) -> tuple[ArchiveSinkTask, StubSinkTaskContext]:
    return start_sink_task(ArchiveSinkTask(), config, [TP0], reporter)


def record(
    offset: int,
    value: Any,
    *,
    key: Any = None,
    value_schema: Schema | None = None,
    key_schema: Schema | None = None,
    headers: Sequence[Header] = (),
    timestamp: int | None = None,
) -> SinkRecord:
    return SinkRecord(
        topic=TOPIC,
        kafka_partition=0,
        key=f"k{offset}" if key is None else key,
        value=value,
        kafka_offset=offset,
        timestamp=1_700_000_000_000 + offset if timestamp is None else timestamp,
        headers=tuple(headers),
        key_schema=key_schema,
        value_schema=value_schema,
    )


def name(start: int) -> str:
    return f"{TOPIC}+0+{start:010d}.parquet"


@dataclass
class Archive:
    url: str
    options: dict[str, Any]
    fs: Any
    root: str

    def config(self, **overrides: Any) -> dict[str, Any]:
        cfg: dict[str, Any] = {"name": "archive-test", "archive.url": self.url, "format": "parquet", **self.options}
        cfg.update({k.replace("_", "."): v for k, v in overrides.items()})
        return cfg

    def files(self) -> list[str]:
        self.fs.invalidate_cache()
        try:
            paths = self.fs.ls(f"{self.root}/topics/{TOPIC}/partition=0", detail=False)
        except FileNotFoundError:
            return []
        return sorted(n for n in (p.rstrip("/").rsplit("/", 1)[-1] for p in paths) if not n.startswith("."))

    def parquet(self, file_name: str) -> pq.ParquetFile:
        return pq.ParquetFile(io.BytesIO(self.fs.cat_file(f"{self.root}/topics/{TOPIC}/partition=0/{file_name}")))

    def table(self, file_name: str) -> pa.Table:
        return pq.read_table(io.BytesIO(self.fs.cat_file(f"{self.root}/topics/{TOPIC}/partition=0/{file_name}")))

    def offsets(self) -> list[int]:
        return [o for f in self.files() for o in self.table(f).column("offset").to_pylist()]


@pytest.fixture
def local_archive(tmp_path) -> Archive:
    root = str(tmp_path / "archive")
    return Archive(f"file://{root}", {}, fsspec.filesystem("file"), root)


@pytest.fixture
def s3_archive(s3_server, s3_bucket) -> Archive:
    fs = s3_server.filesystem()
    return Archive(
        f"s3://{s3_bucket}/archive", {"archive.s3.endpoint.url": s3_server.endpoint_url}, fs, f"{s3_bucket}/archive"
    )


@pytest.fixture(params=["local", "s3"])
def archive(request) -> Archive:
    return request.getfixturevalue(f"{request.param}_archive")


# -- schemas and values ------------------------------------------------------------------------


def order_schema() -> Schema:
    return Schema.struct(
        ("id", Schema(SchemaType.INT64)),
        ("tiny", Schema(SchemaType.INT8)),
        ("small", Schema(SchemaType.INT16)),
        ("qty", Schema(SchemaType.INT32)),
        ("ratio", Schema(SchemaType.FLOAT32)),
        ("price", Schema(SchemaType.FLOAT64)),
        ("paid", Schema(SchemaType.BOOLEAN)),
        ("note", Schema(SchemaType.STRING, optional=True)),
        ("blob", Schema(SchemaType.BYTES)),
        ("tags", Schema(SchemaType.ARRAY, value_schema=Schema(SchemaType.STRING))),
        ("attrs", Schema(SchemaType.MAP, key_schema=Schema(SchemaType.STRING), value_schema=Schema(SchemaType.INT64))),
        ("by_id", Schema(SchemaType.MAP, key_schema=Schema(SchemaType.INT32), value_schema=Schema(SchemaType.STRING))),
        (
            "customer",
            Schema.struct(
                ("name", Schema(SchemaType.STRING)), ("vip", Schema(SchemaType.BOOLEAN)), name="shop.Customer", optional=True
            ),
        ),
        ("amount", Schema(SchemaType.BYTES, name=DECIMAL, version=1, parameters={"scale": "2"})),
        (
            "big",
            Schema(
                SchemaType.BYTES,
                name=DECIMAL,
                version=1,
                parameters={"scale": "4", "connect.decimal.precision": "50"},
                optional=True,
            ),
        ),
        ("day", Schema(SchemaType.INT32, name="org.apache.kafka.connect.data.Date", version=1)),
        ("clock", Schema(SchemaType.INT32, name="org.apache.kafka.connect.data.Time", version=1)),
        ("at", Schema(SchemaType.INT64, name="org.apache.kafka.connect.data.Timestamp", version=1)),
        ("odd-name", Schema(SchemaType.STRING, optional=True)),
        name="shop.Order",
    )


def order(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "tiny": 7,
        "small": -300,
        "qty": 3,
        "ratio": 0.5,
        "price": 9.99,
        "paid": i % 2 == 0,
        "note": None if i % 2 else f"note {i} ✓",
        "blob": bytes([i % 256]) * 3,
        "tags": ["a", "b"],
        "attrs": {"x": 1, "y": 2},
        "by_id": {1: "one", 2: "two"},
        "customer": {"name": "Ada", "vip": True} if i % 2 == 0 else None,
        "amount": decimal.Decimal("12.34"),
        "big": decimal.Decimal("1234567890123456789012345678901234567890.1234") if i % 2 == 0 else None,
        "day": dt.date(2024, 5, 1),
        "clock": dt.time(12, 30, 1, 250_000),
        "at": dt.datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
        "odd-name": "dash",
    }


def as_read(value: dict[str, Any]) -> dict[str, Any]:
    """What pyarrow reads back for ``order(i)``: maps as lists of pairs."""
    out = dict(value)
    out["attrs"] = list(value["attrs"].items())
    out["by_id"] = list(value["by_id"].items())
    return out


# -- round trip ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["snappy", "none", "zstd"])
def test_round_trip_with_connect_schema(archive: Archive, codec: str) -> None:
    key_schema = Schema(SchemaType.STRING)
    task, context = start_task(archive.config(flush_size=3, parquet_codec=codec))
    task.put(
        [
            record(i, order(i), key_schema=key_schema, value_schema=order_schema(), headers=(Header("h", b"v"), Header("n", None)))
            for i in range(5)
        ]
    )
    assert archive.files() == [name(0)]  # 3 records: one full file; 2 buffered
    assert closing_commit(task, context, {TP0: 5}) == {TP0: 5}
    assert archive.files() == [name(0), name(3)]

    pf = archive.parquet(name(0))
    assert pf.metadata.num_rows == 3 and pf.metadata.num_row_groups == 1
    assert pf.metadata.row_group(0).column(0).compression == {"none": "UNCOMPRESSED"}.get(codec, codec.upper())
    meta = pf.schema_arrow.metadata
    assert meta[b"conveyor.topic"] == b"orders" and meta[b"conveyor.start.offset"] == b"0"
    schema = pf.schema_arrow
    assert schema.field("topic").type == pa.string() and not schema.field("topic").nullable
    assert schema.field("partition").type == pa.int32()
    assert schema.field("offset").type == pa.int64()
    assert schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("key").type == pa.string()
    value_type = schema.field("value").type
    types = {value_type.field(i).name: value_type.field(i).type for i in range(value_type.num_fields)}
    assert types["id"] == pa.int64() and types["tiny"] == pa.int8() and types["small"] == pa.int16()
    assert types["qty"] == pa.int32() and types["ratio"] == pa.float32() and types["price"] == pa.float64()
    assert types["paid"] == pa.bool_() and types["note"] == pa.string() and types["blob"] == pa.binary()
    assert types["tags"] == pa.list_(pa.field("element", pa.string(), nullable=False))
    assert pa.types.is_map(types["attrs"]) and types["attrs"].key_type == pa.string()
    assert pa.types.is_map(types["by_id"]) and types["by_id"].key_type == pa.int32()
    assert types["customer"] == pa.struct([("name", pa.string()), ("vip", pa.bool_())])
    assert types["amount"] == pa.decimal128(38, 2)
    assert types["big"] == pa.decimal256(50, 4)
    assert types["day"] == pa.date32()
    assert types["clock"] == pa.time32("ms")
    assert types["at"] == pa.timestamp("ms", tz="UTC")
    assert "odd-name" in types  # Arrow takes any field name

    # the Parquet logical types, as other readers see them
    parquet_schema = pf.schema
    logical = {parquet_schema.column(i).path: str(parquet_schema.column(i).logical_type) for i in range(len(parquet_schema))}
    assert logical["value.amount"].startswith("Decimal(precision=38, scale=2")
    assert logical["value.day"] == "Date"
    assert "Time(isAdjustedToUTC=false, timeUnit=milliseconds" in logical["value.clock"]  # Arrow times have no zone
    assert "Timestamp(isAdjustedToUTC=true, timeUnit=milliseconds" in logical["value.at"]

    rows = archive.table(name(0)).to_pylist() + archive.table(name(3)).to_pylist()
    assert [r["offset"] for r in rows] == [0, 1, 2, 3, 4]
    first = rows[0]
    assert (first["topic"], first["partition"], first["key"]) == (TOPIC, 0, "k0")
    assert first["timestamp"] == dt.datetime.fromtimestamp(1_700_000_000, tz=UTC)
    assert first["headers"] == [{"key": "h", "value": b"v"}, {"key": "n", "value": None}]
    for i, row in enumerate(rows):
        assert row["value"] == as_read(order(i)), i
    assert archive.offsets() == [0, 1, 2, 3, 4]


def test_schemaless_keys_and_values_are_json_text(local_archive: Archive) -> None:
    task, context = start_task(local_archive.config(flush_size=100))
    values = [{"id": 1, "tags": ["x"], "at": dt.date(2024, 1, 2)}, "text", 42, None]
    batch = [record(i, v if v is not None else "x") for i, v in enumerate(values)]
    batch[3].value = None
    batch[1].key = None
    task.put(batch)
    assert closing_commit(task, context, {TP0: 4}) == {TP0: 4}
    table = local_archive.table(name(0))
    assert table.schema.field("value").type == pa.string() and table.schema.field("key").type == pa.string()
    got = table.to_pylist()
    assert [None if r["value"] is None else json.loads(r["value"]) for r in got] == [
        {"id": 1, "tags": ["x"], "at": "2024-01-02"},
        "text",
        42,
        None,
    ]
    assert json.loads(got[0]["key"]) == "k0" and got[1]["key"] is None


def test_primitive_value_and_null_values_of_a_struct_schema(local_archive: Archive) -> None:
    schema = Schema.struct(("id", Schema(SchemaType.INT64)), optional=True)
    task, context = start_task(local_archive.config(flush_size=100))
    batch = [record(0, {"id": 1}, value_schema=schema, key=b"\x00\x01", key_schema=Schema(SchemaType.BYTES))]
    tombstone = record(1, {"id": 0}, value_schema=schema, key=b"\x02", key_schema=Schema(SchemaType.BYTES), timestamp=0)
    tombstone.value = None
    tombstone.timestamp = None
    task.put(batch + [tombstone])
    assert closing_commit(task, context, {TP0: 2}) == {TP0: 2}
    rows = local_archive.table(name(0)).to_pylist()
    assert [(r["key"], r["value"], r["timestamp"]) for r in rows] == [
        (b"\x00\x01", {"id": 1}, dt.datetime.fromtimestamp(1_700_000_000, tz=UTC)),
        (b"\x02", None, None),
    ]


# -- files, row groups, schema changes, partial files ----------------------------------------


def test_row_groups_follow_flush_size(s3_archive: Archive, monkeypatch: pytest.MonkeyPatch) -> None:
    """Row groups of min(flush.size, ROW_GROUP_MAX_RECORDS) records: one per file up to the
    cap; above it, ceil(n / cap) (the cap lowered to 4 here to keep the test small)."""
    schema = Schema.struct(("id", Schema(SchemaType.INT64)))
    task, context = start_task(s3_archive.config(flush_size=5))
    task.put([record(i, {"id": i}, value_schema=schema) for i in range(12)])
    assert closing_commit(task, context, {TP0: 12}) == {TP0: 12}
    files = s3_archive.files()
    assert files == [name(0), name(5), name(10)]
    assert [(s3_archive.parquet(f).metadata.num_rows, s3_archive.parquet(f).metadata.num_row_groups) for f in files] == [
        (5, 1),
        (5, 1),
        (2, 1),
    ]

    monkeypatch.setattr(parquet_format, "ROW_GROUP_MAX_RECORDS", 4)
    task, context = start_task(s3_archive.config(flush_size=10))
    task.put([record(i, {"id": i}, value_schema=schema) for i in range(100, 123)])
    assert closing_commit(task, context, {TP0: 123}) == {TP0: 123}
    groups = {f: s3_archive.parquet(f).metadata for f in s3_archive.files() if f not in files}
    assert {f: (m.num_rows, m.num_row_groups) for f, m in groups.items()} == {
        name(100): (10, 3),
        name(110): (10, 3),
        name(120): (3, 1),
    }
    assert [groups[name(100)].row_group(i).num_rows for i in range(3)] == [4, 4, 2]


def test_schema_change_starts_a_new_file(local_archive: Archive) -> None:
    v1 = Schema.struct(("id", Schema(SchemaType.INT64)), name="shop.Order")
    v2 = Schema.struct(("id", Schema(SchemaType.INT64)), ("note", Schema(SchemaType.STRING, optional=True)), name="shop.Order")
    task, context = start_task(local_archive.config(flush_size=100))
    task.put(
        [record(0, {"id": 0}, value_schema=v1), record(1, {"id": 1}, value_schema=v1)]
        + [record(2, {"id": 2, "note": "n"}, value_schema=v2), record(3, {"id": 3}, value_schema=v1)]
    )
    assert local_archive.files() == [name(0), name(2)]  # each schema change wrote the buffer
    assert closing_commit(task, context, {TP0: 4}) == {TP0: 4}
    assert local_archive.files() == [name(0), name(2), name(3)]
    assert local_archive.table(name(2)).column("value").to_pylist() == [{"id": 2, "note": "n"}]
    assert local_archive.table(name(3)).schema.field("value").type == pa.struct([("id", pa.int64())])
    assert local_archive.offsets() == [0, 1, 2, 3]


@pytest.mark.parametrize("chunk", [3, parquet_format.CHUNK_RECORDS])
def test_closing_commit_writes_the_partial_file_below_the_offsets_given(
    archive: Archive, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also with records converted to Arrow every 3 records: the cuts go through chunks."""
    monkeypatch.setattr(parquet_format, "CHUNK_RECORDS", chunk)
    schema = Schema.struct(("id", Schema(SchemaType.INT64)), ("s", Schema(SchemaType.STRING)))
    task, context = start_task(archive.config(flush_size=100))
    task.put([record(i, {"id": i, "s": f"s{i}"}, value_schema=schema) for i in range(8)])
    # the runtime commits only what it handed over before offset 5: payload(5) then drop_first(5)
    assert closing_commit(task, context, {TP0: 5}) == {TP0: 5}
    assert archive.files() == [name(0)]
    assert archive.table(name(0)).column("value").to_pylist() == [{"id": i, "s": f"s{i}"} for i in range(5)]
    task.put([record(i, {"id": i, "s": f"s{i}"}, value_schema=schema) for i in range(8, 10)])
    assert closing_commit(task, context, {TP0: 10}) == {TP0: 10}
    assert archive.files() == [name(0), name(5)]
    table = archive.table(name(5))
    assert table.column("offset").to_pylist() == [5, 6, 7, 8, 9]
    assert table.column("value").to_pylist() == [{"id": i, "s": f"s{i}"} for i in range(5, 10)]
    assert archive.parquet(name(5)).schema_arrow.metadata[b"conveyor.start.offset"] == b"5"


def test_crash_and_redelivery_make_no_duplicates(local_archive: Archive) -> None:
    schema = Schema.struct(("id", Schema(SchemaType.INT64)))
    task, _ = start_task(local_archive.config(flush_size=4))
    task.put([record(i, {"id": i}, value_schema=schema) for i in range(6)])
    # crash: no commit; the next owner re-reads from 0 and rewrites the same names
    task2, context2 = start_task(local_archive.config(flush_size=4))
    task2.put([record(i, {"id": i}, value_schema=schema) for i in range(10)])
    assert closing_commit(task2, context2, {TP0: 10}) == {TP0: 10}
    assert local_archive.offsets() == list(range(10))


# -- bad records and configuration -------------------------------------------------------------


def test_records_that_do_not_match_their_schema_go_to_the_reporter(local_archive: Archive) -> None:
    schema = Schema.struct(
        ("id", Schema(SchemaType.INT64)),
        ("tiny", Schema(SchemaType.INT8, optional=True)),
        ("amount", Schema(SchemaType.BYTES, name=DECIMAL, parameters={"scale": "2", "connect.decimal.precision": "4"}, optional=True)),
        ("name", Schema(SchemaType.STRING, optional=True)),
    )
    reporter = RecordingReporter()
    task, context = start_task(local_archive.config(flush_size=100), reporter=reporter)
    bad = {
        1: {"id": "not a number"},
        2: {"id": None},
        3: {"id": 3, "tiny": 300},
        4: {"id": 4, "amount": decimal.Decimal("123.45")},
        5: {"id": 5, "amount": decimal.Decimal("1.234")},
        6: {"id": 6, "name": "\ud800"},
        7: "not a struct",
    }
    batch = [record(i, bad.get(i, {"id": i, "amount": decimal.Decimal("12.3")}), value_schema=schema) for i in range(9)]
    task.put(batch)
    assert [r.kafka_offset for r, _ in reporter.reported] == [1, 2, 3, 4, 5, 6, 7]
    messages = [str(e) for _, e in reporter.reported]
    assert all(isinstance(e, DataError) for _, e in reporter.reported)
    assert "'id'" in messages[0] and "int64" in messages[0]
    assert "required" in messages[1]
    assert "out of the range of int8" in messages[2]
    assert "precision" in messages[3] and "scale" in messages[4]
    assert "Unicode" in messages[5]
    assert "struct" in messages[6]
    assert closing_commit(task, context, {TP0: 9}) == {TP0: 9}
    table = local_archive.table(name(0))
    assert table.column("offset").to_pylist() == [0, 8]
    assert [v["amount"] for v in table.column("value").to_pylist()] == [decimal.Decimal("12.30")] * 2

    task2, _ = start_task(local_archive.config(flush_size=100))  # no reporter
    with pytest.raises(DataError, match="orders-0@20"):
        task2.put([record(20, {"id": "x"}, value_schema=schema)])


def test_schema_arrow_cannot_hold_is_a_data_error(local_archive: Archive) -> None:
    schema = Schema(SchemaType.BYTES, name=DECIMAL, parameters={"scale": "0", "connect.decimal.precision": "100"})
    reporter = RecordingReporter()
    task, context = start_task(local_archive.config(flush_size=100), reporter=reporter)
    task.put([record(0, decimal.Decimal(1), value_schema=schema), record(1, {"id": 1})])
    assert [r.kafka_offset for r, _ in reporter.reported] == [0]
    assert "decimal256" in str(reporter.reported[0][1])
    assert closing_commit(task, context, {TP0: 2}) == {TP0: 2}
    assert local_archive.offsets() == [1]


@pytest.mark.parametrize(
    "config, key, message",
    [
        ({"parquet.codec": "brotli"}, "parquet.codec", "'none', 'snappy', 'gzip', 'zstd' or 'lz4'"),
        ({"parquet.codec": 3}, "parquet.codec", "'none', 'snappy'"),
        ({"format": "orc"}, "format", "'jsonl', 'avro' or 'parquet'"),
    ],
)
def test_bad_config_names_the_key(tmp_path, config: dict[str, Any], key: str, message: str) -> None:
    full = {"archive.url": f"file://{tmp_path}", "format": "parquet", **config}
    with pytest.raises(ConfigError) as info:
        ArchiveSinkConnector().validate(full)
    assert key in info.value.errors, info.value.errors
    assert message in info.value.errors[key], info.value.errors[key]


@pytest.mark.parametrize("codec", ["GZIP", "lz4"])
def test_codecs_are_case_insensitive_and_readable(local_archive: Archive, codec: str) -> None:
    task, context = start_task(local_archive.config(flush_size=100, parquet_codec=codec))
    task.put([record(i, f"v{i}") for i in range(3)])
    assert closing_commit(task, context, {TP0: 3}) == {TP0: 3}
    pf = local_archive.parquet(name(0))
    assert pf.metadata.row_group(0).column(0).compression in ("GZIP", "LZ4_RAW", "LZ4")
    assert local_archive.table(name(0)).column("value").to_pylist() == ['"v0"', '"v1"', '"v2"']
