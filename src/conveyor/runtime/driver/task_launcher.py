"""Runs each task as a Spark job on the driver's SparkSession.

Each task runs as one long-running Spark job of one partition, launched from its own
driver thread with job group ``task-<id>``. When the job returns ``DRAINED`` (after a
drain or a restart) the thread launches it again; Spark places the new attempt.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from conveyor.control.protocol import Action, TaskReport, TaskSpec, TaskState, trace_of
from conveyor.runtime.herder.task_handles import TaskHandle
from conveyor.runtime.task.executor import run_task_partition

log = logging.getLogger(__name__)


class TaskLauncher:
    """Runs tasks' Spark jobs on one SparkSession.

    Args:
        spark: the SparkSession.
        spec_for: builds the :class:`TaskSpec` of a handle's next attempt.
        lock: the driver's condition; held while a run's end is recorded, notified after.
        shutting_down: true once the driver is stopping for good (no relaunch after a drain).
        resume_action: what a relaunched task is told to do (run, or pause when the
            connector is paused).
    """

    def __init__(
        self,
        spark: Any,
        spec_for: Callable[[TaskHandle], TaskSpec],
        lock: threading.Condition,
        shutting_down: Callable[[], bool],
        resume_action: Callable[[], Action],
        connector: str,
    ) -> None:
        self._spark = spark
        self._spec_for = spec_for
        self._lock = lock
        self._shutting_down = shutting_down
        self._resume_action = resume_action
        self._connector = connector

    def launch(self, handle: TaskHandle) -> None:
        from pyspark import InheritableThread

        handle.done.clear()
        handle.thread = InheritableThread(target=self._run, args=(handle,), name=f"task-{handle.task_id}",
                                          daemon=True)
        handle.thread.start()

    def cancel(self, handle: TaskHandle) -> None:
        """Cancel the task's Spark job (its runner gets no closing commit)."""
        try:
            self._spark.sparkContext.cancelJobGroup(f"task-{handle.task_id}")
        except Exception:  # noqa: BLE001 - Spark itself may be gone
            log.exception("could not cancel the Spark job of task %d", handle.task_id)

    def _run(self, handle: TaskHandle) -> None:
        sc = self._spark.sparkContext
        while True:
            with self._lock:
                handle.attempt += 1
                spec = self._spec_for(handle)
            sc.setJobGroup(f"task-{handle.task_id}",
                           f"{self._connector} task {handle.task_id} attempt {handle.attempt}",
                           interruptOnCancel=True)
            try:
                result = sc.parallelize([spec], 1).mapPartitions(run_task_partition).collect()
                final = TaskReport.from_json(result[0])
            except Exception as exc:  # noqa: BLE001 - the job itself failed (executor lost, cancelled)
                final = TaskReport(handle.task_id, handle.attempt, TaskState.FAILED, "", trace=trace_of(exc))
            with self._lock:
                handle.report = final
                handle.window.add(final)
                handle.state = final.state
                handle.trace = final.trace
                relaunch = final.state is TaskState.DRAINED
                if relaunch:
                    handle.drains += 1
                    handle.last_drain = final
                    relaunch = not self._shutting_down() and handle.directive.action is not Action.STOP
                    if relaunch:
                        handle.direct(self._resume_action())
                        handle.state = TaskState.RESTARTING
                self._lock.notify_all()
            if not relaunch:
                handle.done.set()
                log.info("task %s-%d ended %s", self._connector, handle.task_id, final.state.value)
                return
            log.info("task %s-%d drained; relaunching", self._connector, handle.task_id)
