"""Kafka Connect's metric names on a running sink connector's GET /metrics (real Kafka, Spark):
the runner's measurements (put() batches, commit times) reach the driver in its reports and come
out under Strimzi's names, next to the record counts."""

from __future__ import annotations

import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conveyor.testing.runs import connector_manifest, produce, running_connector, wait_until

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"


def scrape(driver) -> dict[str, dict[tuple, float]]:
    with urllib.request.urlopen(f"{driver.control_url}/metrics", timeout=10) as response:  # no token: open
        text = response.read().decode()
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_a_sink_shows_connects_metrics(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=2)
    name = f"metrics-{uuid.uuid4().hex[:8]}"
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap,
                                  {"topics": topic, "journal.path": str(tmp_path / "j.jsonl"),
                                   "key.converter": "bytes", "value.converter": "bytes",
                                   "offset.flush.interval.ms": 500})
    with running_connector(manifest, spark) as driver:
        produce(kafka_bootstrap, topic, [(b"k", b"v")] * 30, partition=0)
        produce(kafka_bootstrap, topic, [(b"k", b"v")] * 20, partition=1)
        task = (("connector", name), ("task", "0"))
        scraped = wait_until(lambda: (m := scrape(driver)).get("kafka_connect_sink_task_sink_record_send_total", {})
                             .get(task) == 50 and task in m.get("kafka_connect_connector_task_offset_commit_avg_time_ms",
                                                                 {}) and m, 60, "50 records put and a timed commit")
        assert scraped["kafka_connect_sink_task_sink_record_read_total"][task] == 50
        assert scraped["kafka_connect_connector_task_status"][tuple(sorted((*task, ("status", "running"))))] == 1
        assert scraped["kafka_connect_connector_status"][(("connector", name), ("status", "running"))] == 1
        assert scraped["kafka_connect_connector_connector_class"][(("connector", name), ("connector_class", RECORDING))] == 1
        assert scraped["kafka_connect_sink_task_partition_count"][task] == 2
        assert scraped["kafka_connect_connector_task_batch_size_max"][task] >= 1
        assert scraped["kafka_connect_sink_task_put_batch_max_time_ms"][task] >= 0
        assert scraped["kafka_connect_sink_task_offset_commit_completion_total"][task] >= 1
        assert scraped["kafka_connect_connector_task_running_ratio"][task] > 0
        assert scraped["kafka_connect_worker_connector_running_task_count"][(("connector", name),)] == 1
        assert scraped["kafka_connect_sink_task_sink_record_lag_max"][task] == 0
        wait_until(lambda: scrape(driver)["kafka_connect_sink_task_sink_record_active_count"][task] == 0, 30,
                   "every record committed")


def test_an_exactly_once_source_shows_connects_metrics(kafka_bootstrap, topic_factory, spark):
    topic = topic_factory(partitions=1)
    name = f"metrics-{uuid.uuid4().hex[:8]}"
    config = {"topic": topic, "value.converter": "json", "value.converter.schemas.enable": "false",
              "records.per.stream": "300", "batch.size": "100", "exactly.once.support": "required",
              "transaction.boundary": "poll"}
    manifest = connector_manifest(name, "conveyor.testing.sources:SequenceSourceConnector", kafka_bootstrap, config)
    with running_connector(manifest, spark) as driver:
        task = (("connector", name), ("task", "0"))
        scraped = wait_until(lambda: (m := scrape(driver)).get("kafka_connect_source_task_source_record_write_total",
                                                               {}).get(task) == 300 and m, 60, "300 records written")
        assert scraped["kafka_connect_source_task_source_record_poll_total"][task] == 300
        assert scraped["kafka_connect_source_task_transaction_size_max"][task] == 100
        assert scraped["kafka_connect_source_task_transaction_size_avg"][task] == 100
        assert scraped["kafka_connect_source_task_poll_batch_max_time_ms"][task] >= 0
        assert scraped["kafka_connect_connector_task_batch_size_max"][task] == 100
        assert task in scraped["kafka_connect_connector_task_offset_commit_max_time_ms"]
        assert scraped["kafka_connect_source_task_source_record_active_count"][task] == 0
        assert scraped["kafka_connect_connector_connector_type"][(("connector", name), ("connector_type", "source"))] == 1
        assert not [n for n in scraped if n.startswith("kafka_connect_sink_task_")]
