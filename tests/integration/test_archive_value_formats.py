"""The archive sink's value-only files (``format.class``, Confluent's S3 sink formats), driven
directly on local disk and on a real S3 server (S3Proxy): what Confluent's readers of such
buckets expect to find."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
from typing import Any

import fastavro
import fsspec
import pytest

from conveyor.api import ConfigError, DataError, Schema, SchemaType, SinkRecord, TopicPartition
from conveyor.connectors.archive import ArchiveSinkTask
from conveyor.connectors.archive.config import load_config
from conveyor.converters import _avro_data
from conveyor.converters.logical import decimal_schema, timestamp_schema
from conveyor.testing.contexts import RecordingReporter, closing_commit, start_sink_task

pytestmark = pytest.mark.integration

S = SchemaType
TP = TopicPartition("payments", 0)
AVRO = "io.confluent.connect.s3.format.avro.AvroFormat"
JSON = "io.confluent.connect.s3.format.json.JsonFormat"
BYTES = "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"
PAYMENT = Schema.struct(
    ("id", Schema(S.INT64)),
    ("amount", decimal_schema(2)),
    ("at", timestamp_schema()),
    ("note", Schema(S.STRING, optional=True)),
    name="shop.Payment",
)
AT = dt.datetime(2026, 11, 27, 8, 30, tzinfo=dt.timezone.utc)


def _value(i: int) -> dict[str, Any]:
    return {"id": i, "amount": decimal.Decimal(f"{i}.50"), "at": AT, "note": None if i % 2 else f"n{i}"}


def _record(offset: int, value: Any, schema: Schema | None = PAYMENT) -> SinkRecord:
    return SinkRecord(topic=TP.topic, kafka_partition=0, key=f"k{offset}", value=value, kafka_offset=offset,
                      timestamp=1_700_000_000_000 + offset, value_schema=schema)


@pytest.fixture(params=["local", "s3"])
def archive(request, tmp_path) -> tuple[dict[str, Any], Any, str]:
    """(storage config keys, fsspec filesystem, folder of partition 0)."""
    if request.param == "local":
        root = str(tmp_path / "archive")
        return {"archive.url": root}, fsspec.filesystem("file"), f"{root}/topics/{TP.topic}/partition=0"
    server = request.getfixturevalue("s3_server")
    bucket = request.getfixturevalue("s3_bucket")
    fs = server.filesystem()
    return ({"archive.url": f"s3://{bucket}/a", "archive.s3.endpoint.url": server.endpoint_url}, fs,
            f"{bucket}/a/topics/{TP.topic}/partition=0")


def _run(config: dict[str, Any], batch: list[SinkRecord]) -> tuple[dict, RecordingReporter]:
    reporter = RecordingReporter()
    task, context = start_sink_task(ArchiveSinkTask(), config, [TP], reporter)
    task.put(batch)
    return closing_commit(task, context, {TP: batch[-1].kafka_offset + 1}), reporter


def _files(fs: Any, folder: str) -> dict[str, bytes]:
    fs.invalidate_cache()
    return {p.rsplit("/", 1)[1]: fs.cat_file(p) for p in sorted(fs.ls(folder, detail=False))}


def test_avro_format_files_hold_the_values_with_confluents_avro_schema(archive) -> None:
    storage, fs, folder = archive
    other = Schema.struct(("id", Schema(S.INT64)), name="shop.Refund")
    batch = [_record(o, _value(o)) for o in range(3)] + [_record(3, {"id": 9}, other), _record(4, {"x": 1}, None)]
    committed, reporter = _run({**storage, "format.class": AVRO, "flush.size": 100}, batch)
    assert committed == {TP: 5}
    files = _files(fs, folder)
    assert list(files) == ["payments+0+0000000000.avro", "payments+0+0000000003.avro"]  # a schema change cuts
    reader = fastavro.reader(io.BytesIO(files["payments+0+0000000000.avro"]))
    assert reader.writer_schema["name"] == "shop.Payment"
    # the very schema Confluent's AvroData (and so its S3 sink and AvroConverter) derives
    written = fastavro.parse_schema(json.loads(reader.metadata["avro.schema"]))
    assert written == fastavro.parse_schema(_avro_data.to_avro_schema(PAYMENT))
    assert list(reader) == [_value(o) for o in range(3)]
    assert list(fastavro.reader(io.BytesIO(files["payments+0+0000000003.avro"]))) == [{"id": 9}]
    # a schemaless value cannot be written as Avro: errors.tolerance decides
    [(rejected, error)] = reporter.reported
    assert rejected.kafka_offset == 4 and isinstance(error, DataError) and "value schema" in str(error)


def test_json_format_lines_are_jsonconverter_values(archive) -> None:
    storage, fs, folder = archive
    batch = [_record(o, _value(o)) for o in range(2)] + [_record(2, {"free": [1, "x"]}, None)]
    committed, _ = _run({**storage, "format.class": JSON}, batch)
    assert committed == {TP: 3}
    [(name, data)] = _files(fs, folder).items()
    assert name == "payments+0+0000000000.json"
    lines = [json.loads(line) for line in data.splitlines()]
    millis = int(AT.timestamp() * 1000)
    # JsonConverter, schemas.enable=false: Decimal as base64 of the unscaled value, Timestamp as millis
    assert lines[0] == {"id": 0, "amount": base64.b64encode(b"\x32").decode(), "at": millis, "note": "n0"}
    assert lines[1]["note"] is None and lines[2] == {"free": [1, "x"]}

    numeric, _ = _run({**storage, "format.class": JSON, "json.decimal.format": "numeric", "topics.dir": "n"},
                      [_record(0, _value(7))])
    [data] = _files(fs, folder.replace("/topics/", "/n/")).values()
    assert json.loads(data)["amount"] == 7.5 and b'"amount":7.50' in data


def test_bytearray_format_writes_the_value_bytes_and_separator(archive) -> None:
    storage, fs, folder = archive
    batch = [_record(0, b"\x00raw", None), _record(1, "text", None), _record(2, b"two", None)]
    config = {**storage, "format.class": BYTES, "format.bytearray.separator": "|",
              "format.bytearray.extension": ".dat"}
    committed, reporter = _run(config, batch)
    assert committed == {TP: 3}
    assert _files(fs, folder) == {"payments+0+0000000000.dat": b"\x00raw|two|"}
    [(rejected, error)] = reporter.reported
    assert rejected.kafka_offset == 1 and "ByteArrayConverter" in str(error)


def test_null_values_follow_behavior_on_null_values(tmp_path) -> None:
    root = str(tmp_path / "a")
    batch = [_record(0, _value(0)), _record(1, None), _record(2, _value(2))]
    folder = f"{root}/topics/{TP.topic}/partition=0"
    committed, reporter = _run({"archive.url": root, "format.class": JSON}, batch)
    assert committed == {TP: 3}
    [(rejected, error)] = reporter.reported  # fail (the default): the dead-letter queue decides
    assert rejected.kafka_offset == 1 and "behavior.on.null.values=fail" in str(error)
    assert [json.loads(x)["id"] for x in _files(fsspec.filesystem("file"), folder)
            ["payments+0+0000000000.json"].splitlines()] == [0, 2]

    root2 = str(tmp_path / "b")
    committed, reporter = _run({"archive.url": root2, "format.class": JSON, "behavior.on.null.values": "IGNORE"},
                               [_record(0, None), _record(1, None)])
    assert committed == {TP: 2} and reporter.reported == []  # skipped, yet committed
    assert not fsspec.filesystem("file").exists(f"{root2}/topics")


@pytest.mark.parametrize(
    ("config", "key", "message"),
    [
        ({"format.class": "io.confluent.connect.s3.format.parquet.ParquetFormat"}, "format.class", "unsupported"),
        ({"format.class": JSON, "behavior.on.null.values": "write"}, "behavior.on.null.values", "'fail' or 'ignore'"),
        ({"format.class": JSON, "json.decimal.format": "text"}, "json.decimal.format", "'BASE64' or 'NUMERIC'"),
        ({"format.class": BYTES, "format.bytearray.extension": "bin"}, "format.bytearray.extension", "start with '.'"),
    ],
)
def test_value_format_config_errors_name_the_key(tmp_path, config, key, message) -> None:
    with pytest.raises(ConfigError) as info:
        load_config({"archive.url": str(tmp_path), **config})
    assert key in info.value.errors and message in info.value.errors[key]
