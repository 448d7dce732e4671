"""The driver's start-up helpers (``conveyor.runtime.driver.startup``): a SparkSession started
on a thread, handed over, or stopped when the start-up it was for failed; phase timings."""

from __future__ import annotations

import threading

import pytest

from conveyor.runtime.driver.startup import SparkStarter, StartupClock, spark_context_running


class Session:
    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def _starter(release: threading.Event | None = None, error: Exception | None = None):
    session = Session()
    seen: dict = {}

    def start(properties):
        seen.update(properties, thread=threading.current_thread().name)
        if release is not None:
            assert release.wait(10)
        if error is not None:
            raise error
        return session

    return SparkStarter(start, {"spark.app.name": "a"}), session, seen


def test_the_session_starts_on_its_own_thread_and_is_handed_over():
    starter, session, seen = _starter()
    assert starter.session() is session and session.stopped == 0
    assert seen == {"spark.app.name": "a", "thread": "spark-start"}
    assert starter.seconds is not None and starter.seconds >= 0


def test_what_starting_raised_reaches_whoever_waits():
    starter, _, _ = _starter(error=RuntimeError("executor pods refused"))
    with pytest.raises(RuntimeError, match="executor pods refused"):
        starter.session()


def test_a_start_up_that_failed_stops_the_session_once_it_is_up():
    release = threading.Event()
    starter, session, _ = _starter(release)
    starter.abandon()  # the start-up failed while the JVM was still starting
    assert session.stopped == 0
    release.set()
    starter._thread.join(10)
    assert session.stopped == 1


def test_a_start_up_that_failed_after_the_session_came_up_stops_it_once():
    starter, session, _ = _starter()
    starter._thread.join(10)
    starter.abandon()
    starter.abandon()
    assert session.stopped == 1


def test_the_clock_times_each_phase_also_when_it_raises():
    clock = StartupClock()
    with clock.phase("validation"):
        pass
    with pytest.raises(ValueError), clock.phase("kafka"):
        raise ValueError
    assert [name for name, _ in clock.phases] == ["validation", "kafka"]
    assert clock.summary().startswith("validation 0.00 s, kafka 0.00 s; ") and clock.summary().endswith(" s in all")


def test_a_spark_context_running_in_the_process_is_seen(monkeypatch):
    import pyspark

    monkeypatch.setattr(pyspark.SparkContext, "_active_spark_context", None)
    assert not spark_context_running()
    monkeypatch.setattr(pyspark.SparkContext, "_active_spark_context", object())
    assert spark_context_running()
