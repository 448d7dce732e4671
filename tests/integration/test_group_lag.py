"""A sink connector's lag counts every partition of its topics, held by a task or not
(issue 11 §4): a partition no task holds showed no lag at all, so the connector looked
caught up while records waited (6,800 records read as ``lag 0`` after a kill -9)."""

from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from conveyor.runtime.driver.progress import ProgressReporter
from conveyor.runtime.kafka.group_lag import GroupLag
from conveyor.testing.runs import connector_manifest, produce, running_connector, wait_until

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"


def fill(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    for partition, count in counts.items():
        produce(bootstrap, topic, [(b"k", b"v")] * count, partition=partition)


def test_group_lag_covers_every_partition_committed_or_not(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=3)
    group = f"lag-{uuid.uuid4().hex[:8]}"
    fill(kafka_bootstrap, topic, {0: 10, 1: 20, 2: 30})
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)  # 6 behind; 1 and 2: none committed
    consumer.close()

    by_name = GroupLag({"bootstrap.servers": kafka_bootstrap}, group, [topic])
    assert by_name.refresh() == {f"{topic}:0": 6, f"{topic}:1": 20, f"{topic}:2": 30}
    by_regex = GroupLag({"bootstrap.servers": kafka_bootstrap}, group, ["^" + topic.rsplit("-", 1)[0] + "-.*"])
    assert by_regex.refresh() == by_name.refresh()
    watch = GroupLag({"bootstrap.servers": kafka_bootstrap}, group, [topic], interval_s=0.2).start()
    try:
        assert wait_until(lambda: watch.unassigned({f"{topic}:1"}), 10, "a first refresh") == \
            {f"{topic}:0": 6, f"{topic}:2": 30}
    finally:
        watch.close()
    assert GroupLag({"bootstrap.servers": kafka_bootstrap}, group, ["no-such-topic"]).refresh() == {}


def test_a_partition_held_by_no_task_shows_its_lag_in_status_progress_and_metrics(
        kafka_bootstrap, topic_factory, spark, tmp_path):
    """A foreign member of the connector's group holds one of the two partitions and reads
    nothing: the connector's one task holds the other, and the held-by-nobody partition's
    records appear as ``unassigned_lag``."""
    topic = topic_factory(partitions=2)
    name = f"lag-{uuid.uuid4().hex[:8]}"
    squatter = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"connect-{name}",
                         "enable.auto.commit": False, "partition.assignment.strategy": "cooperative-sticky"})
    squatter.subscribe([topic])
    held: list = []
    done = threading.Event()

    def squat() -> None:
        while not done.is_set():
            squatter.poll(0.1)
            held[:] = squatter.assignment()
            for tp in held:
                squatter.pause([tp])

    thread = threading.Thread(target=squat, daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(held) == 2, 60, "the squatter holding both partitions")
        manifest = connector_manifest(name, RECORDING, kafka_bootstrap,
                                      {"topics": topic, "journal.path": str(tmp_path / "j.jsonl"),
                                       "key.converter": "bytes", "value.converter": "bytes"})
        with running_connector(manifest, spark) as driver:
            task_holds = wait_until(lambda: (a := (driver.status()["tasks"] or [{}])[0].get("assignment"))
                                    and len(a) == 1 and len(held) == 1 and a, 60, "one partition each")
            (mine,) = task_holds
            theirs = f"{topic}:{held[0].partition}"
            assert theirs != mine
            fill(kafka_bootstrap, topic, {held[0].partition: 40, int(mine.rsplit(":", 1)[1]): 5})
            lag = wait_until(lambda: driver.status().get("unassigned_lag", {}).get(theirs) == 40
                             and driver.status()["unassigned_lag"], 30, "the squatted partition's lag")
            assert lag == {theirs: 40}, lag
            progress = ProgressReporter(driver, live=False)
            wait_until(lambda: progress.line().endswith("lag 40"), 30, "lag 40 in the progress line (the task's own 0)")
            from prometheus_client import generate_latest

            scraped = generate_latest(driver.metrics_registry).decode()
            assert f'conveyor_connector_unassigned_lag_records{{connector="{name}"}} 40.0' in scraped
    finally:
        done.set()
        thread.join(10)
        squatter.close()
