"""The driver's side of one task: its directive, latest report and last minute of reports
(its Spark job loop is :class:`conveyor.runtime.driver.task_launcher.TaskLauncher`)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from conveyor.control.protocol import Action, Directive, TaskReport, TaskState
from conveyor.runtime.herder.report_window import ReportWindow

log = logging.getLogger(__name__)


@dataclass
class TaskHandle:
    """The driver's view of one task.

    Attributes:
        drains: how many runs of this task ended ``DRAINED`` (a drain waits for it to grow).
        last_drain: the final report of the latest drained run (its closing commit).
        window: the reports of the last minute, for Kafka Connect's rates and ratios
            (:mod:`conveyor.runtime.herder.report_window`).
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
        self.directive = Directive(action, self.directive.version + 1, connector_deleted, self.directive.log_levels)

    def direct_log_levels(self, levels: tuple[tuple[str, str], ...]) -> None:
        """The same directive with the driver's log levels (the caller holds the lock and notifies)."""
        if levels != self.directive.log_levels:
            self.directive = replace(self.directive, version=self.directive.version + 1, log_levels=levels)

    def stop_entry(self) -> dict[str, Any]:
        """This task in a stop report: ``{"id", "state", "committed", "last_closing_commit",
        "closing_commit_error", "trace", "cleaned_up", "cleanup_error", "batch_path"}``."""
        report = self.report
        return {"id": self.task_id, "state": self.state.value, "committed": report.committed if report else {},
                "batch_path": report.batch_path if report else False,
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
        and counters, and whether its records move as Arrow batches (``batch_path``); ``source``
        adds the source task's counters and ``source_offsets``."""
        r = self.report
        entry: dict[str, Any] = {"id": self.task_id, "state": self.state.value,
                                 "worker_id": r.worker_id if r else "", "attempt": self.attempt}
        if self.trace:
            entry["trace"] = self.trace
        if r is not None:
            entry.update(pod=r.pod, assignment=r.assignment, committed=r.committed, lag=r.lag,
                         records_read=r.records_read, records_put=r.records_put, records_skipped=r.records_skipped,
                         dlq_records=r.dlq_records, commits=r.commits, closing_commits=r.closing_commits,
                         batch_path=r.batch_path)
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
