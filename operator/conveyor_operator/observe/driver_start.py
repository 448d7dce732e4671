"""Whether a driver that does not answer is still starting (image pull, Spark start) or
unreachable: what a Connector's Ready condition says between its first apply and its driver's
first answer."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from conveyor_operator.observe.conditions import Conditions, transition_time
from conveyor_operator.observe.pod_health import pod_ready
from conveyor_operator.status import ConditionType as C

STARTING = "DriverStarting"
"""Ready's reason from the first apply until the driver answers (the reconcile writes it)."""


def still_starting(conditions: Conditions, pods: Iterable[dict[str, Any]], timeout_s: float, now: datetime) -> bool:
    """Whether a driver that did not answer is still starting: Ready says :data:`STARTING`, none
    of the connector's ``pods`` (pod summaries, :func:`~conveyor_operator.observe.pod_health.pod_summary`)
    is Ready, and the apply was less than ``timeout_s`` seconds before ``now`` (an aware UTC
    datetime; the apply's time is the later ``lastTransitionTime`` of Ready and Progressing, so a
    spec problem fixed long after Ready went False counts from the fix). Its status then stays as the
    apply wrote it, as the Flink Kubernetes operator's deployment readiness timeout: a thousand
    Connectors created at once cost one status write each, not two."""
    ready = conditions.get(C.READY) or {}
    if ready.get("reason") != STARTING or any(pod_ready(pod) for pod in pods):
        return False
    times = [t for t in (transition_time(ready), transition_time(conditions.get(C.PROGRESSING))) if t is not None]
    return bool(times) and (now - max(times)).total_seconds() < timeout_s
