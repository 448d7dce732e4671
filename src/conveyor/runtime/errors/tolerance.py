"""``errors.tolerance``, ``errors.retry.timeout`` and error logging for one task.

As Kafka Connect's ``RetryWithToleranceOperator``: an operation on a record
(conversion, transformation) that raises a :class:`RetriableError` is retried with
exponential backoff (capped by ``errors.retry.delay.max.ms``) until
``errors.retry.timeout`` ms have passed; any failure left over is *tolerated* (the
record is skipped, logged when ``errors.log.enable``, sent to the dead-letter queue when
configured) under ``errors.tolerance=all``, and fails the task under ``none``.
"""

from __future__ import annotations

import abc
import enum
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from conveyor.api import ConnectError, RetriableError
from conveyor.runtime.config.settings import CommonSettings, ErrorTolerance

log = logging.getLogger(__name__)
T = TypeVar("T")


class Stage(str, enum.Enum):
    """Where a record failed, as Kafka Connect's ``Stage`` (the ``__connect.errors.stage`` header)."""

    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"


class ToleranceExceeded(ConnectError):
    """A record failed and ``errors.tolerance=none``: the task fails with this error."""


@dataclass(frozen=True, slots=True)
class FailedRecord:
    """The original Kafka record that failed and where."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None
    timestamp: int | None


class Reporter(abc.ABC):
    """Something that takes a tolerated failure: the dead-letter queue, the log."""

    @abc.abstractmethod
    def report(self, failed: FailedRecord, stage: Stage, cls_name: str, error: BaseException) -> Future[None]:
        """Take one failed record; the future completes when it is durable."""

    def flush(self, timeout_s: float) -> None:
        """Push out what ``report`` queued, so that its futures complete."""

    def close(self) -> None:
        """Release resources (after a final flush)."""


def _done() -> Future[None]:
    f: Future[None] = Future()
    f.set_result(None)
    return f


def _all(futures: list[Future[None]]) -> Future[None]:
    if len(futures) == 1:
        return futures[0]
    combined: Future[None] = Future()
    remaining = [len(futures)]

    def one_done(f: Future[None]) -> None:
        if combined.done():
            return
        if f.exception() is not None:
            combined.set_exception(f.exception())  # type: ignore[arg-type]
            return
        remaining[0] -= 1
        if remaining[0] == 0:
            combined.set_result(None)

    if not futures:
        combined.set_result(None)
    for f in futures:
        f.add_done_callback(one_done)
    return combined


class LogReporter(Reporter):
    """``errors.log.enable``: one log line per failed record."""

    def __init__(self, connector: str, task_id: int, include_messages: bool) -> None:
        self._where = f"{connector}-{task_id}"
        self._include = include_messages
        self.logged = 0

    def report(self, failed: FailedRecord, stage: Stage, cls_name: str, error: BaseException) -> Future[None]:
        extra = f" key={failed.key!r} value={failed.value!r}" if self._include else ""
        log.error(
            "task %s: error in stage %s (%s) for record %s-%d@%d: %s%s",
            self._where, stage.value, cls_name, failed.topic, failed.partition, failed.offset, error, extra,
        )
        self.logged += 1
        return _done()


class ToleranceOperator:
    """Applies one task's error settings; called on the task's thread."""

    def __init__(self, settings: CommonSettings, reporters: list[Reporter]) -> None:
        self.tolerance = settings.errors_tolerance
        self.retry_timeout_ms = settings.errors_retry_timeout
        self.retry_delay_max_ms = settings.errors_retry_delay_max_ms
        self.reporters = reporters
        self.failed_count = 0  # records that failed and were tolerated (skipped)
        self.retries = 0  # operations retried (errors.retry.timeout)
        self.last_error_ms = 0  # when a record last failed for good (epoch milliseconds)
        self.pending: list[Future[None]] = []

    def retry(self, operation: Callable[[], T], first_error: BaseException) -> T:
        """Retry ``operation`` after it raised ``first_error``, as ``errors.retry.timeout`` allows.

        Raises:
            BaseException: the last error when retries are not allowed or run out.
        """
        if not isinstance(first_error, RetriableError) or self.retry_timeout_ms == 0:
            raise first_error
        deadline = None if self.retry_timeout_ms < 0 else time.monotonic() + self.retry_timeout_ms / 1000
        delay = 0.3
        while True:
            if deadline is not None and time.monotonic() + delay > deadline:
                raise first_error
            time.sleep(delay)
            self.retries += 1
            try:
                return operation()
            except RetriableError as exc:
                first_error = exc
                delay = min(delay * 2, self.retry_delay_max_ms / 1000)

    def close(self) -> None:
        for reporter in self.reporters:
            reporter.close()

    def failed(self, failed: FailedRecord, stage: Stage, cls_name: str, error: BaseException) -> Future[None]:
        """A record failed for good: skip and report it, or fail the task.

        Returns a future that completes when every reporter has the record.

        Raises:
            ToleranceExceeded: when ``errors.tolerance=none``; the message names the
                record's topic, partition and offset.
        """
        self.last_error_ms = int(time.time() * 1000)
        if self.tolerance is ErrorTolerance.NONE:  # the task fails: the record is not skipped, nor counted so
            raise ToleranceExceeded(
                f"Tolerance exceeded in error handler: stage {stage.value} ({cls_name}) failed for record "
                f"{failed.topic}-{failed.partition} at offset {failed.offset}: {type(error).__name__}: {error}"
            ) from error
        self.failed_count += 1
        futures = [reporter.report(failed, stage, cls_name, error) for reporter in self.reporters]
        self.pending.extend(futures)
        return _all(futures)

    def await_reports(self, timeout_s: float) -> None:
        """Wait until every reported record is durable (before offsets past it are committed).

        Raises:
            ConnectError: a report failed or did not finish within ``timeout_s``.
        """
        pending, self.pending = self.pending, []
        if not pending:
            return
        for reporter in self.reporters:
            reporter.flush(timeout_s)
        deadline = time.monotonic() + timeout_s
        for fut in pending:
            try:
                fut.result(timeout=max(0.0, deadline - time.monotonic()))
            except Exception as exc:  # noqa: BLE001 - any failure blocks the commit
                raise ConnectError(f"could not report a failed record: {exc}") from exc


    def report_fields(self) -> dict[str, int]:
        """The :class:`~conveyor.control.protocol.TaskReport` fields of the task's error handling
        (Kafka Connect's ``task-error-metrics``): ``errors_logged`` by ``errors.log.enable``,
        ``dlq_failures`` of the dead-letter queue's producer, ``retries``, ``last_error_ms``."""
        return {"retries": self.retries, "last_error_ms": self.last_error_ms,
                "errors_logged": sum(getattr(r, "logged", 0) for r in self.reporters),
                "dlq_failures": sum(getattr(r, "failures", 0) for r in self.reporters)}


def class_name(obj: Any) -> str:
    """The qualified class name reported for ``obj`` (``__connect.errors.class.name``)."""
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
