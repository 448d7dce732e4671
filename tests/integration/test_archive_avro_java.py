"""The archive sink's Avro files, read by Apache Avro's own Java library.

The task (driven directly, no Spark, no Kafka) writes ``.avro`` files with logical types,
optional fields, nested records, maps (string and non-string keys), arrays, headers, a struct
key and a schemaless value, with both codecs; ``java/AvroArchiveReader.java`` reads every file
with Avro 1.12.2's ``DataFileReader`` / ``GenericDatumReader`` (logical type conversions on, the
writer schema parsed again with default validation) in one JVM, and what Java reads must equal
what fastavro reads, record by record, value by value (decimals, dates, times and timestamps
compared as numbers). ``avro-tools tojson`` (1.12.2) must print the same JSON as fastavro's
``json_writer`` for the same files.

Java 17+ and Maven (for Avro's jars and avro-tools from Maven Central; ``python -m conveyor.testing
resolve --avro`` fetches them up front) are required: without them the test fails, it never skips.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import fastavro
import pytest

from conveyor.api import Header, Schema, SchemaType, SinkRecord, TopicPartition
from conveyor.connectors.archive import ArchiveSinkTask
from conveyor.testing import ComponentUnavailable, _support
from conveyor.testing.avro_java import AVRO_VERSION, avro_libs, avro_tools_jar
from conveyor.testing.contexts import StubSinkTaskContext

pytestmark = pytest.mark.integration

READER = Path(__file__).parent / "java" / "AvroArchiveReader.java"
TOPIC = "orders"
TP0 = TopicPartition(TOPIC, 0)
TP1 = TopicPartition(TOPIC, 1)
DECIMAL = "org.apache.kafka.connect.data.Decimal"
EPOCH_DAY = dt.date(1970, 1, 1)


def key_schema() -> Schema:
    return Schema.struct(("region", Schema(SchemaType.STRING)), ("id", Schema(SchemaType.INT64)), name="shop.Key")


def value_schema() -> Schema:
    return Schema.struct(
        ("id", Schema(SchemaType.INT64)),
        ("tiny", Schema(SchemaType.INT8)),
        ("small", Schema(SchemaType.INT16)),
        ("qty", Schema(SchemaType.INT32)),
        ("ratio", Schema(SchemaType.FLOAT32)),
        ("price", Schema(SchemaType.FLOAT64)),
        ("paid", Schema(SchemaType.BOOLEAN)),
        ("note", Schema(SchemaType.STRING, optional=True)),
        ("blob", Schema(SchemaType.BYTES, optional=True)),
        ("tags", Schema(SchemaType.ARRAY, value_schema=Schema(SchemaType.STRING, optional=True))),
        ("attrs", Schema(SchemaType.MAP, key_schema=Schema(SchemaType.STRING), value_schema=Schema(SchemaType.INT64))),
        ("by_id", Schema(SchemaType.MAP, key_schema=Schema(SchemaType.INT32), value_schema=Schema(SchemaType.STRING))),
        (
            "customer",
            Schema.struct(
                ("name", Schema(SchemaType.STRING)),
                (
                    "address",
                    Schema.struct(("city", Schema(SchemaType.STRING)), ("zip", Schema(SchemaType.STRING, optional=True)),
                                  name="shop.Address", optional=True),
                ),
                name="shop.Customer",
                optional=True,
            ),
        ),
        ("lines", Schema(SchemaType.ARRAY, value_schema=Schema.struct(("sku", Schema(SchemaType.STRING)),
                                                                     ("n", Schema(SchemaType.INT32))))),
        ("amount", Schema(SchemaType.BYTES, name=DECIMAL, version=1, parameters={"scale": "2"})),
        ("big", Schema(SchemaType.BYTES, name=DECIMAL, version=1,
                       parameters={"scale": "4", "connect.decimal.precision": "30"}, optional=True)),
        ("day", Schema(SchemaType.INT32, name="org.apache.kafka.connect.data.Date", version=1)),
        ("clock", Schema(SchemaType.INT32, name="org.apache.kafka.connect.data.Time", version=1, optional=True)),
        ("at", Schema(SchemaType.INT64, name="org.apache.kafka.connect.data.Timestamp", version=1)),
        ("odd-name", Schema(SchemaType.STRING, optional=True)),
        name="shop.Order",
        optional=True,
    )


def value(i: int) -> dict[str, Any]:
    even = i % 2 == 0
    return {
        "id": i,
        "tiny": -7,
        "small": -300,
        "qty": 3 * i,
        "ratio": 0.5,
        "price": 9.99 + i,
        "paid": even,
        "note": f"note {i} ✓ \"q\"\n" if even else None,
        "blob": bytes(range(i % 7)) if even else None,
        "tags": ["a", None, "c"] if even else [],
        "attrs": {"x": 1, "ü": -(2**40)},
        "by_id": {1: "one", 2: "two"} if even else {},
        "customer": ({"name": "Ada", "address": {"city": "Paris", "zip": None} if i % 4 == 0 else None}
                     if even else None),
        "lines": [{"sku": f"s{j}", "n": j} for j in range(i % 3)],
        "amount": decimal.Decimal("-12.34") if even else decimal.Decimal("0.05"),
        "big": decimal.Decimal("12345678901234567890.1234") if even else None,
        "day": dt.date(2024, 2, 29) if even else dt.date(1969, 12, 31),
        "clock": dt.time(23, 59, 59, 999_000) if even else None,
        "at": dt.datetime(2024, 5, 1, 12, 30, 0, 123_000, tzinfo=dt.timezone.utc) if even
        else dt.datetime(1960, 1, 1, tzinfo=dt.timezone.utc),
        "odd-name": "dash",
    }


def write_archive(root: Path, codec: str) -> list[Path]:
    """Archive files of both partitions: TP0 with Connect schemas (a tombstone, a null key,
    headers), TP1 schemaless; returns their paths."""
    config = {"name": "avro-java", "archive.url": f"file://{root}", "format": "avro", "flush.size": 4,
              "avro.codec": codec}
    task = ArchiveSinkTask()
    context = StubSinkTaskContext(config)
    task.initialize(context)
    task.start(config)
    task.open([TP0, TP1])
    batch = []
    for i in range(6):
        headers = (Header("trace", f"t{i}".encode()), Header("empty", None)) if i % 2 else ()
        batch.append(SinkRecord(topic=TOPIC, kafka_partition=0, key={"region": "eu", "id": i}, value=value(i),
                                kafka_offset=i, timestamp=1_700_000_000_000 + i, headers=headers,
                                key_schema=key_schema(), value_schema=value_schema()))
    batch[4].value = None  # a tombstone
    batch[5].key = None
    batch[5].timestamp = None
    schemaless = [{"id": 1, "tags": ["x"], "n": None}, "text", 4.5, [1, 2], None]
    for i, v in enumerate(schemaless):
        batch.append(SinkRecord(topic=TOPIC, kafka_partition=1, key=None if i % 2 else f"k{i}", value=v,
                                kafka_offset=100 + i, timestamp=1_700_000_000_000))
    task.put(batch)
    context.closing = True
    assert task.pre_commit({TP0: 6, TP1: 105}) == {TP0: 6, TP1: 105}
    files = sorted(root.rglob("*.avro"))
    assert len(files) == 4, files  # TP0: 4 + 2 records; TP1: 4 + 1
    return files


def java_read(files: list[Path]) -> list[dict[str, Any]]:
    try:
        libs = avro_libs()
        java = _support.find_java_home(17, component="avro-java") / "bin" / "java"
    except ComponentUnavailable as e:
        pytest.fail(f"Apache Avro {AVRO_VERSION}'s Java jars and Java 17+ (and Maven to fetch them) are needed"
                    f" to read the archive with Avro's own reader, and are unavailable: {e}")
    jars = sorted(str(p) for p in libs.glob("*.jar"))
    run = subprocess.run([str(java), "-cp", ":".join(jars), str(READER), *map(str, files)],
                         capture_output=True, encoding="utf-8", timeout=300, check=False)
    if run.returncode != 0:
        pytest.fail(f"AvroArchiveReader.java exited {run.returncode}:\n{run.stderr[-4000:]}")
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(answers) == len(files), run.stdout[-2000:]
    return answers


def canonical(v: Any) -> Any:
    """fastavro's values in the reader's JSON form."""
    if isinstance(v, dict):
        return {k: canonical(x) for k, x in v.items()}
    if isinstance(v, list):
        return [canonical(x) for x in v]
    if isinstance(v, bytes):
        return {"$bytes": base64.b64encode(v).decode("ascii")}
    if isinstance(v, decimal.Decimal):
        return {"$decimal": format(v, "f")}
    if isinstance(v, dt.datetime):
        return {"$ts": (v - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(milliseconds=1)}
    if isinstance(v, dt.date):
        return {"$date": (v - EPOCH_DAY).days}
    if isinstance(v, dt.time):
        return {"$time": ((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000}
    return v


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_apache_avro_java_reads_the_archive_as_fastavro_does(tmp_path: Path, codec: str) -> None:
    files = write_archive(tmp_path / "archive", codec)
    answers = java_read(files)
    for path, answer in zip(files, answers):
        assert "error" not in answer, f"Avro's Java reader refused {path.name}: {answer['error']}"
        with open(path, "rb") as f:
            reader = fastavro.reader(f)
            expected = [canonical(r) for r in reader]
            metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        assert answer["codec"] == codec
        assert answer["meta"] == metadata
        assert len(answer["records"]) == len(expected)
        for i, (got, want) in enumerate(zip(answer["records"], expected)):
            assert got == want, f"{path.name} record {i}"
        # Java kept the schema's names and logical types
        fields = {f["name"]: f for f in answer["schema"]["fields"]}
        assert answer["schema"]["name"] == "ConveyorArchiveRecord"
        if "partition=0" in str(path):
            order = fields["value"]["type"][1]
            assert order["name"] == "Order" and order.get("namespace") == "shop"
            logical = {f["name"]: f["type"] for f in order["fields"]}
            assert logical["amount"] == {"type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 2}
            assert logical["day"] == {"type": "int", "logicalType": "date"}
            assert logical["at"] == {"type": "long", "logicalType": "timestamp-millis"}

    # spot checks of what Java read, against the values written
    first = answers[0]["records"]
    assert first[0]["key"] == {"region": "eu", "id": 0}
    assert first[0]["value"]["amount"] == {"$decimal": "-12.34"}
    assert first[0]["value"]["big"] == {"$decimal": "12345678901234567890.1234"}
    assert first[0]["value"]["day"] == {"$date": (dt.date(2024, 2, 29) - EPOCH_DAY).days}
    assert first[0]["value"]["clock"] == {"$time": 86_399_999}
    assert first[1]["value"]["at"] == {"$ts": -315_619_200_000}
    assert first[1]["headers"] == [{"key": "trace", "value": {"$bytes": base64.b64encode(b"t1").decode()}},
                                   {"key": "empty", "value": None}]
    assert first[0]["value"]["by_id"] == [{"key": 1, "value": "one"}, {"key": 2, "value": "two"}]
    assert first[0]["value"]["attrs"] == {"x": 1, "ü": -(2**40)}
    second = answers[1]["records"]
    assert second[0]["value"] is None and second[1]["key"] is None and second[1]["timestamp"] is None
    schemaless = answers[2]["records"] + answers[3]["records"]
    assert [None if r["value"] is None else json.loads(r["value"]) for r in schemaless] == [
        {"id": 1, "tags": ["x"], "n": None}, "text", 4.5, [1, 2], None]


def test_avro_tools_tojson_reads_the_archive_as_fastavro_does(tmp_path: Path) -> None:
    """``avro-tools tojson`` (Avro's JSON encoding: unions as ``{"type": value}``, bytes as
    ISO-8859-1 text) prints what fastavro's ``json_writer`` prints for the records it read."""
    files = write_archive(tmp_path / "archive", "deflate")
    try:
        jar = avro_tools_jar()
        java = _support.find_java_home(17, component="avro-java") / "bin" / "java"
    except ComponentUnavailable as e:
        pytest.fail(f"avro-tools {AVRO_VERSION} and Java 17+ (and Maven to fetch it) are needed, and are"
                    f" unavailable: {e}")
    for path in files:
        run = subprocess.run([str(java), "-jar", str(jar), "tojson", str(path)], capture_output=True,
                             encoding="utf-8", timeout=300, check=False)
        assert run.returncode == 0, f"avro-tools tojson {path.name} exited {run.returncode}:\n{run.stderr[-4000:]}"
        got = [json.loads(line) for line in run.stdout.splitlines()]
        with open(path, "rb") as f:
            reader = fastavro.reader(f)
            records = list(reader)
            out = io.StringIO()
            fastavro.json_writer(out, reader.writer_schema, records)
        expected = [json.loads(line) for line in out.getvalue().splitlines()]
        assert len(got) == len(expected) > 0
        assert got == expected, path.name
