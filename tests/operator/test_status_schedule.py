"""When the operator next reads a driver's status: every interval while it answers, backing off
while it does not, at once after a pod event (pure: the clock is passed in)."""

from conveyor_operator.observe.status_schedule import StatusSchedule

A, B = ("ns", "a"), ("ns", "b")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _take_all(schedule: StatusSchedule) -> set:
    """Every key due now, each then being read (as the poller takes them)."""
    taken = set()
    while (key := schedule.take(0)) is not None:
        taken.add(key)
    return taken


def _schedule(**kwargs) -> tuple[StatusSchedule, _Clock]:
    clock = _Clock()
    return StatusSchedule(clock=clock, **kwargs), clock


def test_a_connector_never_read_is_due_and_one_that_answers_is_due_each_interval():
    schedule, clock = _schedule(interval_s=10)
    schedule.track(A)
    schedule.track(B)
    clock.now = 100.0
    assert _take_all(schedule) == {A, B}, "never read: due at once"
    schedule.answered(A, 100.0)
    schedule.finish(A, 100.0)
    clock.now = 109.9
    assert _take_all(schedule) == set()
    clock.now = 110.0
    assert _take_all(schedule) == {A}, "each interval; B, still being read, is not given again"


def test_a_driver_that_does_not_answer_is_read_less_often_up_to_the_longest_wait():
    schedule, clock = _schedule(interval_s=10, max_backoff_s=60)
    schedule.track(A)
    waits = []
    for _ in range(6):
        assert _take_all(schedule) == {A}
        waits.append(schedule.unreachable(A, clock.now))
        schedule.finish(A, clock.now)
        clock.now += waits[-1] - 0.1
        assert _take_all(schedule) == set(), "not before its wait is over"
        clock.now += 0.1
    assert waits == [10, 20, 40, 60, 60, 60]
    assert _take_all(schedule) == {A}
    schedule.answered(A, clock.now)
    assert schedule.unreachable(A, clock.now) == 10, "an answer starts the back-off over"
    never_below, _ = _schedule(interval_s=10, max_backoff_s=5)
    never_below.track(A)
    assert [never_below.unreachable(A, 0.0)] == [10], "never below the interval"


def test_a_pod_event_makes_the_next_read_due_at_once_without_resetting_the_back_off():
    schedule, _clock = _schedule(interval_s=10, max_backoff_s=60)
    schedule.track(A)
    schedule.track(B)
    for _ in range(3):
        schedule.unreachable(A, 0.0)
    schedule.answered(B, 0.0)
    schedule.hurry(A)
    schedule.hurry(("ns", "never-seen"))
    assert _take_all(schedule) == {A}
    assert schedule.unreachable(A, 0.0) == 60, "still backing off: a pod event is no answer"
    assert len(schedule) == 2, "a hurry of a Connector not tracked tracks nothing"


def test_a_deleted_connector_is_forgotten_and_its_read_under_way_does_not_bring_it_back():
    schedule, clock = _schedule(interval_s=10)
    schedule.track(A)
    schedule.unreachable(A, 0.0)
    schedule.forget(A)
    schedule.forget(B)
    clock.now = 100.0
    assert len(schedule) == 0 and _take_all(schedule) == set()
    schedule.track(A)
    assert _take_all(schedule) == {A}
    schedule.forget(A)  # deleted while its driver is being read
    schedule.unreachable(A, clock.now)
    schedule.finish(A, clock.now)
    clock.now = 1000.0
    assert len(schedule) == 0 and _take_all(schedule) == set()


def test_take_gives_the_due_keys_in_order_and_none_before_they_are_due():
    clock = _Clock()
    schedule = StatusSchedule(interval_s=10, clock=clock)
    schedule.track(A)
    schedule.track(B)
    schedule.track(A)  # tracked again: unchanged
    assert [schedule.take(0), schedule.take(0), schedule.take(0)] == [A, B, None]
    schedule.answered(A, clock.now)
    schedule.finish(A, clock.now)
    schedule.unreachable(B, clock.now)
    schedule.finish(B, clock.now)
    clock.now = 9.9
    assert schedule.take(0) is None
    clock.now = 10.0
    assert {schedule.take(0), schedule.take(0)} == {A, B}


def test_a_key_being_read_is_not_given_twice_and_a_hurry_meanwhile_makes_it_due_right_after():
    clock = _Clock()
    schedule = StatusSchedule(interval_s=10, clock=clock)
    schedule.track(A)
    assert schedule.take(0) == A
    schedule.hurry(A)
    assert schedule.take(0) is None, "being read"
    schedule.answered(A, clock.now)
    schedule.finish(A, clock.now)
    assert schedule.take(0) == A, "hurried during its read: due at once, not an interval later"
    schedule.finish(A, clock.now)
    assert schedule.take(0) is None, "a read that reported nothing is due an interval later"
    clock.now = 10.0
    assert schedule.take(0) == A


def test_a_forgotten_key_is_never_given_and_a_hurry_of_an_untracked_key_tracks_nothing():
    schedule = StatusSchedule(interval_s=10, clock=_Clock())
    schedule.track(A)
    schedule.forget(A)
    schedule.hurry(B)
    assert schedule.take(0) is None and len(schedule) == 0
