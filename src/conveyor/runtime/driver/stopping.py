"""How the driver stops (:class:`DriverStopping`, a part of
:class:`~conveyor.runtime.driver.driver.Driver`): closing commits and ``stop(connector_deleted)``
of the tasks, then of the connector, the offsets deleted when asked, and the Spark session closed.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from conveyor.control.protocol import Action, TaskState, trace_of
from conveyor.runtime.config.validation import connector_class
from conveyor.runtime.deletion.cleanup import cleanup_reported, stop_idle_task
from conveyor.runtime.deletion.offsets import delete_offsets_reported

log = logging.getLogger("conveyor.runtime.driver.driver")


class DriverStopping:
    """The stop path of :class:`~conveyor.runtime.driver.driver.Driver`; it uses the driver's
    state, its task launcher and its control API."""

    def _stop_tasks(self, connector_deleted: bool, timeout_s: float | None = None,
                    task_ids: list[int] | None = None) -> None:
        """STOP every task (or those of ``task_ids``) and wait for their closing commits; cancel
        the Spark job of a task that does not finish within the grace period."""
        grace = timeout_s if timeout_s is not None else float(self.manifest.spec.shutdown.grace_period_seconds)
        self._direct(Action.STOP, connector_deleted, task_ids)
        deadline = time.monotonic() + grace
        for handle in [h for h in self.tasks.values() if task_ids is None or h.task_id in task_ids]:
            if not handle.done.wait(max(0.0, deadline - time.monotonic())):
                log.error("task %s-%d did not stop within %.0fs; cancelling its Spark job", self.name,
                          handle.task_id, grace)
                if self._launcher is not None:
                    self._launcher.cancel(handle)
                handle.done.wait(10)

    def stop(self, connector_deleted: bool = False, timeout_s: float | None = None,
             delete_offsets: bool = False) -> dict[str, Any]:
        """Stop for good: every task makes a closing commit and gets
        ``stop(connector_deleted)``, then the connector does; with ``delete_offsets`` the
        connector's offsets are deleted once the tasks are gone (see
        :mod:`conveyor.runtime.deletion.offsets`). Blocks until done. A second call waits
        for the first, then does what it asks and the first did not (the connector-deleted
        path, deleting the offsets) and returns the first's report so completed. A stop
        during :meth:`start` keeps the connector from starting; with ``connector_deleted``
        a connector that never started here is started only to be stopped
        (:mod:`conveyor.runtime.deletion.cleanup`), as a previous run may have provisioned it.

        Args:
            connector_deleted: the connector is being deleted: tasks and connector clean up
                what they provisioned outside Kafka (KAFKA-14651). A task whose run had
                ended without it (a failed task) gets it here, on an idle context
                (``cleaned_up`` / ``cleanup_error`` in its entry).
            timeout_s: grace period of the tasks' closing commits (default
                ``shutdown.gracePeriodSeconds``); a task still running then is cancelled.
            delete_offsets: ``spec.deletionPolicy.offsets: delete``: delete the sink consumer
                group ``connect-<name>`` / tombstone the source offsets and task-count record.

        Returns:
            ``{"name", "connector_deleted", "tasks": [{"id", "state", "committed",
            "last_closing_commit", "closing_commit_error", "trace", "cleaned_up", "cleanup_error"}],
            "removed": [what the connector reported
            removing], "connector_trace", "offsets_deleted", "offsets_error"}``.
            ``offsets_deleted`` is ``None`` unless offsets were deleted, else
            ``{"consumer_group": "connect-<name>", "existed": bool}`` (sink) or
            ``{"offsets_topic", "source_partitions", "tombstones", "task_count_record"}``
            (source); ``offsets_error`` is ``None`` or why the deletion failed (then
            ``offsets_deleted`` is ``None``). Failures are reported, never raised.
        """
        if not self.lifecycle.begin_stop():
            with self.lifecycle.later_stop():
                self.stopped.wait(timeout_s or self.manifest.spec.shutdown.grace_period_seconds + 30)
                if self.stop_result is None:
                    return {"name": self.name, "stopped": True}
                return self._finish_deletion(connector_deleted, delete_offsets)
        with self.operations:
            log.info("stopping connector %s (connector_deleted=%s, delete_offsets=%s)", self.name,
                     connector_deleted, delete_offsets)
            running = self.connector is not None
            self._stop_tasks(connector_deleted, timeout_s)
            if connector_deleted:
                self._clean_up_ended_tasks()
            removed = self._stop_connector(connector_deleted)
            if connector_deleted and not running:  # never started here (stopped state, a failure, a stop
                removed = self._cleanup_stopped_connector()  # during start-up): an earlier run may have provisioned
            self.connector_state = TaskState.STOPPED
            offsets_deleted, offsets_error = self._delete_offsets() if delete_offsets else (None, None)
            self.stop_result = {
                "name": self.name,
                "connector_deleted": connector_deleted,
                "tasks": [h.stop_entry() for h in self.tasks.values()],
                "removed": removed,
                "connector_trace": self.connector_trace,
                "offsets_deleted": offsets_deleted,
                "offsets_error": offsets_error,
            }
        self.lifecycle.finish_stop()
        return self.stop_result

    def _finish_deletion(self, connector_deleted: bool, delete_offsets: bool) -> dict[str, Any]:
        """A stop after an earlier one (a plain stop, a SIGTERM): what this one asks for and the
        first did not do -- the connector-deleted path, the offsets' deletion -- runs now; the
        first stop's report, completed, is returned."""
        assert self.stop_result is not None
        with self.operations:
            result = self.stop_result
            if connector_deleted and not result["connector_deleted"]:
                log.info("connector %s: deleted after it stopped: running the connector-deleted stop path", self.name)
                result["removed"] = self._cleanup_stopped_connector()
                result["connector_trace"] = self.connector_trace
                result["connector_deleted"] = True
            if delete_offsets and result["offsets_deleted"] is None:
                result["offsets_deleted"], result["offsets_error"] = self._delete_offsets()
            return result

    def _delete_offsets(self) -> tuple[dict[str, Any] | None, str | None]:
        return delete_offsets_reported(self.kafka, self.name, self.connector_type, self.manifest.metadata.namespace,
                                       self.manifest.spec.config)

    def _clean_up_ended_tasks(self) -> None:
        """The connector-deleted stop path, here on the driver, for each task whose run ended
        without it (it had failed) and each task a stop during start-up kept from being launched:
        the task is started on an idle context only to be stopped
        (:func:`conveyor.runtime.deletion.cleanup.stop_idle_task`), as ``conveyor cleanup`` would."""

        ended = [h for h in self.tasks.values() if h.ended_without_deleted_stop]
        unlaunched, self._unlaunched = self._unlaunched, []
        if not ended and not unlaunched:
            return
        connector = self.connector
        if connector is None:
            cls, _ = connector_class(self.manifest.spec.connector_class)
            connector = self._new_connector(cls)
        task_class = connector.task_class()
        for task_id, config in enumerate(unlaunched):  # a stop while Spark started: never launched
            try:
                stop_idle_task(task_class, config)
            except Exception as exc:  # noqa: BLE001 - reported in the stop result
                log.exception("task %s-%d: the connector-deleted stop path failed", self.name, task_id)
                self.connector_trace = trace_of(exc)
        for handle in ended:
            try:
                stop_idle_task(task_class, handle.config)
                handle.cleaned_up, handle.cleanup_error = True, None
                log.info("task %s-%d: connector-deleted stop path run on the driver (its run had ended %s)",
                         self.name, handle.task_id, handle.state.value)
            except Exception as exc:  # noqa: BLE001 - reported in the stop result
                log.exception("task %s-%d: the connector-deleted stop path failed", self.name, handle.task_id)
                handle.cleanup_error = trace_of(exc)

    def _cleanup_stopped_connector(self) -> list[str]:
        """The connector-deleted path for a connector not running here (:mod:`conveyor.runtime.deletion.cleanup`)."""

        removed, trace = cleanup_reported(self.manifest)
        self.connector_trace = trace or self.connector_trace
        return removed

    def _stop_connector(self, connector_deleted: bool) -> list[str]:
        connector, self.connector = self.connector, None
        if connector is None:
            return []
        try:
            connector.stop(connector_deleted=connector_deleted)
            return list(connector.cleanup_report()) if connector_deleted else []
        except Exception as exc:  # noqa: BLE001 - reported in the stop result
            log.exception("connector %s: stop(connector_deleted=%s) failed", self.name, connector_deleted)
            self.connector_trace = trace_of(exc)
            return []

    def close(self) -> None:
        """Release the control API and, when the driver created it, the SparkSession, once no
        later stop runs (a connector-deleted stop that came during a SIGTERM stop finishes)."""
        self.lifecycle.wait_later_stops(self.manifest.spec.shutdown.grace_period_seconds + 60)
        self._stop_control_api()
        if self._group_lag is not None:
            self._group_lag.close()
        if self._own_spark and self._spark is not None:
            gateway = getattr(type(self._spark.sparkContext), "_gateway", None)
            self._spark.stop()
            self._spark = None
            if self._class_data is not None:  # this run's JVM writes the class-data archive as it exits
                self._class_data.finish(getattr(gateway, "proc", None))
                self._class_data = None

    def fail_connector(self, error: BaseException) -> None:
        """The connector reported a fatal error: it shows FAILED and its tasks stop."""
        self.connector_state = TaskState.FAILED
        self.connector_trace = trace_of(error)
        log.error("connector %s failed: %s", self.name, error)
        threading.Thread(target=self._stop_tasks_of_failed_connector, name="connector-failed", daemon=True).start()

    def _stop_tasks_of_failed_connector(self) -> None:
        with self.operations:  # ordered with restarts, reconfigurations and stops
            if self.connector_state is TaskState.FAILED:  # not restarted in between
                self._stop_tasks(connector_deleted=False)
