"""``spec.deletionPolicy.offsets: delete``: deleting a connector deletes its offsets, so a
connector re-created with the same name starts from scratch; through the driver's
``POST /stop?delete_offsets=true`` and ``conveyor cleanup --delete-offsets``, against the
real broker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter

import pytest
import yaml
from confluent_kafka import Consumer

from conveyor.runtime.kafka.fencing import read_task_count
from conveyor.runtime.kafka.offsets_topic import read_offsets
from conveyor.testing.recording import read_journal
from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    control_request,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"
SEQUENCE = "conveyor.testing.sources:SequenceSourceConnector"


def _name(kind: str) -> str:
    return f"del-{kind}-{uuid.uuid4().hex[:8]}"


def _put_ids(journal) -> list[int]:
    return [r["value"]["id"] for e in read_journal(journal) if e["event"] == "put" for r in e["records"]]


def _sink(name, bootstrap, topic, journal):
    return connector_manifest(name, RECORDING, bootstrap, {
        "topics": topic, "journal.path": str(journal), "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "300",
    })


def _values(n):
    return [(f"k{i}".encode(), json.dumps({"id": i}).encode()) for i in range(n)]


def _groups(bootstrap) -> set[str]:
    from confluent_kafka.admin import AdminClient

    listed = AdminClient({"bootstrap.servers": bootstrap}).list_consumer_groups().result(timeout=30)
    return {g.group_id for g in listed.valid}


def _cleanup(path, *args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conveyor.cli", "cleanup", str(path), "--timeout", str(timeout),
                           *args], capture_output=True, text=True, timeout=300, check=False)


def _write(tmp_path, manifest) -> str:
    path = tmp_path / f"{manifest.name}-{uuid.uuid4().hex[:4]}.yaml"
    path.write_text(yaml.safe_dump(manifest.model_dump(by_alias=True, mode="json")))
    return str(path)


def test_stop_with_delete_offsets_deletes_the_sink_group_and_a_recreated_sink_starts_over(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=2)
    produce(kafka_bootstrap, topic, _values(10))
    name = _name("sink")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    with running_connector(_sink(name, kafka_bootstrap, topic, first), spark) as driver:
        wait_until(lambda: sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2).values()) == 10,
                   message="offsets committed")

        code, result = control_request(driver.control_url, "/stop?connector_deleted=true&delete_offsets=true",
                                       "POST", driver.control_tokens.admin)
        assert code == 200, result
    assert result["offsets_deleted"] == {"consumer_group": f"connect-{name}", "existed": True}
    assert result["offsets_error"] is None and result["connector_deleted"] is True
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2) == {}
    assert f"connect-{name}" not in _groups(kafka_bootstrap)
    with running_connector(_sink(name, kafka_bootstrap, topic, second), spark):
        wait_until(lambda: len(_put_ids(second)) >= 10, message="the re-created connector reads everything again")
    assert sorted(_put_ids(second)) == list(range(10))


def test_a_plain_stop_keeps_the_offsets(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(5))
    name = _name("sink")
    with running_connector(_sink(name, kafka_bootstrap, topic, tmp_path / "j.jsonl"), spark) as driver:
        wait_until(lambda: len(_put_ids(tmp_path / "j.jsonl")) >= 5, message="records")
        result = driver.stop(connector_deleted=True)
    assert result["offsets_deleted"] is None and result["offsets_error"] is None
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 5}


def test_cleanup_delete_offsets_of_a_sink_that_is_not_running(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(5))
    name = _name("sink")
    manifest = _sink(name, kafka_bootstrap, topic, tmp_path / "j.jsonl")
    with running_connector(manifest, spark):
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 5},
                   message="offsets committed")
    path = _write(tmp_path, manifest)
    first = _cleanup(path, "--delete-offsets")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["removed"] == [f"journal marker for {name}"]
    assert report["offsets_deleted"] == {"consumer_group": f"connect-{name}", "existed": True}
    assert report["offsets_error"] is None
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {}
    again = _cleanup(path, "--offsets-only")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["offsets_deleted"] == {"consumer_group": f"connect-{name}", "existed": False}
    assert report["attempts"] == 0 and report["removed"] == [], "--offsets-only does not start the connector"


def test_cleanup_exits_1_when_the_group_cannot_be_deleted(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(1))
    name = _name("sink")
    member = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"connect-{name}",
                       "auto.offset.reset": "earliest"})
    member.subscribe([topic])
    try:
        wait_until(lambda: member.poll(0.5) is not None or member.assignment(), message="a member of the group")
        result = _cleanup(_write(tmp_path, _sink(name, kafka_bootstrap, topic, tmp_path / "j.jsonl")),
                          "--offsets-only", timeout=4)
    finally:
        member.close()
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["offsets_deleted"] is None
    assert f"could not delete consumer group connect-{name}" in report["offsets_error"]
    assert "still a member" in result.stderr


def _source(name, bootstrap, topic, offsets_topic, **extra):
    return connector_manifest(name, SEQUENCE, bootstrap, {
        "topic": topic, "value.converter": "json", "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "300", "records.per.stream": "20", "streams.per.task": "2",
        "offsets.storage.topic": offsets_topic, **extra,
    })


def _seqs(msgs) -> Counter:
    return Counter((json.loads(m.value())["stream"], json.loads(m.value())["seq"]) for m in msgs)


def test_stop_with_delete_offsets_tombstones_the_source_offsets_and_a_recreated_source_starts_over(
    kafka_bootstrap, topic_factory, spark
):
    topic, offsets_topic = topic_factory(partitions=1), f"offsets-{uuid.uuid4().hex[:8]}"
    name, other = _name("src"), _name("src")
    with running_connector(_source(other, kafka_bootstrap, topic_factory(), offsets_topic), spark):
        wait_until(lambda: len(read_offsets(kafka_bootstrap, offsets_topic, other)) == 2, message="other's offsets")
    manifest = _source(name, kafka_bootstrap, topic, offsets_topic)
    with running_connector(manifest, spark) as driver:
        assert len(consume_all(kafka_bootstrap, topic, 40)) == 40
        wait_until(lambda: read_offsets(kafka_bootstrap, offsets_topic, name) == {
            '{"stream":"s0"}': {"seq": 19}, '{"stream":"s1"}': {"seq": 19}}, message="offsets flushed")
        result = driver.stop(connector_deleted=True, delete_offsets=True)
    assert result["offsets_error"] is None
    assert result["offsets_deleted"] == {"offsets_topic": offsets_topic, "source_partitions": 2, "tombstones": 2,
                                         "task_count_record": False}
    assert read_offsets(kafka_bootstrap, offsets_topic, name) == {}
    tombstones = [m for m in consume_all(kafka_bootstrap, offsets_topic, 100, timeout_s=5) if m.value() is None]
    assert sorted(m.key() for m in tombstones) == [f'["{name}",{{"stream":"s{i}"}}]'.encode() for i in range(2)]
    assert len(read_offsets(kafka_bootstrap, offsets_topic, other)) == 2, "another connector's offsets are kept"
    with running_connector(manifest, spark):
        msgs = consume_all(kafka_bootstrap, topic, 80)
    assert set(_seqs(msgs).values()) == {2}, "every record again: the re-created connector started from scratch"


def test_cleanup_delete_offsets_of_an_exactly_once_source_tombstones_its_task_count_record(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic, offsets_topic = topic_factory(partitions=1), f"offsets-{uuid.uuid4().hex[:8]}"
    name = _name("eos")
    config_topic = f"configs-{name}"
    manifest = _source(name, kafka_bootstrap, topic, offsets_topic, **{
        "exactly.once.support": "required", "config.storage.topic": config_topic})
    with running_connector(manifest, spark):
        assert len(consume_all(kafka_bootstrap, topic, 40)) == 40
    assert len(read_offsets(kafka_bootstrap, offsets_topic, name)) == 2
    assert read_task_count(kafka_bootstrap, config_topic, name) is not None
    result = _cleanup(_write(tmp_path, manifest), "--offsets-only")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["offsets_deleted"] == {
        "offsets_topic": offsets_topic, "source_partitions": 2, "tombstones": 2, "task_count_record": True}
    assert read_offsets(kafka_bootstrap, offsets_topic, name) == {}
    assert read_task_count(kafka_bootstrap, config_topic, name) is None
    with running_connector(manifest, spark) as driver:
        msgs = consume_all(kafka_bootstrap, topic, 80)
        assert driver.generation == 1, "a new first generation"
    assert set(_seqs(msgs).values()) == {2}
