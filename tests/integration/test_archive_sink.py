"""The archive sink task, driven directly (no Spark, no Kafka), against local files and a
real S3 server (S3Proxy in its own JVM, checking signatures; from ``conveyor.testing.pytest_s3``:
``s3_server``, ``s3_bucket``).

The runtime is replaced by :class:`Context`, a minimal ``SinkTaskContext`` whose
``closing`` flag the tests set around a closing commit (KIP-275), the way the runtime does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import fastavro
import fsspec
import pytest

from conveyor.api import (
    ConfigError,
    ConnectError,
    DataError,
    Header,
    RetriableError,
    Schema,
    SchemaType,
    SinkRecord,
    TopicPartition,
)
from conveyor.connectors.archive import ArchiveSinkConfig, ArchiveSinkConnector, ArchiveSinkTask
from conveyor.connectors.archive.config import load_config
from conveyor.connectors.archive.storage import Storage
from conveyor.testing.contexts import RecordingReporter, StubSinkTaskContext, closing_commit, start_sink_task
from conveyor.testing.ports import free_port
from conveyor.testing.s3 import S3Server

pytestmark = pytest.mark.integration

TOPIC = "orders"
TP0 = TopicPartition(TOPIC, 0)
TP1 = TopicPartition(TOPIC, 1)


# -- a minimal runtime ----------------------------------------------------------------------


Reporter = RecordingReporter
Context = StubSinkTaskContext


def start_task(
    config: Mapping[str, Any], partitions: Sequence[TopicPartition] = (TP0,), reporter: Reporter | None = None
) -> tuple[ArchiveSinkTask, Context]:
    return start_sink_task(ArchiveSinkTask(), config, partitions, reporter)


def record(
    offset: int,
    value: Any = None,
    *,
    tp: TopicPartition = TP0,
    key: Any = None,
    value_schema: Schema | None = None,
    key_schema: Schema | None = None,
    headers: tuple[Header, ...] = (),
) -> SinkRecord:
    if value is None:
        value = {"id": offset, "item": f"item-{offset}"}
    return SinkRecord(
        topic=tp.topic,
        kafka_partition=tp.partition,
        key=f"k{offset}" if key is None else key,
        value=value,
        kafka_offset=offset,
        timestamp=1_700_000_000_000 + offset,
        headers=headers,
        key_schema=key_schema,
        value_schema=value_schema,
    )


def records(first: int, last: int, tp: TopicPartition = TP0, **kwargs: Any) -> list[SinkRecord]:
    """Records at offsets ``first..last`` inclusive."""
    return [record(o, tp=tp, **kwargs) for o in range(first, last + 1)]


def name(start: int, ext: str = "jsonl", tp: TopicPartition = TP0) -> str:
    return f"{tp.topic}+{tp.partition}+{start:010d}.{ext}"


# -- where the archive lives -----------------------------------------------------------------


@dataclass
class Archive:
    """An archive root on one backend, and how to read it back independently."""

    kind: str
    url: str
    options: dict[str, Any]  # connector config keys for the storage
    fs: Any
    root: str
    extra: dict[str, Any] = field(default_factory=dict)

    def config(self, **overrides: Any) -> dict[str, Any]:
        cfg: dict[str, Any] = {"name": "archive-test", "archive.url": self.url, **self.options}
        cfg.update({k.replace("_", "."): v for k, v in overrides.items()})
        return cfg

    def partition_dir(self, tp: TopicPartition = TP0) -> str:
        return f"{self.root}/topics/{tp.topic}/partition={tp.partition}"

    def files(self, tp: TopicPartition = TP0) -> list[str]:
        """Visible file names of a partition (hidden temporaries excluded), sorted."""
        self.fs.invalidate_cache()
        try:
            paths = self.fs.ls(self.partition_dir(tp), detail=False)
        except FileNotFoundError:
            return []
        return sorted(n for n in (p.rstrip("/").rsplit("/", 1)[-1] for p in paths) if not n.startswith("."))

    def all_files(self) -> list[str]:
        self.fs.invalidate_cache()
        return sorted(p[len(self.root) + 1 :] for p in self.fs.find(self.root))

    def read_bytes(self, file_name: str, tp: TopicPartition = TP0) -> bytes:
        return self.fs.cat_file(f"{self.partition_dir(tp)}/{file_name}")

    def read(self, file_name: str, tp: TopicPartition = TP0) -> list[dict[str, Any]]:
        return self._decode(file_name, self.read_bytes(file_name, tp))

    def read_at(self, relative_path: str) -> list[dict[str, Any]]:
        """The records of the file at ``relative_path`` under the archive root."""
        return self._decode(relative_path, self.fs.cat_file(f"{self.root}/{relative_path}"))

    @staticmethod
    def _decode(file_name: str, data: bytes) -> list[dict[str, Any]]:
        if file_name.endswith(".avro"):
            return list(fastavro.reader(_bytes_io(data)))
        assert data.endswith(b"\n")
        return [json.loads(line) for line in data.decode("utf-8").splitlines()]

    def offsets(self, tp: TopicPartition = TP0) -> list[int]:
        """Every archived offset of the partition, in file order (duplicates kept)."""
        return [r["offset"] for f in self.files(tp) for r in self.read(f, tp)]


def _bytes_io(data: bytes):
    import io

    return io.BytesIO(data)


@pytest.fixture
def local_archive(tmp_path) -> Archive:
    root = str(tmp_path / "archive")
    return Archive("local", f"file://{root}", {}, fsspec.filesystem("file"), root)


@pytest.fixture
def s3_archive(request) -> Archive:
    server = request.getfixturevalue("s3_server")
    bucket = request.getfixturevalue("s3_bucket")
    fs = server.filesystem()
    return Archive(
        "s3",
        f"s3://{bucket}/archive",
        {"archive.s3.endpoint.url": server.endpoint_url},
        fs,
        f"{bucket}/archive",
        extra={"server": server, "bucket": bucket},
    )


@pytest.fixture(params=["local", "s3"])
def archive(request) -> Archive:
    return request.getfixturevalue(f"{request.param}_archive")


# -- files appear at flush.size; pre_commit commits only whole files -----------------------


def test_files_appear_only_when_flush_size_is_reached(archive: Archive) -> None:
    task, _ = start_task(archive.config(flush_size=10))
    task.put(records(0, 8))
    assert archive.files() == []
    assert task.pre_commit({TP0: 9}) == {}  # nothing fully written yet: commit nothing

    task.put(records(9, 9))  # the 10th record completes the first file
    assert archive.files() == [name(0)]
    assert archive.offsets() == list(range(10))

    task.put(records(10, 24))
    assert archive.files() == [name(0), name(10)]
    assert task.pre_commit({TP0: 25}) == {TP0: 20}  # 20..24 are only buffered
    assert [len(archive.read(f)) for f in archive.files()] == [10, 10]


def test_pre_commit_never_goes_beyond_the_offsets_given(archive: Archive) -> None:
    task, _ = start_task(archive.config(flush_size=10))
    task.put(records(0, 19))
    assert task.pre_commit({TP0: 15}) == {TP0: 10}  # the last file boundary at or below 15
    assert task.pre_commit({TP0: 20}) == {TP0: 20}
    assert task.pre_commit({TP1: 20}) == {}  # partition with nothing written: left out


def test_closing_pre_commit_writes_partial_buffers_and_commits_everything(archive: Archive) -> None:
    task, context = start_task(archive.config(flush_size=100), [TP0, TP1])
    task.put(records(0, 41) + records(0, 6, tp=TP1))
    assert archive.files(TP0) == archive.files(TP1) == []
    assert task.pre_commit({TP0: 42, TP1: 7}) == {}  # a periodic commit writes nothing

    committed = closing_commit(task, context, {TP0: 42, TP1: 7})
    assert committed == {TP0: 42, TP1: 7}  # everything consumed: nothing is read twice
    assert archive.files(TP0) == [name(0)] and archive.offsets(TP0) == list(range(42))
    assert archive.files(TP1) == [name(0, tp=TP1)] and archive.offsets(TP1) == list(range(7))
    task.close([TP0, TP1])

    # The next owner resumes at the committed offsets and cuts files from there.
    task2, context2 = start_task(archive.config(flush_size=100), [TP0, TP1])
    task2.put(records(42, 50))
    assert closing_commit(task2, context2, {TP0: 51}) == {TP0: 51}
    assert archive.files(TP0) == [name(0), name(42)]
    assert archive.offsets(TP0) == list(range(51))


def test_closing_commit_of_revoked_partitions_only(local_archive: Archive) -> None:
    """Cooperative rebalancing revokes some partitions: only theirs are written."""
    task, context = start_task(local_archive.config(flush_size=100), [TP0, TP1])
    task.put(records(0, 4) + records(0, 2, tp=TP1))
    assert closing_commit(task, context, {TP0: 5}) == {TP0: 5}
    task.close([TP0])
    assert local_archive.files(TP0) == [name(0)]
    assert local_archive.files(TP1) == []  # still buffered, still assigned
    task.put(records(3, 5, tp=TP1))
    assert closing_commit(task, context, {TP1: 6}) == {TP1: 6}
    assert local_archive.offsets(TP1) == list(range(6))


def test_closing_commit_writes_only_records_below_the_offsets_given(local_archive: Archive) -> None:
    """After a failed put the runtime's offsets lag the task's buffer: the closing file must
    stop there, so the committed offset is a file boundary."""
    task, context = start_task(local_archive.config(flush_size=100))
    task.put(records(0, 9))
    assert closing_commit(task, context, {TP0: 6}) == {TP0: 6}
    assert local_archive.files() == [name(0)] and local_archive.offsets() == list(range(6))
    assert closing_commit(task, context, {TP0: 10}) == {TP0: 10}
    assert local_archive.files() == [name(0), name(6)] and local_archive.offsets() == list(range(10))


def test_lost_partitions_drop_their_buffers(local_archive: Archive) -> None:
    task, _ = start_task(local_archive.config(flush_size=10))
    task.put(records(0, 13))
    task.close([TP0])  # lost: no closing commit
    assert local_archive.files() == [name(0)]
    assert task.pre_commit({TP0: 14}) == {}
    task.open([TP0])  # assigned again: the consumer resumes at the committed offset, 0
    task.put(records(0, 19))
    assert task.pre_commit({TP0: 20}) == {TP0: 20}
    assert local_archive.files() == [name(0), name(10)]
    assert local_archive.offsets() == list(range(20))


# -- rotation by time ------------------------------------------------------------------------


def test_rotation_by_time(archive: Archive) -> None:
    task, _ = start_task(archive.config(flush_size=1000, rotate_interval_ms=300))
    task.put(records(0, 2))
    assert task.pre_commit({TP0: 3}) == {}
    assert archive.files() == []
    time.sleep(0.4)
    assert task.pre_commit({TP0: 3}) == {TP0: 3}  # a periodic commit rotates the old buffer
    assert archive.files() == [name(0)]

    task.put(records(3, 4))
    time.sleep(0.4)
    task.put(records(5, 5))  # put rotates the due buffer before taking the new record
    assert archive.files() == [name(0), name(3)]
    assert archive.offsets() == [0, 1, 2, 3, 4]
    assert task.pre_commit({TP0: 6}) == {TP0: 5}


# -- contents ------------------------------------------------------------------------------


def test_jsonl_round_trip(local_archive: Archive) -> None:
    task, context = start_task(local_archive.config(flush_size=100))
    values = [
        {"id": 1, "nested": {"tags": ["a", "b"], "ok": True}, "price": 9.5, "text": "grüße"},
        "plain string",
        [1, 2, 3],
        None,  # tombstone
        b"\x00\x01binary",
        {"amount": decimal.Decimal("12.34"), "at": dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)},
    ]
    batch = [
        record(i, v, key=f"key-{i}", headers=(Header("trace", b"t-1"), Header("none", None)))
        for i, v in enumerate(values)
    ]
    batch[3].value = None  # record() fills in a default value for None
    task.put(batch)
    assert closing_commit(task, context, {TP0: len(values)}) == {TP0: len(values)}
    got = local_archive.read(name(0))
    assert [r["offset"] for r in got] == list(range(len(values)))
    assert got[0] == {
        "topic": TOPIC,
        "partition": 0,
        "offset": 0,
        "timestamp": 1_700_000_000_000,
        "key": "key-0",
        "value": values[0],
        "headers": [{"key": "trace", "value": "dC0x"}, {"key": "none", "value": None}],
    }
    assert got[1]["value"] == "plain string" and got[2]["value"] == [1, 2, 3]
    assert got[3]["value"] is None
    assert got[4]["value"] == "AAFiaW5hcnk="  # base64
    assert got[5]["value"] == {"amount": "12.34", "at": "2024-05-01T12:00:00+00:00"}


def _order_schema() -> Schema:
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
                ("name", Schema(SchemaType.STRING)),
                ("vip", Schema(SchemaType.BOOLEAN)),
                name="shop.Customer",
                optional=True,
            ),
        ),
        (
            "amount",
            Schema(
                SchemaType.BYTES, name="org.apache.kafka.connect.data.Decimal", version=1, parameters={"scale": "2"}
            ),
        ),
        ("day", Schema(SchemaType.INT32, name="org.apache.kafka.connect.data.Date", version=1)),
        ("at", Schema(SchemaType.INT64, name="org.apache.kafka.connect.data.Timestamp", version=1)),
        ("odd-name", Schema(SchemaType.STRING, optional=True)),
        name="shop.Order",
    )


def _order(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "tiny": 7,
        "small": -300,
        "qty": 3,
        "ratio": 0.5,
        "price": 9.99,
        "paid": i % 2 == 0,
        "note": None if i % 2 else f"note {i}",
        "blob": bytes([i % 256]) * 3,
        "tags": ["a", "b"],
        "attrs": {"x": 1, "y": 2},
        "by_id": {1: "one", 2: "two"},
        "customer": {"name": "Ada", "vip": True} if i % 2 == 0 else None,
        "amount": decimal.Decimal("12.34"),
        "day": dt.date(2024, 5, 1),
        "at": dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone.utc),
        "odd-name": "dash",
    }


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_avro_round_trip_with_connect_schema(archive: Archive, codec: str) -> None:
    schema = _order_schema()
    key_schema = Schema(SchemaType.STRING)
    task, context = start_task(archive.config(format="avro", flush_size=3, avro_codec=codec))
    task.put(
        [
            record(i, _order(i), key_schema=key_schema, value_schema=schema, headers=(Header("h", b"v"),))
            for i in range(5)
        ]
    )
    assert closing_commit(task, context, {TP0: 5}) == {TP0: 5}
    assert archive.files() == [name(0, "avro"), name(3, "avro")]

    with _bytes_io(archive.read_bytes(name(0, "avro"))) as f:
        reader = fastavro.reader(f)
        got = list(reader)
        assert reader.codec == codec
        assert reader.metadata["conveyor.start.offset"] == "0"
        value_type = next(fl for fl in reader.writer_schema["fields"] if fl["name"] == "value")["type"]
    order_avro = value_type[1]
    assert order_avro["type"] == "record" and order_avro["name"] == "shop.Order"
    assert [fl["name"] for fl in order_avro["fields"]][-1] == "odd_name"  # made a valid Avro name

    first = got[0]
    assert (first["topic"], first["partition"], first["offset"], first["key"]) == (TOPIC, 0, 0, "k0")
    assert first["timestamp"] == 1_700_000_000_000
    assert first["headers"] == [{"key": "h", "value": b"v"}]
    value = first["value"]
    expected = _order(0)
    assert value["by_id"] == [{"key": 1, "value": "one"}, {"key": 2, "value": "two"}]
    assert value["odd_name"] == "dash"
    for k in (
        "id",
        "tiny",
        "small",
        "qty",
        "ratio",
        "price",
        "paid",
        "note",
        "blob",
        "tags",
        "attrs",
        "customer",
        "amount",
        "day",
        "at",
    ):
        assert value[k] == expected[k], k
    assert got[1]["value"]["note"] is None and got[1]["value"]["customer"] is None
    assert archive.offsets() == [0, 1, 2, 3, 4]


def test_avro_schemaless_values_are_json_text(local_archive: Archive) -> None:
    task, context = start_task(local_archive.config(format="avro", flush_size=100))
    values = [{"id": 1, "tags": ["x"]}, "text", 42, None]
    batch = [record(i, v, key=None if i else "k") for i, v in enumerate(values)]
    batch[3].value = None  # record() fills in a default value for None
    for r in batch[1:]:
        r.key = None
    task.put(batch)
    assert closing_commit(task, context, {TP0: 4}) == {TP0: 4}
    got = local_archive.read(name(0, "avro"))
    assert [None if r["value"] is None else json.loads(r["value"]) for r in got] == [
        {"id": 1, "tags": ["x"]},
        "text",
        42,
        None,
    ]
    assert json.loads(got[0]["key"]) == "k"


def test_avro_schema_change_starts_a_new_file(local_archive: Archive) -> None:
    v1 = Schema.struct(("id", Schema(SchemaType.INT64)), name="shop.Order")
    v2 = Schema.struct(
        ("id", Schema(SchemaType.INT64)), ("note", Schema(SchemaType.STRING, optional=True)), name="shop.Order"
    )
    task, context = start_task(local_archive.config(format="avro", flush_size=100))
    task.put([record(i, {"id": i}, value_schema=v1) for i in range(3)])
    task.put([record(i, {"id": i, "note": "n"}, value_schema=v2) for i in range(3, 5)])
    assert local_archive.files() == [name(0, "avro")]  # the v1 file was written at the change
    assert task.pre_commit({TP0: 5}) == {TP0: 3}
    assert closing_commit(task, context, {TP0: 5}) == {TP0: 5}
    assert [r["value"] for r in local_archive.read(name(3, "avro"))] == [{"id": 3, "note": "n"}, {"id": 4, "note": "n"}]


def test_records_that_do_not_match_their_schema_go_to_the_reporter(local_archive: Archive) -> None:
    schema = Schema.struct(("id", Schema(SchemaType.INT64)))
    reporter = Reporter()
    task, context = start_task(local_archive.config(format="avro", flush_size=100), reporter=reporter)
    batch = [record(i, {"id": i}, value_schema=schema) for i in range(5)]
    batch[2].value = {"id": "not a number"}
    task.put(batch)
    assert [r.kafka_offset for r, _ in reporter.reported] == [2]
    assert isinstance(reporter.reported[0][1], DataError)
    assert closing_commit(task, context, {TP0: 5}) == {TP0: 5}
    assert local_archive.offsets() == [0, 1, 3, 4]

    task2, _ = start_task(local_archive.config(format="avro", flush_size=100))  # no reporter
    with pytest.raises(DataError, match="orders-0@7"):
        task2.put([record(7, {"id": "x"}, value_schema=schema)])


# -- crashes, redelivery, rewinds ----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "avro"])
def test_crash_and_redelivery_make_no_duplicates(archive: Archive, fmt: str) -> None:
    schema = Schema.struct(("id", Schema(SchemaType.INT64)), ("item", Schema(SchemaType.STRING)))
    kw = {"value_schema": schema} if fmt == "avro" else {}
    config = archive.config(flush_size=10, format=fmt)

    task1, _ = start_task(config)
    task1.put(records(0, 26, **kw))
    committed = task1.pre_commit({TP0: 27})[TP0]
    assert committed == 20
    task1.put(records(27, 33, **kw))  # writes 20..29 (uncommitted), buffers 30..33
    before = {f: archive.read_bytes(f) for f in archive.files()}
    assert sorted(before) == [name(0, fmt), name(10, fmt), name(20, fmt)]
    del task1  # crash: no closing commit, no close, no stop

    task2, context2 = start_task(config)  # a new instance, redelivered from the committed offset
    task2.put(records(committed, 45, **kw))
    assert closing_commit(task2, context2, {TP0: 46}) == {TP0: 46}
    assert archive.files() == [name(s, fmt) for s in (0, 10, 20, 30, 40)]
    assert archive.offsets() == list(range(46))  # each record exactly once
    for f, data in before.items():  # rewritten files are the same files, byte for byte
        assert archive.read_bytes(f) == data


def test_stale_files_of_a_crashed_owner_are_replaced(archive: Archive) -> None:
    """The crashed owner cut files differently (time rotation): the new owner's files replace
    them, so the archive still holds every record once."""
    task1, _ = start_task(archive.config(flush_size=10, rotate_interval_ms=100))
    task1.put(records(0, 4))
    time.sleep(0.2)
    task1.put(records(5, 14))  # rotation writes 0..4, then 5..14 fills a file
    assert archive.files() == [name(0), name(5)]
    del task1  # crash before any offset commit: the committed offset is still 0

    task2, context2 = start_task(archive.config(flush_size=10))
    task2.put(records(0, 19))
    assert closing_commit(task2, context2, {TP0: 20}) == {TP0: 20}
    assert archive.files() == [name(0), name(10)]
    assert archive.offsets() == list(range(20))


def test_layout_follows_confluents_s3_sink_keys(archive: Archive) -> None:
    """``topics.dir`` and ``filename.offset.zero.pad.width`` (Confluent's keys): offsets past
    the padding get more digits, and stale files there are still found (names no longer sort
    by offset)."""
    task, context = start_task(archive.config(flush_size=100, topics_dir="", filename_offset_zero_pad_width=2))
    task.put(records(0, 2))
    assert closing_commit(task, context, {TP0: 3}) == {TP0: 3}
    assert archive.all_files() == [f"{TOPIC}/partition=0/{TOPIC}+0+00.jsonl"]

    nested = archive.config(flush_size=10, rotate_interval_ms=100, topics_dir="data/kafka",
                            filename_offset_zero_pad_width=2)
    task1, _ = start_task(nested)
    task1.put(records(95, 99))
    time.sleep(0.2)
    task1.put(records(100, 109))  # rotation cut 95..99, then 100..109
    directory = f"data/kafka/{TOPIC}/partition=0"
    nested_files = lambda: [f for f in archive.all_files() if f.startswith(directory)]  # noqa: E731
    assert nested_files() == [f"{directory}/{TOPIC}+0+100.jsonl", f"{directory}/{TOPIC}+0+95.jsonl"]
    del task1  # crashed before committing: the next owner resumes at 95 and cuts at flush.size
    task2, context2 = start_task({**nested, "rotate.interval.ms": -1})
    task2.put(records(95, 114))
    assert closing_commit(task2, context2, {TP0: 115}) == {TP0: 115}
    assert nested_files() == [f"{directory}/{TOPIC}+0+105.jsonl", f"{directory}/{TOPIC}+0+95.jsonl"]
    read = [r["offset"] for f in nested_files() for r in archive.read_at(f)]
    assert sorted(read) == list(range(95, 115))


def test_hourly_partitioner_on_record_time_replays_into_the_same_files(archive: Archive) -> None:
    """``HourlyPartitioner`` with ``timestamp.extractor=Record`` (Confluent's keys): a file is
    cut where the hour changes; partitions share the hour folders; a crashed owner's files are
    replaced by the same records in the same folders (exactly once, as with the default)."""
    hour = 3_600_000
    base = 1_795_000_000_000 // hour * hour  # 2026-11-18 11:00 UTC

    def at(offset: int, tp: TopicPartition = TP0) -> SinkRecord:  # offsets 0..9 in one hour, then the next
        r = record(offset, tp=tp)
        return dataclasses.replace(r, timestamp=base + (offset // 10) * hour + offset)

    config = archive.config(flush_size=6, partitioner_class="HourlyPartitioner", timestamp_extractor="Record",
                            rotate_interval_ms=100)
    task1, _ = start_task(config, [TP0, TP1])
    task1.put([at(o) for o in range(0, 3)])
    time.sleep(0.2)
    task1.put([at(o) for o in range(3, 14)] + [at(0, TP1)])  # rotation cut 0..2 (the crashed owner's cut)
    del task1

    task2, context2 = start_task({**config, "rotate.interval.ms": -1}, [TP0, TP1])
    task2.put([at(o) for o in range(0, 14)] + [at(0, TP1)])
    assert closing_commit(task2, context2, {TP0: 14, TP1: 1}) == {TP0: 14, TP1: 1}
    h11, h12 = "topics/orders/year=2026/month=11/day=18/hour=11", "topics/orders/year=2026/month=11/day=18/hour=12"
    assert archive.all_files() == [
        f"{h11}/{name(0, tp=TP0)}", f"{h11}/{name(6, tp=TP0)}", f"{h11}/{name(0, tp=TP1)}", f"{h12}/{name(10, tp=TP0)}",
    ]
    assert [r["offset"] for f in archive.all_files() if "+0+" in f for r in archive.read_at(f)] == list(range(14))


def test_redelivered_and_rewound_records_are_skipped(local_archive: Archive) -> None:
    task, context = start_task(local_archive.config(flush_size=10))
    batch = records(0, 14)
    task.put(batch)
    task.put(batch)  # the same batch again (as after a RetriableError)
    task.put(records(3, 16))  # a rewind to 3
    assert closing_commit(task, context, {TP0: 17}) == {TP0: 17}
    assert local_archive.offsets() == list(range(17))
    assert context.rewinds == []


def test_storage_outage_is_retriable_and_redelivery_completes(tmp_path) -> None:
    """An S3 outage while a file is due: put raises RetriableError and keeps its buffer; the
    runtime redelivers the same batch once S3 is back, and nothing is duplicated."""
    server = S3Server().start()
    try:
        bucket = server.create_bucket("outage-archive")
        config = {
            "archive.url": f"s3://{bucket}/a",
            "archive.s3.endpoint.url": server.endpoint_url,
            "archive.s3.key": S3Server.ACCESS_KEY,
            "archive.s3.secret": S3Server.SECRET_KEY,
            "flush.size": 10,
            "retry.backoff.ms": 250,
            "archive.storage.config_kwargs.connect_timeout": 2,
            "archive.storage.config_kwargs.retries.max_attempts": 1,
        }
        task, context = start_task(config)
        task.put(records(0, 5))
        server.stop(keep_data=True)  # the outage: the server's process is gone, its disk is not
        batch = records(6, 12)
        with pytest.raises(RetriableError) as info:
            task.put(batch)
        assert info.value.delay == timedelta(milliseconds=250)
        assert "unreachable" in str(info.value)
        with pytest.raises(RetriableError):  # a closing commit with nothing to commit raises too
            closing_commit(task, context, {TP0: 6})

        server.restart()
        task.put(batch)  # redelivered
        assert closing_commit(task, context, {TP0: 13}) == {TP0: 13}
        keys = server.list_keys(bucket)
        assert keys == [f"a/topics/{TOPIC}/partition=0/{name(0)}", f"a/topics/{TOPIC}/partition=0/{name(10)}"]
        got = [json.loads(line)["offset"] for k in keys for line in server.get_bytes(bucket, k).splitlines()]
        assert got == list(range(13))
        server.delete_bucket(bucket)
    finally:
        server.stop()


# -- deletion keeps the data -----------------------------------------------------------------


def test_connector_deleted_keeps_the_archive(archive: Archive) -> None:
    connector = ArchiveSinkConnector()
    config = archive.config(flush_size=5)
    connector.start(config)
    assert connector.task_configs(2) == [config, config]
    task, context = start_task(connector.task_configs(1)[0])
    task.put(records(0, 7))
    assert closing_commit(task, context, {TP0: 8}) == {TP0: 8}
    task.close([TP0])
    task.stop(connector_deleted=True)
    assert connector.cleanup_report() == []
    connector.stop(connector_deleted=True)
    assert archive.files() == [name(0), name(5)]
    assert archive.offsets() == list(range(8))
    report = connector.cleanup_report()
    assert len(report) == 1 and "kept" in report[0] and archive.url in report[0]


def test_plain_stop_reports_nothing(local_archive: Archive) -> None:
    connector = ArchiveSinkConnector()
    connector.start(local_archive.config())
    connector.stop(connector_deleted=False)
    assert connector.cleanup_report() == []


# -- errors ------------------------------------------------------------------------------------


def test_missing_bucket_is_a_configuration_error(s3_server) -> None:
    config = {
        "archive.url": "s3://no-such-bucket-archive/x",
        "archive.s3.endpoint.url": s3_server.endpoint_url,
        "flush.size": 2,
    }
    with pytest.raises(ConnectError, match="bucket 'no-such-bucket-archive' does not exist") as info:
        ArchiveSinkConnector().start(config)
    assert not isinstance(info.value, RetriableError)
    task, _ = start_task(config)
    task.put(records(0, 0))
    with pytest.raises(ConnectError, match="does not exist.*create the bucket or fix archive.url") as info:
        task.put(records(1, 1))
    assert not isinstance(info.value, RetriableError)


def test_unreachable_endpoint(tmp_path) -> None:
    port = free_port()
    config = {
        "archive.url": "s3://some-bucket/x",
        "archive.s3.endpoint.url": f"http://127.0.0.1:{port}",
        "archive.s3.key": "k",
        "archive.s3.secret": "s",
        "flush.size": 1,
        "archive.storage.config_kwargs.connect_timeout": 1,
        "archive.storage.config_kwargs.retries.max_attempts": 1,
    }
    with pytest.raises(ConnectError, match="cannot reach the archive storage"):
        ArchiveSinkConnector().start(config)
    task, _ = start_task(config)
    with pytest.raises(RetriableError, match="unreachable"):
        task.put(records(0, 0))


def test_local_path_clash_is_a_configuration_error(local_archive: Archive) -> None:
    os.makedirs(os.path.join(local_archive.root, "topics"))
    with open(os.path.join(local_archive.root, "topics", TOPIC), "w") as f:  # a file where a directory goes
        f.write("x")
    task, _ = start_task(local_archive.config(flush_size=1))
    with pytest.raises(ConnectError) as info:
        task.put(records(0, 0))
    assert not isinstance(info.value, RetriableError)


def test_closing_commit_returns_the_progress_of_partitions_that_could_be_written(
    local_archive: Archive, caplog
) -> None:
    """KIP-275: one partition's failing write must not cost the others their progress."""
    blocked = TopicPartition("blocked", 0)
    os.makedirs(os.path.join(local_archive.root, "topics"))
    with open(os.path.join(local_archive.root, "topics", blocked.topic), "w") as f:  # its directory cannot be made
        f.write("x")
    task, context = start_task(local_archive.config(flush_size=100), [TP0, blocked])
    task.put(records(0, 4) + records(0, 2, tp=blocked))
    assert closing_commit(task, context, {TP0: 5, blocked: 3}) == {TP0: 5}
    assert "could not write blocked-0's buffer" in caplog.text
    with pytest.raises(ConnectError, match="path clash"):  # nothing at all to commit: the error is raised
        closing_commit(task, context, {blocked: 3})


@pytest.mark.parametrize(
    ("config", "key", "message"),
    [
        ({}, "archive.url", "Field required"),
        ({"format": "orc"}, "format", "'jsonl', 'avro' or 'parquet'"),
        ({"flush.size": 0}, "flush.size", "greater than or equal to 1"),
        ({"flush.size": "ten"}, "flush.size", "valid integer"),
        ({"rotate.interval.ms": 0}, "rotate.interval.ms", "-1 (off) or a positive"),
        ({"rotate.interval.ms": "soon"}, "rotate.interval.ms", "valid integer"),
        ({"file.name.format": "${topic}"}, "file.name.format", "${start_offset} exactly once"),
        ({"file.name.format": "${offset}-${start_offset}"}, "file.name.format", "unknown placeholder"),
        ({"file.name.format": "d/${start_offset}"}, "file.name.format", "must not contain '/'"),
        ({"avro.codec": "snappy"}, "avro.codec", "'null' or 'deflate'"),
        ({"topics.dir": "/abs"}, "topics.dir", "without a leading or trailing '/'"),
        ({"topics.dir": "a/../b"}, "topics.dir", "'..' path segments"),
        ({"s3.part.size": 1024}, "s3.part.size", "greater than or equal to 5242880"),
        ({"filename.offset.zero.pad.width": 0}, "filename.offset.zero.pad.width", "greater than or equal to 1"),
        ({"archive.url": "relative/dir"}, "archive.url", "must be absolute"),
        ({"archive.url": "s3://"}, "archive.url", "needs a bucket"),
        ({"archive.url": "nosuchproto://x"}, "archive.url", "unknown storage protocol"),
        ({"archive.s3.endpoint.url": "http://x"}, "archive.s3.endpoint.url", "only applies to s3://"),
        ({"archive.storage": "yes"}, "archive.storage", "valid dictionary"),
    ],
)
def test_bad_config_names_the_key(tmp_path, config: dict[str, Any], key: str, message: str) -> None:
    full = {"archive.url": f"file://{tmp_path}", **config}
    if not config:
        full = {}
    with pytest.raises(ConfigError) as info:
        ArchiveSinkConnector().validate(full)
    assert key in info.value.errors, info.value.errors
    assert message in info.value.errors[key], info.value.errors[key]
    task = ArchiveSinkTask()
    task.initialize(Context(full))
    with pytest.raises(ConfigError):
        task.start(full)


def test_storage_options() -> None:
    cfg = load_config(
        {
            "archive.url": "s3://bucket/p",
            "archive.s3.endpoint.url": "http://minio:9000",
            "archive.s3.key": "AKIA",
            "archive.s3.secret": "12345",
            "archive.s3.region": "eu-west-1",
            "archive.storage.client_kwargs.verify": "false",
            "archive.storage.default_block_size": "1048576",
            "archive.storage.token": "0042",
        }
    )
    options = cfg.storage_options()
    assert options["endpoint_url"] == "http://minio:9000"
    assert (options["key"], options["secret"], options["token"]) == ("AKIA", "12345", "0042")
    assert options["client_kwargs"] == {"region_name": "eu-west-1", "verify": False}
    assert options["default_block_size"] == 1048576
    assert options["config_kwargs"]["connect_timeout"] == 10
    assert "12345" not in repr(cfg) and "12345" not in str(cfg)
    assert isinstance(cfg, ArchiveSinkConfig)
    tuned = load_config({"archive.url": "s3://bucket/p", "archive.storage.config_kwargs.read_timeout": "5",
                         }).storage_options()
    assert tuned["config_kwargs"] == {"connect_timeout": 10, "read_timeout": 5,  # merged, not replaced
                                      "retries": {"max_attempts": 3, "mode": "standard"}}
    assert Storage(cfg).fs.retries == 1  # s3fs's own attempts, each with botocore's three
    local = load_config({"archive.url": "/data/archive/", "archive.storage": {"auto_mkdir": "true"}})
    assert local.archive_url == "/data/archive" and local.storage_options() == {"auto_mkdir": True}


# -- performance sanity ----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "avro"])
def test_throughput_one_million_records(local_archive: Archive, capsys, fmt: str) -> None:
    total, batch_size = 1_000_000, 1_000
    schema = Schema.struct(("id", Schema(SchemaType.INT64)), ("item", Schema(SchemaType.STRING)))
    task, context = start_task(local_archive.config(flush_size=100_000, format=fmt))
    elapsed = 0.0
    for first in range(0, total, batch_size):
        batch = [
            SinkRecord(
                TOPIC,
                0,
                key=None,
                value={"id": o, "item": "widget"},
                kafka_offset=o,
                timestamp=1_700_000_000_000,
                value_schema=schema if fmt == "avro" else None,
            )
            for o in range(first, first + batch_size)
        ]
        t0 = time.perf_counter()
        task.put(batch)
        elapsed += time.perf_counter() - t0
    t0 = time.perf_counter()
    assert closing_commit(task, context, {TP0: total}) == {TP0: total}
    elapsed += time.perf_counter() - t0
    files = local_archive.files()
    assert files == [name(s, fmt) for s in range(0, total, 100_000)]
    sizes = [os.path.getsize(os.path.join(local_archive.partition_dir(), f)) for f in files]
    assert len(local_archive.read(files[-1])) == 100_000
    rate = total / elapsed
    with capsys.disabled():
        print(
            f"\n[archive throughput] {fmt}: {total:,} records, flush.size=100000 -> {len(files)} files "
            f"({sum(sizes) / 2**20:.1f} MiB) in {elapsed:.2f} s = {rate:,.0f} records/s"
        )
    assert rate > 20_000
