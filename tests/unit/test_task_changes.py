"""Which tasks a change of task configurations stops, keeps and starts (issue 34, live task
changes: ``DriverOperations._change_tasks``), without Spark: the launcher and the stop are recorded."""

from __future__ import annotations

import threading
from http import HTTPStatus
from types import SimpleNamespace
from typing import Any

import pytest

from conveyor.control.errors import OperationError
from conveyor.control.protocol import Action
from conveyor.runtime.driver.executors import ExecutorTarget
from conveyor.runtime.driver.operations import DriverOperations
from conveyor.runtime.herder.task_handles import TaskHandle


class _Launcher:
    def __init__(self) -> None:
        self.launched: list[int] = []

    def launch(self, handle: TaskHandle) -> None:
        self.launched.append(handle.task_id)


class _Driver(DriverOperations):
    def __init__(self, connector_type: str, configs: list[dict[str, Any]], eos: bool = False) -> None:
        self.name, self.connector_type = "orders", connector_type
        self._lock = threading.Condition()
        self._launcher = _Launcher()
        self._task_count_writer = object() if eos else None
        self.tasks = {i: TaskHandle(i, c) for i, c in enumerate(configs)}
        self.stopped: list[int] = []
        self._executors = None
        self.relaunched_all: list[dict[str, Any]] | None = None

    def _resume_action(self) -> Action:
        return Action.RUN

    def _stop_tasks(self, connector_deleted: bool, timeout_s: float | None = None,
                    task_ids: list[int] | None = None) -> None:
        ids = sorted(self.tasks) if task_ids is None else task_ids
        self.stopped += ids
        for i in ids:
            self.tasks[i].done.set()

    def _launch_tasks(self, configs: list[dict[str, Any]]) -> None:
        self.relaunched_all = configs


def _configs(count: int, tasks_max: int, **extra: str) -> list[dict[str, Any]]:
    return [{"topics": "t", "tasks.max": str(tasks_max), "task.id": str(i), **extra} for i in range(count)]


@pytest.mark.parametrize(("was", "now"), [(1, 3), (3, 1), (2, 4), (4, 2)])
def test_a_sink_rescale_stops_and_starts_only_the_difference(was, now):
    driver = _Driver("sink", _configs(was, was))
    kept = {i: driver.tasks[i] for i in range(min(was, now))}
    driver._change_tasks(_configs(now, now))
    assert driver.stopped == list(range(now, was)), "only the tasks no longer wanted stop"
    assert driver._launcher.launched == list(range(was, now)), "only the new ones start"
    assert sorted(driver.tasks) == list(range(now))
    assert all(driver.tasks[i] is handle for i, handle in kept.items()), "the kept tasks run on, untouched"
    assert all(h.config["tasks.max"] == str(now) for h in driver.tasks.values() if h.task_id >= was)


def test_a_sink_task_whose_configuration_changed_restarts_and_a_failed_one_runs_again():
    driver = _Driver("sink", _configs(3, 3))
    driver.tasks[2].done.set()  # its run ended (failed)
    wanted = _configs(3, 3)
    wanted[1]["marker"] = "v2"
    driver._change_tasks(wanted)
    assert driver.stopped == [1, 2] and driver._launcher.launched == [1, 2]
    assert driver.tasks[1].config["marker"] == "v2"


def test_a_source_task_must_be_equal_with_its_tasks_max_and_an_exactly_once_source_restarts_every_task():
    driver = _Driver("source", _configs(2, 2))
    driver._change_tasks(_configs(3, 3))
    assert driver.stopped == [0, 1] and driver._launcher.launched == [0, 1, 2], \
        "a source task may split its work by tasks.max"
    same = _Driver("source", _configs(2, 2))
    same._change_tasks(_configs(2, 2))
    assert same.stopped == [] and same._launcher.launched == []
    eos = _Driver("source", _configs(2, 2), eos=True)
    eos._change_tasks(_configs(3, 3))
    assert eos.stopped == [0, 1] and eos.relaunched_all == _configs(3, 3), "a new generation fences every task"


def test_a_local_master_takes_no_more_tasks_than_its_slots_live():
    driver = _Driver("sink", _configs(1, 1))
    driver.spark_info = {"master": "local[2]"}
    driver._check_task_slots(2)
    with pytest.raises(OperationError) as refused:
        driver._check_task_slots(3)
    assert refused.value.status == HTTPStatus.CONFLICT and "local[2] has 2" in str(refused.value)
    driver.spark_info = {"master": "k8s://https://kubernetes.default.svc"}
    driver._check_task_slots(64)  # executors may grow (dynamic allocation), or the operator rolls the driver


class _Spark:
    """What ExecutorTarget calls of a SparkSession, recorded: requestTotalExecutors and the
    backend's killExecutors."""

    def __init__(self, master: str, **conf: str) -> None:
        self.totals: list[int] = []
        self.killed: list[str] = []
        spark = self

        class _Conf:
            def get(self, key, default=None):
                return conf.get(key, default)

        class _Backend:
            def killExecutors(self, ids, adjust, count_failures, force):  # noqa: N802 - Spark's name
                assert (adjust, count_failures, force) == (False, False, True), "the total is lowered first"
                spark.killed += ids
                return SimpleNamespace(size=lambda: len(ids), apply=lambda i: ids[i])

        class _Sc:
            def requestTotalExecutors(self, total, locality_aware_tasks, host_to_local_tasks):  # noqa: N802
                spark.totals.append(total)
                return True

            def schedulerBackend(self):  # noqa: N802 - Spark's name
                return _Backend()

        jvm = SimpleNamespace(PythonUtils=SimpleNamespace(toScalaMap=lambda m: {}, toSeq=list),
                              java=SimpleNamespace(util=SimpleNamespace(HashMap=dict)))
        self.sparkContext = SimpleNamespace(master=master, getConf=_Conf, _jsc=SimpleNamespace(sc=_Sc), _jvm=jvm)


def test_executors_follow_the_task_count_and_never_go_below_what_was_configured():
    spark = _Spark("k8s://https://kubernetes.default.svc", **{"spark.executor.instances": "2"})
    target = ExecutorTarget(spark, {"spark.executor.instances": "1"})
    assert target.enabled and target.target == 2 and target.minimum == 1
    assert target.grow(2) == 0 and target.grow(4) == 2 and spark.totals == [4] and target.target == 4
    removed = target.shrink(1, ["orders-exec-3", "orders-exec-4", "orders-exec-4", "orders-exec-2"],
                            busy_pods=["orders-exec-2"])
    assert removed == ["3", "4"], "idle executors of tasks that left; never one a task still runs on"
    assert target.target == 2 and spark.totals == [4, 2]
    assert target.shrink(0, ["orders-exec-1", "orders-exec-5", "orders-driver-x"], []) == ["1"]
    assert target.target == 1 and spark.totals[-1] == 1, "the configured spark.executor.instances stays"
    assert spark.killed == ["3", "4", "1"]
    two_cores = ExecutorTarget(_Spark("spark://h:7077", **{"spark.executor.instances": "1",
                                                            "spark.executor.cores": "2"}), {})
    assert two_cores.needed(3) == 2 and two_cores.minimum == 2, "Spark's default instances, 2 slots each"


@pytest.mark.parametrize("spark", [_Spark("local[4]"),
                                   _Spark("k8s://x", **{"spark.dynamicAllocation.enabled": "true"})])
def test_a_local_master_and_dynamic_allocation_are_left_to_themselves(spark):
    target = ExecutorTarget(spark, {})
    assert target.grow(10) == 0 and target.shrink(0, ["orders-exec-1"], []) == []
    assert spark.totals == [] and spark.killed == []
