"""Zombie fencing for exactly-once source tasks (KIP-618 §"Zombie fencing").

Each source task of a connector produces through the transactional id
``conveyor-<namespace>-<connector>-<task>``. A compacted config topic holds one
*task-count record* per connector (key ``tasks-fencing-<connector>``, value
``{"task-count": N, "generation": G}``). Before a new generation of tasks starts, the
driver:

1. reads the latest task-count record (the previous generation's ``N``);
2. fences every transactional id ``0..N-1`` of that generation: initialising a producer
   with an id aborts its open transaction and bumps its epoch, so a zombie task can no
   longer commit;
3. writes the new task-count record with its own per-connector transactional producer
   (``conveyor-<namespace>-<connector>-leader``), so a stale driver, whose leader
   producer the new driver's initialisation fenced, can no longer write one.

A task that, after initialising its producer, finds a newer generation than its own
aborts its start (it is a zombie).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from conveyor.runtime.kafka.clients import KafkaProperties, client_config
from conveyor.runtime.kafka.topics import ensure_topic, scan_topic

log = logging.getLogger(__name__)

TASK_COUNT_PREFIX = "tasks-fencing-"


def transactional_id(namespace: str, connector: str, task_id: int) -> str:
    """The transactional id of one source task."""
    return f"conveyor-{namespace}-{connector}-{task_id}"


def leader_transactional_id(namespace: str, connector: str) -> str:
    """The transactional id of the driver's producer of task-count records."""
    return f"conveyor-{namespace}-{connector}-leader"


@dataclass(frozen=True)
class TaskCount:
    """A task-count record: the generation's number of tasks and its generation number."""

    task_count: int
    generation: int


def ensure_config_topic(admin: AdminClient, topic: str) -> None:
    """Create the compacted, single-partition config topic unless it exists."""
    ensure_topic(admin, topic, 1, 3, {"cleanup.policy": "compact"})


def read_task_count(kafka: KafkaProperties, topic: str, connector: str, timeout_s: float = 30.0) -> TaskCount | None:
    """The latest committed task-count record of ``connector``, or ``None`` (none, or a
    tombstone after the connector's offsets were deleted).

    Args:
        kafka: base Kafka client properties (see :mod:`conveyor.runtime.kafka.clients`).

    Raises:
        KafkaException: the topic cannot be read.
        TimeoutError: its end was not reached within ``timeout_s``.
    """
    key = (TASK_COUNT_PREFIX + connector).encode()
    latest: TaskCount | None = None
    for msg in scan_topic(kafka, topic, f"conveyor-config-reader-{connector}", timeout_s):
        if msg.key() != key:
            continue
        if msg.value() is None:
            latest = None
            continue
        try:
            data = json.loads(msg.value())
            latest = TaskCount(int(data["task-count"]), int(data.get("generation", 0)))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping malformed task-count record at offset %d: %s", msg.offset(), exc)
    return latest


def fence(kafka: KafkaProperties, transactional_ids: list[str], timeout_s: float = 60.0) -> None:
    """Fence every id: initialise a producer with it (aborting its open transaction and
    bumping its epoch), then close it.

    Raises:
        KafkaException: an id could not be fenced (the generation must not start).
    """
    for tid in transactional_ids:
        producer = Producer(client_config(kafka, {"transactional.id": tid}))
        producer.init_transactions(timeout_s)
        producer.flush(timeout_s)
        log.info("fenced transactional id %s", tid)


class TaskCountWriter:
    """The driver's per-connector transactional producer of task-count records.

    Initialising it fences any older driver's writer of the same connector.
    """

    def __init__(self, kafka: KafkaProperties, topic: str, namespace: str, connector: str,
                 timeout_s: float = 60.0) -> None:
        self._topic = topic
        self._connector = connector
        self._timeout_s = timeout_s
        self._producer = Producer(client_config(kafka, {
            "transactional.id": leader_transactional_id(namespace, connector),
        }))
        self._producer.init_transactions(timeout_s)

    @property
    def producer(self) -> Producer:
        """The transactional producer (for other writes the leader makes in a transaction)."""
        return self._producer

    def write(self, count: TaskCount) -> None:
        """Write ``count`` in a transaction.

        Raises:
            KafkaException: e.g. this driver was fenced by a newer one.
        """
        value: dict[str, Any] = {"task-count": count.task_count, "generation": count.generation}
        self._producer.begin_transaction()
        self._producer.produce(self._topic, key=(TASK_COUNT_PREFIX + self._connector).encode(),
                               value=json.dumps(value, separators=(",", ":")).encode())
        self._producer.commit_transaction(self._timeout_s)


def start_generation(kafka: KafkaProperties, topic: str, namespace: str, connector: str, task_count: int,
                     writer: TaskCountWriter) -> TaskCount:
    """Fence the previous generation and record the new one; returns the new record.

    Raises:
        KafkaException: fencing or writing failed; no task of the new generation may start.
    """
    previous = read_task_count(kafka, topic, connector)
    if previous is not None:
        fence(kafka, [transactional_id(namespace, connector, i) for i in range(previous.task_count)])
    current = TaskCount(task_count, (previous.generation if previous else 0) + 1)
    writer.write(current)
    log.info("connector %s: generation %d with %d task(s); fenced %d id(s) of the previous one", connector,
             current.generation, task_count, previous.task_count if previous else 0)
    return current
