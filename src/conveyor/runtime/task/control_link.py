"""The runner's side of the control API: report status, receive directives.

A daemon thread posts the latest :class:`TaskReport` to
``POST /internal/tasks/<id>/sync`` about once a second; the driver answers with the
current :class:`Directive`, holding the request up to ``wait_ms`` until the directive
changes (long-poll), so a drain or stop reaches the task within milliseconds. Every post
carries the driver's task token (:mod:`conveyor.control.auth`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from conveyor.control.client import DriverClient
from conveyor.control.protocol import Action, Directive, TaskReport
from conveyor.runtime.config import log_levels

log = logging.getLogger(__name__)


class ControlLink:
    """Keeps one task in touch with its driver.

    The report callable must return a finished snapshot (built by the task thread);
    the link never reads the runner's live state.

    Attributes:
        directive: the latest directive (read by the task thread each loop).
        driver_lost: set when the driver has not answered for ``driver_timeout_s``;
            the runner then stops its task as on a plain stop. A driver that refuses the
            token (401/403) counts as not answering.
    """

    def __init__(
        self,
        control_url: str,
        task_id: int,
        report: Callable[[], TaskReport | None],
        wait_ms: int = 1000,
        driver_timeout_s: float = 30.0,
        token: str = "",
    ) -> None:
        self._client = DriverClient(control_url, token=token or None)
        self._task_id = task_id
        self._report = report
        self._wait_ms = wait_ms
        self._driver_timeout_s = driver_timeout_s
        self.directive = Directive()
        self.changed = threading.Event()
        self.driver_lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"control-link-{task_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def sync_now(self, wait_ms: int = 0) -> None:
        """Post the current report right away (e.g. the final one). Errors are logged."""
        try:
            self._sync(wait_ms)
        except Exception as exc:  # noqa: BLE001 - a final report that fails is only logged
            log.warning("could not report to the driver at %s: %s", self._client.base_url, exc)

    def stop(self) -> None:
        """Stop syncing. Does not wait for a long-poll in flight: the daemon thread ends
        when it returns (waiting would add up to ``wait_ms`` to every drain)."""
        self._stop.set()

    def _sync(self, wait_ms: int) -> None:
        report = self._report()
        if report is None:
            time.sleep(wait_ms / 1000)
            return
        directive = self._client.sync_task(self._task_id, report, self.directive.version, wait_ms)
        if directive.version != self.directive.version:
            if directive.log_levels != self.directive.log_levels:
                log_levels.apply(dict(directive.log_levels))
            self.directive = directive
            self.changed.set()

    def _loop(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.is_set():
            try:
                self._sync(self._wait_ms)
                last_ok = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - the link must outlive any one failure
                if time.monotonic() - last_ok > self._driver_timeout_s and not self.driver_lost:
                    log.error("driver unreachable for %.0fs (%s): stopping the task", self._driver_timeout_s, exc)
                    self.driver_lost = True
                    self.directive = Directive(Action.STOP, self.directive.version + 1)
                    self.changed.set()
                self._stop.wait(1.0)
