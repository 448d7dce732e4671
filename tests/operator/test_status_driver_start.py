"""When a driver that does not answer is still starting (Ready DriverStarting kept, no status
write) and when it is unreachable."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from conveyor_operator.observe.conditions import Conditions
from conveyor_operator.observe.driver_start import STARTING, still_starting
from conveyor_operator.status import ConditionType as C

APPLIED = datetime(2026, 12, 2, 8, 0, 0, tzinfo=timezone.utc)


def _conditions(ready_reason: str, ready_at: datetime, progressing_at: datetime | None = None) -> Conditions:
    def stamp(t: datetime) -> str:
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")

    items = [{"type": "Ready", "status": "False", "reason": ready_reason, "lastTransitionTime": stamp(ready_at)}]
    if progressing_at is not None:
        items.append({"type": "Progressing", "status": "True", "reason": "Reconciled",
                      "lastTransitionTime": stamp(progressing_at)})
    return Conditions(items, 1)


def _pod(ready: bool) -> dict:
    return {"metadata": {"name": "orders-driver-x"},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_driver_applied_a_moment_ago_is_starting_until_the_timeout():
    conditions = _conditions(STARTING, APPLIED)
    assert still_starting(conditions, [], 300, APPLIED + timedelta(seconds=299))
    assert not still_starting(conditions, [], 300, APPLIED + timedelta(seconds=300))


def test_a_ready_pod_ends_the_start_at_once():
    conditions = _conditions(STARTING, APPLIED)
    assert still_starting(conditions, [_pod(False)], 300, APPLIED + timedelta(seconds=5))
    assert not still_starting(conditions, [_pod(False), _pod(True)], 300, APPLIED + timedelta(seconds=5))


def test_only_ready_driver_starting_counts_and_the_later_transition_is_the_start():
    later = APPLIED + timedelta(hours=1)  # a spec problem fixed an hour after Ready went False
    assert still_starting(_conditions(STARTING, APPLIED, later), [], 300, later + timedelta(seconds=10))
    assert not still_starting(_conditions("DriverUnreachable", APPLIED), [], 300, APPLIED + timedelta(seconds=1))
    assert not still_starting(Conditions([], 1), [], 300, APPLIED)
    unstamped = Conditions([{"type": C.READY.value, "status": "False", "reason": STARTING}], 1)
    assert not still_starting(unstamped, [], 300, APPLIED), "no time to count from: unreachable, as before"
