"""The RabbitMQ sink's task: publishing with publisher confirms, commits of confirmed records
only, republishing after nacks, returns and lost connections, and the queues it declares (the
delivery contract is in :mod:`.sink`'s docstring). Every hook runs on the task's runner thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pika
import pyarrow as pa

from conveyor.api import (
    ConnectError,
    DataError,
    RetriableError,
    SinkRecord,
    SinkTask,
    TopicPartition,
)
from conveyor.api.batches import (
    HEADERS,
    JSON_TYPE,
    KEY,
    OFFSET,
    PARTITION,
    TIMESTAMP,
    TOPIC,
    VALUE,
    original_topics,
    sink_records,
)
from conveyor.api.sink import Offsets
from conveyor.connectors._builtin import BuiltIn
from conveyor.connectors.rabbitmq.config import (
    NullValues,
    RabbitMQSinkConfig,
    load_config,
    queue_name_problem,
)
from conveyor.connectors.rabbitmq.encoding import TEXT_CONTENT_TYPE, body_of, properties_of, table_of
from conveyor.connectors.rabbitmq.link import Link, LinkDown
from conveyor.connectors.rabbitmq.outbox import CONFIRMED, FAILED, PENDING, OutboundMessage, PartitionOutbox
from conveyor.connectors.rabbitmq.topology import (
    admin_link,
    check_exchange,
    connection_parameters,
    declare_queue,
    delete_queues,
    open_budget,
    scrub_secrets,
    where,
)

log = logging.getLogger(__name__)

class RabbitMQSinkTask(BuiltIn, SinkTask):
    """Publishes the records of its partitions. Every hook runs on the task's runner thread
    (never concurrently); the task owns one AMQP connection.

    Attributes:
        stats: counters (``published``, ``confirmed``, ``nacked``, ``returned``, ``resent``,
            ``lost``: messages in flight when a connection was lost).
        deleted: report lines of ``stop(connector_deleted=True)``.
    """

    def __init__(self) -> None:
        self._config: RabbitMQSinkConfig | None = None
        self._link: Link | None = None
        self._ready: set[str] = set()  # declared (and bound) queues, believed to exist
        self._declared: dict[str, None] = {}  # every queue this task declared, for deletion
        self._parts: dict[TopicPartition, PartitionOutbox] = {}
        self._inflight: OrderedDict[int, OutboundMessage] = OrderedDict()  # delivery tag -> message
        self._failed: deque[OutboundMessage] = deque()  # nacked, returned or lost: to publish again
        self._returned: set[str] = set()  # message ids returned as unroutable, confirm pending
        self._permanent: str | None = None
        self._failures_unlogged = 0
        self.stats = dict.fromkeys(("published", "confirmed", "nacked", "returned", "resent", "lost"), 0)
        self.deleted: list[str] = []

    @property
    def config(self) -> RabbitMQSinkConfig:
        if self._config is None:
            raise RuntimeError("RabbitMQSinkTask used before start()")
        return self._config

    @property
    def declared_queues(self) -> list[str]:
        """The queues this task declared, in order (what ``stop(connector_deleted=True)`` deletes)."""
        return list(self._declared)

    def unconfirmed(self) -> int:
        """Messages published and not yet confirmed, plus those waiting to be published again."""
        return len(self._inflight) + sum(1 for m in self._failed if not m.dropped)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, config: Mapping[str, Any]) -> None:
        """Validate the configuration, connect, check ``rabbitmq.exchange`` and declare the
        durable queues of the configured ``topics``.

        Raises:
            ConfigError: invalid configuration.
            ConnectError: the broker is unreachable or refuses the login (host:port, vhost,
                user; never the password), the exchange is missing, a queue cannot be declared.
        """
        cfg = self._config = load_config(config)
        try:
            self._link = self._new_link()
            if cfg.exchange:
                check_exchange(self._link, cfg)
            for queue in cfg.configured_queues():
                self._ensure_queue(queue)
        except LinkDown as exc:
            self._drop_link()
            raise ConnectError(f"cannot connect to RabbitMQ at {where(cfg)}: {scrub_secrets(cfg, str(exc))}") from None
        except ConnectError:
            self._drop_link()
            raise

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Publish ``records`` (without waiting for their confirms) and collect the confirms
        that arrived. An empty call keeps the connection alive.

        Raises:
            RetriableError: the broker is unreachable, the connection was lost (the batch is
                forgotten and the runtime redelivers it; the task has reconnected when it could),
                or too many messages are unconfirmed (nothing of the batch was published).
            DataError: a record cannot be encoded (or a null value with
                ``behavior.on.null.values=fail``) and there is no errant record reporter.
            ConnectError: the broker refused a queue declaration, or closed the publishing
                channel for good (e.g. the exchange was deleted).
        """
        self.config  # noqa: B018 - raises before start()
        if self._permanent:
            raise ConnectError(self._permanent)
        if not records and not self._failed:
            if self._link is not None and self._link.is_open:
                self._pump(0)
            return
        self._send(self._encode(records))

    def takes_batches(self, key_type: pa.DataType | None, value_type: pa.DataType | None) -> bool:
        """String and binary values (``StringConverter``, ``ByteArrayConverter``): their
        bodies are the column's bytes, with string, binary or JSON keys. JSON and typed values
        are rendered as JSON per record (:func:`.encoding.body_of`) and take records.
        Task runner thread."""
        return value_type in (pa.string(), pa.binary()) and key_type in (pa.string(), pa.binary(), JSON_TYPE)

    def put_batch(self, batch: pa.RecordBatch) -> None:
        """:meth:`put` for a record batch: each row's message built from the columns (the
        value's bytes as the body, no record object), then published as ``put`` publishes.
        Task runner thread. Raises as :meth:`put`."""
        self.config  # noqa: B018 - raises before start()
        if self._permanent:
            raise ConnectError(self._permanent)
        if batch.num_rows == 0:
            self.put([])
            return
        self._send(self._encode_batch(batch))

    def _send(self, messages: list[OutboundMessage]) -> None:
        link = self._connected()
        try:
            self._pump(0)
            if link.down is not None:  # lost while idle: the close arrived just now
                raise link.down
            self._resend(force=False)
            self._make_room()
            for queue in dict.fromkeys(m.queue for m in messages):
                self._ensure_queue(queue)
            for msg in messages:
                self._track(msg)
                self._publish(msg)
            self._pump(0)
            if link.down is not None:
                raise link.down
        except LinkDown as exc:
            self._forget(messages)
            self._drop_link()
            if exc.permanent:
                raise ConnectError(self._permanent or str(exc)) from None
            then = (
                " reconnected; the batch and the unconfirmed messages will be published again"
                if self._reconnect()
                else " will reconnect and publish the batch again"
            )
            raise self._retriable("lost the connection", exc, then) from None

    def pre_commit(self, offsets: Offsets) -> Offsets:
        """Return the offsets whose records RabbitMQ confirmed (see the module docstring).

        With ``context.is_closing()`` true, first republish failed messages and wait up to
        ``rabbitmq.confirm.timeout.ms`` for the outstanding confirms of these partitions
        (reconnecting once if needed). Never raises for broker trouble: the confirmed offsets
        are returned regardless.
        """
        if self._config is None:
            return {}
        closing = self.context.is_closing()
        scope = set(offsets)
        try:
            if closing and self._has_failed(scope):
                self._connected()
            link = self._link
            if link is not None and link.is_open:
                self._pump(0)
                self._resend(force=closing)
                if closing:
                    self._await_confirms(scope)
        except (LinkDown, ConnectError) as exc:  # RetriableError is a ConnectError
            log.warning(
                "rabbitmq-sink: %s commit: %s; committing only what RabbitMQ confirmed",
                "closing" if closing else "periodic",
                scrub_secrets(self.config, str(exc)),
            )
            if self._link is not None and self._link.down is not None:
                self._drop_link()
        result = self._committable(offsets)
        if closing:
            behind = {str(tp): off for tp, off in offsets.items() if result.get(tp) != off}
            if behind:
                log.warning(
                    "rabbitmq-sink: closing commit leaves %s behind (records not confirmed by RabbitMQ"
                    " within %d ms; they will be consumed and published again)",
                    behind,
                    self.config.confirm_timeout_ms,
                )
        return result

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """Forget ``partitions``: their unconfirmed messages are no longer tracked (or
        republished); whoever gets the partitions next consumes them again."""
        for tp in partitions:
            part = self._parts.pop(tp, None)
            if part is not None:
                for msg in part.entries.values():
                    msg.dropped = True

    def stop(self, connector_deleted: bool = False) -> None:
        """Close the connection. With ``connector_deleted``, then delete exactly the queues this
        task declared, with their messages, over a new connection (a queue already deleted by
        hand is fine). Unconfirmed messages are dropped: their offsets were not committed.

        Raises:
            ConnectError: on deletion, the broker cannot be reached or refuses (logged by the
                runtime; the connector's own stop deletes the configured topics' queues too).
        """
        cfg = self._config
        self._inflight.clear()  # first: closing the link must not report them as lost
        self._failed.clear()
        self._parts.clear()
        self._drop_link()
        if not (connector_deleted and cfg is not None and self._declared):
            return
        # A connection of its own: the publishing one may be blocked by a broker alarm.
        link = admin_link(cfg, "task cleanup")
        try:
            self.deleted = delete_queues(link, cfg, list(self._declared))
        except LinkDown as exc:
            raise ConnectError(
                f"lost the connection to RabbitMQ at {where(cfg)} while deleting queues: {scrub_secrets(cfg, str(exc))}"
            ) from None
        finally:
            link.close()
        for line in self.deleted:
            log.info("rabbitmq-sink %s: %s", cfg.name or "", line)

    # -- connection -----------------------------------------------------------------------

    def _new_link(self) -> Link:
        """Raises LinkDown when the broker cannot be reached."""
        params = connection_parameters(self.config, "task")
        link = Link(params, on_confirm=self._on_confirm, on_return=self._on_return, on_lost=self._on_lost)
        link.open(open_budget(params))
        return link

    def _connected(self) -> Link:
        """The open link, reconnecting if needed.

        Raises:
            RetriableError: the broker cannot be reached.
        """
        link = self._link
        if link is not None and link.is_open:
            return link
        self._drop_link()
        if self._permanent:
            raise ConnectError(self._permanent)
        try:
            self._link = self._new_link()
        except LinkDown as exc:
            raise self._retriable("cannot connect", exc, " will retry") from None
        log.info("rabbitmq-sink: connected to RabbitMQ at %s", where(self.config))
        return self._link

    def _reconnect(self) -> bool:
        """One immediate attempt to open a new link; False (logged) when it fails."""
        try:
            self._link = self._new_link()
        except LinkDown as exc:
            log.warning(
                "rabbitmq-sink: reconnecting to RabbitMQ at %s failed: %s",
                where(self.config),
                scrub_secrets(self.config, str(exc)),
            )
            return False
        return True

    def _drop_link(self) -> None:
        link, self._link = self._link, None
        if link is None:
            return
        if link.down is not None and link.down.permanent and self._permanent is None:
            self._permanent = f"RabbitMQ at {where(self.config)}: {scrub_secrets(self.config, str(link.down))}"
        link.close()
        if self._inflight:  # the link closed without reporting a loss (e.g. closed by us)
            self._on_lost("connection closed")

    def _retriable(self, doing: str, exc: BaseException, then: str) -> RetriableError:
        cfg = self.config
        return RetriableError(
            f"RabbitMQ at {where(cfg)}: {doing}: {scrub_secrets(cfg, str(exc))};{then}",
            delay=timedelta(milliseconds=cfg.retry_backoff_ms),
        )

    def _pump(self, timeout: float) -> None:
        if self._link is not None:
            self._link.run(timeout)
        if self._failures_unlogged:
            log.warning(
                "rabbitmq-sink: RabbitMQ did not take %d message(s) (nacked, returned as unroutable or"
                " in flight on a lost connection); they will be published again",
                self._failures_unlogged,
            )
            self._failures_unlogged = 0

    # -- publishing -----------------------------------------------------------------------

    def _encode(self, records: Sequence[SinkRecord]) -> list[OutboundMessage]:
        cfg = self.config
        mode = cfg.delivery_mode.amqp
        out: list[OutboundMessage] = []
        rejects: list[tuple[SinkRecord, str]] = []
        for record in records:
            if record.value is None:
                if cfg.null_values is NullValues.IGNORE:
                    continue
                rejects.append((record, "null value (tombstone) with behavior.on.null.values=fail"))
                continue
            queue = cfg.queue_for(record.topic)
            problem = queue_name_problem(queue)
            if problem:
                rejects.append((record, f"no queue for topic {record.topic!r}: {problem}"))
                continue
            try:
                body, content_type = body_of(record.value)
                props = properties_of(record, content_type, mode)
            except DataError as exc:
                rejects.append((record, str(exc)))
                continue
            out.append(
                OutboundMessage(
                    record.original_topic_partition,
                    record.original_kafka_offset,  # type: ignore[arg-type]
                    queue,
                    body,
                    props,
                )
            )
        self._reject(rejects)
        return out

    def _encode_batch(self, batch: pa.RecordBatch) -> list[OutboundMessage]:
        """:meth:`_encode` for a record batch (see :mod:`conveyor.api.batches`)."""
        cfg = self.config
        mode = cfg.delivery_mode.amqp
        values = batch.column(VALUE)
        content_type = TEXT_CONTENT_TYPE if values.type == pa.string() else None
        bodies = values.view(pa.binary()).to_pylist() if values.type == pa.string() else values.to_pylist()
        keys = batch.column(KEY)
        key_values = keys.view(pa.binary()).to_pylist() if keys.type == pa.binary() else keys.to_pylist() \
            if keys.type == pa.string() else [None if k is None else json.loads(k) for k in keys.storage.to_pylist()]
        topics = batch.column(TOPIC).to_pylist()
        originals = original_topics(batch).to_pylist()
        partitions = batch.column(PARTITION).to_pylist()
        offsets = batch.column(OFFSET).to_pylist()
        stamps = batch.column(TIMESTAMP).cast(pa.int64()).to_pylist()
        headers = batch.column(HEADERS).to_pylist()
        queues: dict[str, tuple[str, str | None]] = {}
        out: list[OutboundMessage] = []
        rejects: list[tuple[SinkRecord, str]] = []
        for i, body in enumerate(bodies):
            topic = topics[i]
            if topic not in queues:
                queue = cfg.queue_for(topic)
                queues[topic] = (queue, queue_name_problem(queue))
            queue, problem = queues[topic]
            if body is None or problem:
                if body is None and cfg.null_values is NullValues.IGNORE:
                    continue
                reason = "null value (tombstone) with behavior.on.null.values=fail" if body is None else \
                    f"no queue for topic {topic!r}: {problem}"
                rejects.append((sink_records(batch.slice(i, 1))[0], reason))
                continue
            original, partition, offset, stamp = originals[i], partitions[i], offsets[i], stamps[i]
            props = pika.BasicProperties(
                content_type=content_type, delivery_mode=mode, message_id=f"{original}-{partition}-{offset}",
                timestamp=stamp // 1000 if stamp is not None and stamp >= 0 else None,
                headers=table_of(headers[i], original, partition, offset, key_values[i], stamp))
            out.append(OutboundMessage(TopicPartition(original, partition), offset, queue, body, props))
        self._reject(rejects)
        return out

    def _reject(self, rejects: list[tuple[SinkRecord, str]]) -> None:
        """Report records that cannot be published to the errant record reporter and wait until
        each report is durable; without a reporter raise :class:`DataError`."""
        if not rejects:
            return
        reporter = self.context.errant_record_reporter()
        if reporter is None:
            record, message = rejects[0]
            raise DataError(
                f"record {record.topic}-{record.kafka_partition}@{record.kafka_offset} cannot be published:"
                f" {message} ({len(rejects)} such record(s) in the batch)"
            )
        futures = [reporter.report(record, DataError(message)) for record, message in rejects]
        for future in futures:
            future.result()

    def _ensure_queue(self, queue: str) -> None:
        if queue in self._ready:
            return
        assert self._link is not None
        declare_queue(self._link, self.config, queue)
        self._ready.add(queue)
        self._declared.setdefault(queue, None)

    def _track(self, msg: OutboundMessage) -> None:
        part = self._parts.get(msg.tp)
        if part is None:
            part = self._parts[msg.tp] = PartitionOutbox(msg.offset)
        old = part.entries.pop(msg.offset, None)
        if old is not None and old is not msg:  # the same record again (redelivered)
            if old.state == PENDING:
                part.pending -= 1
            old.dropped = True
        part.entries[msg.offset] = msg

    def _publish(self, msg: OutboundMessage) -> None:
        assert self._link is not None
        tag = self._link.publish(self.config.exchange, msg.queue, msg.body, msg.props)
        msg.state = PENDING
        msg.attempts += 1
        self._inflight[tag] = msg
        part = self._parts.get(msg.tp)
        if part is not None:
            part.pending += 1
        self.stats["published"] += 1
        if msg.attempts > 1:
            self.stats["resent"] += 1

    def _forget(self, messages: list[OutboundMessage]) -> None:
        """Undo the tracking of a batch whose ``put`` fails (the runtime redelivers it)."""
        for msg in messages:
            part = self._parts.get(msg.tp)
            if part is not None and part.entries.get(msg.offset) is msg:
                del part.entries[msg.offset]
                if msg.state == PENDING and msg.attempts:
                    part.pending -= 1
            msg.dropped = True

    def _resend(self, *, force: bool) -> None:
        """Publish again the failed messages that are due (all of them with ``force``)."""
        if not self._failed:
            return
        now = time.monotonic()
        due: list[OutboundMessage] = []
        later: deque[OutboundMessage] = deque()
        for msg in self._failed:
            if msg.dropped:
                continue
            (due if force or msg.retry_at <= now else later).append(msg)
        self._failed = later
        for i, msg in enumerate(due):
            try:
                self._ensure_queue(msg.queue)
                self._publish(msg)
            except BaseException:
                self._failed.extend(m for m in due[i:] if m.state == FAILED)
                raise

    def _make_room(self) -> None:
        """Wait for confirms while ``rabbitmq.max.in.flight`` messages are outstanding.

        Raises:
            RetriableError: still too many after ``rabbitmq.confirm.timeout.ms``.
        """
        cfg = self.config
        limit = cfg.max_in_flight
        inflight, failed = self._inflight, self._failed

        def room() -> bool:
            return len(inflight) + len(failed) < limit  # O(1): runs on every confirm frame

        if room():
            return
        link = self._link
        assert link is not None
        if self._inflight:
            link.run(cfg.confirm_timeout_ms / 1000, room)
        if link.down is not None:
            raise link.down
        if not room() and self.unconfirmed() >= limit:
            blocked = " (RabbitMQ blocked publishing: memory or disk alarm)" if link.blocked else ""
            raise RetriableError(
                f"RabbitMQ at {where(cfg)}: {self.unconfirmed()} message(s) still unconfirmed or awaiting"
                f" a resend after {cfg.confirm_timeout_ms} ms (rabbitmq.max.in.flight={limit}){blocked};"
                " the batch will be retried",
                delay=timedelta(milliseconds=cfg.retry_backoff_ms),
            )

    def _has_failed(self, scope: set[TopicPartition]) -> bool:
        return any(not m.dropped and m.tp in scope for m in self._failed)

    def _await_confirms(self, scope: set[TopicPartition]) -> None:
        """Closing commit: wait (bounded) until every published message of ``scope`` has an
        answer, republishing failed ones (up to 3 rounds)."""
        cfg = self.config
        link = self._link
        assert link is not None
        parts = [self._parts[tp] for tp in scope if tp in self._parts]

        def settled() -> bool:
            return all(part.pending <= 0 for part in parts)

        started = time.monotonic()
        deadline = started + cfg.confirm_timeout_ms / 1000
        for _round in range(3):
            link.run(max(0.0, deadline - time.monotonic()), settled)
            if link.down is not None or time.monotonic() >= deadline or not self._has_failed(scope):
                break
            self._resend(force=True)
        log.debug("rabbitmq-sink: closing commit waited %.3fs for confirms", time.monotonic() - started)

    def _committable(self, offsets: Offsets) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        for tp, offset in offsets.items():
            part = self._parts.get(tp)
            first = part.first_unconfirmed() if part is not None else None
            if first is None:
                result[tp] = offset  # every record put so far is confirmed (or was skipped)
            elif part is not None and first > part.floor:
                result[tp] = min(first, offset)
        return result

    # -- link callbacks (inside Link.run, on the task's thread) ------------------------------

    def _on_confirm(self, tag: int, multiple: bool, ack: bool) -> None:
        inflight = self._inflight
        if multiple:
            while inflight:
                first = next(iter(inflight))
                if first > tag:
                    break
                self._settle(inflight.popitem(last=False)[1], ack)
        else:
            msg = inflight.pop(tag, None)
            if msg is not None:
                self._settle(msg, ack)

    def _settle(self, msg: OutboundMessage, ack: bool) -> None:
        returned = msg.props.message_id in self._returned if self._returned else False
        if returned:
            self._returned.discard(msg.props.message_id)
        if msg.dropped:
            return
        part = self._parts.get(msg.tp)
        if part is not None:
            part.pending -= 1
        if ack and not returned:
            msg.state = CONFIRMED
            msg.body = b""
            self.stats["confirmed"] += 1
            if part is not None:
                part.trim()
            return
        msg.state = FAILED
        msg.retry_at = time.monotonic() + self.config.retry_backoff_ms / 1000
        self._failed.append(msg)
        self._failures_unlogged += 1
        self.stats["returned" if returned else "nacked"] += 1

    def _on_return(self, routing_key: str, properties: Any, reply_code: int, reply_text: str) -> None:
        if properties.message_id:
            self._returned.add(properties.message_id)
        if routing_key in self._ready:
            log.warning(
                "rabbitmq-sink: RabbitMQ returned a message for queue %r as unroutable (%d %s): the"
                " queue was deleted or unbound; declaring it again",
                routing_key,
                reply_code,
                reply_text,
            )
            self._ready.discard(routing_key)

    def _on_lost(self, reason: str) -> None:
        now = time.monotonic()
        lost = 0
        for msg in self._inflight.values():
            if msg.dropped:
                continue
            part = self._parts.get(msg.tp)
            if part is not None:
                part.pending -= 1
            msg.state = FAILED
            msg.retry_at = now  # publish again as soon as there is a connection
            self._failed.append(msg)
            lost += 1
        self._inflight.clear()
        self._returned.clear()
        self.stats["lost"] += lost
        with contextlib.suppress(Exception):
            log.warning(
                "rabbitmq-sink: connection to RabbitMQ at %s lost (%s); %d unconfirmed message(s) will be"
                " published again",
                where(self.config),
                scrub_secrets(self.config, reason),
                lost,
            )
