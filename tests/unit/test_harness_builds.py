"""Builds the harness runs on a fresh machine inside the first test that needs them (the
Kubernetes binaries, the images): outside that test's pytest-timeout, bounded by their own
timeout, and killed whole (the build tool's children too) when they overrun it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable


@pytest.fixture
def own_alarm() -> Iterator[list[float]]:
    """SIGALRM recorded instead of pytest-timeout's handler; pytest-timeout's timer given back after."""
    fired: list[float] = []
    handler = signal.signal(signal.SIGALRM, lambda *_: fired.append(time.monotonic()))
    timer = signal.getitimer(signal.ITIMER_REAL)
    try:
        yield fired
    finally:
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, *timer)


def test_the_test_timeout_is_paused_inside_and_the_rest_given_back_after(own_alarm):
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    with _support.outside_test_timeout():
        time.sleep(0.6)
        assert own_alarm == []
    resumed = time.monotonic()
    time.sleep(0.6)
    assert len(own_alarm) == 1 and own_alarm[0] - resumed < 0.5


def test_a_build_that_overruns_is_killed_with_its_children(tmp_path):
    child_pid = tmp_path / "child.pid"
    log = tmp_path / "build.log"
    started = time.monotonic()
    with pytest.raises(ComponentUnavailable, match="did not finish in 1 s") as failed:
        _support.run_build(["bash", "-c", f"echo compiling >&2; sleep 60 & echo $! > {child_pid}; wait"], log,
                           env=dict(os.environ), timeout_s=1, what="the test build", component="test")
    assert time.monotonic() - started < 10
    assert "compiling" in failed.value.log_tail
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), "the build's child outlived it"


def test_a_build_that_fails_names_its_exit_code_and_log(tmp_path):
    with pytest.raises(ComponentUnavailable, match=r"the test build failed \(exit 3\)"):
        _support.run_build(["bash", "-c", "exit 3"], tmp_path / "build.log",
                           env=dict(os.environ), timeout_s=10, what="the test build", component="test")


class _Reports(list):
    """The lines progress_while printed and were not looked at yet, and the end of stderr read so
    far that has no newline yet (a line being written when stderr was read)."""

    partial = ""


def _next_report(capfd, seen: _Reports) -> str:
    """Wait (at most 10 s) for the next whole line progress_while prints; keeps the lines in ``seen``."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        *lines, seen.partial = (seen.partial + capfd.readouterr().err).split("\n")
        seen += [line for line in lines if line]
        if seen:
            return seen.pop(0)
        time.sleep(0.02)
    raise AssertionError("no progress report in 10 s")


def test_a_long_step_reports_its_time_and_its_logs_latest_line_until_it_ends(tmp_path, capfd):
    log, seen = tmp_path / "build.log", _Reports()
    log.write_text("go: downloading k8s.io/api v0.36.3\n")
    with _support.progress_while("building the test binaries", log, every_s=0.05):
        assert _next_report(capfd, seen) == \
            "conveyor.testing: ... building the test binaries: 0m00s, now: go: downloading k8s.io/api v0.36.3"
        log.write_text(log.read_text() + "k8s.io/apiserver/pkg/server\n\n")
        while (report := _next_report(capfd, seen)).endswith("k8s.io/api v0.36.3"):
            pass
        assert report == "conveyor.testing: ... building the test binaries: 0m00s, now: k8s.io/apiserver/pkg/server"
    capfd.readouterr()
    time.sleep(0.2)
    assert capfd.readouterr().err == "", "it went on reporting after the step ended"


def test_a_long_step_reports_the_stage_its_script_is_on_beside_the_compilers_latest_line(tmp_path, capfd):
    log, seen = tmp_path / "build.log", _Reports()
    with log.open("w") as out, _support.progress_while("building", log, every_s=0.05, stage="[kube/build]"):
        assert _next_report(capfd, seen) == "conveyor.testing: ... building: 0m00s"
        out.write("[kube/build] kube-apiserver v1.36.3: building with go1.26.8...\nk8s.io/api/core/v1\nk8s.io/api/app")
        out.flush()
        while (report := _next_report(capfd, seen)) == "conveyor.testing: ... building: 0m00s":
            pass
        # the line still being written is not shown until it ends
        assert report == "conveyor.testing: ... building: 0m00s, kube-apiserver v1.36.3: building with go1.26.8..., " \
                         "now: k8s.io/api/core/v1"
        out.write("s/v1\n[kube/build] kubelet v1.36.3: building with go1.26.8...\n")
        out.flush()
        while (report := _next_report(capfd, seen)).endswith("now: k8s.io/api/core/v1"):
            pass
        assert report == "conveyor.testing: ... building: 0m00s, kubelet v1.36.3: building with go1.26.8..., " \
                         "now: k8s.io/api/apps/v1"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead (reaped by init later)
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False
