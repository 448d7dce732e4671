"""What ``conveyor run`` shows while it runs: a live line in a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from conveyor.runtime.herder.protocol import Herder

log = logging.getLogger("conveyor")
LOG_INTERVAL_S = 10.0


class ProgressReporter:
    """Records/s, lag and task states of one driver.

    Args:
        driver: the running driver.
        live: a live-updating line on stderr (a terminal); otherwise a log line every 10 s.
    """

    def __init__(self, driver: Herder, live: bool) -> None:
        self._driver = driver
        self._live = Live(console=Console(stderr=True), auto_refresh=False) if live else None
        self._last_total = 0
        self._last_at = time.monotonic()
        self._last_log = 0.0
        self._rate = 0.0

    def __enter__(self) -> ProgressReporter:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def line(self) -> str:
        status = self._driver.status()
        tasks = status["tasks"]
        total = sum(t.get("records_put", 0) for t in tasks)
        now = time.monotonic()
        elapsed = now - self._last_at
        if elapsed >= 1.0:
            self._rate = (total - self._last_total) / elapsed
            self._last_total, self._last_at = total, now
        lag = sum(sum(t.get("lag", {}).values()) for t in tasks) + sum(status.get("unassigned_lag", {}).values())
        self._states = f"{status['connector']['state']} | {task_states(tasks)}"
        return f"{status['name']} {self._states} | {self._rate:,.0f} records/s | {total:,} records | lag {lag:,}"

    def update(self) -> None:
        """Refresh the live line; without a terminal, log it every 10 s and whenever a state changes."""
        logged_states = self._states
        text = self.line()
        if self._live is not None:
            self._live.update(Text(text), refresh=True)
        elif time.monotonic() - self._last_log >= LOG_INTERVAL_S or self._states != logged_states:
            self._last_log = time.monotonic()
            log.info("%s", text)

    _states = ""


def task_states(tasks: list[dict[str, Any]]) -> str:
    """``tasks 2/2 running``, ``tasks 1/2 running, 1 starting``, ``tasks 0/2 running, 1 FAILED, 1 PAUSED``:
    how many tasks run, then the others by state (``UNASSIGNED`` shows as ``starting``)."""
    counts: dict[str, int] = {}
    for task in tasks:
        state = "starting" if task["state"] == "UNASSIGNED" else task["state"]
        counts[state] = counts.get(state, 0) + 1
    running = counts.pop("RUNNING", 0)
    others = "".join(f", {n} {state}" for state, n in sorted(counts.items()))
    return f"tasks {running}/{len(tasks)} running{others}"
