"""rabbitmq-sink's batch path (``put_batch``: each message built from the columns) against its
record path, through the runtime with a real broker, Spark and RabbitMQ: the same messages
(body, properties, headers), the same dead-letter records and the same committed offsets."""

from __future__ import annotations

import uuid

import pytest

from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    dead_letter_context,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

STRING = "org.apache.kafka.connect.storage.StringConverter"
HEADERS = [("trace", b"\x00\xff"), ("empty", None), ("dup", b"1"), ("dup", b"2")]


def _items(partition: int, n: int) -> list[tuple[bytes | None, bytes | None]]:
    """Values with non-ASCII text, malformed UTF-8, empty values and tombstones; keys as JSON
    numbers, strings and objects, and null keys."""
    keys = [b"7", b'"k"', b'{"id": 1}', None]
    values = [b"plain", "é 日本".encode(), b"x\xffy", b"", None]
    return [(keys[i % 4], values[i % 5] if partition == 0 else f"p1-{i}".encode()) for i in range(n)]


@pytest.mark.parametrize("values", ["string", "bytes"])
def test_the_batch_path_publishes_what_the_record_path_publishes(
    kafka_bootstrap, topic_factory, spark, rabbitmq_server, rabbitmq_queue_name, values
):
    topic = topic_factory(partitions=2)
    produce(kafka_bootstrap, topic, _items(0, 200), partition=0, headers=HEADERS)
    produce(kafka_bootstrap, topic, _items(1, 200), partition=1)
    tombstones = sum(1 for _, v in _items(0, 200) if v is None)
    published, dead, offsets = {}, {}, {}
    for path in ("records", "batches"):
        name, queue, dlq = f"rmqb-{uuid.uuid4().hex[:6]}", rabbitmq_queue_name(path), f"dlq-{uuid.uuid4().hex[:8]}"
        config = {"topics": topic, "rabbitmq.url": rabbitmq_server.url, "rabbitmq.queue.name.format": queue,
                  "key.converter": "json", "key.converter.schemas.enable": "false",
                  "value.converter": STRING if values == "string" else "bytes",
                  "behavior.on.null.values": "fail", "errors.tolerance": "all",
                  "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1",
                  "errors.deadletterqueue.context.headers.enable": "true", "offset.flush.interval.ms": "300",
                  "conveyor.batch.path.enable": str(path == "batches").lower()}
        with running_connector(connector_manifest(name, "rabbitmq-sink", kafka_bootstrap, config), spark) as d:
            task = wait_until(lambda: next((t for t in d.status()["tasks"] if t.get("records_read") == 400), None),
                              message=f"every record read through {path}")
            assert task["batch_path"] is (path == "batches")
            wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2)  # noqa: B023
                       == {0: 200, 1: 200}, message=f"every offset committed through {path}")
        offsets[path] = committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2)
        published[path] = sorted([
            (m.properties.message_id, m.body, m.properties.content_type, m.properties.delivery_mode,
             m.properties.timestamp is not None, sorted(m.headers.items(), key=repr))
            for m in rabbitmq_server.get_messages(queue)], key=repr)
        dead[path] = sorted([(m.key(), m.value(), sorted(dead_letter_context(m.headers()).items(), key=repr),
                              [h for h in m.headers() if not h[0].startswith("__connect.errors.")])
                             for m in consume_all(kafka_bootstrap, dlq, expected=tombstones)], key=repr)
    assert published["batches"] == published["records"] and len(published["records"]) == 400 - tombstones
    assert dead["batches"] == dead["records"] and len(dead["records"]) == tombstones
    assert offsets["batches"] == offsets["records"] == {0: 200, 1: 200}
    assert any(b"\xef\xbf\xbd" in body for _, body, *_ in published["records"]) is (values == "string")
