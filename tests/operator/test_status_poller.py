"""The status poller: reads run on its own threads when due, at most ``workers`` at once, and a
read that hangs holds one of them only (kopf's handler threads are never involved)."""

from __future__ import annotations

import threading
import time

from conveyor_operator.observe.status_poller import StatusPoller
from conveyor_operator.observe.status_schedule import StatusSchedule


def _wait(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.01)


def test_each_tracked_key_is_read_once_when_due_and_again_an_interval_later():
    schedule = StatusSchedule(interval_s=0.3)
    reads: list[tuple[str, str]] = []
    poller = StatusPoller(schedule, lambda key: (reads.append(key), schedule.answered(key, time.monotonic())), 2)
    poller.start()
    try:
        for i in range(5):
            schedule.track(("ns", f"c{i}"))
        _wait(lambda: len(reads) >= 5)
        assert sorted(reads[:5]) == [("ns", f"c{i}") for i in range(5)]
        _wait(lambda: len(reads) >= 10)
        assert sorted(reads[5:10]) == sorted(reads[:5]), "each read again after its interval"
    finally:
        poller.stop()


def test_reads_that_hang_hold_at_most_the_pollers_workers_and_the_others_go_on():
    schedule = StatusSchedule(interval_s=60)
    release = threading.Event()
    started: list[str] = []
    lock = threading.Lock()

    def read(key):
        with lock:
            started.append(key[1])
        if key[1].startswith("hung"):
            release.wait(10)
        schedule.answered(key, time.monotonic())

    poller = StatusPoller(schedule, read, workers=3)
    poller.start()
    try:
        for name in ("hung-1", "hung-2", "ok-1", "ok-2", "ok-3"):
            schedule.track(("ns", name))
        _wait(lambda: {"ok-1", "ok-2", "ok-3"} <= set(started))
        assert len(started) == 5
        assert threading.active_count() < 50
    finally:
        release.set()
        poller.stop()


def test_a_read_that_raises_is_logged_and_the_key_read_again_an_interval_later(caplog):
    schedule = StatusSchedule(interval_s=0.2)
    calls: list[float] = []

    def read(key):
        calls.append(time.monotonic())
        raise RuntimeError("boom")

    poller = StatusPoller(schedule, read, workers=1)
    poller.start()
    try:
        schedule.track(("ns", "a"))
        _wait(lambda: len(calls) >= 2)
        assert calls[1] - calls[0] >= 0.19
        assert "status of connector ns/a not read" in caplog.text
    finally:
        poller.stop()


def test_the_poller_resyncs_the_schedule_with_the_index_keys():
    schedule = StatusSchedule(interval_s=60)
    reads: list[tuple[str, str]] = []
    index_keys = [("ns", "lost")]  # in the index, never tracked (what the resync is for)
    poller = StatusPoller(schedule, reads.append, 2, keys=lambda: list(index_keys), resync_s=0.2)
    poller.start()
    try:
        _wait(lambda: reads == [("ns", "lost")])
        index_keys.clear()
        _wait(lambda: len(schedule) == 0)  # two resyncs without it
    finally:
        poller.stop()
