"""``conveyor cleanup``: the connector-deleted stop path for a connector that is not running.

Starts the connector and each of its tasks only to stop them with
``connector_deleted=True`` (KAFKA-14651), in this process and without Spark or Kafka
consumers: no data moves. Safe to repeat: a connector's cleanup must be idempotent.
Transient failures (anything but a configuration error) are retried with exponential
backoff until the deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from conveyor.api import (
    ConfigError,
    Connector,
    ConnectorContext,
    ErrantRecordReporter,
    OffsetStorageReader,
    SinkRecord,
    SinkTask,
    SinkTaskContext,
    SourceTask,
    SourceTaskContext,
    TopicPartition,
    TransactionContext,
)
from conveyor.manifest import ConnectorManifest
from conveyor.runtime.preflight import connector_class

log = logging.getLogger(__name__)


class CleanupError(RuntimeError):
    """Cleanup could not finish; the message says why (the last error)."""


@dataclass
class CleanupResult:
    """What a finished cleanup did."""

    name: str
    removed: list[str] = field(default_factory=list)
    tasks: int = 0
    attempts: int = 1


class _Context(ConnectorContext):
    def request_task_reconfiguration(self) -> None:
        """Ignored: nothing runs."""

    def raise_error(self, error: BaseException) -> None:
        raise error


class _NoReporter(ErrantRecordReporter):
    def report(self, record: SinkRecord, error: BaseException) -> Future[None]:
        raise ConfigError({"errors.tolerance": "no records flow during cleanup"})


class _IdleSinkContext(SinkTaskContext):
    """A sink task context with no partitions: cleanup consumes nothing."""

    def __init__(self, configs: Mapping[str, Any]) -> None:
        self._configs = dict(configs)

    def configs(self) -> Mapping[str, Any]:
        return self._configs

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Ignored: nothing is consumed."""

    def timeout(self, timeout: timedelta) -> None:
        """Ignored: nothing is retried."""

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset()

    def pause(self, *partitions: TopicPartition) -> None:
        """Ignored: nothing is assigned."""

    def resume(self, *partitions: TopicPartition) -> None:
        """Ignored: nothing is assigned."""

    def request_commit(self) -> None:
        """Ignored: nothing is committed."""

    def errant_record_reporter(self) -> ErrantRecordReporter:
        return _NoReporter()

    def is_closing(self) -> bool:
        return False


class _NoOffsets(OffsetStorageReader):
    def offset(self, partition: Mapping[str, Any]) -> None:
        return None


class _IdleSourceContext(SourceTaskContext):
    def __init__(self, configs: Mapping[str, Any]) -> None:
        self._configs = dict(configs)

    def configs(self) -> Mapping[str, Any]:
        return self._configs

    def offset_storage_reader(self) -> OffsetStorageReader:
        return _NoOffsets()

    def transaction_context(self) -> TransactionContext | None:
        return None


def _clean_once(cls: type[Connector], manifest: ConnectorManifest) -> CleanupResult:
    config = {**manifest.spec.config, "name": manifest.name}
    connector = cls()
    connector.initialize(_Context())
    connector.validate(config)
    connector.start(config)
    task_count = 0
    try:
        for task_config in connector.task_configs(manifest.spec.tasks_max):
            task_config = {**task_config, "name": manifest.name}
            task = connector.task_class()()
            if isinstance(task, SinkTask):
                task.initialize(_IdleSinkContext(task_config))
            elif isinstance(task, SourceTask):
                task.initialize(_IdleSourceContext(task_config))
            task.start(task_config)
            task.stop(connector_deleted=True)
            task_count += 1
    finally:
        connector.stop(connector_deleted=True)
    return CleanupResult(manifest.name, list(connector.cleanup_report()), task_count)


def cleanup_connector(
    manifest: ConnectorManifest, timeout_s: float = 300.0, initial_backoff_s: float = 1.0, max_backoff_s: float = 30.0
) -> CleanupResult:
    """Run the connector-deleted stop path for ``manifest`` without running it.

    Raises:
        CleanupError: the configuration is invalid (no retry), or cleanup kept failing
            until ``timeout_s`` seconds passed; the message carries the last error.
    """
    cls, _ = connector_class(manifest.spec.connector_class)
    deadline = time.monotonic() + timeout_s
    backoff = initial_backoff_s
    attempt = 0
    while True:
        attempt += 1
        try:
            result = _clean_once(cls, manifest)
            result.attempts = attempt
            return result
        except ConfigError as exc:
            raise CleanupError(f"cleanup of {manifest.name} cannot start: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - anything else may be transient: retry
            remaining = deadline - time.monotonic()
            if remaining <= backoff:
                raise CleanupError(
                    f"cleanup of {manifest.name} did not finish after {attempt} attempt(s) in {timeout_s:.0f}s: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            log.warning("cleanup of %s failed (attempt %d), retrying in %.1fs: %s", manifest.name, attempt, backoff,
                        exc)
            time.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
