"""The driver's lifecycle: one state machine that every trigger goes through -- ``start``, the
control API (``POST /stop``, ``/drain``, ``/state``...), SIGTERM, the operator's calls.

::

    CREATED --start--> STARTING --connector up--> RUNNING
                          |  \\                       |
                          |   +--start failed--> STOPPED (nothing to stop)
                          +------------stop-------+--+--> STOPPING --stop done--> STOPPED

=====================  ==========================  ==========================================
trigger                from                        effect
=====================  ==========================  ==========================================
``begin_start``        CREATED                     STARTING; any other state: ``LifecycleError``
``cancel_start``       any (a signal handler)      the connector will not start; the caller
                                                   then calls ``Driver.stop``
``may_start_connector``STARTING                    True unless cancelled or a stop began
``started``            STARTING                    RUNNING (a stop that began stays STOPPING)
``start_failed``       STARTING                    STOPPED, with no stop report
``begin_stop``         CREATED/STARTING/RUNNING    STOPPING, True: the caller runs the stop path
                       STOPPING/STOPPED            False: the caller waits for ``STOPPED``
``finish_stop``        STOPPING                    STOPPED; ``stopped`` is set
``later_stop``         (after ``begin_stop`` False)  ends that later stop: ``wait_later_stops``
                                                   returns once none is left
=====================  ==========================  ==========================================

Who waits for what: a stop that arrives during start-up runs at once on whatever exists (the
driver's ``operations`` lock orders it against the connector's start), and the start, seeing the
stop began, does not start the connector. A second stop waits for ``STOPPED`` and then does
what it asks that the first did not (see ``Driver.stop``); the driver is not closed before it
is done (``wait_later_stops``), so a connector-deleted stop that arrives during a SIGTERM stop
runs its cleanup before the process exits. Operations other than stop answer 409 once
``stopping`` is true.

Thread-safety: transitions hold the driver's condition (the same one task runners' ``sync``
waits on, so a stop wakes them); ``cancel_start`` only sets a flag, so it is safe in a signal
handler.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Iterator


class Phase(str, enum.Enum):
    CREATED = "CREATED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"


class LifecycleError(RuntimeError):
    """A transition that the current phase does not allow (a second ``start``)."""


class Lifecycle:
    """The phase of one driver.

    Args:
        lock: the driver's condition; notified on every transition.
    """

    def __init__(self, lock: threading.Condition) -> None:
        self._lock = lock
        self._phase = Phase.CREATED
        self._start_cancelled = False
        self._later_stops = 0
        self.stopped = threading.Event()
        """Set once the phase is STOPPED (stop done, or the start failed)."""

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def stopping(self) -> bool:
        """A stop began (STOPPING or STOPPED)."""
        return self._phase in (Phase.STOPPING, Phase.STOPPED)

    def begin_start(self) -> None:
        """Raises:
            LifecycleError: the driver was started before, or stopped.
        """
        with self._lock:
            if self._phase is not Phase.CREATED:
                raise LifecycleError(f"cannot start a driver that is {self._phase.value}")
            self._phase = Phase.STARTING

    def cancel_start(self) -> None:
        self._start_cancelled = True

    def may_start_connector(self) -> bool:
        """Whether the start may go on to start the connector; call it under the lock that
        orders the start against a stop (the driver's ``operations``)."""
        return self._phase is Phase.STARTING and not self._start_cancelled

    def started(self) -> None:
        self._move(Phase.STARTING, Phase.RUNNING)

    def start_failed(self) -> None:
        if self._move(Phase.STARTING, Phase.STOPPED):
            self.stopped.set()

    def begin_stop(self) -> bool:
        """True when this call moved the phase to STOPPING (its caller runs the stop path);
        False when a stop had begun before: the caller is a later stop, and must end it
        within ``with lifecycle.later_stop():``."""
        with self._lock:
            if self.stopping:
                self._later_stops += 1
                return False
            self._phase = Phase.STOPPING
            self._lock.notify_all()
            return True

    @contextlib.contextmanager
    def later_stop(self) -> Iterator[None]:
        """The body of a later stop (``begin_stop`` answered False); counted until it exits."""
        try:
            yield
        finally:
            with self._lock:
                self._later_stops -= 1
                self._lock.notify_all()

    def wait_later_stops(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds until no later stop runs; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._later_stops == 0, timeout_s)

    def finish_stop(self) -> None:
        if self._move(Phase.STOPPING, Phase.STOPPED):
            self.stopped.set()

    def _move(self, source: Phase, target: Phase) -> bool:
        with self._lock:
            if self._phase is not source:
                return False
            self._phase = target
            self._lock.notify_all()
            return True
