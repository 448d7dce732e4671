"""Conversion, transformations, errors.tolerance and the dead-letter queue, end to end."""

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


def _name() -> str:
    return f"err-{uuid.uuid4().hex[:8]}"


def _puts(journal):
    return [r for e in read_journal(journal) if e["event"] == "put" for r in e["records"]]


def _config(topic, journal, **extra):
    return {
        "topics": topic,
        "journal.path": str(journal),
        "value.converter": "json",
        "value.converter.schemas.enable": "false",
        "consumer.override.session.timeout.ms": "6000",
        **extra,
    }


def test_poison_record_with_tolerance_none_fails_task_naming_offset(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    items = [(None, json.dumps({"id": i}).encode()) for i in range(5)]
    items.append((None, b"{not json"))
    items += [(None, json.dumps({"id": i}).encode()) for i in range(6, 10)]
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal))
    with running_connector(manifest, spark) as driver:
        wait_until(lambda: read_journal(journal) and any(e["event"] == "open" for e in read_journal(journal)),
                   message="assignment")
        produce(kafka_bootstrap, topic, items[:5])
        wait_until(lambda: len(_puts(journal)) >= 5, message="good records put")
        produce(kafka_bootstrap, topic, items[5:])
        status = wait_until(lambda: (s := driver.status())["tasks"][0]["state"] == "FAILED" and s,
                            message="task FAILED")
    trace = status["tasks"][0]["trace"]
    assert f"{topic}-0 at offset 5" in trace and "VALUE_CONVERTER" in trace
    assert status["tasks"][0].get("records_skipped", 0) == 0, "the record failed the task: it was not skipped"
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 5}, "nothing past the poison"
    assert max(r["offset"] for r in _puts(journal)) == 4


def test_poison_record_with_tolerance_all_goes_to_dlq_with_headers(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    journal = tmp_path / "j.jsonl"
    items = [(b"a", b'{"id": 1}'), (b"bad", b"{oops"), (b"c", b'{"id": 3}')]
    produce(kafka_bootstrap, topic, items)
    name = _name()
    config = _config(topic, journal, **{
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
        "errors.log.enable": "true",
    })
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, config)
    with running_connector(manifest, spark) as driver:
        wait_until(lambda: len(_puts(journal)) >= 2, message="good records put")
        wait_until(lambda: driver.status()["tasks"][0].get("records_skipped") == 1, message="skip reported")
    assert [r["value"] for r in _puts(journal)] == [{"id": 1}, {"id": 3}], "pipeline continued past the poison"
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 3}
    [dead] = consume_all(kafka_bootstrap, dlq, expected=1)
    assert (dead.key(), dead.value()) == (b"bad", b"{oops"), "original bytes"
    headers = {k: v.decode() for k, v in dead.headers()}
    assert headers["__connect.errors.topic"] == topic
    assert headers["__connect.errors.partition"] == "0"
    assert headers["__connect.errors.offset"] == "1"
    assert headers["__connect.errors.connector.name"] == name
    assert headers["__connect.errors.task.id"] == "0"
    assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert "JsonConverter" in headers["__connect.errors.class.name"]
    assert headers["__connect.errors.exception.class.name"].endswith("DataError")
    assert headers["__connect.errors.exception.message"]
    assert "Traceback" in headers["__connect.errors.exception.stacktrace"]


def test_errant_record_reporter_sends_to_dlq_and_continues(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, [(None, b'"ok1"'), (None, b'"reject"'), (None, b'"ok2"')])
    name = _name()
    config = _config(topic, journal, **{
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
        "report.errant.values": "reject",
    })
    with running_connector(connector_manifest(name, RECORDING, kafka_bootstrap, config), spark):
        wait_until(lambda: len(_puts(journal)) >= 2, message="records put")
    [dead] = consume_all(kafka_bootstrap, dlq, expected=1)
    assert dead.value() == b'"reject"'
    headers = {k: v.decode() for k, v in dead.headers()}
    assert headers["__connect.errors.stage"] == "TASK_PUT"
    assert headers["__connect.errors.offset"] == "1"
    assert "errant value" in headers["__connect.errors.exception.message"]


def test_errant_record_reporter_with_tolerance_none_fails_the_task(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, [(None, b'"reject"')])
    config = _config(topic, journal, **{"report.errant.values": "reject"})
    with running_connector(connector_manifest(_name(), RECORDING, kafka_bootstrap, config), spark) as driver:
        status = wait_until(lambda: (s := driver.status())["tasks"][0]["state"] == "FAILED" and s,
                            message="task FAILED")
    assert "Tolerance exceeded" in status["tasks"][0]["trace"]


@pytest.mark.parametrize(
    ("converter", "extra", "payload", "expected"),
    [
        ("org.apache.kafka.connect.storage.StringConverter", {}, b"hello", "hello"),
        ("string", {}, "h\u00e9".encode(), "h\u00e9"),
        ("org.apache.kafka.connect.json.JsonConverter", {"value.converter.schemas.enable": "false"},
         b'{"a": [1, 2]}', {"a": [1, 2]}),
        ("json", {"value.converter.schemas.enable": "true"},
         b'{"schema": {"type": "struct", "optional": false, "fields": [{"field": "id", "type": "int64"}]},'
         b' "payload": {"id": 7}}', {"id": 7}),
    ],
)
def test_value_converters(kafka_bootstrap, topic_factory, spark, tmp_path, converter, extra, payload, expected):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, [(None, payload)])
    config = _config(topic, journal, **{"value.converter": converter, **extra})
    config.pop("value.converter.schemas.enable") if "schemas.enable" not in str(extra) else None
    with running_connector(connector_manifest(_name(), RECORDING, kafka_bootstrap, config), spark):
        wait_until(lambda: _puts(journal), message="record put")
    assert _puts(journal)[0]["value"] == expected


def test_transforms_and_predicates_apply_in_order(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, [(None, b'{"id": 1}'), (None, None), (None, b'{"id": 2}')])
    config = _config(topic, journal, **{
        "transforms": "dropTombstones,addSource,route",
        "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.dropTombstones.predicate": "isTombstone",
        "transforms.addSource.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.addSource.static.field": "source",
        "transforms.addSource.static.value": "conveyor",
        "transforms.addSource.offset.field": "kafka_offset",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "routed-$1",
        "predicates": "isTombstone",
        "predicates.isTombstone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    })
    name = _name()
    with running_connector(connector_manifest(name, RECORDING, kafka_bootstrap, config), spark):
        wait_until(lambda: len(_puts(journal)) >= 2, message="records put")
    puts = _puts(journal)
    assert [r["value"] for r in puts] == [
        {"id": 1, "source": "conveyor", "kafka_offset": 0},
        {"id": 2, "source": "conveyor", "kafka_offset": 2},
    ]
    assert {r["topic"] for r in puts} == {f"routed-{topic}"}
    assert {r["original_topic"] for r in puts} == {topic}
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 3}, "filtered records count"
