"""A logging filter that lets each distinct message through once per window: librdkafka
repeats a failing connection's error every few hundred milliseconds (a wrong bootstrap address
printed 194 identical lines before the one clear message)."""

from __future__ import annotations

import logging
import threading
import time


class CollapseRepeats(logging.Filter):
    """Drops a record whose level and text were let through less than ``window_s`` seconds ago,
    counting it; the next time that text passes it says how many were dropped. Thread-safe
    (librdkafka's logs arrive on its own threads)."""

    MAX_TRACKED = 1000

    def __init__(self, window_s: float = 60.0) -> None:
        super().__init__()
        self.window_s = window_s
        self._seen: dict[tuple[int, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        key, now = (record.levelno, text), time.monotonic()
        with self._lock:
            passed, dropped = self._seen.get(key, (float("-inf"), 0))
            if now - passed < self.window_s:
                self._seen[key] = (passed, dropped + 1)
                return False
            if len(self._seen) >= self.MAX_TRACKED:
                self._seen.clear()
            self._seen[key] = (now, 0)
        if dropped:
            record.msg, record.args = f"{text} (repeated {dropped} more times in {self.window_s:.0f}s)", ()
        return True
