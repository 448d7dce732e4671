"""A source task's records the producer cannot write (stage KAFKA_PRODUCE) follow
``errors.retry.timeout``, ``errors.retry.delay.max.ms`` and ``errors.tolerance``
(conveyor.runtime.task.source.produce_failures), on a real broker: the task writes to a topic
that does not exist and that its producer may not have created
(``allow.auto.create.topics=false``), so each delivery times out after 1.5 s (the retriable
``_MSG_TIMED_OUT``) until the test creates the topic."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import pytest
from conveyor.runtime.kafka.offsets_topic import read_offsets
from conveyor.testing.runs import connector_manifest, consume_all, running_connector, wait_until

pytestmark = pytest.mark.integration

SEQUENCE = "conveyor.testing.sources:SequenceSourceConnector"
RECORDS = 30


def _config(topic: str, offsets_topic: str, **extra: str) -> dict[str, str]:
    return {"topic": topic, "records.per.stream": str(RECORDS), "batch.size": "10",
            "value.converter": "json", "value.converter.schemas.enable": "false",
            "offsets.storage.topic": offsets_topic, "offset.flush.interval.ms": "300",
            "producer.override.message.timeout.ms": "1500",
            "producer.override.allow.auto.create.topics": "false", **extra}


def _missing_topic() -> str:
    return f"not-yet-{uuid.uuid4().hex[:10]}"


def topic_exists(bootstrap: str, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def _committed_seq(bootstrap: str, offsets_topic: str, name: str) -> int | None:
    offsets = read_offsets({"bootstrap.servers": bootstrap}, offsets_topic, name, timeout_s=10)
    return next(iter(offsets.values()))["seq"] if offsets else None


def test_retriable_produce_failures_are_tried_again_until_the_broker_takes_them(kafka_bootstrap, topic_factory,
                                                                               spark):
    topic, offsets_topic, name = _missing_topic(), f"offsets-{uuid.uuid4().hex[:6]}", f"pf-{uuid.uuid4().hex[:8]}"
    config = _config(topic, offsets_topic, **{"errors.retry.timeout": "120000", "errors.retry.delay.max.ms": "1000"})
    with running_connector(connector_manifest(name, SEQUENCE, kafka_bootstrap, config), spark) as driver:
        wait_until(lambda: (r := driver.tasks[0].report) is not None and r.retries >= 2 * RECORDS, timeout_s=60,
                   message="every record timed out (1.5 s) and produced again, twice")
        task = driver.status()["tasks"][0]
        assert task["state"] == "RUNNING" and task.get("records_written", 0) == 0, task
        assert _committed_seq(kafka_bootstrap, offsets_topic, name) is None, "nothing committed past them"
        topic_factory(partitions=1, name=topic)
        messages = consume_all(kafka_bootstrap, topic, RECORDS, timeout_s=90)
        wait_until(lambda: _committed_seq(kafka_bootstrap, offsets_topic, name) == RECORDS - 1,
                   message="every offset committed once written")
        assert driver.status()["tasks"][0].get("records_skipped", 0) == 0
    seqs = Counter(json.loads(m.value())["seq"] for m in messages)
    assert sorted(seqs) == list(range(RECORDS)) and set(seqs.values()) == {1}, "every record once"


def test_with_tolerance_all_and_no_retries_the_records_are_skipped_logged_and_their_offsets_committed(
        kafka_bootstrap, topic_factory, spark):
    topic, offsets_topic, name = _missing_topic(), f"offsets-{uuid.uuid4().hex[:6]}", f"pf-{uuid.uuid4().hex[:8]}"
    config = _config(topic, offsets_topic, **{"errors.tolerance": "all", "errors.log.enable": "true"})
    with running_connector(connector_manifest(name, SEQUENCE, kafka_bootstrap, config), spark) as driver:
        wait_until(lambda: driver.status()["tasks"][0].get("records_skipped") == RECORDS, timeout_s=60,
                   message="every record skipped")
        wait_until(lambda: _committed_seq(kafka_bootstrap, offsets_topic, name) == RECORDS - 1,
                   message="offsets committed past the skipped records")
        assert driver.status()["tasks"][0]["state"] == "RUNNING"
        report = driver.tasks[0].report
        assert report.errors_logged == RECORDS, "errors.log.enable: a line for each (stage KAFKA_PRODUCE)"
        assert report.retries == 0
    assert not topic_exists(kafka_bootstrap, topic), "none written: the topic was never made"


def test_with_tolerance_none_the_task_fails_naming_the_stage_and_commits_nothing(kafka_bootstrap, topic_factory,
                                                                                spark):
    topic, offsets_topic, name = _missing_topic(), f"offsets-{uuid.uuid4().hex[:6]}", f"pf-{uuid.uuid4().hex[:8]}"
    with running_connector(connector_manifest(name, SEQUENCE, kafka_bootstrap, _config(topic, offsets_topic)),
                           spark) as driver:
        status = wait_until(lambda: (s := driver.status())["tasks"][0]["state"] == "FAILED" and s, timeout_s=60,
                            message="task FAILED")
    trace = status["tasks"][0]["trace"]
    assert "Tolerance exceeded" in trace and "KAFKA_PRODUCE" in trace, trace
    assert _committed_seq(kafka_bootstrap, offsets_topic, name) is None
