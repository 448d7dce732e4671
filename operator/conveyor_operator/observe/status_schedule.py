"""When the operator next asks a connector's driver for its status: every interval while it
answers, backing off while it does not (a driver starting, a closed port, a pod that cannot
run), at once after one of the connector's pods changed.

At a thousand Connectors a fixed clock was the operator's load: every driver polled every 10 s,
each poll of an unreachable driver a list of its pods and a status write (issue 33). Backing off
keeps a driver that never answers at one poll a minute; a pod event (the driver pod Ready, an
executor gone) brings the next poll forward, so a driver that comes up is seen on the next tick.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

Key = tuple[str, str]
"""(namespace, Connector name)."""


@dataclass
class _Entry:
    due: float = 0.0
    failures: int = 0


class StatusSchedule:
    """Per Connector, when its status is next due (``time.monotonic()`` seconds). Thread-safe:
    kopf's timer threads ask, its pod events hurry.

    Args:
        interval_s: between polls of a driver that answers (the operator's
            ``status_interval_seconds``).
        max_backoff_s: longest wait between polls of a driver that does not answer; the waits
            go ``interval_s``, then doubling, up to this.
    """

    def __init__(self, interval_s: float, max_backoff_s: float = 60.0) -> None:
        self.interval_s = interval_s
        self.max_backoff_s = max(max_backoff_s, interval_s)
        self._entries: dict[Key, _Entry] = {}
        self._lock = threading.Lock()

    def due(self, key: Key, now: float) -> bool:
        """True when ``key``'s status should be read now (never read yet, its wait over, or hurried)."""
        with self._lock:
            entry = self._entries.get(key)
            return entry is None or now >= entry.due

    def answered(self, key: Key, now: float) -> None:
        """The driver answered: next read after ``interval_s``."""
        with self._lock:
            self._entries[key] = _Entry(due=now + self.interval_s)

    def unreachable(self, key: Key, now: float) -> float:
        """The driver did not answer: wait longer each time in a row (``interval_s``, then doubling,
        at most ``max_backoff_s``). Returns the wait in seconds."""
        with self._lock:
            entry = self._entries.setdefault(key, _Entry())
            entry.failures += 1
            wait = min(self.max_backoff_s, self.interval_s * 2 ** min(entry.failures - 1, 16))
            entry.due = now + wait
            return wait

    def hurry(self, key: Key) -> None:
        """Something of the connector changed (a pod event): read its status at the next tick."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.due = 0.0

    def forget(self, key: Key) -> None:
        """The Connector is gone."""
        with self._lock:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
