"""The harness's real Apache Kafka Connect worker (conveyor.testing.connect) beside the session's
broker: its REST API answers, lists the FileStream plugins, and a FileStreamSink connector moves
records from a topic into a file."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer

from conveyor.testing.kafka import KAFKA_VERSION

pytestmark = pytest.mark.integration

FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


def test_worker_answers_with_its_version(connect_worker):
    status, body, headers = connect_worker.rest("GET", "/")
    assert status == 200, body
    assert body["version"] == KAFKA_VERSION == "4.1.1"
    assert headers["content-type"].startswith("application/json")
    assert connect_worker.url.startswith("http://127.0.0.1:")
    assert connect_worker.ready_seconds is not None and connect_worker.ready_seconds < connect_worker.startup_timeout


def test_worker_lists_the_file_stream_connectors(connect_worker):
    status, body, _ = connect_worker.rest("GET", "/connector-plugins")
    assert status == 200, body
    classes = {p["class"] for p in body}
    assert FILE_SINK in classes
    assert "org.apache.kafka.connect.file.FileStreamSourceConnector" in classes


def test_file_stream_sink_writes_every_record(connect_worker, kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory()
    out = tmp_path / "sink.txt"
    name = f"file-sink-{uuid.uuid4().hex[:8]}"
    created = connect_worker.put_connector(name, {"connector.class": FILE_SINK, "topics": topic, "file": str(out),
                                                  "tasks.max": "1"})
    assert created["name"] == name
    try:
        connect_worker.wait_for_state(name, "RUNNING", timeout=60)
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        for i in range(10):
            producer.produce(topic, key=str(i).encode(), value=json.dumps({"n": i}).encode())
        assert producer.flush(30) == 0

        deadline = time.monotonic() + 60
        lines: list[str] = []
        while time.monotonic() < deadline:
            lines = out.read_text().splitlines() if out.exists() else []
            if len(lines) >= 10:
                break
            time.sleep(0.2)
        assert len(lines) == 10, f"{len(lines)} lines in {out}; worker log: {connect_worker.log_path}"
        # JsonConverter without schemas hands the sink a Map; FileStreamSink writes its toString()
        assert lines[0] == "{n=0}" and lines[-1] == "{n=9}"
    finally:
        connect_worker.delete_connector(name)
