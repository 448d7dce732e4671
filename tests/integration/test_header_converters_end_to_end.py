"""``header.converter`` end to end: sink tasks see typed headers, sources write them, and a
header that cannot be read follows ``errors.tolerance`` (stage ``HEADER_CONVERTER``)."""

from __future__ import annotations

import json
import uuid

import pytest

from conveyor.testing.recording import read_journal
from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"
SEQUENCE = "conveyor.testing.sources:SequenceSourceConnector"
SIMPLE = "org.apache.kafka.connect.storage.SimpleHeaderConverter"


def _puts(journal):
    return [r for e in read_journal(journal) if e["event"] == "put" for r in e["records"]]


def _sink_config(topic, journal, **extra):
    return {"topics": topic, "journal.path": str(journal), "value.converter": "json",
            "value.converter.schemas.enable": "false", "offset.flush.interval.ms": "300", **extra}


HEADERS = [("n", b"42"), ("big", b"40000"), ("flag", b"true"), ("list", b"[1,2]"), ("s", b"hello"), ("none", None)]


def test_sink_tasks_see_headers_typed_by_connects_default_converter(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic, journal = topic_factory(partitions=1), tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, [(None, b'{"id": 1}')], headers=HEADERS)
    manifest = connector_manifest(f"hdr-{uuid.uuid4().hex[:8]}", RECORDING, kafka_bootstrap,
                                  _sink_config(topic, journal, **{"header.converter": SIMPLE}))
    with running_connector(manifest, spark):
        wait_until(lambda: _puts(journal), message="record put")
    [record] = _puts(journal)
    assert record["headers"] == [["n", 42, "int8"], ["big", 40000, "int32"], ["flag", True, "boolean"],
                                 ["list", [1, 2], "array"], ["s", "hello", "string"], ["none", None, None]]


def test_without_a_header_converter_sink_tasks_see_raw_bytes(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic, journal = topic_factory(partitions=1), tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, [(None, b'{"id": 1}')], headers=[("n", b"42"), ("none", None)])
    manifest = connector_manifest(f"hdr-{uuid.uuid4().hex[:8]}", RECORDING, kafka_bootstrap,
                                  _sink_config(topic, journal))
    with running_connector(manifest, spark):
        wait_until(lambda: _puts(journal), message="record put")
    assert _puts(journal)[0]["headers"] == [["n", str(b"42"), None], ["none", None, None]]


def test_a_header_that_cannot_be_read_goes_to_the_dead_letter_queue(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic, journal = topic_factory(partitions=1), tmp_path / "j.jsonl"
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    for i, header in enumerate([b'{"ok": 1}', b"{oops", b'[3]']):
        produce(kafka_bootstrap, topic, [(None, json.dumps({"id": i}).encode())], headers=[("h", header)])
    name = f"hdr-{uuid.uuid4().hex[:8]}"
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, _sink_config(topic, journal, **{
        "header.converter": "org.apache.kafka.connect.json.JsonConverter",
        "header.converter.schemas.enable": "false",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}))
    with running_connector(manifest, spark):
        wait_until(lambda: len(_puts(journal)) >= 2, message="readable records put")
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 3},
                   message="every offset committed, the unreadable one included")
    assert [(r["value"]["id"], r["headers"]) for r in _puts(journal)] == [(0, [["h", {"ok": 1}, None]]),
                                                                          (2, [["h", [3], None]])]
    [dead] = consume_all(kafka_bootstrap, dlq, expected=1)
    context = {k: v.decode() for k, v in dead.headers() if k.startswith("__connect.errors.")}
    assert (dead.value(), context["__connect.errors.stage"]) == (b'{"id": 1}', "HEADER_CONVERTER")
    assert context["__connect.errors.offset"] == "1"
    assert ("h", b"{oops") in dead.headers(), "the original header bytes"


def _source_manifest(bootstrap, topic, **extra):
    return connector_manifest(f"hdr-src-{uuid.uuid4().hex[:8]}", SEQUENCE, bootstrap, {
        "topic": topic, "records.per.stream": "3", "record.headers": "typed", "value.converter": "json",
        "value.converter.schemas.enable": "false", **extra})


def test_sources_write_typed_headers_through_the_header_converter(kafka_bootstrap, topic_factory, spark):
    topic = topic_factory(partitions=1)
    manifest = _source_manifest(kafka_bootstrap, topic, **{"header.converter": SIMPLE})
    with running_connector(manifest, spark):
        messages = consume_all(kafka_bootstrap, topic, expected=3)
    assert [m.headers() for m in messages] == [
        [("seq", str(n).encode()), ("note", f"n={n}".encode()), ("raw", bytes([0, n]))] for n in range(3)]


def test_a_typed_header_without_a_header_converter_fails_the_task_with_the_reason(kafka_bootstrap, topic_factory,
                                                                                    spark):
    topic = topic_factory(partitions=1)
    manifest = _source_manifest(kafka_bootstrap, topic)
    with running_connector(manifest, spark) as driver:
        status = wait_until(lambda: (s := driver.status())["tasks"][0]["state"] == "FAILED" and s,
                            message="task FAILED")
    trace = status["tasks"][0]["trace"]
    assert "HEADER_CONVERTER" in trace and "without a header.converter" in trace, trace
