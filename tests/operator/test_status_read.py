"""A status read finds its Connector in the operator's index, or not yet, or no longer: kopf
stores what an index function returns only after it returns, and the index function is what
tracks the Connector, so the first read can come before the entry it reads. The status poller's
resync (StatusSchedule.sync with tracked_keys of the index) settles which."""

from __future__ import annotations

from conveyor_operator.context import RUNTIME
from conveyor_operator.handlers.status import connector_bodies, read_status, status_view, tracked_keys
from conveyor_operator.observe.status_schedule import StatusSchedule

KEY = ("ns", "events")
BODY = {
    "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
    "metadata": {"name": "events", "namespace": "ns", "uid": "u1", "generation": 1},
    "spec": {"class": "postgres-sink"},
    # a spec problem: the read stops before asking a driver (the reads leave those for the next edit)
    "status": {"observedGeneration": 1, "conditions": [
        {"type": "Degraded", "status": "True", "reason": "InvalidConfig", "message": "x", "observedGeneration": 1}]},
}


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _index_event(index: dict, body: dict) -> None:
    """What kopf does with an event of the Connector: call the index function, then store what it
    returned."""
    meta = body["metadata"]
    index.update({k: [v] for k, v in connector_bodies(
        namespace=meta["namespace"], name=meta["name"], meta=meta, status=body["status"], body=body).items()})


def _read(schedule: StatusSchedule, clock: _Clock, index: dict) -> bool:
    """One read of KEY, as the poller makes it, if due now; whether it was."""
    if schedule.take(0) != KEY:
        return False
    read_status(KEY, index, {})
    schedule.finish(KEY, clock.now)
    return True


def test_a_read_before_kopf_stored_the_index_entry_keeps_the_connector_and_one_gone_is_forgotten(monkeypatch):
    clock = _Clock()
    schedule = StatusSchedule(interval_s=10, clock=clock)
    monkeypatch.setattr(RUNTIME, "status_schedule", schedule)
    index: dict = {}
    meta = BODY["metadata"]
    connector_bodies(namespace="ns", name="events", meta=meta, status=BODY["status"], body=BODY)  # tracks it
    assert schedule.sync(tracked_keys(index)) == (0, 0), "a resync in between: not forgotten at once"
    assert _read(schedule, clock, index), "tracked: due at once"
    assert len(schedule) == 1, "read before kopf stored its entry (an operator restart): still tracked"

    index[KEY] = [status_view(BODY)]  # kopf stores it now
    assert schedule.sync(tracked_keys(index)) == (0, 0)
    clock.now = 10.0
    assert _read(schedule, clock, index), "read again an interval later"
    _index_event(index, BODY)  # a later event of the Connector
    clock.now = 20.0
    assert _read(schedule, clock, index) and len(schedule) == 1

    del index[KEY]  # DELETED: kopf empties the entry without calling the index function
    clock.now = 30.0
    assert _read(schedule, clock, index) and len(schedule) == 1
    assert schedule.sync(tracked_keys(index)) == (0, 0), "one resync without it: maybe not stored yet"
    assert schedule.sync(tracked_keys(index)) == (0, 1), "two in a row: gone, forgotten"
    clock.now = 1000.0
    assert schedule.take(0) is None


def test_a_resync_tracks_what_the_index_holds_and_tracking_missed_and_not_what_is_being_deleted():
    schedule = StatusSchedule(interval_s=10, clock=_Clock())
    deleting = {**status_view(BODY), "metadata": {**BODY["metadata"], "name": "old", "deletionTimestamp": "t"}}
    never_applied = {**status_view(BODY), "metadata": {**BODY["metadata"], "name": "new"}, "status": {}}
    index = {KEY: [status_view(BODY)], ("ns", "old"): [deleting], ("ns", "new"): [never_applied]}
    assert tracked_keys(index) == [KEY]
    assert schedule.sync(tracked_keys(index)) == (1, 0), "lost by the event-driven tracking: tracked again"
    assert schedule.take(0) == KEY, "due at once"
