"""The Kafka messages behind the rows a task was given on the batch path, kept so that a row
the task reports (``ErrantRecordReporter.report``) reaches the dead-letter queue with its
original key, value and headers, as a record of the record path does (whose
``InternalSinkRecord`` holds its message). Runs on the task's thread.

Only the most recent messages are kept, up to :data:`HELD_MESSAGES_MAX` messages and
:data:`HELD_BYTES_MAX` bytes of keys and values: a task reports a row while it still holds it,
and a task holds a bounded buffer (the PostgreSQL sink: ``batch.size`` records). A row reported
after its message was let go is reported without its bytes, as a record the task made itself.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence

from confluent_kafka import Message

HELD_MESSAGES_MAX = 100_000
"""At most this many messages are kept."""
HELD_BYTES_MAX = 64 << 20
"""At most this many bytes of keys and values (64 MiB) are kept."""

log = logging.getLogger(__name__)


class HeldMessages:
    """The last messages handed to a task in batches, found again by their coordinates."""

    def __init__(self, max_messages: int = HELD_MESSAGES_MAX, max_bytes: int = HELD_BYTES_MAX) -> None:
        self._max_messages, self._max_bytes = max_messages, max_bytes
        # (messages, their key and value bytes, index by (topic, partition, offset) made on first lookup)
        self._held: deque[tuple[Sequence[Message], int, dict[tuple[str, int, int], Message] | None]] = deque()
        self._messages = self._bytes = 0

    def hold(self, msgs: Sequence[Message]) -> None:
        """Keep ``msgs`` (one batch's), letting the oldest go beyond the limits."""
        size = sum(map(len, filter(None, map(Message.value, msgs)))) + sum(map(len, filter(None, map(Message.key,
                                                                                                     msgs))))
        self._held.append((msgs, size, None))
        self._messages += len(msgs)
        self._bytes += size
        while len(self._held) > 1 and (self._messages > self._max_messages or self._bytes > self._max_bytes):
            gone, gone_size, _ = self._held.popleft()
            self._messages -= len(gone)
            self._bytes -= gone_size

    def find(self, topic: str, partition: int, offset: int) -> Message | None:
        """The held message at these coordinates, the most recent if read twice; ``None``
        if it was let go or never held."""
        for i in range(len(self._held) - 1, -1, -1):
            msgs, size, index = self._held[i]
            if index is None:
                index = {(m.topic(), m.partition(), m.offset()): m for m in msgs}
                self._held[i] = (msgs, size, index)
            found = index.get((topic, partition, offset))
            if found is not None:
                return found
        log.debug("no message held for %s-%d@%d: reported without its bytes", topic, partition, offset)
        return None
