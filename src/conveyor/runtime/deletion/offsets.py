"""Deleting a connector's offsets (``spec.deletionPolicy.offsets: delete``), as Kafka
Connect's ``DELETE /connectors/<name>/offsets`` (KIP-875) does, so that a connector
re-created with the same name starts from scratch.

* **Sink**: the consumer group ``connect-<name>`` is deleted (``DeleteGroups``). The
  broker refuses while the group has members; the tasks' consumers leave it when they
  close, so the deletion is retried on ``NON_EMPTY_GROUP`` (and coordinator errors) until
  ``timeout_s`` passes. A group that does not exist counts as deleted.
* **Source**: every key of the connector in the offsets topic (Kafka Connect's
  ``["<name>", {partition}]``, in every byte spelling found) whose latest value is not
  already a tombstone gets a tombstone (``null`` value) in the topic partition it was found
  in; so does the connector's task-count record in the config topic, if there is one.
  When the connector has exactly-once tasks (or had: a task-count record exists), the
  task ids of the last generation are fenced first and the tombstones are written in one
  transaction of the connector's leader producer (KIP-618), so no zombie task can write
  an offset after them.

Must run only once the connector's tasks have stopped. Blocking; runs on the caller's
thread. Every failure raises :class:`OffsetsDeletionError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from conveyor.api import ConfigError
from conveyor.runtime.config.settings import parse_source_settings
from conveyor.runtime.kafka.clients import KafkaProperties, client_config
from conveyor.runtime.kafka.fencing import (
    TASK_COUNT_PREFIX,
    fence,
    leader_transactional_id,
    read_task_count,
    transactional_id,
)
from conveyor.runtime.kafka.offsets_topic import decode_key, live_offset_keys, partition_id

log = logging.getLogger(__name__)

_GROUP_RETRIABLE = (
    KafkaError.NON_EMPTY_GROUP,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
)


class OffsetsDeletionError(RuntimeError):
    """The offsets could not be (entirely) deleted; the message says which and why."""


def sink_group(connector: str) -> str:
    """The consumer group of a sink connector's tasks (Kafka Connect's ``connect-<name>``)."""
    return f"connect-{connector}"


def delete_sink_offsets(kafka: KafkaProperties, connector: str, timeout_s: float = 60.0,
                        retry_interval_s: float = 0.5) -> dict[str, Any]:
    """Delete the consumer group ``connect-<connector>`` and with it its committed offsets.

    Returns:
        ``{"consumer_group": "connect-<name>", "existed": bool}``.

    Raises:
        OffsetsDeletionError: the broker refused (e.g. the group still had members after
            ``timeout_s`` seconds: a task's consumer did not leave).
    """
    group = sink_group(connector)
    admin = AdminClient(client_config(kafka))
    deadline = time.monotonic() + timeout_s
    attempts = 0
    while True:
        attempts += 1
        remaining = max(1.0, deadline - time.monotonic())
        try:
            admin.delete_consumer_groups([group], request_timeout=min(30.0, remaining))[group].result()
            log.info("connector %s: deleted consumer group %s", connector, group)
            return {"consumer_group": group, "existed": True}
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                log.info("connector %s: consumer group %s does not exist: nothing to delete", connector, group)
                return {"consumer_group": group, "existed": False}
            if err.code() not in _GROUP_RETRIABLE or time.monotonic() + retry_interval_s > deadline:
                hint = " (a task's consumer is still a member)" if err.code() == KafkaError.NON_EMPTY_GROUP else ""
                raise OffsetsDeletionError(
                    f"could not delete consumer group {group} after {attempts} attempt(s): {err.str()}{hint}"
                ) from None
            log.info("connector %s: consumer group %s not deletable yet (%s), retrying", connector, group, err.name())
            time.sleep(retry_interval_s)


def delete_source_offsets(kafka: KafkaProperties, connector: str, namespace: str, config: Mapping[str, Any],
                          timeout_s: float = 60.0) -> dict[str, Any]:
    """Tombstone every offset of source connector ``connector`` in its offsets topic
    (``offsets.storage.topic``) and its task-count record in ``config.storage.topic``.

    Args:
        kafka: base Kafka client properties.
        namespace: the connector's namespace (part of its transactional ids).
        config: the connector's ``spec.config`` (for the topic names and exactly-once).

    Returns:
        ``{"offsets_topic": str, "source_partitions": int, "tombstones": int,
        "task_count_record": bool}``: ``source_partitions`` distinct source partitions
        had offsets; ``tombstones`` keys were written (one per byte spelling of a key).

    Raises:
        OffsetsDeletionError: reading the topics, fencing or writing failed.
    """
    return write_source_offsets(kafka, connector, namespace, config, None, timeout_s)


def write_source_offsets(kafka: KafkaProperties, connector: str, namespace: str, config: Mapping[str, Any],
                         updates: Mapping[bytes, bytes | None] | None, timeout_s: float = 60.0) -> dict[str, Any]:
    """Write source offsets of ``connector`` to its offsets topic, as its tasks would.

    ``updates`` maps offsets-topic keys (:func:`~conveyor.runtime.kafka.offsets_topic.offset_key`)
    to values (``None``: a tombstone); every other live spelling of an updated source partition
    is tombstoned. ``updates=None`` tombstones every offset of the connector and its
    task-count record (:func:`delete_source_offsets`). When the connector has exactly-once
    tasks (or had: a task-count record exists), the task ids of its last generation are fenced
    first and everything is written in one transaction of its leader producer (KIP-618).

    Raises:
        OffsetsDeletionError: reading the topics, fencing or writing failed.
    """

    try:
        settings = parse_source_settings(config)
    except ConfigError as exc:
        raise OffsetsDeletionError(f"cannot write the source offsets of {connector}: {exc}") from None
    offsets_topic, config_topic = settings.offsets_storage_topic, settings.config_storage_topic
    try:
        live = live_offset_keys(kafka, offsets_topic, connector, timeout_s)
        task_count = read_task_count(kafka, config_topic, connector, timeout_s)
        transactional = settings.exactly_once or task_count is not None
        if task_count is not None:
            fence(kafka, [transactional_id(namespace, connector, i) for i in range(task_count.task_count)], timeout_s)
        if updates is None:
            writes: list[_Write] = [(offsets_topic, key, part, None) for key, (part, _) in live.items()]
            if task_count is not None:
                writes.append((config_topic, (TASK_COUNT_PREFIX + connector).encode(), None, None))
        else:
            touched = {partition_id(decode_key(key)[1]) for key in updates}
            writes = [(offsets_topic, key, part, None) for key, (part, pid) in live.items()
                      if pid in touched and key not in updates]
            writes += [(offsets_topic, key, None, value) for key, value in updates.items()]
        if writes:
            if transactional:
                _write_in_transaction(kafka, leader_transactional_id(namespace, connector), writes, timeout_s)
            else:
                _write(kafka, writes, timeout_s)
    except KafkaException as exc:
        raise OffsetsDeletionError(
            f"could not write the source offsets of {connector} in {offsets_topic}: {exc.args[0].str()}"
        ) from None
    except TimeoutError as exc:
        raise OffsetsDeletionError(f"could not write the source offsets of {connector}: {exc}") from None
    partitions = len({pid for _, pid in live.values()})
    if updates is None:
        log.info("connector %s: tombstoned %d offset key(s) of %d source partition(s) in %s%s", connector, len(live),
                 partitions, offsets_topic, " and its task-count record" if task_count is not None else "")
    return {"offsets_topic": offsets_topic, "source_partitions": partitions, "tombstones": len(live),
            "task_count_record": task_count is not None}


#: (topic, key, topic partition or None for the key's murmur2 partition, value or None for a tombstone)
_Write = tuple[str, bytes, "int | None", "bytes | None"]


def _produce_all(producer: Producer, writes: list[_Write], on_delivery: Any = None) -> None:
    for topic, key, partition, value in writes:
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if partition is not None:
            kwargs["partition"] = partition
        if on_delivery is not None:
            kwargs["on_delivery"] = on_delivery
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)


# Keys without a partition go where Kafka Connect's Java producer puts them (murmur2).
_PRODUCER = {"partitioner": "murmur2_random"}


def _write(kafka: KafkaProperties, writes: list[_Write], timeout_s: float) -> None:
    producer = Producer(client_config(kafka, {**_PRODUCER, "enable.idempotence": True, "linger.ms": 5}))
    errors: list[KafkaError] = []
    _produce_all(producer, writes, lambda err, _msg: errors.append(err) if err is not None else None)
    left = producer.flush(timeout_s)
    if errors:
        raise KafkaException(errors[0])
    if left:
        raise TimeoutError(f"{left} offsets record(s) not acknowledged within {timeout_s:.0f}s")


def _write_in_transaction(kafka: KafkaProperties, tid: str, writes: list[_Write], timeout_s: float) -> None:
    producer = Producer(client_config(kafka, {**_PRODUCER, "transactional.id": tid}))
    producer.init_transactions(timeout_s)
    producer.begin_transaction()
    _produce_all(producer, writes)
    producer.commit_transaction(timeout_s)


def delete_offsets(kafka: KafkaProperties, connector: str, connector_type: str, namespace: str,
                   config: Mapping[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
    """:func:`delete_sink_offsets` or :func:`delete_source_offsets` by ``connector_type``
    (``"sink"`` / ``"source"``).

    Raises:
        OffsetsDeletionError: see those functions.
    """
    if connector_type == "sink":
        return delete_sink_offsets(kafka, connector, timeout_s)
    if connector_type == "source":
        return delete_source_offsets(kafka, connector, namespace, config, timeout_s)
    raise OffsetsDeletionError(f"connector {connector} is neither a sink nor a source: no offsets to delete")


def delete_offsets_reported(kafka: KafkaProperties, connector: str, connector_type: str, namespace: str,
                            config: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`delete_offsets` for a stop report: ``(what was deleted, None)`` or ``(None, why
    not)``; never raises (the failure is logged)."""
    try:
        return delete_offsets(kafka, connector, connector_type, namespace, config), None
    except OffsetsDeletionError as exc:
        log.error("connector %s: deleting offsets failed: %s", connector, exc)
        return None, str(exc)
    except Exception as exc:
        log.exception("connector %s: deleting offsets failed", connector)
        return None, f"{type(exc).__name__}: {exc}"
