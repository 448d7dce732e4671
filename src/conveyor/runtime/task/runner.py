"""What sink and source task runners share: the control link, the sequence of one run,
and the final report.

One run, on the Spark task's thread: ``_start`` → ``_loop`` until a stop or drain
directive → ``_close(clean=True)`` (the closing commit or final offset flush) →
``task.stop(connector_deleted)`` → ``_release`` → the final report. A failure skips to
``_close(clean=False)`` and ends ``FAILED``; a fenced producer ends ``FENCED`` without
closing (a newer generation owns the task's work, KIP-618).
"""

from __future__ import annotations

import abc
import logging
import os
import sys
import threading
import time
import traceback
from typing import Any

from conveyor.control.protocol import Action, TaskReport, TaskSpec, TaskState, current_pod, trace_of
from conveyor.runtime.task.control_link import ControlLink
from conveyor.runtime.task.meter import TaskMeter

log = logging.getLogger(__name__)

PROFILE_DIR_ENV = "CONVEYOR_TASK_PROFILE_DIR"
REPORT_INTERVAL_S = 0.5
FINAL_REPORT_MARGIN_S = 2.0
"""Time kept from the closing timeout for the final report to reach the driver."""


class TaskFailed(Exception):
    """The task must stop as ``FAILED``; ``__cause__`` is the reason."""


class TaskFenced(Exception):
    """A newer generation took over this task's transactional id (KIP-618)."""


class TaskRunner(abc.ABC):
    """Base of :class:`SinkTaskRunner` and :class:`SourceTaskRunner`; ``run()`` returns the
    final report and never raises for a failure of the task itself."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec
        self.pod = current_pod()
        self.worker_id = f"{self.pod}/{os.getpid()}"
        self.state = TaskState.UNASSIGNED
        self.trace: str | None = None
        self.task: Any = None
        self.meter = TaskMeter()  # batches, commits, transactions: Kafka Connect's windowed task metrics
        self.link = ControlLink(spec.control_url, spec.task_id, lambda: self._report_cache,
                                token=spec.control_token)
        self._report_cache: TaskReport | None = None
        self._report_at = 0.0
        self._closing_deadline: float | None = None
        self._stack_dump: threading.Timer | None = None

    def _profiled(self, loop: Any) -> Any:
        """``loop()``, under :mod:`cProfile` when ``$CONVEYOR_TASK_PROFILE_DIR`` names a
        directory: the task's profile is written there as ``<connector>-<task>.prof``
        (for benchmarks; the profiler slows the task down)."""
        folder = os.environ.get(PROFILE_DIR_ENV)
        if not folder:
            return loop()
        import cProfile

        profile = cProfile.Profile()
        try:
            return profile.runcall(loop)
        finally:
            profile.dump_stats(os.path.join(folder, f"{self.where}.prof"))

    @property
    def where(self) -> str:
        """``<connector>-<task>`` for log lines."""
        return f"{self.spec.connector}-{self.spec.task_id}"

    def run(self) -> TaskReport:
        self.report(fresh=True)
        # The driver's directive before the first poll: a task of a paused connector must
        # not deliver the records it finds on its first poll.
        self.link.sync_now()
        self.link.start()
        final = TaskState.STOPPED
        connector_deleted = False
        try:
            self._start()
            self.meter.running()
            final, connector_deleted = self._profiled(self._loop)
            self._close(clean=True)
        except TaskFenced as exc:
            final = TaskState.FENCED
            self.trace = f"fenced: {exc}"
            log.error("task %s fenced: %s", self.where, exc)
        except TaskFailed as exc:
            final = TaskState.FAILED
            self._record_failure(exc.__cause__ or exc)
            self._close_quietly()
        except Exception as exc:  # noqa: BLE001 - anything else is a task failure too
            final = TaskState.FAILED
            self._record_failure(exc)
            self._close_quietly()
        self._stop_task(connector_deleted)
        self._release()
        self.state = final
        report = self.report(fresh=True)
        self.link.sync_now()
        self.link.stop()
        if self._stack_dump is not None:
            self._stack_dump.cancel()
        return report

    def _leaving(self) -> tuple[TaskState, bool] | None:
        """The final state and ``connector_deleted`` when the directive says to stop or
        drain; ``None`` to go on. Arms a stack dump in case closing takes nearly all its time."""
        directive = self.link.directive
        if directive.action not in (Action.STOP, Action.DRAIN):
            return None
        self._start_closing()
        self._arm_stack_dump(max(1.0, self.spec.closing_timeout_s - 5))
        if directive.action is Action.DRAIN:
            return TaskState.DRAINED, False
        return TaskState.STOPPED, directive.connector_deleted

    def _arm_stack_dump(self, delay_s: float) -> None:
        """Log every thread's stack if closing is still running after ``delay_s``. A Python
        timer that holds the GIL, not faulthandler's watchdog: that one reads other threads'
        frames without it and crashed a worker mid-close (the task then ended FAILED)."""
        if self._stack_dump is None:
            self._stack_dump = threading.Timer(delay_s, self._log_stacks)
            self._stack_dump.daemon = True
            self._stack_dump.start()

    def _log_stacks(self) -> None:
        stacks = "\n".join(f"Thread {ident}:\n{''.join(traceback.format_stack(frame))}"
                           for ident, frame in sys._current_frames().items())
        log.warning("task %s: closing is still running; stacks:\n%s", self.where, stacks)

    def _start_closing(self) -> None:
        if self._closing_deadline is None:
            self._closing_deadline = time.monotonic() + self.spec.closing_timeout_s - FINAL_REPORT_MARGIN_S

    def closing_time_left(self) -> float:
        """Seconds left for closing before the driver's grace period (``closing_timeout_s``,
        counted from the stop or drain directive, or from a failure) runs out, less
        :data:`FINAL_REPORT_MARGIN_S`; may be negative."""
        self._start_closing()
        assert self._closing_deadline is not None
        return self._closing_deadline - time.monotonic()

    # hooks of the subclasses -----------------------------------------------------------

    @abc.abstractmethod
    def _start(self) -> None:
        """Create the task, its clients and converters; ``task.start``."""

    @abc.abstractmethod
    def _loop(self) -> tuple[TaskState, bool]:
        """Run until a stop or drain directive; return :meth:`_leaving`'s answer."""

    @abc.abstractmethod
    def _close(self, clean: bool) -> None:
        """The closing commit (sinks) or the final offsets (sources); ``clean`` is false after a failure."""

    def _release(self) -> None:
        """Close the Kafka clients and everything else the run opened."""

    @abc.abstractmethod
    def _build_report(self, **common: Any) -> TaskReport:
        """The report: ``common`` holds the fields every task reports."""

    # shared ------------------------------------------------------------------------------

    def _close_quietly(self) -> None:
        try:
            self._close(clean=False)
        except Exception:
            log.exception("task %s: closing after the failure failed", self.where)

    def _stop_task(self, connector_deleted: bool) -> None:
        if self.task is None:
            return
        try:
            self.task.stop(connector_deleted=connector_deleted)
        except Exception as exc:
            log.exception("task %s: stop() failed", self.where)
            if self.trace is None:
                self.trace = f"stop(connector_deleted={connector_deleted}) failed: {exc}"

    def _record_failure(self, exc: BaseException) -> None:
        self.trace = trace_of(exc)
        log.error("task %s failed: %s: %s", self.where, type(exc).__name__, exc)

    def report(self, fresh: bool = False) -> TaskReport:
        """Publish the task's current report for the control link; rebuilt at most every
        0.5 s unless ``fresh``. Called on the task thread only."""
        now = time.monotonic()
        if not fresh and self._report_cache is not None and now - self._report_at < REPORT_INTERVAL_S:
            return self._report_cache
        tolerance = getattr(self, "tolerance", None)  # set by the subclass's _start
        report = self._build_report(
            task_id=self.spec.task_id, attempt=self.spec.attempt, state=self.state, worker_id=self.worker_id,
            trace=self.trace, pod=self.pod, **self.meter.report_fields(),
            **(tolerance.report_fields() if tolerance is not None else {}),
        )
        self._report_cache, self._report_at = report, now
        return report
