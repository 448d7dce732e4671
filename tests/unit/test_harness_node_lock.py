"""One Kubernetes node per machine: a second one is refused, naming who holds it and what to do."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conveyor.testing import node


@contextmanager
def _running(*argv: str) -> Iterator[int]:
    """The pid of a process whose command line ends with ``argv``, once it has exec'd; killed after."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", *argv])
    try:
        deadline = time.monotonic() + 10
        while b"time.sleep" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the sleeper did not start"
            time.sleep(0.01)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_node_held_by_the_kubernetes_quickstart_says_how_to_stop_it():
    with _running("conveyor.testing", "up", "--node") as pid:
        reason, hint = node._who_holds_the_node(str(pid))
    assert reason == f"the Kubernetes quickstart's cluster runs on this machine (pid {pid})"
    assert "examples/kubernetes/quickstart.sh --down" in hint


def test_a_node_held_by_a_test_session_says_to_wait_for_it():
    with _running("pytest", "tests/e2e") as pid:
        reason, hint = node._who_holds_the_node(str(pid))
    assert reason == f"another test node runs on this machine (pid {pid})"
    assert hint == "wait for that test session to end"
    assert node._who_holds_the_node("") == ("another test node runs on this machine (pid ?)", hint)


def test_the_lock_is_the_machines_not_the_caches():
    assert str(node.NODE_LOCK).startswith("/run/")
