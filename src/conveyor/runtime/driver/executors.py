"""Executors that follow the task count of a running driver (issue 34, live task changes).

A task is a Spark job that never ends, so each needs an executor slot
(``spark.executor.cores // spark.task.cpus``) for as long as it runs. At start
:func:`~conveyor.runtime.driver.spark_session.spark_properties` raises
``spark.executor.instances`` until every task has one; when the task count changes on a running
driver, :class:`ExecutorTarget` sets the executors the tasks need as the cluster manager's
total (``SparkContext.requestTotalExecutors``, which the Kubernetes backend serves by creating
executor pods; ``requestExecutors`` would add to a requested total that a static allocation
never set, so it asks for nothing), and once a task that left has made its closing commit,
lowers the total and removes the executor it freed (the scheduler backend's ``killExecutors``
without a second adjustment, so that no pod replaces it), never going below the instances the
configuration asked for. A local master has no executors, and
with dynamic allocation Spark follows the pending tasks itself: then it does nothing.

Called with the driver's ``operations`` lock held (one change at a time).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from conveyor.runtime.driver.spark_session import (
    SPARK_DEFAULT_EXECUTOR_INSTANCES,
    dynamic_allocation,
    executor_id_of_pod,
    is_local_master,
    task_slots_per_executor,
)

log = logging.getLogger(__name__)


class ExecutorTarget:
    """How many executors the driver has asked for, and the changes to that number.

    Args:
        spark: the driver's SparkSession.
        configured: the Spark properties as given (``spec.spark.sparkConf`` and ``--conf``):
            their ``spark.executor.instances`` (Spark's default 2) is the least kept.
    """

    def __init__(self, spark: Any, configured: Mapping[str, str]) -> None:
        self._spark = spark
        local = is_local_master(spark.sparkContext.master)
        conf: Any = {} if local else spark.sparkContext.getConf()
        self.enabled = not local and not dynamic_allocation(conf)
        self.minimum = int(configured.get("spark.executor.instances", SPARK_DEFAULT_EXECUTOR_INSTANCES))
        self.target = int(conf.get("spark.executor.instances", str(SPARK_DEFAULT_EXECUTOR_INSTANCES)))
        self.slots = task_slots_per_executor(conf)

    def needed(self, task_count: int) -> int:
        """Executors for ``task_count`` tasks: a slot each, and no fewer than configured."""
        return max(self.minimum, math.ceil(task_count / self.slots))

    def grow(self, task_count: int) -> int:
        """Ask for the executors ``task_count`` tasks need beyond the target; returns how many
        were asked for (0 when none are needed, on a local master, with dynamic allocation,
        or when the cluster manager refused: logged, and the new tasks wait for a slot)."""
        more = self.needed(task_count) - self.target
        if not self.enabled or more <= 0:
            return 0
        if not self._request_total(self.target + more):
            log.warning("the cluster manager refused %d more executor(s): new tasks wait for a free slot", more)
            return 0
        self.target += more
        log.info("requested %d more executor(s) for %d task(s): %d in all", more, task_count, self.target)
        return more

    def shrink(self, task_count: int, freed_pods: Iterable[str], busy_pods: Iterable[str]) -> list[str]:
        """Remove the executors of ``freed_pods`` (the pods of tasks that have made their
        closing commit and stopped) that run no task of ``busy_pods``, while the target is over
        what ``task_count`` tasks need; returns the executor ids removed."""
        if not self.enabled:
            return []
        busy = set(busy_pods)
        freed = {}
        for pod in dict.fromkeys(freed_pods):
            executor_id = executor_id_of_pod(pod)
            if executor_id is not None and pod not in busy and self.target - len(freed) > self.needed(task_count):
                freed[executor_id] = pod
        if not freed or not self._request_total(self.target - len(freed)):
            return []
        self.target -= len(freed)
        removed = self._kill(list(freed))
        for executor_id in removed:
            log.info("executor %s (pod %s) removed: its task left; %d executor(s) in all", executor_id,
                     freed[executor_id], self.target)
        return removed

    def _request_total(self, total: int) -> bool:
        sc = self._spark.sparkContext
        try:
            no_locality = sc._jvm.PythonUtils.toScalaMap(sc._jvm.java.util.HashMap())
            return bool(sc._jsc.sc().requestTotalExecutors(total, 0, no_locality))
        except Exception:  # noqa: BLE001 - a Spark developer API: never let it fail the change
            log.exception("could not ask for %d executor(s) in all", total)
            return False

    def _kill(self, executor_ids: list[str]) -> list[str]:
        """The backend's ``killExecutors(ids, adjustTargetNumExecutors=false, countFailures=false,
        force=true)``: the total is already lowered; returns the ids it removed."""
        sc = self._spark.sparkContext
        try:
            backend = sc._jsc.sc().schedulerBackend()
            killed = backend.killExecutors(sc._jvm.PythonUtils.toSeq(executor_ids), False, False, True)
            return [str(killed.apply(i)) for i in range(killed.size())]
        except Exception:  # noqa: BLE001 - a Spark developer API: the executor just stays idle
            log.exception("could not remove executor(s) %s", ", ".join(executor_ids))
            return []
