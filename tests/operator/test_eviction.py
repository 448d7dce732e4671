"""Which pod events are evictions to translate."""

from conveyor_operator.handlers.eviction import disruption


def _condition(status: str) -> dict:
    return {"conditions": [{"type": "Ready", "status": "True"},
                           {"type": "DisruptionTarget", "status": status, "reason": "EvictionByEvictionAPI"}]}


def test_a_disruption_target_is_an_eviction():
    assert disruption(_condition("True")) == "DisruptionTarget"


def test_a_plain_deletion_such_as_a_rollout_is_not():
    assert disruption({"conditions": [{"type": "Ready", "status": "False"}]}) is None
    assert disruption({}) is None
    assert disruption(_condition("False")) is None
