"""A Connector whose Secret or ConfigMap is missing is looked at again soon (the usual cause is a
folder applied with the Connector before its Secret), then every 30 seconds."""

from conveyor_operator.context import missing_reference_delay


def test_a_missing_secret_is_looked_for_again_soon_then_every_30_seconds():
    assert [missing_reference_delay(retry) for retry in range(6)] == [5.0, 10.0, 20.0, 30.0, 30.0, 30.0]
