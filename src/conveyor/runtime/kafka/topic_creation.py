"""Topics a source connector writes to, created on first use with the settings of their group
(:mod:`conveyor.runtime.config.topic_creation`, KIP-158, as Kafka Connect's ``TopicCreation``).
A topic that exists is left as it is."""

from __future__ import annotations

import logging
from typing import Any

from conveyor.runtime.config.topic_creation import TopicGroup
from conveyor.runtime.kafka.topics import ensure_topic

log = logging.getLogger(__name__)


class TopicCreator:
    """Creates, once per topic and task, a topic the task is about to write to (the task's
    runner thread calls :meth:`ensure` before producing to a topic it has not written to)."""

    def __init__(self, admin: Any, groups: list[TopicGroup]) -> None:
        self._admin = admin
        self._groups = groups
        self._known: set[str] = set()

    def ensure(self, topic: str) -> None:
        """Create ``topic`` with its group's settings unless it exists.

        Raises:
            KafkaException: the broker refused the creation.
        """
        if topic in self._known:
            return
        group = next(g for g in self._groups if g.matches(topic))
        log.debug("topic %s: topic.creation group %s (%d partition(s), replication factor %d)", topic, group.name,
                  group.partitions, group.replication_factor)
        ensure_topic(self._admin, topic, group.partitions, group.replication_factor, group.configs)
        self._known.add(topic)
