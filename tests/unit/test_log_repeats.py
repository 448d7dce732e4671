"""Repeated log lines (librdkafka's connection errors) are collapsed (issue 11, "first hour" §5)."""

import logging

from conveyor.runtime.kafka.log_repeats import CollapseRepeats


def _record(text: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("t", level, __file__, 1, text, (), None)


def test_a_repeated_message_passes_once_per_window_and_then_says_how_often_it_came(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("conveyor.runtime.kafka.log_repeats.time.monotonic", lambda: clock[0])
    f = CollapseRepeats(window_s=60)
    assert f.filter(_record("connect failed"))
    assert [f.filter(_record("connect failed")) for _ in range(193)] == [False] * 193
    assert f.filter(_record("another error"))
    assert f.filter(_record("connect failed", logging.WARNING)), "another level is another message"
    clock[0] += 61
    again = _record("connect failed")
    assert f.filter(again)
    assert again.getMessage() == "connect failed (repeated 193 more times in 60s)"
