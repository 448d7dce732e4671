"""Source offsets in a compacted Kafka topic, in Kafka Connect's exact format.

A record's key is the JSON array ``["<connector>", {source partition}]`` and its value the
JSON source offset (``null`` resets the partition), both written compact as Kafka
Connect's ``JsonConverter`` with ``schemas.enable=false`` writes them, and keyed to a
partition with the Java client's murmur2 partitioner. So offsets written by Apache Kafka
Connect read here, and the other way round.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource

from conveyor.api import OffsetStorageReader
from conveyor.runtime.kafka.clients import KafkaProperties
from conveyor.runtime.kafka.topics import ensure_topic, scan_topic

log = logging.getLogger(__name__)

DEFAULT_OFFSETS_TOPIC = "connect-offsets"
"""Kafka Connect's usual ``offset.storage.topic``; override with ``offsets.storage.topic``."""


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """The offsets-topic key of ``partition`` of ``connector``."""
    return _compact([connector, dict(partition)]).encode()


def offset_value(offset: Mapping[str, Any] | None) -> bytes | None:
    """The offsets-topic value of ``offset`` (``None`` is a tombstone)."""
    return None if offset is None else _compact(dict(offset)).encode()


def partition_id(partition: Mapping[str, Any]) -> str:
    """A canonical, hashable form of a source partition (key order does not matter)."""
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


def decode_partition_id(pid: str) -> dict[str, Any]:
    """The source partition a :func:`partition_id` stands for."""
    return dict(json.loads(pid))


def decode_key(key: bytes | None) -> tuple[str, dict[str, Any]]:
    """``(connector, source partition)`` of an offsets-topic key.

    Raises:
        ValueError: not Kafka Connect's ``["name", {...}]`` shape.
    """
    if key is None:
        raise ValueError("null key")
    data = json.loads(key)
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], str) and isinstance(data[1], dict)):
        raise ValueError("expected [\"<connector>\", {partition}]")
    return data[0], data[1]


def ensure_offsets_topic(admin: AdminClient, topic: str, partitions: int = 25) -> None:
    """Create the compacted offsets topic (25 partitions, as Kafka Connect) unless it exists."""
    ensure_topic(admin, topic, partitions, 3, {"cleanup.policy": "compact"})


def read_offsets(kafka: KafkaProperties, topic: str, connector: str, timeout_s: float = 30.0,
                 client_config: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Every committed offset of ``connector``: ``{partition_id: offset}``.

    Reads the whole topic up to its end with ``read_committed`` isolation (offsets of
    aborted transactions never count). The last record of a key wins; a tombstone
    removes it. A malformed record is logged with its key and skipped.

    Args:
        kafka: base Kafka client properties (see :mod:`conveyor.runtime.kafka.clients`).
        client_config: extra consumer settings, applied last.

    Raises:
        KafkaException: the topic cannot be read.
        TimeoutError: its end was not reached within ``timeout_s``.
    """
    offsets: dict[str, dict[str, Any]] = {}
    for msg in scan_topic(kafka, topic, f"conveyor-offsets-reader-{connector}", timeout_s, client_config):
        _apply(offsets, connector, msg.key(), msg.value(), msg.partition(), msg.offset())
    return offsets


def live_offset_keys(kafka: KafkaProperties, topic: str, connector: str,
                     timeout_s: float = 60.0) -> dict[bytes, tuple[int, str]]:
    """The offsets-topic keys of ``connector`` whose latest record is not a tombstone:
    ``{raw key: (topic partition, partition_id)}``.

    Keys are kept as written: the same source partition may appear under several byte
    spellings (e.g. written by Apache Kafka Connect with spaces, then by Conveyor compact),
    and compaction only removes a record superseded by one with the very same key bytes.

    Raises:
        KafkaException: the topic cannot be read.
        TimeoutError: its end was not reached within ``timeout_s``.
    """
    live: dict[bytes, tuple[int, str]] = {}
    for msg in scan_topic(kafka, topic, f"conveyor-offsets-reader-{connector}", timeout_s):
        key = msg.key()
        try:
            name, source_partition = decode_key(key)
        except ValueError:
            continue
        if name != connector:
            continue
        assert key is not None
        if msg.value() is None:
            live.pop(key, None)
        else:
            live[key] = (msg.partition(), partition_id(source_partition))
    return live


def _apply(offsets: dict[str, dict[str, Any]], connector: str, key: bytes | None, value: bytes | None,
           partition: int, position: int) -> None:
    try:
        name, source_partition = decode_key(key)
        offset = None if value is None else json.loads(value)
        if offset is not None and not isinstance(offset, dict):
            raise ValueError("offset is not a JSON object")
    except ValueError as exc:
        log.warning("skipping malformed offsets record at partition %d offset %d (key %r): %s", partition, position,
                    key, exc)
        return
    if name != connector:
        return
    pid = partition_id(source_partition)
    if offset is None:
        offsets.pop(pid, None)
    else:
        offsets[pid] = offset


class TopicOffsetReader(OffsetStorageReader):
    """Offsets read once at task start (a task is the only writer of its partitions)."""

    def __init__(self, offsets: Mapping[str, Mapping[str, Any]]) -> None:
        self._offsets = {k: dict(v) for k, v in offsets.items()}

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        found = self._offsets.get(partition_id(partition))
        return dict(found) if found is not None else None

    def update(self, partition: Mapping[str, Any], offset: Mapping[str, Any]) -> None:
        """Record an offset this task committed."""
        self._offsets[partition_id(partition)] = dict(offset)


def broker_transaction_limits(admin: AdminClient) -> tuple[bool, int | None]:
    """``(transactions usable, transaction.max.timeout.ms)`` of the first broker.

    Transactions need ``transaction.state.log.*`` to be satisfiable; a broker whose
    transaction-state topic cannot reach ``min.isr`` refuses ``InitProducerId``.
    """
    metadata = admin.list_topics(timeout=10)
    broker_id = next(iter(metadata.brokers))
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    max_timeout = configs.get("transaction.max.timeout.ms")
    rf = configs.get("transaction.state.log.replication.factor")
    min_isr = configs.get("transaction.state.log.min.isr")
    brokers = len(metadata.brokers)
    usable = True
    if rf is not None and rf.value is not None and int(rf.value) > brokers:
        usable = False
    if min_isr is not None and min_isr.value is not None and int(min_isr.value) > brokers:
        usable = False
    return usable, (int(max_timeout.value) if max_timeout is not None and max_timeout.value else None)
