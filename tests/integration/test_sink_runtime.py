"""The sink task runtime against a real broker and real Spark: one test per Kafka Connect rule.

Each test runs an in-process driver on the session SparkSession with the recording sink
(``conveyor.testing.recording``), whose journal shows every hook call the task received.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer

from conveyor.testing.recording import read_journal
from conveyor.testing.runs import (
    GROUP_PROTOCOLS,
    committed_offsets,
    connector_manifest,
    group_member_config,
    group_protocol_config,
    group_protocol_of,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"


@pytest.fixture
def journal(tmp_path):
    return tmp_path / "journal.jsonl"


def _name() -> str:
    return f"rec-{uuid.uuid4().hex[:8]}"


BOTH_PROTOCOLS = pytest.mark.parametrize("protocol", GROUP_PROTOCOLS)
"""The rebalance rules hold on both consumer group protocols: classic and KIP-848's."""


def _config(topic, journal, protocol="classic", **extra):
    return {
        "topics": topic,
        "journal.path": str(journal),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "60000",
        **group_protocol_config(protocol),
        **extra,
    }


def _puts(journal):
    return [r for e in read_journal(journal) if e["event"] == "put" for r in e["records"]]


def _events(journal, event):
    return [e for e in read_journal(journal) if e["event"] == event]


def _values(n, start=0):
    return [(f"k{i}".encode(), json.dumps({"id": i}).encode()) for i in range(start, start + n)]


def test_delivers_every_record_and_commits_on_shutdown(kafka_bootstrap, topic_factory, spark, journal):
    topic = topic_factory(partitions=2)
    produce(kafka_bootstrap, topic, _values(100))
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal))
    with running_connector(manifest, spark) as driver:
        wait_until(lambda: len(_puts(journal)) >= 100, message="100 records put")
        status = wait_until(lambda: (s := driver.status())["tasks"][0]["state"] == "RUNNING" and s,
                            message="task RUNNING in status")
        assert status["type"] == "sink"
        assert status["connector"]["state"] == "RUNNING"
        assert [t["state"] for t in status["tasks"]] == ["RUNNING"]
        result = driver.stop()
    puts = _puts(journal)
    assert sorted(r["value"]["id"] for r in puts) == list(range(100))
    assert all(r["key"] == f"k{r['value']['id']}" for r in puts), "StringConverter is the default key converter"
    # Group connect-<name>, committed to the end of each partition by the closing commit.
    assert sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2).values()) == 100
    closing = [e for e in _events(journal, "pre_commit") if e["closing"]]
    assert closing and closing[-1]["returned"] == closing[-1]["offsets"]
    assert [e["event"] for e in read_journal(journal)][-3:] == ["close", "stop", "connector_stop"]
    assert _events(journal, "stop")[0]["connector_deleted"] is False
    assert result["tasks"][0]["state"] == "STOPPED"


def test_periodic_commits_are_not_closing(kafka_bootstrap, topic_factory, spark, journal):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(10))
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap,
                                  _config(topic, journal, **{"offset.flush.interval.ms": "300"}))
    with running_connector(manifest, spark):
        wait_until(lambda: len(_puts(journal)) >= 10, message="records put")
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1).get(0) == 10,
                   message="periodic commit to offset 10")
        periodic = wait_until(lambda: len(e := _events(journal, "pre_commit")) >= 3 and e,
                              message="several periodic pre_commit calls")
        assert not any(e["closing"] for e in periodic), "is_closing() is false outside closing commits"
    closing = [e for e in _events(journal, "pre_commit") if e["closing"]]
    assert len(closing) == 1


def test_request_commit_commits_without_waiting_for_the_interval(kafka_bootstrap, topic_factory, spark, journal):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(5))
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap,
                                  _config(topic, journal, **{"request.commit.every": "5"}))
    with running_connector(manifest, spark):
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1).get(0) == 5,
                   timeout_s=30, message="commit requested by the task")


def test_empty_pre_commit_commits_nothing(kafka_bootstrap, topic_factory, spark, journal):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(20))
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal, pre_commit="empty"))
    with running_connector(manifest, spark):
        wait_until(lambda: len(_puts(journal)) >= 20, message="records put")
    assert any(e["closing"] for e in _events(journal, "pre_commit"))
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {}


def test_offsets_beyond_consumed_or_unassigned_are_not_committed(kafka_bootstrap, topic_factory, spark, journal):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(7))
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal, pre_commit="beyond"))
    with running_connector(manifest, spark):
        wait_until(lambda: len(_puts(journal)) >= 7, message="records put")
    closing = [e for e in _events(journal, "pre_commit") if e["closing"]][-1]
    assert closing["returned"][f"{topic}:0"] == 1007
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {}


def test_rewind_from_open_redelivers_from_that_offset(kafka_bootstrap, topic_factory, spark, journal):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(10))
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap,
                                  _config(topic, journal, **{"rewind.on.open": f"{topic}:0:6"}))
    with running_connector(manifest, spark):
        wait_until(lambda: len(_puts(journal)) >= 4, message="records from offset 6")
    assert [r["offset"] for r in _puts(journal)] == [6, 7, 8, 9]
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 10}


def test_retriable_put_redelivers_the_same_batch_without_leaving_the_group(
    kafka_bootstrap, topic_factory, spark, journal
):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(30))
    name = _name()
    manifest = connector_manifest(
        name, RECORDING, kafka_bootstrap,
        _config(topic, journal, **{"retriable.puts": "3", "retry.timeout.ms": "200"}),
    )
    with running_connector(manifest, spark):
        wait_until(lambda: len(_puts(journal)) >= 30, message="records put after retries")
        events = read_journal(journal)
    retried = [e["offsets"] for e in events if e["event"] == "put_retriable"]
    assert len(retried) == 3
    first_put = next(e for e in events if e["event"] == "put")
    assert [r["offset"] for r in first_put["records"]][: len(retried[0])] == retried[0], "same batch redelivered"
    assert sorted(r["offset"] for r in _puts(journal)) == list(range(30)), "nothing lost, nothing twice"
    assert [e for e in events if e["event"] == "close"] == [], "no revoke while retrying"


def test_failing_put_fails_task_after_closing_commit_of_processed_records(
    kafka_bootstrap, topic_factory, spark, journal
):
    topic = topic_factory(partitions=1)
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap,
                                  _config(topic, journal, **{"fail.put.at.offset": "15"}))
    with running_connector(manifest, spark) as driver:
        wait_until(lambda: _events(journal, "open"), message="partition assigned")
        produce(kafka_bootstrap, topic, _values(10))
        wait_until(lambda: len(_puts(journal)) >= 10, message="first 10 put")
        produce(kafka_bootstrap, topic, _values(10, start=10))
        status = wait_until(
            lambda: (s := driver.status()) and s["tasks"][0]["state"] == "FAILED" and s, message="task FAILED"
        )
        assert "asked to fail at offset 15" in status["tasks"][0]["trace"]
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 10}
    closing = [e for e in _events(journal, "pre_commit") if e["closing"]]
    assert closing and closing[-1]["offsets"] == {f"{topic}:0": 10}
    assert [e["event"] for e in read_journal(journal)][-3:] == ["close", "stop", "connector_stop"]


@BOTH_PROTOCOLS
def test_revoked_partitions_get_a_closing_commit_then_close(kafka_bootstrap, topic_factory, spark, journal, protocol):
    topic = topic_factory(partitions=2)
    produce(kafka_bootstrap, topic, _values(20))
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal, protocol))
    with running_connector(manifest, spark):
        wait_until(lambda: len(_puts(journal)) >= 20, message="records put")
        # A second member joins connect-<name>: the (cooperative, or the broker's) assignor moves one partition.
        intruder = Consumer(group_member_config(kafka_bootstrap, f"connect-{name}", protocol))
        intruder.subscribe([topic])
        try:
            wait_until(lambda: (intruder.poll(0.2), _events(journal, "close"))[1], timeout_s=60,
                       message="revocation of one partition")
            assert group_protocol_of(kafka_bootstrap, f"connect-{name}") == protocol
            closes = _events(journal, "close")
            revoked = closes[0]["partitions"]
            assert len(revoked) == 1
            before = [e for e in read_journal(journal) if e["event"] in ("pre_commit", "close")]
            idx = next(i for i, e in enumerate(before) if e["event"] == "close")
            assert before[idx - 1]["event"] == "pre_commit" and before[idx - 1]["closing"] is True
            assert list(before[idx - 1]["offsets"]) == revoked, "closing commit covers the revoked partitions only"
            partition = int(revoked[0].rsplit(":", 1)[1])
            committed = committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2)
            assert committed.get(partition) == before[idx - 1]["offsets"][revoked[0]]
        finally:
            intruder.close()


@BOTH_PROTOCOLS
def test_lost_partitions_are_closed_without_commit(kafka_bootstrap, topic_factory, spark, journal, protocol):
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, _values(3))
    name = _name()
    config = _config(topic, journal, protocol, **{
        "consumer.override.max.poll.interval.ms": "7000",
        "slow.put.seconds": "9",
    })
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, config)
    with running_connector(manifest, spark):
        wait_until(lambda: _events(journal, "close"), timeout_s=60, message="lost partitions closed")
        events = read_journal(journal)
    close_at = next(i for i, e in enumerate(events) if e["event"] == "close")
    assert not any(e["event"] == "pre_commit" and e["closing"] for e in events[:close_at]), "no commit on lost"


def test_tasks_max_three_runs_three_spark_jobs_and_delivers_everything(
    kafka_bootstrap, topic_factory, spark, journal
):
    topic = topic_factory(partitions=6)
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal), tasks_max=3)
    with running_connector(manifest, spark) as driver:

        def reported_assignments():
            tasks = driver.status()["tasks"]
            assigned = [set(t.get("assignment", [])) for t in tasks]
            # reports are snapshots taken at different moments: during a cooperative rebalance
            # a partition can show in the report of its old owner and of its new one
            settled = all(assigned) and len(set().union(*assigned)) == 6 == sum(len(a) for a in assigned)
            return settled and assigned

        wait_until(reported_assignments, message="six partitions, each owned by exactly one of three tasks")
        produce(kafka_bootstrap, topic, _values(600))
        wait_until(lambda: len(_puts(journal)) >= 600, message="600 records put")
        tracker = spark.sparkContext.statusTracker()
        jobs = {g: [j for j in tracker.getJobIdsForGroup(f"task-{g}") if tracker.getJobInfo(j).status == "RUNNING"]
                for g in range(3)}
        assert all(len(ids) == 1 for ids in jobs.values()), jobs
        assert len({ids[0] for ids in jobs.values()}) == 3
    assert sorted(r["value"]["id"] for r in _puts(journal)) == list(range(600))
    assert {e["task"] for e in _events(journal, "put")} == {0, 1, 2}
