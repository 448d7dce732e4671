"""Topics the runtime creates for itself (dead-letter queues, offsets, config) and reading
their ends."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conveyor.runtime.kafka.clients import KafkaProperties, client_config

log = logging.getLogger(__name__)

_NOT_READY = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART)


def ensure_topic(
    admin: AdminClient,
    name: str,
    partitions: int = 1,
    replication_factor: int = 3,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Create ``name`` unless it exists, and wait until every partition has a leader.

    The replication factor is capped at the number of brokers, with a warning, so Kafka
    Connect's defaults work on a one-broker development cluster (``-1`` means the broker's
    default).

    Raises:
        KafkaException: creation failed for another reason than "already exists".
        TimeoutError: the partitions had no leader within ``timeout_s``.
    """
    metadata = admin.list_topics(timeout=10)
    if name not in metadata.topics:
        brokers = len(metadata.brokers)
        rf = replication_factor
        if rf > brokers:
            log.warning("topic %s: replication factor %d > %d broker(s); using %d", name, rf, brokers, brokers)
            rf = brokers
        futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf,
                                                config=dict(config or {}))])
        try:
            futures[name].result(timeout=timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    deadline = time.monotonic() + timeout_s
    while True:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and topic.partitions and all(
            p.leader >= 0 for p in topic.partitions.values()
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} has partitions without a leader after {timeout_s:.0f}s")
        time.sleep(0.1)


def high_watermark(consumer: Consumer, tp: KafkaTopicPartition, deadline: float) -> int:
    """The partition's high watermark, waiting out a topic so new that it has no leader yet.

    Raises:
        KafkaException: any other error, or still not ready at ``deadline`` (monotonic).
    """
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=max(0.1, deadline - time.monotonic()))[1]
        except KafkaException as exc:
            if exc.args[0].code() not in _NOT_READY or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def scan_topic(kafka: KafkaProperties, topic: str, group_id: str, timeout_s: float = 30.0,
               client_settings: Mapping[str, Any] | None = None) -> Iterator[Message]:
    """Every record of ``topic`` from the beginning up to the end it has when the scan
    starts, partition by partition in offset order, ``read_committed`` (records of aborted
    or open transactions are skipped). A topic that does not exist yields nothing.

    The consumer is assigned partitions directly: ``group_id`` never joins a group and
    nothing is committed. ``client_settings`` are applied over the runtime's.

    Raises:
        KafkaException: the topic cannot be read.
        TimeoutError: its end was not reached within ``timeout_s`` seconds.
    """
    consumer = Consumer(client_config(kafka, {
        "group.id": group_id,
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
    }, client_settings))
    try:
        deadline = time.monotonic() + timeout_s
        metadata = consumer.list_topics(topic, timeout=timeout_s)
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            return
        ends = {}
        for p in metadata.topics[topic].partitions:
            high = high_watermark(consumer, KafkaTopicPartition(topic, p), deadline)
            if high > 0:
                ends[p] = high
        if not ends:
            return
        consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        remaining = set(ends)
        while remaining:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} not read to its end within {timeout_s:.0f}s")
            for msg in consumer.consume(1000, 0.2):  # waits for a full batch or the timeout: keep it short
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        remaining.discard(msg.partition())
                        continue
                    raise KafkaException(err)
                if msg.partition() not in remaining:
                    continue
                yield msg
                if msg.offset() + 1 >= ends[msg.partition()]:
                    remaining.discard(msg.partition())
    finally:
        consumer.close()
