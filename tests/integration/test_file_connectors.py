"""``file-sink`` and ``file-source`` (Kafka Connect's FileStream connectors) against a real broker
and Spark: lines written once across a restart, lines read in order and resumed, and source
offsets byte for byte as Kafka Connect stores them in its offsets topic."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from conveyor.runtime.kafka.offsets_topic import (
    ensure_offsets_topic,
    offset_key,
    offset_value,
    partition_id,
    read_offsets,
)
from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

# Dotted paths: the entry points file-sink / file-source name these once the package is installed.
SINK = "conveyor.connectors.file.sink:FileSinkConnector"
SOURCE = "conveyor.connectors.file.source:FileSourceConnector"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


def _name(kind: str) -> str:
    return f"file-{kind}-{uuid.uuid4().hex[:8]}"


def _lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _running(driver) -> bool:
    tasks = driver.status()["tasks"]
    return bool(tasks) and tasks[0]["state"] == "RUNNING"


def _produce_ids(bootstrap: str, topic: str, ids: range, partitions: int = 3) -> None:
    for p in range(partitions):
        items = [(f"k{i}", json.dumps({"id": i, "name": f"n{i}"})) for i in ids if i % partitions == p]
        produce(bootstrap, topic, items, partition=p)


def _line(i: int) -> str:
    # Java's HashMap prints "name" before "id" (FileStreamSinkTask's println of the Map)
    return f"{{name=n{i}, id={i}}}"


def test_sink_writes_every_record_once_across_a_restart(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=3)
    out = tmp_path / "sink.txt"
    name = _name("sink")
    config = {"topics": topic, "file": str(out), "value.converter.schemas.enable": "false",
              "offset.flush.interval.ms": "500"}
    manifest = connector_manifest(name, SINK, kafka_bootstrap, config)
    _produce_ids(kafka_bootstrap, topic, range(1000))
    with running_connector(manifest, spark):
        wait_until(lambda: len(_lines(out)) >= 1000, timeout_s=120, message="1,000 lines in the file")
    lines = _lines(out)
    assert sorted(lines) == sorted(_line(i) for i in range(1000))
    ids = [int(line.rsplit("=", 1)[1][:-1]) for line in lines]
    for p in range(3):  # each partition's records in offset order
        assert [i for i in ids if i % 3 == p] == list(range(p, 1000, 3))
    assert sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 3).values()) == 1000

    with running_connector(manifest, spark) as driver:
        wait_until(lambda: _running(driver), message="restarted task RUNNING")
        _produce_ids(kafka_bootstrap, topic, range(1000, 1010))
        wait_until(lambda: len(_lines(out)) >= 1010, timeout_s=60, message="10 more lines")
    counts = Counter(_lines(out))
    assert len(counts) == 1010 and set(counts.values()) == {1}, "no line twice after the restart"
    assert set(counts) == {_line(i) for i in range(1010)}
    assert sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 3).values()) == 1010


def _source_config(path, topic: str, offsets_topic: str) -> dict[str, str]:
    return {"file": str(path), "topic": topic, "value.converter": STRING_CONVERTER,
            "offsets.storage.topic": offsets_topic, "offset.flush.interval.ms": "300"}


def _values(msgs) -> list[str]:
    return [m.value().decode() for m in msgs]


def test_source_reads_in_order_tails_resumes_and_stores_kafka_connect_offsets(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=1)
    offsets_topic = f"offsets-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "input.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1000)), encoding="utf-8")
    name = _name("source")
    manifest = connector_manifest(name, SOURCE, kafka_bootstrap, _source_config(path, topic, offsets_topic))
    started_ms = int(time.time() * 1000)
    with running_connector(manifest, spark):
        msgs = consume_all(kafka_bootstrap, topic, 1000, timeout_s=120)
        assert _values(msgs) == [f"line {i}" for i in range(1000)]
        assert {m.key() for m in msgs} == {None}
        assert all(started_ms <= m.timestamp()[1] <= time.time() * 1000 for m in msgs), "read time, as Connect"
        with path.open("a", encoding="utf-8") as f:
            f.write("".join(f"line {i}\n" for i in range(1000, 1010)))
        msgs = consume_all(kafka_bootstrap, topic, 1010, timeout_s=60)
        assert _values(msgs) == [f"line {i}" for i in range(1010)]
    size = path.stat().st_size
    partition = {"filename": str(path)}
    wait_until(lambda: read_offsets(kafka_bootstrap, offsets_topic, name) == {partition_id(partition): {
        "position": size}}, timeout_s=30, message="the final offset in the offsets topic")
    key = f'["{name}",{{"filename":"{path}"}}]'.encode()
    assert key == offset_key(name, partition)
    raw = [m for m in consume_all(kafka_bootstrap, offsets_topic, 10_000, timeout_s=5) if m.key() == key]
    assert raw and raw[-1].value() == f'{{"position":{size}}}'.encode(), "Kafka Connect's bytes"

    with running_connector(manifest, spark) as driver:
        wait_until(lambda: _running(driver), message="restarted task RUNNING")
        time.sleep(3)  # three empty polls' worth of waiting
        assert len(consume_all(kafka_bootstrap, topic, 1011, timeout_s=5)) == 1010, "nothing sent again"
    assert read_offsets(kafka_bootstrap, offsets_topic, name) == {partition_id(partition): {"position": size}}


def test_source_resumes_from_an_offset_kafka_connect_wrote(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    offsets_topic = f"offsets-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "connect.txt"
    rows = [f"row {i}\n" for i in range(100)]
    path.write_text("".join(rows), encoding="utf-8")
    position = len("".join(rows[:40]).encode())
    name = _name("resume")
    # What Kafka Connect's worker writes: its offsets topic, its JsonConverter bytes, murmur2.
    ensure_offsets_topic(AdminClient({"bootstrap.servers": kafka_bootstrap}), offsets_topic)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2_random"})
    producer.produce(offsets_topic, key=offset_key(name, {"filename": str(path)}),
                     value=offset_value({"position": position}))
    assert producer.flush(30) == 0
    manifest = connector_manifest(name, SOURCE, kafka_bootstrap, _source_config(path, topic, offsets_topic))
    with running_connector(manifest, spark):
        msgs = consume_all(kafka_bootstrap, topic, 60, timeout_s=120)
        time.sleep(2)
        msgs = consume_all(kafka_bootstrap, topic, 61, timeout_s=5)
    assert _values(msgs) == [f"row {i}" for i in range(40, 100)]
