"""Where a Connector started (``status.startingOffsets``), recorded once from its driver's first
report, and its Events. From then on ``spec.initialOffsets`` is left out of what the driver runs
(:mod:`conveyor_operator.reconcile.initial_offsets`).

The driver writes ``spec.initialOffsets`` before its first task starts
(:mod:`conveyor.runtime.driver.starting_offsets`) and reports ``starting_offsets`` in its
``/status``: ``{"initial": "NotGiven"|"Applied"|"Kept", "found": int, "sample": [KIP-875
entries], "written": int, "message": str}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

APPLIED, KEPT = "Applied", "Kept"
EVENT_APPLIED, EVENT_KEPT, EVENT_FOUND = "InitialOffsetsApplied", "InitialOffsetsKept", "OffsetsFound"
SAMPLE_IN_EVENT = 10


def recorded(status: Mapping[str, Any]) -> bool:
    """Whether ``status.startingOffsets`` is written: the driver's first start is behind."""
    return status.get("startingOffsets") is not None


def status_entry(report: Mapping[str, Any], now: datetime | None = None) -> dict[str, Any] | None:
    """``status.startingOffsets`` from a driver's ``starting_offsets``; ``None`` when it has none
    (a driver that has not got that far, or one from before the field)."""
    if not isinstance(report, Mapping) or not isinstance(report.get("found"), int):
        return None
    when = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"initial": str(report.get("initial") or "NotGiven"), "found": report["found"],
            "written": int(report.get("written") or 0), "message": str(report.get("message") or ""), "time": when}


def events(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The Events (``(reason, message)``, all of type Normal) of a driver's first
    ``starting_offsets``: the initial offsets written or kept, and stored offsets found (a
    Connector re-created under a name whose offsets were retained, ``deletionPolicy.offsets:
    retain``), naming up to :data:`SAMPLE_IN_EVENT` of them."""
    out: list[tuple[str, str]] = []
    found = int(report.get("found") or 0)
    if found:
        shown = [_entry(e) for e in (report.get("sample") or [])[:SAMPLE_IN_EVENT]]
        more = f" and {found - len(shown)} more" if found > len(shown) else ""
        out.append((EVENT_FOUND, f"stored offsets of {found} partition(s) found (a connector of this name ran before "
                                 f"and its offsets were retained): {', '.join(shown)}{more}"))
    if report.get("initial") == APPLIED:
        out.append((EVENT_APPLIED, str(report.get("message") or "spec.initialOffsets written")))
    elif report.get("initial") == KEPT:
        out.append((EVENT_KEPT, str(report.get("message") or "spec.initialOffsets not written (existing: keep)")))
    return out


def _entry(entry: Any) -> str:
    if not isinstance(entry, Mapping):
        return "?"
    partition, offset = entry.get("partition") or {}, entry.get("offset")
    if isinstance(partition, Mapping) and "kafka_topic" in partition:
        where = f"{partition.get('kafka_topic')}-{partition.get('kafka_partition')}"
        at = offset.get("kafka_offset") if isinstance(offset, Mapping) else offset
        return f"{where}@{at}"
    return f"{_compact(partition)}={_compact(offset)}"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
