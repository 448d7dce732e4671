"""Kafka Connect's offsets management (KIP-875): list, alter and reset a connector's offsets.

Documents, validation and messages are Kafka Connect 4.x's:

* ``ConnectorOffsets`` ``{"offsets": [{"partition": {...}, "offset": {...}}]}``. A sink's
  partition is ``{"kafka_topic": str, "kafka_partition": int}`` and its offset
  ``{"kafka_offset": int}`` (the consumer group ``connect-<name>``'s committed offsets); a
  source's are its source partitions and offsets as stored in the offsets topic.
* Altering or resetting needs the connector ``STOPPED`` (400 otherwise). The connector's
  ``alter_offsets`` hook is called first, on a new instance (as Connect's
  ``SinkConnector.alterOffsets`` / ``SourceConnector.alterOffsets``): raising fails the
  request and nothing is written; its answer chooses the success message.
* A ``null`` offset resets that one partition: a sink partition then resumes as
  ``consumer.auto.offset.reset`` says, a source partition as if never read.

Blocking; runs on the caller's thread (a control API worker thread).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from conveyor.api import Connector, SinkConnector
from conveyor.api import TopicPartition as ApiTopicPartition
from conveyor.control.errors import OperationError
from conveyor.runtime.config.settings import parse_source_settings
from conveyor.runtime.deletion.offsets import (
    OffsetsDeletionError,
    delete_offsets,
    delete_sink_offsets,
    sink_group,
    write_source_offsets,
)
from conveyor.runtime.kafka.clients import KafkaProperties, client_config
from conveyor.runtime.kafka.offsets_topic import decode_partition_id, offset_key, offset_value, read_offsets

log = logging.getLogger(__name__)

KAFKA_TOPIC_KEY = "kafka_topic"
KAFKA_PARTITION_KEY = "kafka_partition"
KAFKA_OFFSET_KEY = "kafka_offset"
TIMEOUT_S = 30.0
_COORDINATOR_NOT_READY = (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                         KafkaError.NOT_COORDINATOR)

ALTERED = "The offsets for this connector have been altered successfully"
RESET = "The offsets for this connector have been reset successfully"
_FRAMEWORK_ONLY = ("The Connect framework-managed offsets for this connector have been {done} successfully. "
                   "However, if this connector manages offsets externally, they will need to be manually "
                   "{done} in the system that the connector uses.")

SinkOffsets = dict[ApiTopicPartition, "int | None"]
SourceOffsets = list[tuple[dict[str, Any], "dict[str, Any] | None"]]


def _bad_request(message: str) -> OperationError:
    return OperationError(HTTPStatus.BAD_REQUEST, message)


def not_stopped_message(name: str) -> str:
    return ("Connectors must be in the STOPPED state before their offsets can be modified. This can be done for "
            f"the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint")


def entries_of(body: Mapping[str, Any]) -> list[Any]:
    """The ``offsets`` list of a ``PATCH`` body.

    Raises:
        OperationError: 400 when it is missing or empty (Connect's message).
    """
    entries = body.get("offsets")
    if not isinstance(entries, list) or not entries:
        raise _bad_request("Partitions / offsets need to be provided for an alter offsets request")
    return entries


def _integer(value: Any, what: str, null_message: str) -> int:
    if value is None:
        raise _bad_request(null_message)
    try:
        return int(str(value))
    except ValueError:
        raise _bad_request(f"Failed to parse the following Kafka {what} value in the provided offsets: '{value}'. "
                           f"{what.capitalize()} values for sink connectors need to be integers.") from None


def parse_sink_offsets(entries: list[Any]) -> SinkOffsets:
    """``{TopicPartition: next offset or None}`` from a sink ``PATCH`` body's entries, checked
    as Connect's ``SinkUtils.parseSinkConnectorOffsets`` checks them.

    Raises:
        OperationError: 400 naming what is wrong, in Connect's words.
    """
    out: SinkOffsets = {}
    for entry in entries:
        partition = entry.get("partition") if isinstance(entry, Mapping) else None
        offset = entry.get("offset") if isinstance(entry, Mapping) else None
        if not isinstance(partition, Mapping):
            raise _bad_request("The partition for a sink connector offset cannot be null or missing")
        if KAFKA_TOPIC_KEY not in partition or KAFKA_PARTITION_KEY not in partition:
            raise _bad_request(f"The partition for a sink connector offset must contain the keys "
                               f"'{KAFKA_TOPIC_KEY}' and '{KAFKA_PARTITION_KEY}'")
        topic = partition[KAFKA_TOPIC_KEY]
        if not isinstance(topic, str):
            raise _bad_request("Kafka topic names must be valid strings and may not be null")
        number = _integer(partition[KAFKA_PARTITION_KEY], "partition",
                          "Kafka partitions must be valid numbers and may not be null")
        tp = ApiTopicPartition(topic, number)
        if offset is None:
            out[tp] = None
            continue
        if not isinstance(offset, Mapping) or KAFKA_OFFSET_KEY not in offset:
            raise _bad_request(f"The offset for a sink connector should either be null or contain the key "
                               f"'{KAFKA_OFFSET_KEY}'")
        out[tp] = _integer(offset[KAFKA_OFFSET_KEY], "offset", "Kafka offsets must be valid numbers and may not be null")
    return out


def parse_source_offsets(entries: list[Any]) -> SourceOffsets:
    """``[(source partition, source offset or None)]`` from a source ``PATCH`` body's entries.

    Raises:
        OperationError: 400 for a missing partition or a partition or offset that is not an object.
    """
    out: SourceOffsets = []
    for entry in entries:
        partition = entry.get("partition") if isinstance(entry, Mapping) else None
        offset = entry.get("offset") if isinstance(entry, Mapping) else None
        if not isinstance(partition, Mapping):
            raise _bad_request("Source partitions may not be null")
        if offset is not None and not isinstance(offset, Mapping):
            raise _bad_request("Source offsets must be JSON objects or null")
        out.append((dict(partition), None if offset is None else dict(offset)))
    return out


# ---------------------------------------------------------------------------------- list


def list_sink_offsets(kafka: KafkaProperties, connector: str) -> list[dict[str, Any]]:
    """The committed offsets of the consumer group ``connect-<connector>``, by topic and partition.

    Asked through a consumer of the group that never subscribes, so it never joins: an
    OffsetFetch for every partition of every topic but the internal (``__``) ones. The admin
    client's ``list_consumer_group_offsets`` is not used: on a group the broker has not seen
    yet it can crash the process (SIGSEGV on NOT_COORDINATOR, librdkafka issue 5040).

    Raises:
        KafkaException: the broker did not answer within ``TIMEOUT_S`` seconds (the
            coordinator still loading is retried until then).
    """
    consumer = Consumer(client_config(kafka, {"group.id": sink_group(connector), "enable.auto.commit": False}))
    try:
        topics = consumer.list_topics(timeout=TIMEOUT_S).topics
        partitions = [TopicPartition(topic, number) for topic, meta in sorted(topics.items())
                      if not topic.startswith("__") for number in sorted(meta.partitions)]
        answered = _committed(consumer, partitions) if partitions else []
    finally:
        consumer.close()
    committed = sorted((tp.topic, tp.partition, tp.offset) for tp in answered if tp.offset >= 0)
    return [{"partition": {KAFKA_TOPIC_KEY: topic, KAFKA_PARTITION_KEY: partition},
             "offset": {KAFKA_OFFSET_KEY: offset}} for topic, partition, offset in committed]


def _coordinator_loading(exc: BaseException) -> bool:
    return isinstance(exc, KafkaException) and exc.args[0].code() in _COORDINATOR_NOT_READY


def _committed(consumer: Consumer, partitions: list[TopicPartition]) -> list[TopicPartition]:
    retrying = Retrying(retry=retry_if_exception(_coordinator_loading), stop=stop_after_delay(TIMEOUT_S),
                        wait=wait_exponential(multiplier=0.1, max=2.0), reraise=True)
    return retrying(consumer.committed, partitions, timeout=TIMEOUT_S)


def list_source_offsets(kafka: KafkaProperties, connector: str, offsets_topic: str) -> list[dict[str, Any]]:
    """Every source partition of ``connector`` with an offset in ``offsets_topic``."""
    stored = read_offsets(kafka, offsets_topic, connector, TIMEOUT_S)
    return [{"partition": decode_partition_id(pid), "offset": offset} for pid, offset in sorted(stored.items())]


# ---------------------------------------------------------------------------------- alter


def _hook(cls: type[Connector], config: Mapping[str, Any], offsets: Any) -> bool:
    try:
        return bool(cls().alter_offsets(dict(config), offsets))
    except NotImplementedError as exc:
        raise OperationError(HTTPStatus.INTERNAL_SERVER_ERROR,
                             f"Failed to modify offsets for connector {config.get('name')} because it doesn't "
                             f"support external modification of offsets: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - whatever the connector raises refuses the change
        raise OperationError(HTTPStatus.INTERNAL_SERVER_ERROR,
                             f"Failed to modify offsets for connector {config.get('name')} because the connector "
                             f"refused the change: {exc}") from None


def _message(connector_managed: bool, reset: bool) -> str:
    if connector_managed:
        return RESET if reset else ALTERED
    return _FRAMEWORK_ONLY.format(done="reset" if reset else "altered")


def alter_sink_offsets(kafka: KafkaProperties, cls: type[Connector], config: Mapping[str, Any],
                       offsets: SinkOffsets) -> str:
    """Write ``offsets`` to the group ``connect-<name>``: a number is committed, ``None`` removes
    that partition's committed offset. Returns Connect's success message.

    Raises:
        OperationError: 500 when the connector's hook raised or Kafka refused (a group with
            members: a task still running).
    """
    name = str(config["name"])
    managed = _hook(cls, config, offsets)
    admin = AdminClient(client_config(kafka))
    group = sink_group(name)
    commits = {tp: offset for tp, offset in offsets.items() if offset is not None}
    try:
        if len(commits) < len(offsets):
            kept = {(e["partition"][KAFKA_TOPIC_KEY], e["partition"][KAFKA_PARTITION_KEY]): e["offset"][KAFKA_OFFSET_KEY]
                    for e in list_sink_offsets(kafka, name)}
            removed = {(tp.topic, tp.partition) for tp, offset in offsets.items() if offset is None}
            # librdkafka has no OffsetDelete: drop the group, then commit what stays.
            delete_sink_offsets(kafka, name, timeout_s=TIMEOUT_S)  # OffsetsDeletionError: a member left
            commits = {ApiTopicPartition(t, p): o for (t, p), o in kept.items() if (t, p) not in removed} | commits
        if commits:
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(tp.topic, tp.partition, offset)
                                                           for tp, offset in sorted(commits.items())])
            admin.alter_consumer_group_offsets([request], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    except KafkaException as exc:
        raise OperationError(HTTPStatus.INTERNAL_SERVER_ERROR,
                             f"Failed to alter consumer group offsets for connector {name}: {exc.args[0].str()}") from None
    except OffsetsDeletionError as exc:
        raise OperationError(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc)) from None
    log.info("connector %s: offsets of %d partition(s) altered in group %s", name, len(offsets), group)
    return _message(managed, reset=False)


def alter_source_offsets(kafka: KafkaProperties, cls: type[Connector], config: Mapping[str, Any], namespace: str,
                         offsets: SourceOffsets) -> str:
    """Write ``offsets`` to the connector's offsets topic (a tombstone for ``None``), in a
    fenced transaction for an exactly-once connector. Returns Connect's success message.

    Raises:
        OperationError: 500 when the connector's hook raised or writing failed.
    """
    name = str(config["name"])
    managed = _hook(cls, config, offsets)
    updates = {offset_key(name, partition): offset_value(offset) for partition, offset in offsets}
    try:
        write_source_offsets(kafka, name, namespace, config, updates, TIMEOUT_S)
    except OffsetsDeletionError as exc:
        raise OperationError(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc)) from None
    log.info("connector %s: offsets of %d source partition(s) altered", name, len(offsets))
    return _message(managed, reset=False)


def reset_offsets(kafka: KafkaProperties, cls: type[Connector], config: Mapping[str, Any], namespace: str) -> str:
    """Remove every offset of the connector (the group, or tombstones in the offsets topic)
    after the connector's hook agreed to a reset of all of them. Returns Connect's message."""
    name = str(config["name"])
    if issubclass(cls, SinkConnector):
        current: Any = {ApiTopicPartition(e["partition"][KAFKA_TOPIC_KEY], e["partition"][KAFKA_PARTITION_KEY]): None
                        for e in list_sink_offsets(kafka, name)}
        connector_type = "sink"
    else:
        topic = parse_source_settings(config).offsets_storage_topic
        current = [(e["partition"], None) for e in list_source_offsets(kafka, name, topic)]
        connector_type = "source"
    managed = _hook(cls, config, current)
    try:
        delete_offsets(kafka, name, connector_type, namespace, config, timeout_s=TIMEOUT_S)
    except OffsetsDeletionError as exc:
        raise OperationError(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc)) from None
    return _message(managed, reset=True)
