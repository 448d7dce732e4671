"""Connectors: the part of a plugin that configures tasks and owns shared resources.

Lifecycle, as Kafka Connect's ``Connector``: ``initialize(context)`` →
``validate(config)`` → ``start(config)`` → ``task_configs(max_tasks)`` (again whenever the
connector calls ``context.request_task_reconfiguration()``) → ``stop(connector_deleted)``.
Every connector hook is called from the driver's main control thread, never
concurrently with another hook of the same connector.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from conveyor.api.config import parse_config
from conveyor.api.records import TopicPartition
from conveyor.api.tasks import Task


class ConnectorContext(abc.ABC):
    """The runtime as seen by a connector."""

    @abc.abstractmethod
    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call ``task_configs`` again and restart tasks whose
        configuration changed (e.g. a new table appeared). Safe from any thread."""

    @abc.abstractmethod
    def raise_error(self, error: BaseException) -> None:
        """Fail the connector from a background thread of its own: the connector shows
        ``FAILED`` with ``error`` and its tasks are stopped (not deleted)."""


class Connector(abc.ABC):
    """Base of every connector. Subclass :class:`SinkConnector` or :class:`SourceConnector`.

    Attributes:
        config_model: optional pydantic model (usually a
            :class:`~conveyor.api.config.ConnectorConfig`) that ``validate`` uses; its JSON
            schema documents the connector's configuration.
    """

    config_model: ClassVar[type[BaseModel] | None] = None

    _context: ConnectorContext | None = None

    def initialize(self, context: ConnectorContext) -> None:
        """Receive the runtime context; called once, before anything else."""
        self._context = context

    @property
    def context(self) -> ConnectorContext:
        """The context given to ``initialize``.

        Raises:
            RuntimeError: when read before ``initialize``.
        """
        if self._context is None:
            raise RuntimeError(f"{type(self).__name__}.context read before initialize()")
        return self._context

    def version(self) -> str:
        """The connector's version, shown in status. Defaults to ``"0.0.0"``."""
        return "0.0.0"

    def validate(self, config: Mapping[str, Any]) -> BaseModel | None:
        """Check a configuration before ``start``; the runtime refuses to start on error.

        The default validates against :attr:`config_model` (when set), each key and then its
        checks across keys (:meth:`~conveyor.api.config.ConnectorConfig.problems`), and returns
        the parsed model; override it only for checks that need more than the configuration.

        Raises:
            ConfigError: naming each invalid key and the expected type or value.
        """
        if self.config_model is None:
            return None
        return parse_config(self.config_model, config)

    @abc.abstractmethod
    def start(self, config: Mapping[str, Any]) -> None:
        """Start with the validated configuration (the manifest's ``spec.config``).

        Raising fails the connector; nothing else is started.
        """

    @abc.abstractmethod
    def task_class(self) -> type[Task]:
        """The :class:`~conveyor.api.tasks.Task` subclass that does the work."""

    @abc.abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        """Split the work into at most ``max_tasks`` task configurations (``tasks.max``).

        Returns one mapping per task; the runtime starts ``len(result)`` tasks with ids
        ``0..len(result)-1``. Returning fewer than ``max_tasks`` is normal.
        """

    def stop(self, connector_deleted: bool = False) -> None:
        """Stop the connector; called once, after every task has stopped.

        Args:
            connector_deleted: ``True`` only when the connector itself is being deleted
                (``kubectl delete connector``, ``conveyor stop --connector-deleted``,
                ``conveyor cleanup``): remove what the connector provisioned outside Kafka.
                ``False`` on every plain stop, restart, rebalance, pause or scale-down
                (as KIP-883 / KAFKA-14651 propose).

        Raising is logged and reported; on a deletion it keeps the Kubernetes finalizer
        so that cleanup is retried.
        """

    def cleanup_report(self) -> list[str]:
        """What ``stop(connector_deleted=True)`` removed, one human-readable line each
        (``"dropped table audit.orders_log"``); shown by ``conveyor stop`` and the
        operator's Events. Defaults to nothing."""
        return []


class ExactlyOnceSupport(str, enum.Enum):
    """A source connector's answer to "can you run exactly once?" (KIP-618)."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(str, enum.Enum):
    """Whether a source connector can define its own transaction boundaries (KIP-618)."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class SinkConnector(Connector, abc.ABC):
    """A connector whose tasks read from Kafka topics (``topics`` or ``topics.regex``)."""

    def alter_offsets(self, config: Mapping[str, Any], offsets: Mapping[TopicPartition, int | None]) -> bool:
        """Agree to (or refuse) an offsets change made while the connector is ``STOPPED``
        (``PATCH`` / ``DELETE /connectors/<name>/offsets``, as KIP-875's
        ``SinkConnector.alterOffsets``). Called on a new instance that was never started,
        on a control API thread, before the runtime changes the consumer group.

        Args:
            config: the connector's configuration (``name`` included).
            offsets: next offset to consume per partition; ``None`` resets that partition.

        Returns:
            ``True`` when the connector has applied the change wherever it keeps offsets
            itself (an offsets table), ``False`` (the default) when it keeps none or did not.

        Raises:
            Exception: any error refuses the change: nothing is written, the request fails (500).
        """
        return False


class SourceConnector(Connector, abc.ABC):
    """A connector whose tasks write to Kafka from an external system."""

    def alter_offsets(self, config: Mapping[str, Any],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> bool:
        """Agree to (or refuse) an offsets change made while the connector is ``STOPPED``
        (as KIP-875's ``SourceConnector.alterOffsets``); see :meth:`SinkConnector.alter_offsets`.

        Args:
            offsets: ``(source partition, source offset)`` pairs; ``None`` resets that partition.

        Raises:
            Exception: the offsets are not ones this connector can use (the request fails, 500).
        """
        return False

    def exactly_once_support(self, config: Mapping[str, Any]) -> ExactlyOnceSupport | None:
        """Whether this connector, so configured, supports exactly-once delivery.

        Consulted when ``exactly.once.support=required``; ``None`` (the default) means
        unknown, which ``required`` refuses (as KIP-618 §"Connector API expansions").
        """
        return None

    def can_define_transaction_boundaries(self, config: Mapping[str, Any]) -> ConnectorTransactionBoundaries:
        """Whether tasks may define transaction boundaries through
        ``context.transaction_context()`` (``transaction.boundary=connector``)."""
        return ConnectorTransactionBoundaries.UNSUPPORTED
