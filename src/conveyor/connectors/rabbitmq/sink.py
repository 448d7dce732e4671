"""The RabbitMQ sink connector (entry point ``rabbitmq-sink``); its task is in :mod:`.task`.

Each record is published to the durable queue of its topic (``rabbitmq.queue.name.format``)
with publisher confirms; Kafka offsets are committed only for records the broker confirmed.

Under ``StringConverter`` or ``ByteArrayConverter`` values the task takes record batches
(``put_batch``): each message is built from the columns (the body is the value's bytes), with
the same body, properties and headers as from a record, and published as ``put`` publishes.

Delivery (at least once):

* ``put`` publishes the batch without waiting for confirms (pika ``SelectConnection``, see
  :mod:`.link`); confirms are collected whenever the task touches the connection again. When
  ``rabbitmq.max.in.flight`` messages are unconfirmed, ``put`` first waits for confirms (up to
  ``rabbitmq.confirm.timeout.ms``), then raises :class:`RetriableError` without publishing
  anything of the batch.
* ``pre_commit(offsets)`` returns, per partition, the offset of its earliest record not yet
  confirmed (everything before it is confirmed), or the runtime's offset when every record
  put so far is confirmed; a partition with nothing confirmed since it was opened is left
  out. A periodic commit takes the confirms that have arrived; a closing one
  (``context.is_closing()``) first republishes failed messages and waits, up to
  ``rabbitmq.confirm.timeout.ms``, for the outstanding confirms of the closing partitions,
  so that nothing is re-sent needlessly after a rebalance, drain or shutdown.
* A message the broker nacks, or returns as unroutable (``mandatory``: its queue was deleted
  under the running connector; it is declared again), is published again after
  ``rabbitmq.retry.backoff.ms``; until it is confirmed its partition's commit stays before it.
* A lost connection (broker restart, network, ``close_all_connections``) leaves the unconfirmed
  messages in an unknown state: they are published again on the next connection. ``put``
  notices a loss (during the call, or one that happened since the previous hook), forgets its
  batch, reconnects once right away and raises :class:`RetriableError`: the runtime redelivers
  the batch, and the next ``put`` first publishes the unconfirmed messages again. An unreachable
  broker during ``put`` is a :class:`RetriableError` too; at ``start`` it is a
  :class:`ConnectError` (host:port, vhost and user; never the password).

Provisioning (:mod:`.topology`): ``start`` (connector and task) declares the durable queues of the configured
``topics``; the task declares the queue of any other topic it sees on first use (and binds
queues to ``rabbitmq.exchange`` when set). ``Task.stop(connector_deleted=True)`` deletes exactly
the queues that task declared; ``Connector.stop(connector_deleted=True)`` deletes the queues of
the configured ``topics`` (and those it declared), so a deletion cleans up even with no task
running; a queue already deleted by hand is fine. Queues are deleted with their messages.
A plain stop deletes nothing.

Hooks: the connector's run on the driver's control thread; the task's on its runner thread,
one at a time; the task's connection is used only inside its hooks. The runtime calls ``put``
(possibly empty) every few hundred milliseconds, which also serves AMQP heartbeats; after a
longer silence than the heartbeat timeout (e.g. a paused connector) the broker may have closed
the connection, and the first ``put`` then reconnects and raises one :class:`RetriableError`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from conveyor.api import (
    ConnectError,
    SinkConnector,
)
from conveyor.connectors._builtin import BuiltIn
from conveyor.connectors.rabbitmq.config import (
    RabbitMQSinkConfig,
    load_config,
)
from conveyor.connectors.rabbitmq.link import LinkDown
from conveyor.connectors.rabbitmq.task import RabbitMQSinkTask
from conveyor.connectors.rabbitmq.topology import (
    admin_link,
    check_exchange,
    declare_queue,
    delete_queues,
    scrub_secrets,
    where,
)

log = logging.getLogger(__name__)


class RabbitMQSinkConnector(BuiltIn, SinkConnector):
    """Publishes Kafka records to durable RabbitMQ queues, one queue per topic by default.

    Every hook runs on the driver's control thread. The connector holds no connection
    between hooks.
    """

    config_model = RabbitMQSinkConfig

    def __init__(self) -> None:
        self._raw: dict[str, Any] = {}
        self._config: RabbitMQSinkConfig | None = None
        self._declared: dict[str, None] = {}
        self._cleanup: list[str] = []

    def start(self, config: Mapping[str, Any]) -> None:
        """Validate ``config``, connect once, check ``rabbitmq.exchange`` exists and declare the
        durable queues of the configured ``topics``.

        Raises:
            ConfigError: invalid configuration.
            ConnectError: the broker is unreachable or refuses the login (host:port named, never
                the password), the exchange is missing, or a queue cannot be declared.
        """
        cfg = load_config(config)
        self._config = cfg
        self._raw = dict(config)
        link = admin_link(cfg, "connector")
        try:
            if cfg.exchange:
                check_exchange(link, cfg)
            for queue in cfg.configured_queues():
                declare_queue(link, cfg, queue)
                self._declared[queue] = None
        except LinkDown as exc:
            raise ConnectError(
                f"lost the connection to RabbitMQ at {where(cfg)} while declaring queues: "
                f"{scrub_secrets(cfg, str(exc))}"
            ) from None
        finally:
            link.close()

    def task_class(self) -> type[RabbitMQSinkTask]:
        return RabbitMQSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        """``max_tasks`` (at least 1) identical configurations: the consumer group splits the
        partitions between tasks."""
        return [dict(self._raw) for _ in range(max(1, max_tasks))]

    def stop(self, connector_deleted: bool = False) -> None:
        """On deletion, delete the queues of the configured ``topics`` (and any this connector
        declared), with their messages; queues already gone are fine. A plain stop does nothing.

        Raises:
            ConnectError: the broker cannot be reached or refuses a deletion (the runtime keeps
                the finalizer and retries).
        """
        cfg = self._config
        if not connector_deleted or cfg is None:
            return
        queues = list(dict.fromkeys([*cfg.configured_queues(), *self._declared]))
        if not queues:
            return
        link = admin_link(cfg, "connector cleanup")
        try:
            lines = delete_queues(link, cfg, queues)
        except LinkDown as exc:
            raise ConnectError(
                f"lost the connection to RabbitMQ at {where(cfg)} while deleting queues: {scrub_secrets(cfg, str(exc))}"
            ) from None
        finally:
            link.close()
        for line in lines:
            log.info("rabbitmq-sink %s: %s", cfg.name or "", line)
        self._cleanup.extend(lines)

    def cleanup_report(self) -> list[str]:
        return list(self._cleanup)
