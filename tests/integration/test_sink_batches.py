"""The sink's batch path (``SinkTask.put_batch``, Arrow record batches) against a real broker
and Spark: the same output and offsets as the record path, and the runtime's contracts
(retries, pause and resume, drains) on batches."""

from __future__ import annotations

import json
import uuid

import pytest

from conveyor.testing.recording import read_journal
from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    control_request,
    dead_letter_context,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

FILE_SINK = "conveyor.connectors.file.sink:FileSinkConnector"
ARCHIVE_SINK = "conveyor.connectors.archive.sink:ArchiveSinkConnector"
JSON = "org.apache.kafka.connect.json.JsonConverter"
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


DROP_TOMBSTONES = {"transforms": "dropTombstones", "transforms.dropTombstones.type": "Filter",
                   "transforms.dropTombstones.predicate": "isTombstone", "predicates": "isTombstone",
                   "predicates.isTombstone.type": "RecordIsTombstone"}


@pytest.mark.parametrize("transforms", [{}, DROP_TOMBSTONES], ids=["no-transforms", "filter-tombstones"])
def test_the_file_sink_writes_the_same_lines_and_commits_the_same_offsets_on_both_paths(
    kafka_bootstrap, topic_factory, spark, tmp_path, transforms
):
    topic = topic_factory(partitions=2)
    for p in range(2):
        produce(kafka_bootstrap, topic, _values(p, 600), partition=p)
    outputs, offsets = {}, {}
    lines = 1200 - (sum(1 for i in range(600) if i % 7 == 0 and ODD_VALUES[i % 5] is None) if transforms else 0)
    for path in ("records", "batches"):
        out = tmp_path / f"{path}.txt"
        name = _name()
        config = {"topics": topic, "file": str(out), "value.converter": STRING, "key.converter": STRING,
                  "offset.flush.interval.ms": "300", "conveyor.batch.path.enable": str(path == "batches").lower(),
                  **transforms}
        with running_connector(connector_manifest(name, FILE_SINK, kafka_bootstrap, config), spark) as d:
            wait_until(lambda: out.exists() and out.read_bytes().count(b"\n") >= lines,  # noqa: B023
                       message=f"{lines} lines through {path}")
            task = wait_until(lambda: next((t for t in d.status()["tasks"] if t.get("records_read") == 1200), None),
                              message="the task's report of every record read")
            assert task["batch_path"] is (path == "batches")
        wait_until(lambda: sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2).values())  # noqa: B023
                   == 1200, message="every offset committed")
        outputs[path] = out.read_bytes()
        offsets[path] = committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2)
    by_partition = {path: _split(outputs[path]) for path in outputs}
    assert by_partition["batches"] == by_partition["records"], "each partition's lines, in order"
    assert offsets["batches"] == offsets["records"] == {0: 600, 1: 600}
    assert "\ufffd".encode() in outputs["batches"] and (b"\nnull\n" in outputs["batches"]) is not bool(transforms)
    assert sum(len(p) for p in by_partition["batches"]) == lines


#: poison (invalid JSON, NaN, a wide integer's batch, ...) among values the converter reads
ODD_JSON = [b"{oops", b"NaN", None, b"", b'{"wide": 123456789012345678901234567890}',
            '{"t": "é \\u00e9 \\n \\" 日本"}'.encode(), b"[1e16, 0.1, -0.0]", b"  null "]


def _json_items(partition: int, n: int) -> list[tuple[bytes, bytes | None]]:
    items = []
    for i in range(n):
        key = b"{bad" if (partition, i) == (0, 50) else f'"k{i}"'.encode()
        value = ODD_JSON[(i // 7) % len(ODD_JSON)] if partition == 0 and i % 7 == 0 else \
            f'{{"id": {i}, "name": "n-{partition}-{i}", "pad": "{"x" * 40}"}}'.encode()
        items.append((key, value))
    return items


TRANSFORMS = {"transforms": "dropN,via,route", "transforms.dropN.type": "DropHeaders",
                     "transforms.dropN.headers": "n", "transforms.route.type": "RegexRouter",
                     "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1-archived",
                     "transforms.via.type": "InsertHeader", "transforms.via.header": "via",
                     "transforms.via.value.literal": "conveyor", "transforms.via.predicate": "hasH",
                     "predicates": "hasH", "predicates.hasH.type": "HasHeaderKey", "predicates.hasH.name": "h"}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_archive_writes_the_same_files_and_dead_letters_and_commits_the_same_offsets_on_both_paths(
    kafka_bootstrap, topic_factory, spark, tmp_path, fmt
):
    topic = topic_factory(partitions=2)
    produce(kafka_bootstrap, topic, _json_items(0, 300), partition=0)
    produce(kafka_bootstrap, topic, _json_items(1, 300), partition=1, headers=[("h", b"\x00\xff"), ("n", None)])
    poison = 1 + sum(1 for _, v in _json_items(0, 300) if v in (b"{oops", b"NaN"))
    files, dead = {}, {}
    for path in ("records", "batches"):
        root, dlq, name = tmp_path / path, f"dlq-{uuid.uuid4().hex[:8]}", _name()
        config = {"topics": topic, "archive.url": str(root), "format": fmt, "flush.size": "40",
                  "key.converter": JSON, "key.converter.schemas.enable": "false",
                  "value.converter": JSON, "value.converter.schemas.enable": "false",
                  "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                  "errors.deadletterqueue.topic.replication.factor": "1",
                  "errors.deadletterqueue.context.headers.enable": "true", **TRANSFORMS,
                  "offset.flush.interval.ms": "300", "conveyor.batch.path.enable": str(path == "batches").lower()}
        with running_connector(connector_manifest(name, ARCHIVE_SINK, kafka_bootstrap, config), spark) as d:
            task = wait_until(lambda: next((t for t in d.status()["tasks"]
                                            if t.get("records_skipped") == poison), None),
                              message=f"{poison} records skipped through {path}")
            assert task["batch_path"] is (path == "batches")
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2)  # noqa: B023
                   == {0: 300, 1: 300}, message="every offset committed (the closing commit writes the rest)")
        files[path] = {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob(f"*.{fmt}"))}
        dead[path] = sorted((m.partition(), m.offset(), m.key(), m.value(), dead_letter_context(m.headers()))
                            for m in consume_all(kafka_bootstrap, dlq, expected=poison))
    assert files["batches"] == files["records"]
    assert len(files["records"]) >= 600 // 40
    if fmt == "jsonl":  # the transforms ran: "n" gone from partition 1's rows, "via" added to them
        lines = [json.loads(line) for data in files["records"].values() for line in data.splitlines()]
        assert {tuple(h["key"] for h in line["headers"] or ()) for line in lines} == {(), ("h", "via")}
    assert dead["batches"] == dead["records"] and len(dead["records"]) == poison
    assert {h["__connect.errors.stage"] for *_, h in dead["records"]} == {"KEY_CONVERTER", "VALUE_CONVERTER"}


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


def test_rows_a_task_reports_from_a_batch_reach_the_dead_letter_queue_with_their_original_bytes(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=2)
    items = [(f"k{i}", "bad" if i % 9 == 4 else f"{i}") for i in range(90)]
    produce(kafka_bootstrap, topic, items, headers=[("h", b"\x00\xff"), ("n", None)])
    dead = {}
    for path in ("records", "batches"):
        dlq, name = f"dlq-{uuid.uuid4().hex[:8]}", _name()
        config = {"topics": topic, "journal.path": str(tmp_path / f"{path}.jsonl"), "report.errant.values": "bad",
                  "value.converter": STRING, "key.converter": STRING, "errors.tolerance": "all",
                  "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1",
                  "errors.deadletterqueue.context.headers.enable": "true",
                  "conveyor.batch.path.enable": str(path == "batches").lower()}
        with running_connector(connector_manifest(name, RECORDING_BATCH, kafka_bootstrap, config), spark) as d:
            task = wait_until(lambda: next((t for t in d.status()["tasks"]
                                            if t.get("records_put") == 90 and t.get("dlq_records") == 10), None),
                              message=f"90 records put and 10 dead letters through {path}")
            assert task["batch_path"] is (path == "batches")
        dead[path] = sorted(((m.key(), m.value(), m.headers()[:2], dead_letter_context(m.headers()[2:]))
                             for m in consume_all(kafka_bootstrap, dlq, expected=10)),  # in the original's order:
                            key=lambda d: (int(d[3]["__connect.errors.partition"]),  # the tasks' reports interleave
                                           int(d[3]["__connect.errors.offset"])))
    assert dead["batches"] == dead["records"]
    assert {(key, value, tuple(headers)) for key, value, headers, _ in dead["records"]} == {
        (f"k{i}".encode(), b"bad", (("h", b"\x00\xff"), ("n", None))) for i in range(90) if i % 9 == 4}
    assert {h["__connect.errors.stage"] for *_, h in dead["records"]} == {"TASK_PUT"}


def test_a_batch_holds_up_to_batch_max_records_where_put_holds_up_to_max_poll_records(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, [(f"k{i}", f"{i}") for i in range(3000)])
    config = {"topics": topic, "journal.path": str(journal), "value.converter": STRING, "key.converter": STRING,
              "conveyor.batch.max.records": "1200"}
    with running_connector(connector_manifest(_name(), RECORDING_BATCH, kafka_bootstrap, config), spark):
        wait_until(lambda: len(_put(journal)) >= 3000, message="every record put")
    sizes = [b["rows"] for b in _events(journal, "put_batch")]
    assert max(sizes) <= 1200 and max(sizes) > 500, sizes
    assert sorted(_put(journal)) == list(range(3000))
