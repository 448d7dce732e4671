"""What ``conveyor run --stay-after-stop`` serves when the connector could not start.

In a Deployment an exiting driver is restarted, fails the same way and crash-loops. With
``--stay-after-stop`` it serves this instead until SIGTERM: ``GET /status`` reports the
connector FAILED with the reason (the operator shows it as ``Degraded``), and
``POST /stop?connector_deleted=true`` still runs the connector-deleted stop path, as
``conveyor cleanup`` would, so deleting the Connector can clean up.
"""

from __future__ import annotations

from dataclasses import asdict
from http import HTTPStatus
from typing import Any

from prometheus_client import CollectorRegistry

from conveyor.control.errors import OperationError
from conveyor.manifest import ConnectorManifest
from conveyor.runtime.deletion.cleanup import cleanup_connector


class FailedStart:
    """Stands in for a :class:`~conveyor.runtime.driver.driver.Driver` behind the control API: a
    :class:`~conveyor.runtime.herder.protocol.Herder`.

    Every operation other than ``status`` and ``stop`` answers 409. Methods are called on
    the control API's request threads.
    """

    def __init__(self, manifest: ConnectorManifest, error: str) -> None:
        self.manifest = manifest
        self.name = manifest.name
        self.error = error
        self.metrics_registry = CollectorRegistry()
        self.stop_result: dict[str, Any] | None = None

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "connector": {"state": "FAILED", "worker_id": "", "trace": self.error},
                "tasks": [], "type": "unknown"}

    def stop(self, connector_deleted: bool = False, timeout_s: float | None = None,
             delete_offsets: bool = False) -> dict[str, Any]:
        """Nothing runs, so a plain stop does nothing; a connector-deleted one (or
        ``delete_offsets``) runs :func:`conveyor.runtime.deletion.cleanup.cleanup_connector`, whose
        failure is reported in ``connector_trace`` / ``offsets_error``, never raised."""

        result: dict[str, Any] = {"name": self.name, "connector_deleted": connector_deleted, "tasks": [],
                                  "removed": [], "connector_trace": None, "offsets_deleted": None,
                                  "offsets_error": None}
        if connector_deleted or delete_offsets:
            timeout = timeout_s or float(self.manifest.spec.shutdown.grace_period_seconds)
            try:
                done = asdict(cleanup_connector(self.manifest, timeout_s=timeout, delete_offsets=delete_offsets,
                                                connector_cleanup=connector_deleted))
            except Exception as exc:  # noqa: BLE001 - reported to the caller
                result["connector_trace"] = f"{type(exc).__name__}: {exc}"
            else:
                result.update(removed=done["removed"], offsets_deleted=done["offsets_deleted"],
                              offsets_error=done["offsets_error"])
        self.stop_result = result
        return result

    def __getattr__(self, item: str) -> Any:
        def refuse(*_: Any, **__: Any) -> Any:
            raise OperationError(HTTPStatus.CONFLICT, f"connector {self.name} failed to start: {self.error}")
        return refuse
