"""``conveyor cleanup``: the connector-deleted stop path for a connector that is not running.

Starts the connector and each of its tasks only to stop them with
``connector_deleted=True`` (KAFKA-14651), in this process and without Spark or Kafka
consumers: no data moves. Safe to repeat: a connector's cleanup must be idempotent.
Transient failures (anything but a configuration error) are retried with exponential
backoff until the deadline.

With ``delete_offsets`` (``spec.deletionPolicy.offsets: delete``) the connector's offsets
are deleted afterwards, as the driver's stop does (:mod:`conveyor.runtime.deletion.offsets`):
the sink consumer group ``connect-<name>``, or tombstones for the source offsets and the
task-count record. That part can run alone (``connector_cleanup=False``), for a connector
whose ``deletionPolicy.cleanup`` is false or whose driver stopped before deleting them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, retry_if_not_exception_type, wait_exponential
from tenacity.retry import retry_base

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
    Task,
    TopicPartition,
    TransactionContext,
)
from conveyor.control.protocol import trace_of
from conveyor.manifest import ConnectorManifest, ManifestError
from conveyor.runtime.config.validation import connector_class

log = logging.getLogger(__name__)


class CleanupError(RuntimeError):
    """Cleanup could not finish; the message says why (the last error)."""


@dataclass
class CleanupResult:
    """What a finished cleanup did.

    Attributes:
        name: the connector.
        removed: what the connector reported removing (``cleanup_report()``).
        tasks: how many tasks were started and stopped with ``connector_deleted=True``.
        attempts: attempts of the connector-deleted stop path (0 when not run).
        offsets_deleted: with ``delete_offsets``: what was deleted, as in
            :meth:`conveyor.runtime.driver.driver.Driver.stop`'s result; else ``None``.
        offsets_error: with ``delete_offsets``: why deleting the offsets failed (after
            retries), else ``None``.
    """

    name: str
    removed: list[str] = field(default_factory=list)
    tasks: int = 0
    attempts: int = 1
    offsets_deleted: dict[str, Any] | None = None
    offsets_error: str | None = None

    @property
    def ok(self) -> bool:
        """Everything asked for was done (no ``offsets_error``)."""
        return self.offsets_error is None


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


def stop_idle_task(task_class: type[Task], config: Mapping[str, Any]) -> None:
    """Start a task of ``task_class`` with ``config`` (its ``task_configs`` entry, ``name``
    included) on an idle context -- no partitions, no offsets -- only to stop it with
    ``connector_deleted=True``: its connector-deleted stop path, with no data moving. Blocking,
    on the caller's thread.

    Raises:
        Exception: whatever the task's ``initialize``, ``start`` or ``stop`` raised.
    """
    task = task_class()
    if isinstance(task, SinkTask):
        task.initialize(_IdleSinkContext(config))
    elif isinstance(task, SourceTask):
        task.initialize(_IdleSourceContext(config))
    task.start(dict(config))
    task.stop(connector_deleted=True)


def _clean_once(cls: type[Connector], manifest: ConnectorManifest) -> CleanupResult:
    config = {**manifest.spec.config, "name": manifest.name}
    connector = cls()
    connector.initialize(_Context())
    connector.validate(config)
    connector.start(config)
    task_count = 0
    try:
        for task_config in connector.task_configs(manifest.spec.tasks_max):
            stop_idle_task(connector.task_class(), {**task_config, "name": manifest.name})
            task_count += 1
    finally:
        connector.stop(connector_deleted=True)
    return CleanupResult(manifest.name, list(connector.cleanup_report()), task_count)


def cleanup_connector(
    manifest: ConnectorManifest,
    timeout_s: float = 300.0,
    initial_backoff_s: float = 1.0,
    max_backoff_s: float = 30.0,
    delete_offsets: bool = False,
    connector_cleanup: bool = True,
) -> CleanupResult:
    """Run the connector-deleted stop path for ``manifest`` without running it, then, with
    ``delete_offsets``, delete its offsets. Blocking, on the caller's thread.

    Args:
        timeout_s: seconds to keep retrying transient failures (both parts share it).
        delete_offsets: also delete the offsets (sink consumer group / source offsets).
        connector_cleanup: run the connector-deleted stop path (``False``: offsets only).

    Returns:
        What was done; a failure to delete the offsets is in ``offsets_error`` (see
        :attr:`CleanupResult.ok`), not raised.

    Raises:
        CleanupError: the configuration is invalid (no retry; a Kafka Secret that is not
            mounted included), or the connector-deleted stop path kept failing until
            ``timeout_s`` seconds passed; the message carries the last error.
    """
    cls, connector_type = connector_class(manifest.spec.connector_class)
    deadline = time.monotonic() + timeout_s
    if connector_cleanup:
        result = _retry(lambda: _clean_once(cls, manifest), manifest.name, deadline, timeout_s, initial_backoff_s,
                        max_backoff_s)
    else:
        result = CleanupResult(manifest.name, attempts=0)
    if delete_offsets:
        _delete_offsets(manifest, connector_type, result, deadline, initial_backoff_s, max_backoff_s)
    return result


def _retrying(deadline: float, initial_backoff_s: float, max_backoff_s: float, retry: retry_base,
              before_sleep: Callable[[RetryCallState], None]) -> Retrying:
    """Retries with exponential backoff (``initial_backoff_s`` doubling up to ``max_backoff_s``)
    for as long as the next wait still ends before ``deadline`` (``time.monotonic()``); the last
    error is raised as it was."""
    return Retrying(retry=retry, wait=wait_exponential(multiplier=initial_backoff_s, max=max_backoff_s),
                    stop=lambda state: deadline - time.monotonic() <= (state.upcoming_sleep or 0.0),
                    before_sleep=before_sleep, reraise=True)


def _retry(once: Callable[[], CleanupResult], name: str, deadline: float, timeout_s: float, initial_backoff_s: float,
           max_backoff_s: float) -> CleanupResult:
    def warn(state: RetryCallState) -> None:
        log.warning("cleanup of %s failed (attempt %d), retrying in %.1fs: %s", name, state.attempt_number,
                    state.upcoming_sleep, state.outcome.exception() if state.outcome else None)

    # a configuration error is not transient: no retry
    retrying = _retrying(deadline, initial_backoff_s, max_backoff_s, retry_if_not_exception_type(ConfigError), warn)
    try:
        result = retrying(once)
    except ConfigError as exc:
        raise CleanupError(f"cleanup of {name} cannot start: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - what kept failing until the deadline
        attempts = retrying.statistics.get("attempt_number", 1)
        raise CleanupError(
            f"cleanup of {name} did not finish after {attempts} attempt(s) in {timeout_s:.0f}s: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    result.attempts = retrying.statistics.get("attempt_number", 1)
    return result


def _offsets_error(exc: BaseException) -> str:
    from conveyor.runtime.deletion.offsets import OffsetsDeletionError

    return str(exc) if isinstance(exc, OffsetsDeletionError) else f"{type(exc).__name__}: {exc}"


def _delete_offsets(manifest: ConnectorManifest, connector_type: str, result: CleanupResult, deadline: float,
                    initial_backoff_s: float, max_backoff_s: float) -> None:
    from conveyor.runtime.deletion.offsets import delete_offsets  # Kafka: when deleting offsets

    try:
        kafka = manifest.spec.kafka.client_properties()
    except ManifestError as exc:
        raise CleanupError(f"cleanup of {manifest.name} cannot start: {exc}") from None

    def warn(state: RetryCallState) -> None:
        log.warning("cleanup of %s: deleting offsets failed (attempt %d), retrying in %.1fs: %s", manifest.name,
                    state.attempt_number, state.upcoming_sleep,
                    _offsets_error(state.outcome.exception()) if state.outcome else None)

    retrying = _retrying(deadline, initial_backoff_s, max_backoff_s, retry_if_exception_type(Exception), warn)
    try:
        result.offsets_deleted = retrying(lambda: delete_offsets(
            kafka, manifest.name, connector_type, manifest.metadata.namespace, manifest.spec.config,
            timeout_s=max(5.0, min(60.0, deadline - time.monotonic())),
        ))
        result.offsets_error = None
    except Exception as exc:  # noqa: BLE001 - reported in the result
        result.offsets_error = f"{_offsets_error(exc)} ({retrying.statistics.get('attempt_number', 1)} attempt(s))"
        log.error("cleanup of %s: deleting offsets failed: %s", manifest.name, result.offsets_error)


def cleanup_reported(manifest: ConnectorManifest) -> tuple[list[str], str | None]:
    """:func:`cleanup_connector` for a stop report: ``(what the connector removed, None)``, or
    ``([], the error's trace)`` when it failed; never raises."""
    try:
        return cleanup_connector(manifest).removed, None
    except Exception as exc:  # noqa: BLE001 - reported in the stop result
        return [], trace_of(exc)
