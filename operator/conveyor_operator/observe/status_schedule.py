"""When the operator next asks a connector's driver for its status: every interval while it
answers, backing off while it does not (a driver starting, a closed port, a pod that cannot
run), at once after one of the connector's pods changed.

At a thousand Connectors a fixed clock was the operator's load: every driver polled every 10 s
by a kopf timer per Connector on the handlers' threads, each poll of an unreachable driver a list
of its pods and a status write (issue 33). Backing off keeps a driver that never answers at one
poll a minute; a pod event (the driver pod Ready, an executor gone) brings the next poll forward,
so a driver that comes up is seen at once. :class:`StatusSchedule` is also the queue that
:class:`conveyor_operator.observe.status_poller.StatusPoller` takes due reads from.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Key = tuple[str, str]
"""(namespace, Connector name)."""


@dataclass
class _Entry:
    due: float = 0.0
    failures: int = 0
    reading: bool = False
    hurried: bool = False
    """Hurried while its read was under way: due again as soon as that read ends."""
    unlisted: bool = False
    """Not among the keys of the last :meth:`StatusSchedule.sync`."""


class StatusSchedule:
    """Per Connector, when its status is next due (``time.monotonic()`` seconds). Thread-safe:
    the poller's threads take and report reads, kopf's event handlers track and hurry.

    Args:
        interval_s: between reads of a driver that answers (the operator's
            ``status_interval_seconds``).
        max_backoff_s: longest wait between reads of a driver that does not answer; the waits
            go ``interval_s``, then doubling, up to this.
        clock: what :meth:`take` reads the time from (the ``now`` the other methods take).
    """

    def __init__(self, interval_s: float, max_backoff_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.interval_s = interval_s
        self.max_backoff_s = max(max_backoff_s, interval_s)
        self._entries: dict[Key, _Entry] = {}
        self._heap: list[tuple[float, int, Key]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()

    def track(self, key: Key) -> None:
        """A Connector whose status is to be read: due at once the first time, unchanged after."""
        with self._changed:
            if key not in self._entries:
                self._entries[key] = _Entry()
                self._push(key, 0.0)

    def answered(self, key: Key, now: float) -> None:
        """The driver answered: next read after ``interval_s``. A key not tracked (forgotten during
        its read) stays untracked."""
        with self._changed:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry.failures = 0
            self._set_due(key, entry, now + self.interval_s)

    def unreachable(self, key: Key, now: float) -> float:
        """The driver did not answer: wait longer each time in a row (``interval_s``, then doubling,
        at most ``max_backoff_s``). Returns the wait in seconds (0 for a key not tracked, which
        stays untracked)."""
        with self._changed:
            entry = self._entries.get(key)
            if entry is None:
                return 0.0
            entry.failures += 1
            wait = min(self.max_backoff_s, self.interval_s * 2 ** min(entry.failures - 1, 16))
            self._set_due(key, entry, now + wait)
            return wait

    def hurry(self, key: Key) -> None:
        """Something of the connector changed (a pod event, its driver's word): read its status
        now, or again right after the read under way. A key not tracked is left alone."""
        with self._changed:
            entry = self._entries.get(key)
            if entry is None:
                return
            if entry.reading:
                entry.hurried = True
            else:
                self._set_due(key, entry, 0.0)

    def sync(self, keys: Iterable[Key]) -> tuple[int, int]:
        """Make the tracked keys exactly ``keys`` (the Connectors the operator's index holds, to be
        read): a key missing is tracked, due at once; a key no longer there is forgotten. The
        index functions track and forget as events come; this catches what they cannot: kopf
        stores an index function's value only after it returns, so a read can come first and
        find nothing, and a DELETED event empties the index without calling the function. A key
        is forgotten when two syncs in a row did not list it: the first may have copied the index
        between an index function's track and kopf storing its value.
        Returns (tracked, forgotten)."""
        wanted = set(keys)
        with self._changed:
            gone = []
            for key, entry in self._entries.items():
                if key in wanted:
                    entry.unlisted = False
                elif entry.unlisted:
                    gone.append(key)
                else:
                    entry.unlisted = True
            for key in gone:
                del self._entries[key]
            new = [key for key in wanted if key not in self._entries]
            for key in new:
                self.track(key)  # the condition's lock is reentrant
            return len(new), len(gone)

    def forget(self, key: Key) -> None:
        """The Connector is gone (or being deleted): no more reads."""
        with self._changed:
            self._entries.pop(key, None)

    def take(self, timeout_s: float) -> Key | None:
        """The next key that is due, waiting up to ``timeout_s`` seconds for one; ``None`` when
        none came due. The key counts as being read until :meth:`finish`."""
        now = self.clock()
        deadline = now + timeout_s
        with self._changed:
            while True:
                while self._heap and not self._valid(self._heap[0]):
                    heapq.heappop(self._heap)
                if self._heap and self._heap[0][0] <= now:
                    _due, _, key = heapq.heappop(self._heap)
                    entry = self._entries[key]
                    entry.reading, entry.due = True, math.inf
                    return key
                wait = deadline - now if not self._heap else min(deadline, self._heap[0][0]) - now
                if wait <= 0:
                    return None
                self._changed.wait(wait)
                now = self.clock()

    def finish(self, key: Key, now: float) -> None:
        """The read of ``key`` that :meth:`take` gave is over: it is due when :meth:`answered` or
        :meth:`unreachable` said during the read, else after ``interval_s`` (a read that had
        nothing to ask), or at once when it was hurried meanwhile."""
        with self._changed:
            entry = self._entries.get(key)
            if entry is None or not entry.reading:
                return
            entry.reading = False
            due = 0.0 if entry.hurried else (now + self.interval_s if entry.due == math.inf else entry.due)
            entry.hurried = False
            self._set_due(key, entry, due)

    def wake(self) -> None:
        """Let a :meth:`take` waiting look again (the poller stops)."""
        with self._changed:
            self._changed.notify_all()

    def __len__(self) -> int:
        with self._changed:
            return len(self._entries)

    def _set_due(self, key: Key, entry: _Entry, due: float) -> None:
        entry.due = due
        if not entry.reading:
            self._push(key, due)

    def _push(self, key: Key, due: float) -> None:
        heapq.heappush(self._heap, (due, next(self._order), key))
        self._changed.notify_all()

    def _valid(self, item: tuple[float, int, Key]) -> bool:
        entry = self._entries.get(item[2])
        return entry is not None and not entry.reading and entry.due == item[0]
