"""Migrating between Apache Kafka Connect 4.1.1 and Conveyor, both ways, on the same broker:
a connector of the same name continues from the offsets the other one committed (source
offsets in the shared offsets topic, byte for byte; the sink's consumer group
``connect-<name>``), with nothing lost and nothing read twice. The steps are the README's
"Migrating from Kafka Connect"."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest

from conveyor.runtime.kafka.offsets_topic import live_offset_keys
from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
JSON = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false"}


def _append(path: Path, first: int, last: int) -> None:
    with path.open("a") as f:
        f.writelines(f"line {i}\n" for i in range(first, last))


def _connect_offsets(worker, name: str) -> list:
    status, body, _ = worker.rest("GET", f"/connectors/{name}/offsets")
    return body["offsets"] if status == 200 else []


def _stop_in_connect(worker, name: str) -> None:
    """The migration's first step on the Connect side: stop (the last offsets are flushed), then delete."""
    status, body, _ = worker.rest("PUT", f"/connectors/{name}/stop")
    assert status == 204, body
    worker.wait_for_state(name, "STOPPED")
    worker.delete_connector(name)


def _values(bootstrap: str, topic: str, expected: int) -> list[str]:
    return [json.loads(m.value()) for m in consume_all(bootstrap, topic, expected)]


def test_a_source_moves_from_kafka_connect_to_conveyor_and_back(connect_worker, kafka_bootstrap, topic_factory,
                                                                  spark, tmp_path):
    topic, data = topic_factory(partitions=1), tmp_path / "input.txt"
    name = f"mig-src-{uuid.uuid4().hex[:8]}"
    offsets_topic = connect_worker.offset_storage_topic
    _append(data, 0, 100)

    connect_worker.put_connector(name, {"connector.class": FILE_SOURCE, "file": str(data), "topic": topic,
                                        "tasks.max": "1", **JSON})
    wait_until(lambda: _connect_offsets(connect_worker, name) == [
        {"partition": {"filename": str(data)}, "offset": {"position": data.stat().st_size}}],
        message="Kafka Connect committed the end of the file")
    _stop_in_connect(connect_worker, name)
    _append(data, 100, 150)

    manifest = connector_manifest(name, "file-source", kafka_bootstrap, {
        "file": str(data), "topic": topic, "offsets.storage.topic": offsets_topic, "offset.flush.interval.ms": "500",
        **JSON})
    with running_connector(manifest, spark) as driver:
        wait_until(lambda: driver.status()["tasks"][0].get("records_written", 0) >= 50, message="50 new records")
        wait_until(lambda: driver.status()["tasks"][0].get("source_offsets") and
                   list(driver.status()["tasks"][0]["source_offsets"].values()) == [
                       {"position": data.stat().st_size}], message="Conveyor committed the end of the file")
    keys = live_offset_keys(driver.kafka, offsets_topic, name)
    assert list(keys) == [json.dumps([name, {"filename": str(data)}], separators=(",", ":")).encode()], \
        "one key, byte for byte the one Kafka Connect wrote"
    _append(data, 150, 200)

    connect_worker.put_connector(name, {"connector.class": FILE_SOURCE, "file": str(data), "topic": topic,
                                        "tasks.max": "1", **JSON})
    try:
        wait_until(lambda: _connect_offsets(connect_worker, name) == [
            {"partition": {"filename": str(data)}, "offset": {"position": data.stat().st_size}}],
            message="Kafka Connect continued from Conveyor's offset to the end")
    finally:
        _stop_in_connect(connect_worker, name)
    values = _values(kafka_bootstrap, topic, 200)
    assert values == [f"line {i}" for i in range(200)], "every line once, in order: nothing lost, nothing twice"


def test_a_sink_group_moves_from_kafka_connect_to_conveyor_and_back(connect_worker, kafka_bootstrap, topic_factory,
                                                                      spark, tmp_path):
    topic = topic_factory(partitions=3)
    name = f"mig-sink-{uuid.uuid4().hex[:8]}"
    group = f"connect-{name}"
    files = [tmp_path / f"{who}.txt" for who in ("connect-1", "conveyor", "connect-2")]

    def records(first: int, last: int) -> None:
        produce(kafka_bootstrap, topic, [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(first, last)])

    def lines(path: Path) -> Counter:
        return Counter(path.read_text().splitlines()) if path.exists() else Counter()

    def committed() -> int:
        return sum(committed_offsets(kafka_bootstrap, group, topic, 3).values())

    def run_in_connect(path: Path, through: int) -> None:
        connect_worker.put_connector(name, {"connector.class": FILE_SINK, "file": str(path), "topics": topic,
                                            "tasks.max": "1", **JSON})
        try:
            wait_until(lambda: committed() == through, message=f"Kafka Connect committed {through}")
        finally:
            _stop_in_connect(connect_worker, name)

    records(0, 100)
    run_in_connect(files[0], 100)
    records(100, 150)
    manifest = connector_manifest(name, "file-sink", kafka_bootstrap, {
        "file": str(files[1]), "topics": topic, "offset.flush.interval.ms": "500", **JSON})
    with running_connector(manifest, spark):
        wait_until(lambda: committed() == 150, message="Conveyor committed 150")
    records(150, 200)
    run_in_connect(files[2], 200)

    expected = [Counter(f"{{n={i}}}" for i in range(a, b)) for a, b in ((0, 100), (100, 150), (150, 200))]
    assert [lines(f) for f in files] == expected, "each run read exactly what the one before left"
