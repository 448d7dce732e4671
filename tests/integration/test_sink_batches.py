"""The sink's batch path (``SinkTask.put_batch``, Arrow record batches) against a real broker
and Spark: the same output and offsets as the record path, and the runtime's contracts
(retries, pause and resume, drains) on batches."""

from __future__ import annotations

import uuid

import pytest

from conveyor.testing.recording import read_journal
from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    control_request,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

FILE_SINK = "conveyor.connectors.file.sink:FileSinkConnector"
RECORDING_BATCH = "conveyor.testing.recording:RecordingBatchSinkConnector"
STRING = "org.apache.kafka.connect.storage.StringConverter"

#: a null value, non-ASCII, malformed UTF-8 (the converter's replacement character), an empty value
ODD_VALUES = [None, "é ü 日本".encode(), b"x\xffy", b"", b"{\"a\": 1}"]


def _values(partition: int, n: int) -> list[tuple[bytes, bytes | None]]:
    """Partition 0 holds the odd values among its own; every value of partition 1 starts ``p1-``."""
    if partition:
        return [(f"k{i}".encode(), f"p1-{i}".encode()) for i in range(n)]
    return [(f"k{i}".encode(), ODD_VALUES[i % 5] if i % 7 == 0 else f"v{i}".encode()) for i in range(n)]


def _name() -> str:
    return f"batch-{uuid.uuid4().hex[:8]}"


def test_the_file_sink_writes_the_same_lines_and_commits_the_same_offsets_on_both_paths(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=2)
    for p in range(2):
        produce(kafka_bootstrap, topic, _values(p, 600), partition=p)
    outputs, offsets = {}, {}
    for path in ("records", "batches"):
        out = tmp_path / f"{path}.txt"
        name = _name()
        config = {"topics": topic, "file": str(out), "value.converter": STRING, "key.converter": STRING,
                  "offset.flush.interval.ms": "300", "conveyor.batch.path.enable": str(path == "batches").lower()}
        with running_connector(connector_manifest(name, FILE_SINK, kafka_bootstrap, config), spark):
            wait_until(lambda: out.exists() and out.read_bytes().count(b"\n") >= 1200,  # noqa: B023
                       message=f"1,200 lines through {path}")
        wait_until(lambda: sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2).values())  # noqa: B023
                   == 1200, message="every offset committed")
        outputs[path] = out.read_bytes()
        offsets[path] = committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2)
    by_partition = {path: _split(outputs[path]) for path in outputs}
    assert by_partition["batches"] == by_partition["records"], "each partition's lines, in order"
    assert offsets["batches"] == offsets["records"] == {0: 600, 1: 600}
    assert "\ufffd".encode() in outputs["batches"] and b"\nnull\n" in outputs["batches"]


def _split(data: bytes) -> list[list[bytes]]:
    """The lines of partition 0 and of partition 1, each in the order written."""
    lines = data.split(b"\n")[:-1]
    return [[line for line in lines if not line.startswith(b"p1-")], [line for line in lines if line.startswith(b"p1-")]]


def test_batches_are_retried_paused_and_drained_without_a_record_lost_or_put_twice(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=2)
    journal = tmp_path / "j.jsonl"
    name = _name()
    items = [(f"k{i}", f"{i}") for i in range(40)]
    produce(kafka_bootstrap, topic, items)
    config = {"topics": topic, "journal.path": str(journal), "value.converter": STRING, "key.converter": STRING,
              "offset.flush.interval.ms": "300", "retriable.puts": "2", "retry.timeout.ms": "200"}
    with running_connector(connector_manifest(name, RECORDING_BATCH, kafka_bootstrap, config), spark) as d:
        wait_until(lambda: len(_put(journal)) >= 40, message="the first records, after two retries")
        d.pause()
        wait_until(lambda: d.status()["tasks"][0]["state"] == "PAUSED", message="task PAUSED")
        produce(kafka_bootstrap, topic, [(f"k{i}", f"{i}") for i in range(40, 60)])
        commits = len(_events(journal, "pre_commit"))
        wait_until(lambda: len(_events(journal, "pre_commit")) >= commits + 3, message="commits while paused")
        assert len(_put(journal)) == 40, "no put while paused"
        d.resume()
        wait_until(lambda: len(_put(journal)) >= 60, message="the records sent while paused")
        status, result = control_request(d.control_url, "/drain?task=0", "POST", d.control_tokens.admin)
        assert status == 200 and result["complete"] is True
        produce(kafka_bootstrap, topic, [(f"k{i}", f"{i}") for i in range(60, 70)])
        wait_until(lambda: len(_put(journal)) >= 70, message="records after the drain")
    assert sorted(_put(journal)) == list(range(70)), "each record put once"
    assert len(_events(journal, "put_retriable")) == 2 * len(_events(journal, "start")) == 4, "two per task start"
    batches = _events(journal, "put_batch")
    assert batches and {b["value_type"] for b in batches} == {"string"}, "the task took record batches"
    assert sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2).values()) == 70


def _events(journal, name: str) -> list[dict]:
    return [e for e in read_journal(journal) if e["event"] == name]


def _put(journal) -> list[int]:
    return [int(r["value"]) for e in _events(journal, "put") for r in e["records"]]
