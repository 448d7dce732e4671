"""Connectors on an authenticated listener: ``spec.kafka.authentication`` (SASL/PLAIN, the
password in a Secret mounted under ``$CONVEYOR_MOUNT_DIR``) reaches every Kafka client the
runtime creates, against the harness broker's SASL_PLAINTEXT listener. Its port only
accepts authenticated clients, so records flowing prove that every client authenticated."""

from __future__ import annotations

import json
import uuid

import pytest

from conveyor.runtime.driver.driver import Driver, DriverError
from conveyor.runtime.kafka.offsets_topic import read_offsets
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
SECRET = {"name": "kafka-credentials", "key": "password"}


@pytest.fixture
def sasl(kafka_broker):
    return kafka_broker.sasl_plain()


@pytest.fixture
def mounted_password(tmp_path, monkeypatch):
    """Writes the password where the pods see the Secret key; returns a setter."""
    root = tmp_path / "mounts"
    monkeypatch.setenv("CONVEYOR_MOUNT_DIR", str(root))

    def mount(password: str) -> None:
        path = root / "secrets" / SECRET["name"] / SECRET["key"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(password + "\n")

    return mount


def _kafka(sasl, username="conveyor"):
    return {"bootstrapServers": sasl.bootstrap_servers,
            "authentication": {"type": "plain", "username": username, "passwordSecret": SECRET}}


def test_sink_connector_runs_end_to_end_over_sasl_plain(kafka_bootstrap, sasl, mounted_password, topic_factory,
                                                        spark, tmp_path):
    mounted_password(sasl.users["conveyor"])
    topic, dlq = topic_factory(partitions=2), f"dlq-{uuid.uuid4().hex[:8]}"
    journal = tmp_path / "j.jsonl"
    records = [(f"k{i}".encode(), json.dumps({"id": i}).encode()) for i in range(20)] + [(b"bad", b"not json")]
    produce(kafka_bootstrap, topic, records)
    name = f"sasl-{uuid.uuid4().hex[:8]}"
    config = {"topics": topic, "journal.path": str(journal), "value.converter.schemas.enable": "false",
              "offset.flush.interval.ms": "300", "errors.tolerance": "all",
              "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1"}
    manifest = connector_manifest(name, RECORDING, "unused:1", config, tasks_max=2, kafka=_kafka(sasl))
    with running_connector(manifest, spark) as driver:
        wait_until(lambda: len([r for e in read_journal(journal) if e["event"] == "put" for r in e["records"]]) >= 20,
                   message="20 records put")
        wait_until(lambda: sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2).values()) == 21,
                   message="offsets committed through the authenticated consumers")
        assert [m.value() for m in consume_all(kafka_bootstrap, dlq, 1)] == [b"not json"], "DLQ producer and admin"
        wait_until(lambda: all(t["state"] == "RUNNING" for t in driver.status()["tasks"]), message="both tasks RUNNING")


def test_exactly_once_source_connector_over_sasl_plain(kafka_bootstrap, sasl, mounted_password, topic_factory, spark):
    mounted_password(sasl.users["conveyor"])
    topic, offsets_topic = topic_factory(partitions=1), f"offsets-{uuid.uuid4().hex[:8]}"
    name = f"sasl-{uuid.uuid4().hex[:8]}"
    config = {"topic": topic, "value.converter": "json", "value.converter.schemas.enable": "false",
              "records.per.stream": "30", "exactly.once.support": "required",
              "offsets.storage.topic": offsets_topic, "config.storage.topic": f"configs-{name}"}
    manifest = connector_manifest(name, SEQUENCE, "unused:1", config, kafka=_kafka(sasl))
    with running_connector(manifest, spark) as driver:
        assert len(consume_all(kafka_bootstrap, topic, 30)) == 30
        wait_until(lambda: driver.status()["tasks"][0].get("transactions", 0) > 0, message="a transaction")
    assert read_offsets(kafka_bootstrap, offsets_topic, name) == {'{"stream":"s0"}': {"seq": 29}}


def test_a_wrong_password_fails_preflight_with_the_brokers_reason(sasl, mounted_password, spark):
    mounted_password("not-the-password")
    manifest = connector_manifest("wrong-password", RECORDING, "unused:1", {"topics": "t", "journal.path": "/dev/null"},
                                  kafka=_kafka(sasl))
    driver = Driver(manifest, spark=spark, control_port=0)
    with pytest.raises(DriverError) as err:
        driver.start()
    message = str(err.value)
    assert f"Kafka at {sasl.bootstrap_servers} (SASL_PLAINTEXT, PLAIN as 'conveyor') refused" in message
    assert "Invalid username or password" in message
    assert "not-the-password" not in message
    assert driver.server is None and driver.tasks == {}, "nothing left running"


def test_an_unknown_user_fails_preflight_too(sasl, mounted_password, spark):
    mounted_password("whatever")
    manifest = connector_manifest("unknown-user", RECORDING, "unused:1", {"topics": "t", "journal.path": "/dev/null"},
                                  kafka=_kafka(sasl, username="mallory"))
    with pytest.raises(DriverError, match=r"as 'mallory'\) refused the connection's credentials"):
        Driver(manifest, spark=spark, control_port=0).start()
