"""``spec.initialOffsets`` (KIP-995's offsets at creation) on a real driver and broker: written
before the first task reads, kept over stored offsets with ``existing: keep``, written over them
with ``replace``, and checked as Kafka Connect checks a ``PATCH`` body."""

from __future__ import annotations

import json
import uuid

import pytest

from conveyor.runtime.driver.driver import DriverError
from conveyor.runtime.kafka.offsets_topic import read_offsets
from conveyor.testing.recording import read_journal
from conveyor.testing.runs import committed_offsets, connector_manifest, produce, running_connector, wait_until

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"
SEQUENCE = "conveyor.testing.sources:SequenceSourceConnector"


def _put(journal) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for e in read_journal(journal) if e["event"] == "put"
                  for r in e["records"])


def _sink_entries(topic, offsets):
    return [{"partition": {"kafka_topic": topic, "kafka_partition": p}, "offset": {"kafka_offset": o}}
            for p, o in offsets.items()]


def test_a_sink_starts_where_told_keeps_what_it_committed_and_replaces_it_when_asked(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        produce(kafka_bootstrap, topic, [(f"k{i}", json.dumps({"id": i})) for i in range(10)], partition=p)
    name = f"initial-sink-{uuid.uuid4().hex[:8]}"

    def manifest(journal, offsets, existing):
        return connector_manifest(name, RECORDING, kafka_bootstrap, {
            "topics": topic, "journal.path": str(journal), "value.converter.schemas.enable": "false",
            "offset.flush.interval.ms": "300"},
            initialOffsets={"offsets": _sink_entries(topic, offsets), "existing": existing})

    first = tmp_path / "first.jsonl"
    with running_connector(manifest(first, {0: 4, 1: 7}, "keep"), spark) as driver:
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2) == {0: 10, 1: 10},
                   message="offsets committed to the end")
        started = driver.status()["starting_offsets"]
        settled = driver.manifest.spec.model_copy(update={"initial_offsets": None})  # as the operator then sends it
        assert driver.reconfigure(settled)["tasks"] == 1
    assert [e["event"] for e in read_journal(first)].count("start") == 1, "the change restarted no task"
    assert _put(first) == [(0, o) for o in range(4, 10)] + [(1, o) for o in range(7, 10)]
    assert (started["initial"], started["found"], started["written"]) == ("Applied", 0, 2)

    again = tmp_path / "again.jsonl"
    with running_connector(manifest(again, {0: 0, 1: 0}, "keep"), spark) as driver:
        started = driver.status()["starting_offsets"]
        produce(kafka_bootstrap, topic, [("new", json.dumps({"id": 10}))], partition=0)
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2) == {0: 11, 1: 10},
                   message="the new record committed")
    assert _put(again) == [(0, 10)]
    assert (started["initial"], started["found"], started["written"]) == ("Kept", 2, 0)
    assert "existing: keep" in started["message"]
    assert sorted(e["offset"]["kafka_offset"] for e in started["sample"]) == [10, 10]

    replaced = tmp_path / "replaced.jsonl"
    with running_connector(manifest(replaced, {0: 9}, "replace"), spark) as driver:
        started = driver.status()["starting_offsets"]
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2) == {0: 11, 1: 10},
                   message="offsets committed to the end again")
    # replaced, not merged: partition 1, not named, lost its stored offset and starts from the beginning
    assert _put(replaced) == [(0, 9), (0, 10)] + [(1, o) for o in range(10)]
    assert (started["initial"], started["found"], started["written"]) == ("Applied", 2, 1)
    assert "the stored offsets of 2 partition(s) replaced" in started["message"]


def test_a_source_starts_from_the_given_source_offsets(kafka_bootstrap, topic_factory, spark):
    topic, offsets_topic = topic_factory(partitions=1), f"offsets-{uuid.uuid4().hex[:8]}"
    name = f"initial-src-{uuid.uuid4().hex[:8]}"
    manifest = connector_manifest(name, SEQUENCE, kafka_bootstrap, {
        "topic": topic, "value.converter": "json", "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "300", "records.per.stream": "10", "offsets.storage.topic": offsets_topic},
        initialOffsets={"offsets": [{"partition": {"stream": "s0"}, "offset": {"seq": 5}}]})
    with running_connector(manifest, spark) as driver:
        wait_until(lambda: read_offsets(driver.kafka, offsets_topic, name).get('{"stream":"s0"}') == {"seq": 9},
                   message="the source committed its last offset")
        started = driver.status()["starting_offsets"]
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"check-{name}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seqs, deadline = [], 50
    while deadline and len(seqs) < 4:
        msg = consumer.poll(0.2)
        deadline -= 1
        if msg is not None and msg.error() is None:
            seqs.append(json.loads(msg.value())["seq"])
    consumer.close()
    assert seqs == [6, 7, 8, 9]  # the task resumes after the offset it is given, as from a committed one
    assert (started["initial"], started["found"], started["written"]) == ("Applied", 0, 1)


@pytest.mark.parametrize(("entry", "message"), [
    ({"partition": {"kafka_topic": "t"}, "offset": {"kafka_offset": 1}},
     "spec.initialOffsets: The partition for a sink connector offset must contain the keys "
     "'kafka_topic' and 'kafka_partition'"),
    ({"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": "one"}},
     "spec.initialOffsets: Failed to parse the following Kafka offset value in the provided offsets: 'one'."),
])
def test_an_entry_connect_would_refuse_fails_the_start_naming_the_field(kafka_bootstrap, spark, entry, message):
    manifest = connector_manifest(f"initial-bad-{uuid.uuid4().hex[:8]}", RECORDING, kafka_bootstrap,
                                  {"topics": "t", "journal.path": "/dev/null"},
                                  initialOffsets={"offsets": [entry]})
    with pytest.raises(DriverError) as raised, running_connector(manifest, spark):
        pass
    assert str(raised.value).startswith(message)
