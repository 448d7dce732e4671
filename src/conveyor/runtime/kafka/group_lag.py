"""Lag of a sink connector's consumer group over every partition of its topics, held by a
task or not (issue 11 §4).

Tasks report the lag of the partitions they hold. A partition no task holds (while the group
rebalances, or while a dead member's session has not expired yet) has no task to report it,
and the connector looked caught up while records waited. :class:`GroupLag` asks the
brokers, every ``interval_s`` on a thread of its own, for each partition of the subscribed
topics (``topics``, or ``topics.regex`` matched as the consumer does) the log end offset
and the group's committed offset: the lag is their difference, or the whole log (end less
start) when the group has committed nothing there (``auto.offset.reset=earliest``, the
runtime's default). It asks through a consumer of the group that never subscribes, so it
never joins the group.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Collection, Sequence

from confluent_kafka import Consumer, KafkaException, TopicPartition

from conveyor.control.protocol import tp_key
from conveyor.runtime.kafka.clients import KafkaProperties, client_config

log = logging.getLogger(__name__)
REQUEST_TIMEOUT_S = 10.0


class GroupLag:
    """The group's lag per partition, refreshed every ``interval_s`` seconds.

    Args:
        kafka: the connector's base Kafka client properties.
        group: the sink connector's consumer group (``connect-<name>``).
        subscription: topic names, or one ``^regex`` (``SinkSettings.subscription``).
        interval_s: seconds between two refreshes.
    """

    def __init__(self, kafka: KafkaProperties, group: str, subscription: Sequence[str],
                 interval_s: float = 5.0) -> None:
        self.group = group
        self._subscription = list(subscription)
        self._interval_s = interval_s
        # A consumer that never subscribes: it reads the group's commits without joining it.
        # (AdminClient's ListOffsets crashed librdkafka 2.16's main thread here, at random.)
        self._consumer = Consumer(client_config(kafka, {"group.id": group, "client.id": f"{group}-lag",
                                                        "enable.auto.commit": False}))
        # (lag per partition, sum of the log end offsets) of the last refresh: one attribute, so
        # a reader on another thread never pairs one refresh's lag with another's log end.
        self._last: tuple[dict[str, int], int | None] = ({}, None)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="group-lag", daemon=True)

    def start(self) -> GroupLag:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop refreshing; the consumer is closed by the refresh thread (it may be using it)."""
        self._closed.set()

    def unassigned(self, assigned: Collection[str]) -> dict[str, int]:
        """``{"topic:partition": records behind}`` of the partitions not in ``assigned``
        (``"topic:partition"`` keys), as of the last refresh; empty before the first."""
        return {key: lag for key, lag in self._last[0].items() if key not in assigned}

    def totals(self) -> dict[str, int] | None:
        """As of the last refresh, ``{"partitions": n, "lag": records behind, "log_end": sum of
        the log end offsets}`` over every partition of the subscription (the log end grows by
        the records produced); ``None`` before the first."""
        lag, log_end = self._last
        if log_end is None:
            return None
        return {"partitions": len(lag), "lag": sum(lag.values()), "log_end": log_end}

    def _run(self) -> None:
        try:
            while not self._closed.is_set():
                try:
                    self.refresh()
                except KafkaException as exc:
                    log.debug("group %s: lag not refreshed: %s", self.group, exc)
                self._closed.wait(self._interval_s)
        finally:
            self._consumer.close()

    def refresh(self) -> dict[str, int]:
        """Ask the brokers now; returns ``{"topic:partition": records behind}`` and keeps it with the
        log end offsets' sum for :meth:`unassigned` and :meth:`totals`.

        Raises:
            confluent_kafka.KafkaException: the brokers did not answer within 10 s a request.
        """
        partitions = self._partitions()
        if not partitions:
            self._last = ({}, 0)
            return {}
        committed = {(tp.topic, tp.partition): tp.offset
                     for tp in self._consumer.committed(partitions, timeout=REQUEST_TIMEOUT_S)}
        lag = {}
        log_end = 0
        for tp in partitions:
            start, end = self._consumer.get_watermark_offsets(tp, timeout=REQUEST_TIMEOUT_S)
            position = committed.get((tp.topic, tp.partition), -1)
            lag[tp_key(tp.topic, tp.partition)] = max(0, end - (position if position >= 0 else start))
            log_end += end
        self._last = (lag, log_end)
        return lag

    def _partitions(self) -> list[TopicPartition]:
        topics = self._consumer.list_topics(timeout=REQUEST_TIMEOUT_S).topics
        if len(self._subscription) == 1 and self._subscription[0].startswith("^"):
            pattern = re.compile(self._subscription[0])
            names = [t for t in topics if pattern.search(t) and not t.startswith("__")]
        else:
            names = [t for t in self._subscription if t in topics]
        return [TopicPartition(t, p) for t in sorted(names) for p in sorted(topics[t].partitions)]
