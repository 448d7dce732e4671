"""Automatic restarts of a FAILED connector or its FAILED tasks (``spec.autoRestart``), as
Strimzi's ``KafkaConnector`` ``autoRestart`` does them:

* the n-th restart in a row waits ``min(n*n + n, 60)`` minutes after the previous one (the
  first is immediate; then 2, 6, 12, 20, 30, 42, 56, 60, 60... minutes), and none happens once
  ``maxRestarts`` restarts were made;
* a restart is Kafka Connect's ``POST /connectors/<name>/restart?includeTasks=true&onlyFailed=true``;
* the count is kept in ``status.autoRestart`` and forgotten once the connector has run
  without failing for the current back-off (or after a manual restart).

Pure decisions; the operator's status reads act on them (:mod:`conveyor_operator.handlers.status`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from conveyor.manifest import AutoRestartSpec

MAX_BACKOFF_MINUTES = 60


def backoff(count: int) -> timedelta:
    """How long after the ``count``-th automatic restart the next one may happen."""
    return timedelta(minutes=min(count * count + count, MAX_BACKOFF_MINUTES))


@dataclass(frozen=True)
class Decision:
    restart: bool
    """Restart now (``status`` then holds the new count)."""
    status: dict[str, Any] | None
    """The new ``status.autoRestart`` (``None``: none counted)."""
    gave_up: bool = False
    """``maxRestarts`` reached: failed, and left failed."""


def _timestamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def decide(spec: AutoRestartSpec | None, current: dict[str, Any] | None, failing: bool, name: str,
           now: datetime) -> Decision:
    """What to do about a connector that is (``failing``) or is not failing.

    Args:
        spec: ``spec.autoRestart``; ``None`` or ``enabled: false`` never restarts.
        current: ``status.autoRestart`` as last written (``count``, ``lastRestartTimestamp``).
        now: the current time (UTC, aware).
    """
    count = int((current or {}).get("count", 0))
    last_text = (current or {}).get("lastRestartTimestamp")
    last = datetime.fromisoformat(last_text.replace("Z", "+00:00")) if last_text else None
    waited_enough = last is None or now - last >= backoff(count)
    if not failing:
        forget = current is not None and (last is None or now - last > backoff(count))
        return Decision(False, None if forget else current)
    if spec is None or not spec.enabled:
        return Decision(False, current)
    if spec.max_restarts is not None and count >= spec.max_restarts:
        return Decision(False, current, gave_up=True)
    if not waited_enough:
        return Decision(False, current)
    return Decision(True, {"count": count + 1, "connectorName": name, "lastRestartTimestamp": _timestamp(now)})
