"""What a RabbitMQ sink task has published and not yet committed: each record's message until
its partition's commit passes it (:class:`OutboundMessage`), and the messages of one partition in
``put`` order (:class:`PartitionOutbox`). Used on the task's runner thread only.
"""

from __future__ import annotations

from collections import OrderedDict

import pika

from conveyor.api import TopicPartition

PENDING, CONFIRMED, FAILED = 0, 1, 2
"""A message's state: published and not answered, confirmed, or nacked/returned (to resend)."""


class OutboundMessage:
    """One record's message, from publishing until its partition's commit passes it."""

    __slots__ = ("attempts", "body", "dropped", "offset", "props", "queue", "retry_at", "state", "tp")

    def __init__(self, tp: TopicPartition, offset: int, queue: str, body: bytes, props: pika.BasicProperties) -> None:
        self.tp = tp
        self.offset = offset
        self.queue = queue
        self.body = body
        self.props = props
        self.state = PENDING
        self.attempts = 0
        self.retry_at = 0.0
        self.dropped = False  # forgotten: partition closed or its put() failed


class PartitionOutbox:
    """Messages of one partition in ``put`` order, from the earliest not yet confirmed."""

    __slots__ = ("entries", "floor", "pending")

    def __init__(self, floor: int) -> None:
        self.floor = floor  # offset of the first record put since the partition was opened
        self.entries: OrderedDict[int, OutboundMessage] = OrderedDict()
        self.pending = 0  # published, no answer yet

    def trim(self) -> None:
        entries = self.entries
        while entries:
            msg = next(iter(entries.values()))
            if msg.state != CONFIRMED and not msg.dropped:
                return
            entries.popitem(last=False)

    def first_unconfirmed(self) -> int | None:
        self.trim()
        return next(iter(self.entries)) if self.entries else None
