"""Kubernetes-style conditions (``metav1.Condition``) on a Connector's status."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from conveyor_operator.status import ConditionType


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def transition_time(condition: dict[str, Any] | None) -> datetime | None:
    """A condition's ``lastTransitionTime`` (RFC 3339, UTC) as an aware datetime; None when it
    has none or it does not parse."""
    text = (condition or {}).get("lastTransitionTime")
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


class Conditions:
    """A mutable copy of ``status.conditions``; :meth:`set` keeps ``lastTransitionTime``
    when the status does not change, as the API conventions ask."""

    def __init__(self, current: list[dict[str, Any]] | None, generation: int | None) -> None:
        self.items = [dict(c) for c in (current or [])]
        self.generation = generation

    def get(self, type_: ConditionType) -> dict[str, Any] | None:
        return next((c for c in self.items if c.get("type") == type_.value), None)

    def set(self, type_: ConditionType, status: bool | None, reason: str, message: str = "") -> None:
        value = "Unknown" if status is None else ("True" if status else "False")
        existing = self.get(type_)
        entry = {"type": type_.value, "status": value, "reason": reason, "message": message[:4000],
                 "lastTransitionTime": now()}
        if self.generation is not None:
            entry["observedGeneration"] = self.generation
        if existing is None:
            self.items.append(entry)
            return
        if existing.get("status") == value:
            entry["lastTransitionTime"] = existing.get("lastTransitionTime", entry["lastTransitionTime"])
        existing.clear()
        existing.update(entry)

    def is_true(self, type_: ConditionType) -> bool:
        c = self.get(type_)
        return c is not None and c.get("status") == "True"
