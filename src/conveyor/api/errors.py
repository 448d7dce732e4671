"""Typed errors that connectors raise and the runtime interprets.

As in Kafka Connect's ``org.apache.kafka.connect.errors``: a hook that raises
:class:`RetriableError` asks for the same work to be tried again; any other
exception stops the task, which then shows ``FAILED`` with the error in its status.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any


class ConnectError(Exception):
    """Base class of every error the connector API defines.

    Raised from a task hook (other than as :class:`RetriableError`) it fails the task.
    """


class RetriableError(ConnectError):
    """A transient failure: the runtime retries the same call later.

    From ``SinkTask.put`` the runtime pauses the task's partitions, keeps the consumer in
    its group and redelivers the same batch after ``delay`` (or ``context.timeout()``,
    whichever the task set last). From ``SourceTask.poll`` the runtime calls ``poll``
    again after ``delay``.

    Args:
        message: what went wrong.
        delay: how long to wait before the retry; ``None`` lets the runtime choose
            (the sink task context's ``timeout()`` or the connector's retry backoff).
    """

    def __init__(self, message: str = "", *, delay: timedelta | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class DataError(ConnectError):
    """A record cannot be converted or processed (bad bytes, wrong schema).

    Raised by converters and transformations, and by ``SinkTask.put``/``put_batch`` when
    the external system refuses a record of the call (the runtime then finds which, see
    ``SinkTask.put``); the runtime applies ``errors.tolerance`` to each such record: with
    ``none`` the task fails, with ``all`` the record is skipped and, when
    ``errors.deadletterqueue.topic.name`` is set, sent to the dead-letter queue.

    Args:
        message: what went wrong (never a secret value).
        records: from a sink task that buffers across calls, the records its refused write
            held, which it no longer holds (``SinkRecord`` objects as ``put`` got them, or
            the ``pyarrow.RecordBatch`` objects ``put_batch`` got, in order); the runtime then
            searches those instead of the call's own. Required for the search from
            ``pre_commit``, where there is no call's own. ``None``: the call's records.
    """

    def __init__(self, message: str = "", *, records: Sequence[Any] | None = None) -> None:
        super().__init__(message)
        self.records = records


class ConfigError(ConnectError):
    """A connector or task configuration is invalid.

    Attributes:
        errors: ``{config key: message}`` for every invalid key; the message names the
            expected type or value.
    """

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = dict(errors)
        detail = "; ".join(f"{key}: {msg}" for key, msg in self.errors.items())
        super().__init__(f"invalid configuration: {detail}")
