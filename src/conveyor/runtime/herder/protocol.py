"""The face of one connector's driver that the control API serves and reads: Kafka Connect's
``Herder``, for one connector.

:class:`~conveyor.runtime.driver.driver.Driver` implements it;
:class:`~conveyor.runtime.driver.failed_start.FailedStart` stands in for it when the connector
could not start (every operation but ``status`` and ``stop`` is refused with 409). The REST room
(:mod:`conveyor.runtime.rest`) and the metrics collectors know a driver only through it.

Operations are called on the control API's worker threads; each returns the JSON document the
endpoint answers with, and raises :class:`~conveyor.control.errors.OperationError` (with the
HTTP status) when it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from conveyor.api import Connector
from conveyor.control.protocol import Directive, TaskReport, TaskState
from conveyor.manifest import ConnectorManifest, ConnectorSpec, ConnectorState
from conveyor.runtime.herder.lifecycle import Lifecycle
from conveyor.runtime.herder.task_handles import TaskHandle


class Herder(Protocol):
    """One connector's driver, as the control API sees it (read-only properties: an
    implementation may keep them as plain attributes).

    Attributes:
        name: the connector's name.
        manifest: the running manifest (references resolved).
        written_spec: the spec as written (``${secret:...}`` references unresolved), for
            Kafka Connect's config documents.
        kafka: the librdkafka properties of the connector's Kafka clients (holds secrets).
        connector: the running :class:`~conveyor.api.Connector` instance, ``None`` when none
            runs (stopped, failed).
        connector_type: ``"sink"``, ``"source"`` or ``"unknown"``.
        connector_state: the connector instance's state (Kafka Connect's states).
        tasks: the driver's view of each task, by task id.
        lifecycle: the driver's state machine (its phase: starting, running, stopping...).
        operations: held by an operation that must not interleave with a restart, a
            reconfiguration or a stop (re-entrant).
        metrics_registry: what ``GET /metrics`` serves.
    """

    @property
    def name(self) -> str: ...

    @property
    def manifest(self) -> ConnectorManifest: ...

    @property
    def written_spec(self) -> ConnectorSpec: ...

    @property
    def kafka(self) -> dict[str, str]: ...

    @property
    def connector(self) -> Connector | None: ...

    @property
    def connector_type(self) -> str: ...

    @property
    def connector_state(self) -> TaskState: ...

    @property
    def tasks(self) -> Mapping[int, TaskHandle]: ...

    @property
    def lifecycle(self) -> Lifecycle: ...

    @property
    def operations(self) -> AbstractContextManager[Any]: ...

    @property
    def metrics_registry(self) -> CollectorRegistry: ...

    def status(self) -> dict[str, Any]:
        """Kafka Connect's status document: ``{"name", "connector": {...}, "tasks": [...], "type"}``."""
        ...

    def sync(self, task_id: int, report: TaskReport, known_version: int, wait_ms: int) -> Directive:
        """Take a task runner's report; answer its directive, waiting up to ``wait_ms``
        milliseconds for a change when the runner already knows version ``known_version``."""
        ...

    def stop(self, connector_deleted: bool = False, timeout_s: float | None = None,
             delete_offsets: bool = False) -> dict[str, Any]:
        """Stop for good: closing commits, ``stop(connector_deleted)``, then the offsets when
        ``delete_offsets``; waits up to ``timeout_s`` seconds (default: the grace period)."""
        ...

    def drain(self, pod: str | None = None, task_id: int | None = None,
              timeout_s: float | None = None) -> dict[str, Any]:
        """Closing commits of the tasks on ``pod`` (or of task ``task_id``), which then run again."""
        ...

    def restart(self, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any]:
        """Kafka Connect's connector restart (KIP-745)."""
        ...

    def restart_task(self, task_id: int) -> dict[str, Any]:
        """A closing commit of one task and a new run of it (asynchronous)."""
        ...

    def set_state(self, target: ConnectorState) -> dict[str, Any]:
        """Move to ``running``, ``paused`` or ``stopped``."""
        ...

    def pause(self) -> dict[str, Any]:
        ...

    def push_log_levels(self) -> None:
        """Send the log levels set in the driver's process to every running task's process."""
        ...

    def resume(self) -> dict[str, Any]:
        ...

    def reconfigure(self, spec: ConnectorSpec, written: ConnectorSpec | None = None) -> dict[str, Any]:
        """Apply a new spec (references resolved; ``written`` as written): closing commits, then
        the connector and its tasks restart with it."""
        ...
