"""The source runtime against a real broker and Spark: Kafka Connect's offsets format,
KIP-416 ``commit_record``, KIP-618 transactions and zombie fencing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
import yaml
from confluent_kafka import KafkaException, Producer

from conveyor.manifest import ConnectorManifest
from conveyor.runtime.driver.driver import Driver, DriverError
from conveyor.runtime.kafka.fencing import transactional_id
from conveyor.runtime.kafka.offsets_topic import decode_key, offset_key, read_offsets
from conveyor.testing.runs import connector_manifest, consume_all, running_connector, wait_until

pytestmark = pytest.mark.integration

SEQUENCE = "conveyor.testing.sources:SequenceSourceConnector"


def _name() -> str:
    return f"src-{uuid.uuid4().hex[:8]}"


def _config(topic, **extra):
    return {
        "topic": topic,
        "value.converter": "json",
        "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "300",
        **extra,
    }


def _journal(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def _seqs(msgs):
    return Counter((json.loads(m.value())["stream"], json.loads(m.value())["seq"]) for m in msgs)


def test_offsets_are_written_in_kafka_connect_format_and_resumed(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    offsets_topic = f"offsets-{uuid.uuid4().hex[:6]}"
    name = _name()
    config = _config(topic, **{"records.per.stream": "50", "offsets.storage.topic": offsets_topic})
    with running_connector(connector_manifest(name, SEQUENCE, kafka_bootstrap, config), spark):
        assert len(consume_all(kafka_bootstrap, topic, 50)) == 50
        wait_until(lambda: read_offsets(kafka_bootstrap, offsets_topic, name), message="offsets flushed")
    raw = consume_all(kafka_bootstrap, offsets_topic, 1)
    key = raw[-1].key()
    assert key == f'["{name}",{{"stream":"s0"}}]'.encode(), "Kafka Connect's JsonConverter key, compact"
    assert decode_key(key) == (name, {"stream": "s0"})
    assert json.loads(raw[-1].value()) == {"seq": 49}
    # Restarted, the task reads its offset and emits nothing more.
    with running_connector(connector_manifest(name, SEQUENCE, kafka_bootstrap, config), spark) as driver:
        wait_until(lambda: driver.status()["tasks"][0]["state"] == "RUNNING", message="running")
        time.sleep(2)
    assert len(consume_all(kafka_bootstrap, topic, 51, timeout_s=5)) == 50


def test_hand_written_kafka_connect_offset_is_honoured_and_malformed_ones_skipped(
    kafka_bootstrap, topic_factory, spark
):
    topic = topic_factory(partitions=1)
    offsets_topic = f"offsets-{uuid.uuid4().hex[:6]}"
    name = _name()
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(offsets_topic, key=b"not json at all", value=b"{}")
    producer.produce(offsets_topic, key=f'["{name}",{{"stream":"s0"}}]'.encode(), value=b"[1,2]")
    # As Apache Kafka Connect writes it (spaces are fine: keys are compared as JSON).
    producer.produce(offsets_topic, key=f'["{name}", {{"stream": "s0"}}]'.encode(), value=b'{"seq": 89}')
    producer.flush(30)
    config = _config(topic, **{"records.per.stream": "100", "offsets.storage.topic": offsets_topic})
    with running_connector(connector_manifest(name, SEQUENCE, kafka_bootstrap, config), spark):
        msgs = consume_all(kafka_bootstrap, topic, 10)
    assert sorted(seq for _, seq in _seqs(msgs)) == list(range(90, 100))


def test_commit_record_metadata_is_what_consumers_see_and_dropped_records_get_none(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=3)
    journal = str(tmp_path / "j.jsonl")
    config = _config(topic, **{"records.per.stream": "10", "streams.per.task": "3", "journal.path": journal})
    with running_connector(connector_manifest(_name(), SEQUENCE, kafka_bootstrap, config), spark):
        msgs = consume_all(kafka_bootstrap, topic, 30)
        wait_until(lambda: len([e for e in _journal(journal) if e["event"] == "commit_record"]) >= 30,
                   message="commit_record for every record")
    seen = {m.key().decode(): (m.topic(), m.partition(), m.offset(), m.timestamp()[1]) for m in msgs}
    calls = [e for e in _journal(journal) if e["event"] == "commit_record"]
    assert len(calls) == 30
    for call in calls:
        meta = call["metadata"]
        assert (meta["topic"], meta["partition"], meta["offset"], meta["timestamp"]) == seen[call["key"]]


def test_filtered_records_get_commit_record_none(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    journal = str(tmp_path / "j.jsonl")
    config = _config(topic, **{
        "records.per.stream": "20", "journal.path": journal,
        "transforms": "dropAll",
        "transforms.dropAll.type": "org.apache.kafka.connect.transforms.Filter",
    })
    with running_connector(connector_manifest(_name(), SEQUENCE, kafka_bootstrap, config), spark):
        wait_until(lambda: len([e for e in _journal(journal) if e["event"] == "commit_record"]) >= 20,
                   message="commit_record(record, None) for dropped records")
    assert all(e["metadata"] is None for e in _journal(journal) if e["event"] == "commit_record")
    assert consume_all(kafka_bootstrap, topic, 1, timeout_s=3) == []


@pytest.mark.parametrize("boundary", ["poll", "interval", "connector"])
def test_exactly_once_transactions_commit_records_and_offsets_together(
    boundary, kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=2)
    journal = str(tmp_path / "j.jsonl")
    name = _name()
    config = _config(topic, **{
        "records.per.stream": "1000", "streams.per.task": "2", "journal.path": journal,
        "exactly.once.support": "required", "transaction.boundary": boundary,
        "transaction.boundary.interval.ms": "500", "transaction.commit.every": "250", "batch.size": "100",
    })
    with running_connector(connector_manifest(name, SEQUENCE, kafka_bootstrap, config, tasks_max=2), spark) as d:
        msgs = consume_all(kafka_bootstrap, topic, 4000)
        wait_until(lambda: sum(t.get("transactions", 0) for t in d.status()["tasks"]) > 0, message="transactions")
    counts = _seqs(msgs)
    assert len(counts) == 4000 and set(counts.values()) == {1}
    assert read_offsets(kafka_bootstrap, "connect-offsets", name) == {
        f'{{"stream":"s{i}"}}': {"seq": 999} for i in range(4)
    }
    with_metadata = [e for e in _journal(journal) if e["event"] == "commit_record" and e["metadata"]]
    assert len(with_metadata) == 4000


def test_required_exactly_once_refuses_a_too_long_transaction_timeout(kafka_bootstrap, topic_factory, spark):
    topic = topic_factory(partitions=1)
    config = _config(topic, **{"exactly.once.support": "required",
                               "producer.override.transaction.timeout.ms": "3600000"})
    driver = Driver(connector_manifest(_name(), SEQUENCE, kafka_bootstrap, config), spark=spark, control_port=0)
    with pytest.raises(DriverError, match=r"transaction.timeout.ms \(3600000\) exceeds the brokers' "
                                          r"transaction.max.timeout.ms"):
        driver.start()


def test_required_exactly_once_refuses_a_connector_that_does_not_declare_support(kafka_bootstrap, spark):
    config = {"exactly.once.support": "required", "topic": "t"}
    manifest = connector_manifest(_name(), "conveyor.testing.sources:UndeclaredSourceConnector", kafka_bootstrap,
                                  config)
    driver = Driver(manifest, spark=spark, control_port=0)
    with pytest.raises(DriverError, match=r"spec.config.exactly.once.support: required, but the connector's "
                                          r"exactly_once_support\(\) answered None"):
        driver.start()


def test_scaling_down_fences_the_ids_of_the_removed_tasks(kafka_bootstrap, topic_factory, spark):
    topic = topic_factory(partitions=1)
    name = _name()
    config = _config(topic, **{"records.per.stream": "10", "exactly.once.support": "requested"})
    with running_connector(connector_manifest(name, SEQUENCE, kafka_bootstrap, config, tasks_max=3), spark):
        consume_all(kafka_bootstrap, topic, 30)
    # A zombie of task 2 of that generation, with a transaction still open.
    zombie = Producer({"bootstrap.servers": kafka_bootstrap,
                       "transactional.id": transactional_id("default", name, 2)})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, key=b"zombie", value=b'{"stream": "zombie", "seq": -1}')
    zombie.flush(30)
    with running_connector(connector_manifest(name, SEQUENCE, kafka_bootstrap, config, tasks_max=1), spark) as d:
        wait_until(lambda: d.status()["tasks"][0]["state"] == "RUNNING", message="new generation running")
        with pytest.raises(KafkaException) as fenced:
            zombie.commit_transaction(30)
        assert fenced.value.args[0].fatal() or "fenc" in fenced.value.args[0].str().lower()
    msgs = consume_all(kafka_bootstrap, topic, 31, timeout_s=5)
    assert b"zombie" not in [m.key() for m in msgs], "the zombie's transaction was aborted by the fencing"
    assert len(msgs) == 30


def _run(manifest_path: str, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "conveyor.cli", "run", manifest_path, "--control-port", "0",
                             "--no-progress"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _session_pids(proc: subprocess.Popen) -> list[int]:
    out = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _write_manifest(tmp_path, name, bootstrap, config, tasks_max=2) -> str:
    path = tmp_path / f"{name}-{uuid.uuid4().hex[:4]}.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name},
        "spec": {"class": SEQUENCE, "tasksMax": tasks_max, "kafka": {"bootstrapServers": bootstrap},
                 "config": config, "shutdown": {"gracePeriodSeconds": 20}},
    }))
    return str(path)


@pytest.mark.process_boundary("SIGSTOP/SIGCONT of a whole conveyor run process (driver, JVM, workers)")
def test_zombie_driver_is_fenced_and_every_record_is_read_once(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    name = _name()
    config = _config(topic, **{"records.per.stream": "20000", "streams.per.task": "1", "batch.size": "200",
                               "poll.delay.ms": "100", "exactly.once.support": "required"})
    log = open(tmp_path / "drivers.log", "ab")
    a = _run(_write_manifest(tmp_path, name, kafka_bootstrap, config), log)
    b = None
    try:
        wait_until(lambda: len(consume_all(kafka_bootstrap, topic, 2000, timeout_s=2)) >= 2000, timeout_s=120,
                   message="driver A writing")
        frozen = _session_pids(a)
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        b = _run(_write_manifest(tmp_path, name, kafka_bootstrap, config), log)
        wait_until(lambda: len(consume_all(kafka_bootstrap, topic, 20000, timeout_s=2)) >= 20000, timeout_s=180,
                   message="driver B writing")
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        time.sleep(5)  # A's tasks wake up in the middle of their transactions and find themselves fenced
        msgs = consume_all(kafka_bootstrap, topic, 40000, timeout_s=180)
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                for pid in _session_pids(proc):
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=120)
    counts = _seqs(msgs)
    assert set(counts.values()) == {1}, [k for k, v in counts.items() if v > 1][:5]
    assert len(counts) == 40000, "every record of both streams exactly once"
    assert "fenced" in (tmp_path / "drivers.log").read_text().lower()


@pytest.mark.process_boundary("kill -9 of a conveyor run process with transactions open")
def test_kill_9_mid_run_then_restart_is_exactly_once(kafka_bootstrap, topic_factory, tmp_path, spark):
    """One boundary, ``interval`` (a transaction spans polls, so the kill lands in an open one);
    each boundary's transactions are ``test_exactly_once_transactions_commit_records_and_offsets_together``'s.
    The restart, which only resumes from the committed offsets, runs on the session's SparkSession."""
    topic = topic_factory(partitions=2)
    name = _name()
    config = _config(topic, **{
        "records.per.stream": "50000", "batch.size": "500", "poll.delay.ms": "100",
        "exactly.once.support": "required", "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "1000", "transaction.commit.every": "500",
    })
    manifest = _write_manifest(tmp_path, name, kafka_bootstrap, config)
    log = open(tmp_path / "driver.log", "ab")
    first = _run(manifest, log)
    try:
        wait_until(lambda: len(consume_all(kafka_bootstrap, topic, 20000, timeout_s=2)) >= 20000, timeout_s=180,
                   message="a fifth of the run")
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    seen = len(consume_all(kafka_bootstrap, topic, 100000, timeout_s=3))
    assert seen < 100000, "the kill must land mid-run"
    with running_connector(ConnectorManifest.load(manifest), spark):
        msgs = consume_all(kafka_bootstrap, topic, 100000, timeout_s=240)
    counts = _seqs(msgs)
    assert len(counts) == 100000 and set(counts.values()) == {1}, "read_committed: every change exactly once"
    assert offset_key(name, {"stream": "s0"})


def test_topic_creation_makes_the_topic_a_source_writes_to_with_its_groups_settings(kafka_bootstrap, spark):
    """KIP-158: a topic that does not exist is created on first use, with the settings of the
    first topic.creation group that includes it (here 3 partitions, compacted)."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = f"created-compact-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    assert topic not in admin.list_topics(timeout=10).topics
    config = _config(topic, **{"records.per.stream": "20",
                               "topic.creation.default.replication.factor": "1",
                               "topic.creation.default.partitions": "1",
                               "topic.creation.groups": "compacted",
                               "topic.creation.compacted.include": "created-compact-.*",
                               "topic.creation.compacted.partitions": "3",
                               "topic.creation.compacted.cleanup.policy": "compact"})
    with running_connector(connector_manifest(_name(), SEQUENCE, kafka_bootstrap, config), spark):
        assert len(consume_all(kafka_bootstrap, topic, 20)) == 20
    try:
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        described = admin.describe_configs([resource])[resource].result(30)
        assert described["cleanup.policy"].value == "compact"
    finally:
        admin.delete_topics([topic])
