"""The driver's side of one task: its directive, latest report, and the Spark job loop.

Each task runs as one long-running Spark job of one partition, launched from its own
driver thread with job group ``task-<id>``. When the job returns ``DRAINED`` (after a
drain or a restart) the thread launches it again; Spark places the new attempt.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conveyor.control.protocol import Action, Directive, TaskReport, TaskSpec, TaskState, trace_of
from conveyor.runtime.report_window import ReportWindow

log = logging.getLogger(__name__)


@dataclass
class TaskHandle:
    """The driver's view of one task.

    Attributes:
        drains: how many runs of this task ended ``DRAINED`` (a drain waits for it to grow).
        last_drain: the final report of the latest drained run (its closing commit).
        window: the reports of the last minute, for Kafka Connect's rates and ratios
            (:mod:`conveyor.runtime.report_window`).
        cleaned_up: the connector-deleted stop path ran for this task in the driver after
            its run ended without it (a task that had failed); ``cleanup_error`` says why
            that failed.
    """

    task_id: int
    config: dict[str, Any]
    attempt: int = 0
    directive: Directive = field(default_factory=Directive)
    report: TaskReport | None = None
    thread: threading.Thread | None = None
    done: threading.Event = field(default_factory=threading.Event)
    state: TaskState = TaskState.UNASSIGNED
    trace: str | None = None
    drains: int = 0
    last_drain: TaskReport | None = None
    window: ReportWindow = field(default_factory=ReportWindow)
    cleaned_up: bool = False
    cleanup_error: str | None = None

    @property
    def pod(self) -> str:
        return self.report.pod if self.report else ""

    def direct(self, action: Action, connector_deleted: bool = False) -> None:
        """Give the task a new directive (the caller holds the driver's lock and notifies)."""
        self.directive = Directive(action, self.directive.version + 1, connector_deleted)

    def stop_entry(self) -> dict[str, Any]:
        """This task in a stop report: ``{"id", "state", "committed", "last_closing_commit",
        "closing_commit_error", "trace", "cleaned_up", "cleanup_error"}``."""
        report = self.report
        return {"id": self.task_id, "state": self.state.value, "committed": report.committed if report else {},
                "last_closing_commit": report.last_closing_commit if report else None,
                "closing_commit_error": report.closing_commit_error if report else None, "trace": self.trace,
                "cleaned_up": self.cleaned_up, "cleanup_error": self.cleanup_error}

    @property
    def ended_without_deleted_stop(self) -> bool:
        """The run ended (failed, or its ``stop(connector_deleted=True)`` raised) without the
        connector-deleted stop path having run to its end."""
        return self.done.is_set() and (self.state is not TaskState.STOPPED or self.trace is not None)

    def status_entry(self, source: bool) -> dict[str, Any]:
        """This task in the driver's status document: Kafka Connect's ``{"id", "state",
        "worker_id", "trace"}`` with Conveyor's ``attempt`` and, once the task has reported,
        its ``pod``, ``assignment``, ``committed`` / ``lag`` (``{"topic:partition": int}``)
        and counters; ``source`` adds the source task's counters and ``source_offsets``."""
        r = self.report
        entry: dict[str, Any] = {"id": self.task_id, "state": self.state.value,
                                 "worker_id": r.worker_id if r else "", "attempt": self.attempt}
        if self.trace:
            entry["trace"] = self.trace
        if r is not None:
            entry.update(pod=r.pod, assignment=r.assignment, committed=r.committed, lag=r.lag,
                         records_read=r.records_read, records_put=r.records_put, records_skipped=r.records_skipped,
                         dlq_records=r.dlq_records, commits=r.commits, closing_commits=r.closing_commits)
            if source:
                entry.update(records_written=r.records_written, transactions=r.transactions,
                             source_offsets=r.source_offsets)
        return entry

    def take_report(self, report: TaskReport) -> bool:
        """Record a runner's report unless it belongs to an older attempt."""
        if report.attempt != self.attempt:
            return False
        self.report = report
        self.window.add(report)
        if not self.state.is_final or report.state.is_final:
            self.state = report.state
        self.trace = report.trace
        return True


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
        from conveyor.runtime.task.executor import run_task_partition

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
