"""Runs one sink task inside a Spark executor: Kafka Connect's ``WorkerSinkTask``.

Consumer group ``connect-<name>``, auto-commit off, cooperative-sticky assignor. One
thread (the Spark task's) runs the consumer, every task hook and the commits, so the
rebalance callbacks below run on it too (librdkafka serves them inside ``consume``).

Closing-aware commits (KIP-275), the sequence for every trigger:

* revoke (rebalance): ``pre_commit(offsets of the revoked partitions)`` with
  ``is_closing()`` true → synchronous commit → ``close(revoked)``.
* stop, drain, driver shutdown, ``state: stopped``, reconfiguration: the same for every
  assigned partition, then ``stop(connector_deleted)``, then the consumer leaves the group.
* a failing ``put``: the same closing commit of what earlier ``put`` calls processed,
  then ``close`` and ``stop``; the task reports ``FAILED``.
* lost partitions (session expired): ``close(lost)`` and no commit.

Why a closing commit cannot hang on a rebalance (librdkafka's classic group protocol, as
its ``rdkafka_cgrp.c`` and the broker's request handling show):

* A broker answers one request per connection at a time, and a consumer sends its
  ``OffsetCommit`` on the same coordinator connection as its ``JoinGroup``. While a
  rebalance waits for a member that neither rejoins nor leaves, this member's
  ``JoinGroup`` is parked at the coordinator and a synchronous commit queued behind it
  waits for that member's ``session.timeout.ms`` (6 s here, see below; librdkafka's
  default is 45 s).
* A cooperative consumer whose assignment is empty does not send ``LeaveGroup`` from
  ``close()`` (``rd_kafka_cgrp_revoke_all_rejoin`` returns early when terminating), so
  the broker keeps it as a member until its session expires: a task without partitions
  that stops first left every other closing task waiting (measured: 44 s). So every
  consumer here is ``unsubscribe()``-d before ``close()``: that path sends ``LeaveGroup``
  whatever the assignment (measured: the broker sees the member gone in 0.2 s).
* Static membership (KIP-345, ``group.instance.id``) is not used: a static member sends no
  ``LeaveGroup`` from ``close()`` nor from ``unsubscribe()`` (measured on librdkafka 2.16:
  still a member 20 s later), and confluent-kafka has no ``RemoveMembersFromConsumerGroup``,
  so a stopped, drained or scaled-down task would hold its partitions, and keep the group
  from being deleted, for a whole session. A crash instead costs at most
  ``session.timeout.ms`` (6 s) before the survivors, or the restarted task, take over.
* The closing commit of a stop, drain or failure is asynchronous, and the task thread
  keeps serving the consumer (rebalance callbacks, the commit's result) until the
  broker answers, with every partition paused and fetched records dropped (they were
  never ``put``; the next owner reads them from the commit). It is retried on
  ``ILLEGAL_GENERATION`` / ``REBALANCE_IN_PROGRESS`` and bounded by half the closing
  timeout (``shutdown.gracePeriodSeconds``), so a task always ends before the driver
  would cancel its Spark job; a commit not confirmed by then is logged and the next
  start resumes from the previous commit (at least once, never lost).
* A closing commit inside the revoke callback stays synchronous, as Kafka Connect's
  ``onPartitionsRevoked``: the member has already rejoined and nothing is parked ahead
  of it.
* ``close()`` waits for the ``LeaveGroup`` answer and any commit in flight, which the
  same parked rebalance delays: it gets what is left of the grace period, then is left to
  finish on its own, so ``stop`` has run and the final report reaches the driver in time
  (``closing_commit_error`` in the report says when the closing commit did not land).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from conveyor.api import ConnectError, Header, HeaderConverter, RetriableError, SinkTask, TopicPartition
from conveyor.control.protocol import Action, TaskReport, TaskSpec, TaskState, tp_key
from conveyor.converters import ByteArrayConverter, load_converter
from conveyor.converters.header_converters import load_header_converter, to_connect_headers
from conveyor.runtime.config.plugins import load_connector_class
from conveyor.runtime.config.settings import SinkSettings, parse_sink_settings, prefixed
from conveyor.runtime.errors.dead_letter_queue import DeadLetterQueue
from conveyor.runtime.errors.tolerance import LogReporter, Reporter, Stage, ToleranceOperator, class_name
from conveyor.runtime.kafka.clients import client_config
from conveyor.runtime.kafka.log_repeats import CollapseRepeats
from conveyor.runtime.task.runner import TaskFailed, TaskRunner
from conveyor.runtime.task.sink.context import (
    InternalSinkRecord,
    LazySinkRecord,
    RunnerErrantRecordReporter,
    RunnerSinkContext,
    failed_record,
)
from conveyor.transforms.chain import TransformationChain

log = logging.getLogger(__name__)
log.addFilter(CollapseRepeats())  # librdkafka's logs come through it

_JAVA_ONLY_CONSUMER_KEYS = {"max.poll.records", "key.deserializer", "value.deserializer"}
DEFAULT_RETRY_BACKOFF_S = 1.0
POLL_TIMEOUT_S = 0.2
CLOSING_COMMIT_RETRY_S = 10.0
"""How long a closing commit inside a revoke callback is retried while the group rebalances."""
_REBALANCING = (KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS)

def consumer_config(spec: TaskSpec) -> dict[str, Any]:
    """librdkafka settings of a sink task's consumer: the connector's base Kafka properties
    (``spec.kafka``: bootstrap servers, TLS, SASL), the runtime's settings, then
    ``consumer.override.*`` (applied last; Java-only keys dropped)."""
    settings: dict[str, Any] = {
        "group.id": f"connect-{spec.connector}",
        "client.id": f"connector-consumer-{spec.connector}-{spec.task_id}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "enable.partition.eof": False,
        # librdkafka waits this long before fetching again once its local queue is over
        # queued.min.messages; its 1000 ms default stalls a consumer that keeps up (measured:
        # 350k records/s instead of 1.8M in one Python process).
        "fetch.queue.backoff.ms": 10,
        # A crashed task's consumer stays a member until its session expires, and every other
        # member's rebalance waits for that. 6 s (the broker's group.min.session.timeout.ms)
        # expires it before a restarted driver's consumers have even joined: partitions are
        # back 7.8 s after a restart from kill -9, against 11.2 s with 10 s and 90 s with 45 s
        # (benchmarks/recovery.py). Heartbeats come from librdkafka's own thread, never held by
        # put() or the GIL; what a session guards against here is a dead process or a network
        # cut, and a false expiry costs a rebalance and records read again, never lost.
        "session.timeout.ms": 6_000,
        "heartbeat.interval.ms": 1_500,
    }
    overrides = prefixed(spec.connector_config, "consumer.override.")
    return client_config(spec.kafka, settings,
                         {k: v for k, v in overrides.items() if k not in _JAVA_ONLY_CONSUMER_KEYS})


def producer_config(spec: TaskSpec) -> dict[str, Any]:
    """librdkafka settings for producers a sink task owns (the dead-letter queue): base
    Kafka properties, a client id, then ``producer.override.*``."""
    return client_config(spec.kafka, {"client.id": f"connector-dlq-producer-{spec.connector}-{spec.task_id}"},
                         prefixed(spec.connector_config, "producer.override."))


class SinkTaskRunner(TaskRunner):
    """One run of one sink task; ``run()`` returns its final report and never raises
    for a failure of the task itself (that is reported as ``FAILED``)."""

    def __init__(self, spec: TaskSpec) -> None:
        super().__init__(spec)
        self.settings: SinkSettings | None = None
        self.task: SinkTask | None = None
        self.consumer: Consumer | None = None
        self.context: RunnerSinkContext | None = None
        self.tolerance: ToleranceOperator | None = None
        self.current: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self._committed_assigned: dict[TopicPartition, int] = {}
        self._tps: dict[tuple[str, int], TopicPartition] = {}
        self._retry_batch: list[InternalSinkRecord] | None = None
        self._retry_offsets: dict[TopicPartition, int] = {}
        self._retry_at = 0.0
        self._paused_for_retry = False
        self._paused_by_directive = False
        self._next_commit = 0.0
        self.records_read = 0
        self.records_put = 0
        self.commits = 0
        self.closing_commits = 0
        self.last_closing_commit: dict[str, int] | None = None
        self.closing_commit_error: str | None = None
        self._stopping = False
        self._in_revoke_callback = False
        self._serving_close = False
        self._commit_result: tuple[KafkaError | None, list[KafkaTopicPartition]] | None = None

    # ------------------------------------------------------------------ lifecycle

    def _start(self) -> None:
        spec = self.spec
        self.settings = parse_sink_settings(spec.connector_config)
        connector_cls = load_connector_class(spec.connector_class)
        task_cls = connector_cls().task_class()
        self.task = task_cls()
        reporters: list[Reporter] = []
        if self.settings.errors_log_enable:
            reporters.append(LogReporter(spec.connector, spec.task_id, self.settings.errors_log_include_messages))
        if self.settings.dlq_topic:
            reporters.append(
                DeadLetterQueue(
                    producer_config(spec),
                    self.settings.dlq_topic,
                    spec.connector,
                    spec.task_id,
                    self.settings.dlq_context_headers,
                )
            )
        self.tolerance = ToleranceOperator(self.settings, reporters)
        self.context = RunnerSinkContext(spec.task_config, RunnerErrantRecordReporter(self.tolerance, self.task))
        self.key_converter = load_converter(spec.connector_config, "key", self.settings.key_converter)
        self.value_converter = load_converter(spec.connector_config, "value", self.settings.value_converter)
        self.header_converter = load_header_converter(spec.connector_config)
        self.chain = TransformationChain.from_config(spec.connector_config)
        self.task.initialize(self.context)
        self.task.start(spec.task_config)
        config = consumer_config(spec)
        config["on_commit"] = self._on_commit
        self._cooperative = "cooperative" in str(config.get("partition.assignment.strategy", ""))
        self.consumer = Consumer(config, logger=log)
        self.consumer.subscribe(
            self.settings.subscription, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self.state = TaskState.RUNNING
        self._next_commit = time.monotonic() + self.settings.offset_flush_interval_ms / 1000

    def _loop(self) -> tuple[TaskState, bool]:
        """Poll, deliver and commit until a stop or drain directive; returns the final
        state and whether the connector is being deleted."""
        assert self.settings and self.consumer and self.context
        interval = self.settings.offset_flush_interval_ms / 1000
        while True:
            leaving = self._leaving()
            if leaving is not None:
                return leaving
            self._follow_pause(self.link.directive.action is Action.PAUSE)
            now = time.monotonic()
            if self.context.commit_requested or now >= self._next_commit:
                self.context.commit_requested = False
                self._commit(closing=False)
                self._next_commit = now + interval
            self._apply_pause_requests()
            self._apply_rewinds()
            msgs = self.consumer.consume(self.settings.max_poll_records, self._poll_timeout(now))
            self._raise_callback_error()
            batch, offsets = self._convert(msgs) if msgs else ([], {})
            self.records_read += len(msgs)
            if self._retry_batch is not None:
                self._retry_batch.extend(batch)
                self._retry_offsets.update(offsets)
                if time.monotonic() >= self._retry_at:
                    batch, offsets = self._retry_batch, self._retry_offsets
                    self._deliver(batch, offsets)
            elif not self._paused_by_directive:
                self._deliver(batch, offsets)
            self.report()

    def _poll_timeout(self, now: float) -> float:
        if self._retry_batch is not None:
            return max(0.0, min(POLL_TIMEOUT_S, self._retry_at - now))
        return POLL_TIMEOUT_S

    # ------------------------------------------------------------------ records

    def _tp(self, topic: str, partition: int) -> TopicPartition:
        key = (topic, partition)
        tp = self._tps.get(key)
        if tp is None:
            tp = self._tps[key] = TopicPartition(topic, partition)
        return tp

    def _convert(self, msgs: list[Message]) -> tuple[list[InternalSinkRecord], dict[TopicPartition, int]]:
        """Messages → records after conversion and transformations. Offsets advance for
        every message, including those dropped by a transformation or tolerated.

        The hot loop of every sink task: records are :class:`LazySinkRecord` (timestamp,
        headers and original coordinates read from the message on first use) and
        conversions are inlined; a failed conversion takes :meth:`_to_connect`, the
        tolerance path.
        """
        key_conv, value_conv, chain = self.key_converter, self.value_converter, self.chain
        key_raw = isinstance(key_conv, ByteArrayConverter)
        value_raw = isinstance(value_conv, ByteArrayConverter)
        key_to_connect, value_to_connect = key_conv.to_connect_data, value_conv.to_connect_data
        header_conv = self.header_converter
        transform = not chain.is_empty
        new_record, lazy = object.__new__, LazySinkRecord
        records: list[InternalSinkRecord] = []
        append = records.append
        last: dict[tuple[str, int], int] = {}
        run_topic, run_partition, run_offset = None, -1, -1  # messages come in runs per partition
        for msg in msgs:
            if msg.error() is not None:
                self._consume_error(msg.error())
                continue
            topic = msg.topic()
            partition = msg.partition()
            offset = msg.offset()
            if partition != run_partition or topic != run_topic:
                if run_topic is not None:
                    last[run_topic, run_partition] = run_offset
                run_topic, run_partition = topic, partition
            run_offset = offset
            if not (key_raw and value_raw):  # for the converters; the record reads its own when asked
                raw_headers = msg.headers()
                headers = tuple([Header(k, v) for k, v in raw_headers]) if raw_headers else ()
            if key_raw:
                key, key_schema = msg.key(), None
            else:
                try:
                    key_schema, key = key_to_connect(topic, headers, msg.key())
                except Exception as exc:  # noqa: BLE001 - tolerance decides
                    key, key_schema = self._to_connect(key_conv, Stage.KEY_CONVERTER, msg, topic, headers, exc)
                    if key is _FAILED:
                        continue
            if value_raw:
                value, value_schema = msg.value(), None
            else:
                try:
                    value_schema, value = value_to_connect(topic, headers, msg.value())
                except Exception as exc:  # noqa: BLE001 - tolerance decides
                    value, value_schema = self._to_connect(value_conv, Stage.VALUE_CONVERTER, msg, topic, headers,
                                                           exc)
                    if value is _FAILED:
                        continue
            if header_conv is not None:
                typed_headers = self._to_connect_headers(header_conv, msg, topic)
                if typed_headers is _FAILED:
                    continue
            record = new_record(lazy)
            record.topic = topic
            record.kafka_partition = partition
            record.kafka_offset = offset
            record.key = key
            record.key_schema = key_schema
            record.value = value
            record.value_schema = value_schema
            record.raw = msg
            if header_conv is not None:
                record.headers = typed_headers
            if transform:
                record = self._transform(record, msg)
                if record is None:
                    continue
            append(record)
        if run_topic is not None:
            last[run_topic, run_partition] = run_offset
        return records, {self._tp(t, p): off + 1 for (t, p), off in last.items()}

    def _to_connect(self, converter: Any, stage: Stage, msg: Message, topic: str, headers: tuple[Header, ...],
                    first: Exception) -> tuple[Any, Any]:
        """A conversion that raised ``first``: retried per ``errors.retry.timeout``, then
        tolerated (``_FAILED``) or the task fails."""
        assert self.tolerance is not None
        data = msg.key() if stage is Stage.KEY_CONVERTER else msg.value()
        try:
            sv = self.tolerance.retry(lambda: converter.to_connect_data(topic, headers, data), first)
        except Exception as final:  # noqa: BLE001
            self._tolerate(msg, stage, class_name(converter), final)
            return _FAILED, None
        return sv.value, sv.schema

    def _to_connect_headers(self, converter: HeaderConverter, msg: Message, topic: str) -> Any:
        """The message's headers through ``header.converter``: retried per
        ``errors.retry.timeout``, then tolerated (``_FAILED``) or the task fails."""
        assert self.tolerance is not None
        try:
            return to_connect_headers(converter, topic, msg.headers())
        except Exception as exc:  # noqa: BLE001 - tolerance decides
            try:
                return self.tolerance.retry(lambda: to_connect_headers(converter, topic, msg.headers()), exc)
            except Exception as final:  # noqa: BLE001
                self._tolerate(msg, Stage.HEADER_CONVERTER, class_name(converter), final)
                return _FAILED

    def _transform(self, record: InternalSinkRecord, msg: Message) -> InternalSinkRecord | None:
        assert self.tolerance is not None
        try:
            return self.chain.apply(record)
        except Exception as exc:  # noqa: BLE001 - tolerance decides
            try:
                return self.tolerance.retry(lambda: self.chain.apply(record), exc)
            except Exception as final:  # noqa: BLE001
                cls = getattr(final, "transformation_class", None) or class_name(self.chain)
                self._tolerate(msg, Stage.TRANSFORMATION, cls, final)
                return None

    def _tolerate(self, msg: Message, stage: Stage, cls_name: str, error: BaseException) -> None:
        assert self.tolerance is not None
        try:
            self.tolerance.failed(failed_record(msg), stage, cls_name, error)
        except ConnectError as exc:
            raise TaskFailed(str(exc)) from exc

    def _consume_error(self, err: KafkaError) -> None:
        if err.fatal():
            raise TaskFailed(f"fatal consumer error: {err}") from KafkaException(err)
        log.warning("task %s-%d: consumer error: %s", self.spec.connector, self.spec.task_id, err)

    def _deliver(self, batch: list[InternalSinkRecord], offsets: dict[TopicPartition, int]) -> None:
        """``put`` a batch; on RetriableError keep it for redelivery with consumption paused."""
        assert self.task and self.context
        started = time.monotonic()
        try:
            self.task.put(batch)
        except RetriableError as exc:
            delay = exc.delay or self.context.retry_timeout
            self.context.retry_timeout = None
            backoff = delay.total_seconds() if delay is not None else DEFAULT_RETRY_BACKOFF_S
            log.info("task %s-%d: put() asked for a retry in %.3fs: %s", self.spec.connector, self.spec.task_id,
                     backoff, exc)
            self._retry_batch, self._retry_offsets = batch, offsets
            self._retry_at = time.monotonic() + backoff
            self._pause_for_retry(True)
            return
        except Exception as exc:  # noqa: BLE001 - the task fails
            raise TaskFailed(f"put() failed: {exc}") from exc
        self.meter.batch(len(batch), time.monotonic() - started)
        if self._retry_batch is not None:
            self._retry_batch, self._retry_offsets = None, {}
            self._pause_for_retry(False)
        self.current.update(offsets)
        self.records_put += len(batch)
        if self.context.commit_requested:
            self.context.commit_requested = False
            self._commit(closing=False)

    # ------------------------------------------------------------------ commits

    def _commit(self, closing: bool, partitions: Sequence[TopicPartition] | None = None) -> None:
        """:meth:`_commit_offsets`, timed when it completes (Connect's ``offset-commit-*-time-ms``)."""
        commits, started = self.commits, time.monotonic()
        self._commit_offsets(closing, partitions)
        if self.commits > commits:
            self.meter.commit(time.monotonic() - started)

    def _commit_offsets(self, closing: bool, partitions: Sequence[TopicPartition] | None = None) -> None:
        """``pre_commit`` then commit what it returned, validated as Kafka Connect does
        (``WorkerSinkTask.commitOffsets``): only assigned partitions, never past what was
        consumed and put. Synchronous."""
        assert self.task and self.context and self.consumer and self.tolerance
        scope = set(self.context.assigned if partitions is None else partitions)
        offsets = {tp: off for tp, off in self.current.items() if tp in scope}
        self.tolerance.await_reports(self.spec.closing_timeout_s)
        self.context.closing = closing and self.settings.closing_aware_commits  # type: ignore[union-attr]
        try:
            requested = self.task.pre_commit(offsets)
        except Exception as exc:  # noqa: BLE001 - a failed pre_commit skips this commit
            log.error("task %s-%d: pre_commit failed, nothing committed: %s", self.spec.connector,
                      self.spec.task_id, exc)
            return
        finally:
            self.context.closing = False
        valid: dict[TopicPartition, int] = {}
        for tp, off in (requested or {}).items():
            if tp not in scope:
                log.warning("task %s-%d: ignoring offset for %s: partition not assigned", self.spec.connector,
                            self.spec.task_id, tp)
            elif tp not in self.current or off > self.current[tp]:
                log.warning("task %s-%d: ignoring offset %d for %s: not yet consumed", self.spec.connector,
                            self.spec.task_id, off, tp)
            else:
                valid[tp] = off
        to_commit = {tp: off for tp, off in valid.items() if self._committed_assigned.get(tp) != off}
        if to_commit:
            try:
                self._commit_sync(to_commit, closing)
            except KafkaException as exc:
                # As Kafka Connect: a failed commit (e.g. the group is rebalancing) is logged and the
                # same offsets are offered again at the next commit; only a fatal error fails the task.
                if exc.args[0].fatal():
                    raise TaskFailed(f"offset commit failed fatally: {exc.args[0].str()}") from exc
                if closing:
                    self.closing_commit_error = exc.args[0].str()
                    log.error("task %s-%d: closing commit failed: %s; the partitions' next owner resumes from "
                              "the last commit %s", self.spec.connector, self.spec.task_id, exc.args[0].str(),
                              {str(tp): off for tp, off in self._committed_assigned.items() if tp in to_commit})
                else:
                    log.warning("task %s-%d: offset commit failed, will retry at the next commit: %s",
                                self.spec.connector, self.spec.task_id, exc.args[0].str())
                return
            self.committed.update(to_commit)
            self._committed_assigned.update(to_commit)
        self.commits += 1
        if closing:
            self.closing_commits += 1
            self.closing_commit_error = None
            # What the group holds for these partitions after the closing commit, including
            # offsets an earlier commit already wrote.
            self.last_closing_commit = {tp_key(tp.topic, tp.partition): off for tp, off in valid.items()}

    def _commit_sync(self, offsets: dict[TopicPartition, int], closing: bool) -> None:
        """Commit and wait for the broker's answer (the rule is in the module docstring).

        A closing commit outside a revoke callback goes through
        :meth:`_commit_serving_group`. Any other commit is synchronous; inside a revoke
        callback a closing commit that meets a group rebalance (``ILLEGAL_GENERATION`` /
        ``REBALANCE_IN_PROGRESS``) is retried for up to :data:`CLOSING_COMMIT_RETRY_S` (at
        most half the closing timeout): there is no later commit to offer these offsets again.

        Raises:
            KafkaException: the commit failed (for good), or a closing commit was not
                confirmed in time (``_TIMED_OUT``).
        """
        assert self.consumer is not None
        partitions = [KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        budget_s = min(CLOSING_COMMIT_RETRY_S, self.spec.closing_timeout_s / 2) if closing else 0
        if closing and not self._in_revoke_callback:
            half = self.spec.closing_timeout_s / 2
            self._commit_serving_group(partitions, max(1.0, min(half, self.closing_time_left() - half / 2)))
            return
        deadline = time.monotonic() + budget_s
        while True:
            try:
                self.consumer.commit(offsets=partitions, asynchronous=False)
                return
            except KafkaException as exc:
                if exc.args[0].code() not in _REBALANCING or time.monotonic() + 0.2 > deadline:
                    raise
                log.info("task %s-%d: closing commit met a rebalance (%s); retrying", self.spec.connector,
                         self.spec.task_id, exc.args[0].name())
                time.sleep(0.2)

    def _commit_serving_group(self, partitions: list[KafkaTopicPartition], budget_s: float) -> None:
        """An asynchronous commit of ``partitions`` while this (the task's) thread keeps
        serving the consumer, so that the group's rebalances complete and the answer
        arrives; retried on a rebalance error until ``budget_s`` seconds have passed.

        Raises:
            KafkaException: the commit failed for good, or was not confirmed within
                ``budget_s`` (code ``_TIMED_OUT``).
        """
        assert self.consumer is not None and self.context is not None
        deadline = time.monotonic() + budget_s
        self._serving_close = True
        try:
            self._pause_all_assigned()
            while True:
                self._commit_result = None
                self.consumer.commit(offsets=partitions, asynchronous=True)
                while self._commit_result is None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise KafkaException(KafkaError(
                            KafkaError._TIMED_OUT, f"closing commit not confirmed within {budget_s:.0f}s"))
                    self.consumer.poll(min(POLL_TIMEOUT_S, remaining))  # a record fetched now is not put
                error, results = self._commit_result
                failed = next((p.error for p in results if p.error is not None), None)
                error = error or failed
                if error is None:
                    return
                if error.code() not in _REBALANCING or time.monotonic() + 0.2 > deadline:
                    raise KafkaException(error)
                log.info("task %s-%d: closing commit met a rebalance (%s); retrying", self.spec.connector,
                         self.spec.task_id, error.name())
                time.sleep(0.2)
        finally:
            self._serving_close = False

    def _on_commit(self, error: KafkaError | None, partitions: list[KafkaTopicPartition]) -> None:
        self._commit_result = (error, partitions)

    def _pause_all_assigned(self) -> None:
        assert self.consumer is not None
        assignment = self.consumer.assignment()
        if assignment:
            self.consumer.pause(assignment)

    def _close_partitions(self, partitions: list[TopicPartition], commit: bool) -> None:
        assert self.task and self.context
        partitions = [tp for tp in partitions if tp in self.context.assigned]
        if not partitions:
            return
        if commit:
            self._commit(closing=True, partitions=partitions)
        self.task.close(partitions)
        for tp in partitions:
            self.context.assigned.discard(tp)
            self.context.paused_by_task.discard(tp)
            self.current.pop(tp, None)
            self._committed_assigned.pop(tp, None)
            self.context.rewinds.pop(tp, None)
        self._drop_from_retry(set(partitions))

    def _close(self, clean: bool) -> None:
        """A closing commit of every assigned partition, then ``close`` (also after a
        failure: what earlier ``put`` calls processed is committed)."""
        if self.task is not None and self.context is not None:
            self._close_partitions(sorted(self.context.assigned), commit=True)

    def _release(self) -> None:
        self._stopping = True
        if self.consumer is not None:
            self._close_consumer(self.consumer)
        if self.tolerance is not None:
            self.tolerance.close()
        self.chain_close()

    def _close_consumer(self, consumer: Consumer) -> None:
        """``unsubscribe()`` (it sends ``LeaveGroup`` even with no partitions, see the module
        docstring), then ``close()``, waiting until the closing deadline at most: librdkafka's
        ``close()`` has no timeout and waits for the ``LeaveGroup`` answer and any commit in
        flight, which a rebalance parked behind a frozen member delays for that member's
        ``session.timeout.ms``. A close still running then is left to finish on its own
        (the broker expires the member) so that the task ends within its grace period."""
        def close() -> None:
            try:
                consumer.unsubscribe()
                consumer.close()
            except Exception:  # noqa: BLE001
                log.exception("task %s: consumer close failed", self.where)

        closer = threading.Thread(target=close, name=f"close-consumer-{self.where}", daemon=True)
        closer.start()
        closer.join(max(1.0, self.closing_time_left()))
        if closer.is_alive():
            log.error("task %s: the consumer did not close before the grace period ends; leaving it to the "
                      "broker's session timeout", self.where)

    def chain_close(self) -> None:
        chain = getattr(self, "chain", None)
        if chain is not None:
            chain.close()

    # ------------------------------------------------------------------ rebalance callbacks

    def _on_assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        assert self.task and self.context
        if self._stopping:
            return
        if self._serving_close:  # the task is closing: take the partitions, paused, and never open them
            self._assign(consumer, [KafkaTopicPartition(p.topic, p.partition, OFFSET_INVALID) for p in partitions])
            consumer.pause(partitions)
            return
        new = [self._tp(p.topic, p.partition) for p in partitions]
        self.context.assigned.update(new)
        try:
            self.task.open(new)
        except Exception as exc:  # noqa: BLE001 - open failing fails the task
            self._callback_error = TaskFailed(f"open() failed: {exc}")
            self._callback_error.__cause__ = exc
        assign = []
        for tp in new:
            rewind = self.context.rewinds.pop(tp, None)
            if rewind is not None:
                self.current[tp] = rewind
                assign.append(KafkaTopicPartition(tp.topic, tp.partition, rewind))
            else:
                assign.append(KafkaTopicPartition(tp.topic, tp.partition, OFFSET_INVALID))
        self._assign(consumer, assign)
        if self._paused_by_directive or self._paused_for_retry:
            consumer.pause(assign)

    def _assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        if self._cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        if self.task is None or self._stopping:
            return
        if self._serving_close:  # the closing commit in flight covers them; the task closes them after it
            self._unassign(consumer, partitions)
            return
        revoked = [self._tp(p.topic, p.partition) for p in partitions]
        self._in_revoke_callback = True
        try:
            self._close_partitions(revoked, commit=True)
        except Exception as exc:  # noqa: BLE001
            self._callback_error = TaskFailed(f"closing partitions on revoke failed: {exc}")
            self._callback_error.__cause__ = exc
        finally:
            self._in_revoke_callback = False
        self._unassign(consumer, partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        if self.task is None or self._stopping:
            return
        if self._serving_close:
            self._unassign(consumer, partitions)
            return
        lost = [self._tp(p.topic, p.partition) for p in partitions]
        log.warning("task %s-%d: partitions lost, closing without commit: %s", self.spec.connector,
                    self.spec.task_id, ", ".join(map(str, lost)))
        try:
            self._close_partitions(lost, commit=False)
        except Exception as exc:  # noqa: BLE001
            self._callback_error = TaskFailed(f"closing lost partitions failed: {exc}")
            self._callback_error.__cause__ = exc
        self._unassign(consumer, partitions)

    def _unassign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        if self._cooperative:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()

    _callback_error: TaskFailed | None = None
    _cooperative = True

    # ------------------------------------------------------------------ pausing and rewinds

    def _raise_callback_error(self) -> None:
        if self._callback_error is not None:
            error, self._callback_error = self._callback_error, None
            raise error

    def _follow_pause(self, paused: bool) -> None:
        if paused == self._paused_by_directive:
            return
        self._paused_by_directive = paused
        self.state = TaskState.PAUSED if paused else TaskState.RUNNING
        self._refresh_pause()

    def _pause_for_retry(self, paused: bool) -> None:
        self._paused_for_retry = paused
        self._refresh_pause()

    def _refresh_pause(self) -> None:
        assert self.consumer and self.context
        assigned = [KafkaTopicPartition(tp.topic, tp.partition) for tp in self.context.assigned]
        if not assigned:
            return
        if self._paused_by_directive or self._paused_for_retry:
            self.consumer.pause(assigned)
        else:
            resume = [p for p in assigned if self._tp(p.topic, p.partition) not in self.context.paused_by_task]
            if resume:
                self.consumer.resume(resume)

    def _apply_pause_requests(self) -> None:
        assert self.consumer and self.context
        requests, self.context.pause_requests = self.context.pause_requests, []
        for pause, tps in requests:
            kafka_tps = [KafkaTopicPartition(tp.topic, tp.partition) for tp in tps if tp in self.context.assigned]
            if not kafka_tps:
                continue
            if pause:
                self.consumer.pause(kafka_tps)
            elif not (self._paused_by_directive or self._paused_for_retry):
                self.consumer.resume(kafka_tps)

    def _apply_rewinds(self) -> None:
        assert self.consumer and self.context
        if not self.context.rewinds:
            return
        rewinds, self.context.rewinds = self.context.rewinds, {}
        for tp, off in rewinds.items():
            if tp not in self.context.assigned:
                log.warning("task %s-%d: ignoring rewind of %s: not assigned", self.spec.connector,
                            self.spec.task_id, tp)
                continue
            self.consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, off))
            self.current[tp] = off
        self._drop_from_retry(set(rewinds))

    def _drop_from_retry(self, partitions: set[TopicPartition]) -> None:
        if self._retry_batch is None or not partitions:
            return
        self._retry_batch = [r for r in self._retry_batch if self._tp(r.original_topic, r.original_kafka_partition)
                             not in partitions]  # type: ignore[arg-type]
        self._retry_offsets = {tp: off for tp, off in self._retry_offsets.items() if tp not in partitions}

    # ------------------------------------------------------------------ reporting

    def _build_report(self, **common: Any) -> TaskReport:
        assigned = sorted(self.context.assigned) if self.context else []
        return TaskReport(
            **common,
            assignment=[tp_key(tp.topic, tp.partition) for tp in assigned],
            committed={tp_key(tp.topic, tp.partition): off for tp, off in self.committed.items()},
            consumed={tp_key(tp.topic, tp.partition): off for tp, off in self.current.items()},
            lag=self._lag(assigned),
            records_read=self.records_read,
            records_put=self.records_put,
            records_skipped=self.tolerance.failed_count if self.tolerance else 0,
            dlq_records=sum(getattr(r, "sent", 0) for r in self.tolerance.reporters) if self.tolerance else 0,
            commits=self.commits,
            closing_commits=self.closing_commits,
            last_closing_commit=self.last_closing_commit,
            closing_commit_error=self.closing_commit_error,
        )

    def _lag(self, assigned: list[TopicPartition]) -> dict[str, int]:
        if self.consumer is None or self._stopping:
            return {}
        lag = {}
        for tp in assigned:
            try:
                _low, high = self.consumer.get_watermark_offsets(KafkaTopicPartition(tp.topic, tp.partition),
                                                                 cached=True)
            except KafkaException:
                continue
            if high is None or high < 0:
                continue
            lag[tp_key(tp.topic, tp.partition)] = max(0, high - self.current.get(tp, self.committed.get(tp, high)))
        return lag


_FAILED = object()


