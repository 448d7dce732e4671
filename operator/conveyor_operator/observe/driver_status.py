"""A driver's status document in the words of the Connector's ``.status``: a task's lag, and a
trace's summary."""

from __future__ import annotations

from typing import Any


def task_lag(lag: Any) -> int | None:
    """A task's lag for ``status.tasks[].lag``: the driver reports it per partition
    (``{"topic:partition": records}``); the status holds their sum."""
    if isinstance(lag, bool):
        return None
    if isinstance(lag, int):
        return lag
    if isinstance(lag, dict):
        return sum(v for v in lag.values() if isinstance(v, int) and not isinstance(v, bool))
    return None


TRACE_SUMMARY_CHARS = 300


def short_trace(trace: str | None, limit: int = TRACE_SUMMARY_CHARS) -> str | None:
    """A Python traceback's summary for ``.status``: the first line of its (last) exception,
    ``Type: message``, at most ``limit`` characters; the lines after it (a database's
    ``DETAIL`` quoting row values) and the frames are left out. The whole trace stays in the
    pod's log and the driver's authenticated ``GET /status``."""
    if not trace:
        return None
    lines = [line for line in trace.strip().splitlines() if line.strip()]
    after_frames = max((i for i, line in enumerate(lines) if line.startswith(" ")), default=-1) + 1
    summary = (lines[after_frames] if after_frames < len(lines) else lines[-1]).strip()
    return summary if len(summary) <= limit else summary[:limit - 1] + "…"
