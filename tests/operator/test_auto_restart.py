"""``spec.autoRestart``'s schedule, as Strimzi's: restarts after 0, 2, 6, 12, 20... minutes up to
60, none past ``maxRestarts``, the count forgotten once the connector ran long enough."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from conveyor_operator.observe.auto_restart import backoff, decide

from conveyor.manifest import AutoRestartSpec

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
ON = AutoRestartSpec()


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _status(count: int, minutes: float) -> dict:
    return {"count": count, "connectorName": "c", "lastRestartTimestamp": _at(minutes).strftime("%Y-%m-%dT%H:%M:%SZ")}


def test_the_backoff_grows_as_n_squared_plus_n_minutes_up_to_an_hour():
    assert [backoff(n).total_seconds() / 60 for n in range(10)] == [0, 2, 6, 12, 20, 30, 42, 56, 60, 60]


def test_a_failure_is_restarted_at_once_then_after_each_backoff():
    first = decide(ON, None, failing=True, name="c", now=T0)
    assert first.restart and first.status == _status(1, 0)
    assert not decide(ON, first.status, failing=True, name="c", now=_at(1.9)).restart
    second = decide(ON, first.status, failing=True, name="c", now=_at(2))
    assert second.restart and second.status["count"] == 2
    assert not decide(ON, second.status, failing=True, name="c", now=_at(2 + 5.9)).restart
    assert decide(ON, second.status, failing=True, name="c", now=_at(2 + 6)).restart


def test_max_restarts_stops_the_restarts_and_says_so():
    spec = AutoRestartSpec(maxRestarts=2)
    decision = decide(spec, _status(2, 0), failing=True, name="c", now=_at(600))
    assert not decision.restart and decision.gave_up and decision.status == _status(2, 0)
    assert decide(AutoRestartSpec(maxRestarts=0), None, failing=True, name="c", now=T0).gave_up


@pytest.mark.parametrize("spec", [None, AutoRestartSpec(enabled=False)])
def test_without_auto_restart_nothing_restarts(spec):
    decision = decide(spec, None, failing=True, name="c", now=T0)
    assert not decision.restart and decision.status is None and not decision.gave_up


def test_the_count_is_kept_while_recent_and_forgotten_once_the_connector_ran_long_enough():
    recent = _status(3, 0)  # next back-off: 12 minutes
    assert decide(ON, recent, failing=False, name="c", now=_at(12)).status == recent
    assert decide(ON, recent, failing=False, name="c", now=_at(12.1)).status is None
    assert decide(ON, None, failing=False, name="c", now=T0).status is None
