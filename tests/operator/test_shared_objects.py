"""SharedObjects: a namespace's shared objects are applied once, not by every reconcile.
The API server's side of the apply is in tests/kube; here only the bookkeeping, with a
recorder in place of the client."""

import threading
import time

import pytest
from conveyor_operator.reconcile.shared_objects import SharedObjects


class RecordingKube:
    def __init__(self, fail: bool = False, delay: float = 0.0) -> None:
        self.applied: list[str] = []
        self.fail = fail
        self.delay = delay

    def apply(self, obj):
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("refused")
        self.applied.append(obj["metadata"]["name"])
        return obj


def sa(name="conveyor-spark", namespace="data", **labels):
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": labels}}


def test_same_object_is_applied_once_a_changed_one_again():
    kube, shared = RecordingKube(), SharedObjects()
    assert shared.ensure(kube, sa()) is True
    assert shared.ensure(kube, sa()) is False
    assert shared.ensure(kube, sa(namespace="other")) is True
    assert shared.ensure(kube, sa(team="a")) is True
    assert kube.applied == ["conveyor-spark"] * 3


def test_applied_again_after_the_ttl():
    kube, shared = RecordingKube(), SharedObjects(ttl_seconds=0.05)
    shared.ensure(kube, sa())
    time.sleep(0.1)
    assert shared.ensure(kube, sa()) is True
    assert len(kube.applied) == 2


def test_a_failed_apply_is_not_remembered():
    shared = SharedObjects()
    with pytest.raises(RuntimeError):
        shared.ensure(RecordingKube(fail=True), sa())
    kube = RecordingKube()
    assert shared.ensure(kube, sa()) is True


def test_concurrent_reconciles_wait_for_one_apply():
    kube, shared = RecordingKube(delay=0.05), SharedObjects()
    threads = [threading.Thread(target=shared.ensure, args=(kube, sa())) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert kube.applied == ["conveyor-spark"]
