"""When the operator next reads a driver's status: every interval while it answers, backing off
while it does not, at once after a pod event (pure: the clock is passed in)."""

from conveyor_operator.observe.status_schedule import StatusSchedule

A, B = ("ns", "a"), ("ns", "b")


def test_a_connector_never_read_is_due_and_one_that_answers_is_due_each_interval():
    schedule = StatusSchedule(interval_s=10)
    assert schedule.due(A, 0.0)
    schedule.answered(A, 100.0)
    assert not schedule.due(A, 109.9) and schedule.due(A, 110.0)
    assert schedule.due(B, 100.0), "another connector's read changes nothing of this one"


def test_a_driver_that_does_not_answer_is_read_less_often_up_to_the_longest_wait():
    schedule = StatusSchedule(interval_s=10, max_backoff_s=60)
    waits = [schedule.unreachable(A, 0.0) for _ in range(6)]
    assert waits == [10, 20, 40, 60, 60, 60]
    assert not schedule.due(A, 59.9) and schedule.due(A, 60.0)
    schedule.answered(A, 100.0)
    assert schedule.unreachable(A, 200.0) == 10, "an answer starts the back-off over"
    assert [StatusSchedule(10, max_backoff_s=5).unreachable(A, 0.0)] == [10], "never below the interval"


def test_a_pod_event_makes_the_next_read_due_at_once_without_resetting_the_back_off():
    schedule = StatusSchedule(interval_s=10, max_backoff_s=60)
    for _ in range(3):
        schedule.unreachable(A, 0.0)
    schedule.answered(B, 0.0)
    schedule.hurry(A)
    schedule.hurry(("ns", "never-seen"))
    assert schedule.due(A, 0.0) and not schedule.due(B, 0.0)
    assert schedule.unreachable(A, 0.0) == 60, "still backing off: a pod event is no answer"
    assert schedule.due(("ns", "never-seen"), 0.0) and len(schedule) == 2


def test_a_deleted_connector_is_forgotten():
    schedule = StatusSchedule(interval_s=10)
    schedule.unreachable(A, 0.0)
    schedule.forget(A)
    schedule.forget(B)
    assert len(schedule) == 0 and schedule.due(A, 0.0)
