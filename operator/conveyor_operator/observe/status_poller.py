"""The operator's status reads, on threads of their own.

Each read of a driver's ``GET /status`` blocks a thread for up to the control API's timeout (a
driver pod that stopped answering holds it the whole time). Run on kopf's handler threads, as the
per-Connector timers did, a thousand Connectors' reads queued the creates, updates and deletes
behind them (issue 33). :class:`StatusPoller` takes the reads that are due from a
:class:`~conveyor_operator.observe.status_schedule.StatusSchedule` and runs at most ``workers`` of
them at once on its own pool, so reconciling never waits for a driver, and a read is made when it
is due, not at the next tick of a timer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from conveyor_operator.observe.status_schedule import Key, StatusSchedule

log = logging.getLogger("conveyor_operator")

RESYNC_SECONDS = 30.0
"""Between two resyncs of the schedule with the operator's index (:class:`StatusPoller`)."""


class StatusPoller:
    """Calls ``read(key)`` for each key when ``schedule`` says it is due.

    ``read`` runs on one of ``workers`` threads; it reports its outcome through
    ``schedule.answered`` / ``schedule.unreachable`` (else the next read is an interval later).
    An exception it raises is logged and the key read again an interval later.

    Every ``resync_s`` seconds the schedule is made to hold exactly ``keys()`` (the Connectors
    in the operator's index; :meth:`StatusSchedule.sync`), as a controller's informer resyncs: a
    Connector the event-driven tracking missed is read again within that time (logged at
    WARNING: it is a bug to report), one gone is dropped.

    Args:
        schedule: what is due when.
        read: one Connector's status read and write.
        workers: reads at once (threads).
        keys: the keys to read, from the index (``None``: no resync).
        resync_s: seconds between resyncs.
    """

    def __init__(self, schedule: StatusSchedule, read: Callable[[Key], None], workers: int,
                 keys: Callable[[], Iterable[Key]] | None = None, resync_s: float = RESYNC_SECONDS) -> None:
        self.schedule = schedule
        self.read = read
        self.workers = workers
        self.keys = keys
        self.resync_s = resync_s
        self._next_resync = time.monotonic() + resync_s
        self._slots = threading.BoundedSemaphore(workers)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="status-read")
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="status-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Take no more reads, and wait up to ``timeout_s`` seconds for those under way."""
        self._stopping.set()
        self.schedule.wake()
        self._thread.join(timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _resync(self) -> None:
        if self.keys is None or time.monotonic() < self._next_resync:
            return
        self._next_resync = time.monotonic() + self.resync_s
        try:
            tracked, forgotten = self.schedule.sync(self.keys())
        except RuntimeError:  # the index changed size while its keys were copied: next time
            return
        if tracked:
            log.warning("status reads: %d Connector(s) of the index were not tracked; reading them now", tracked)
        if forgotten:
            log.debug("status reads: %d Connector(s) no longer in the index forgotten", forgotten)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._resync()
            if not self._slots.acquire(timeout=1.0):
                continue
            key = self.schedule.take(timeout_s=1.0)
            if key is None or self._stopping.is_set():
                if key is not None:
                    self.schedule.finish(key, self.schedule.clock())
                self._slots.release()
                continue
            try:
                self._pool.submit(self._run, key)
            except RuntimeError:  # the pool shut down under us: stopping
                self.schedule.finish(key, self.schedule.clock())
                self._slots.release()
                return

    def _run(self, key: Key) -> None:
        try:
            self.read(key)
        except Exception:  # noqa: BLE001 - one Connector's failure must not end the others' reads
            log.exception("status of connector %s/%s not read", *key)
        finally:
            self.schedule.finish(key, self.schedule.clock())
            self._slots.release()
