"""What ``conveyor run`` shows while it runs: a live line in a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

if TYPE_CHECKING:
    from conveyor.runtime.driver import Driver

log = logging.getLogger("conveyor")
LOG_INTERVAL_S = 10.0


class ProgressReporter:
    """Records/s, lag and task states of one driver.

    Args:
        driver: the running driver.
        live: a live-updating line on stderr (a terminal); otherwise a log line every 10 s.
    """

    def __init__(self, driver: Driver, live: bool) -> None:
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
        lag = sum(sum(t.get("lag", {}).values()) for t in tasks)
        running = sum(1 for t in tasks if t["state"] == "RUNNING")
        failed = sum(1 for t in tasks if t["state"] == "FAILED")
        text = (
            f"{status['name']} {status['connector']['state']} | tasks {running}/{len(tasks)} running"
            f"{f', {failed} FAILED' if failed else ''} | {self._rate:,.0f} records/s | {total:,} records | lag {lag:,}"
        )
        return text

    def update(self) -> None:
        text = self.line()
        if self._live is not None:
            self._live.update(Text(text), refresh=True)
        elif time.monotonic() - self._last_log >= LOG_INTERVAL_S:
            self._last_log = time.monotonic()
            log.info("%s", text)
