"""Runs one sink task inside a Spark executor: Kafka Connect's ``WorkerSinkTask``.

Consumer group ``connect-<name>``, auto-commit off, cooperative-sticky assignor. One
thread (the Spark task's) runs the consumer, every task hook and the commits, so the
rebalance callbacks run on it too (librdkafka serves them inside ``consume``).

Closing-aware commits (KIP-275), the sequence for every trigger:

* revoke (rebalance): ``pre_commit(offsets of the revoked partitions)`` with
  ``is_closing()`` true → synchronous commit → ``close(revoked)``.
* stop, drain, driver shutdown, ``state: stopped``, reconfiguration: the same for every
  assigned partition, then ``stop(connector_deleted)``, then the consumer leaves the group.
* a failing ``put``: the same closing commit of what earlier ``put`` calls processed,
  then ``close`` and ``stop``; the task reports ``FAILED``.
* lost partitions (session expired): ``close(lost)`` and no commit.

Why a closing commit cannot hang on a rebalance: :mod:`.commits`. The runner is put together
from its parts: conversion of records (:mod:`.conversion`), commits (:mod:`.commits`) and
rebalance callbacks (:mod:`.rebalance`) and paused partitions (:mod:`.pausing`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from conveyor.api import SinkTask, TopicPartition
from conveyor.control.protocol import Action, TaskReport, TaskSpec, TaskState, tp_key
from conveyor.converters import load_converter
from conveyor.converters.columnar import columnar
from conveyor.converters.header_converters import load_header_converter
from conveyor.runtime.config.plugins import load_connector_class
from conveyor.runtime.config.settings import (
    CLASSIC_PROTOCOL_ONLY,
    GroupProtocol,
    SinkSettings,
    parse_sink_settings,
    prefixed,
)
from conveyor.runtime.errors.dead_letter_queue import DeadLetterQueue
from conveyor.runtime.errors.tolerance import LogReporter, Reporter, ToleranceOperator
from conveyor.runtime.kafka.clients import client_config
from conveyor.runtime.kafka.log_repeats import CollapseRepeats
from conveyor.runtime.task.runner import TaskFailed, TaskRunner
from conveyor.runtime.task.sink.batches import ALWAYS, BatchBuilder, drop_partitions
from conveyor.runtime.task.sink.commits import POLL_TIMEOUT_S, SinkCommits
from conveyor.runtime.task.sink.context import (
    InternalSinkRecord,
    RunnerErrantRecordReporter,
    RunnerSinkContext,
)
from conveyor.runtime.task.sink.conversion import SinkConversion
from conveyor.runtime.task.sink.held_messages import HeldMessages
from conveyor.runtime.task.sink.pausing import SinkPausing
from conveyor.runtime.task.sink.rebalance import SinkRebalance
from conveyor.transforms.chain import NoBatchForm, TransformationChain

log = logging.getLogger(__name__)
log.addFilter(CollapseRepeats())  # librdkafka's logs come through it

_JAVA_ONLY_CONSUMER_KEYS = {"max.poll.records", "key.deserializer", "value.deserializer"}

def consumer_config(spec: TaskSpec, protocol: GroupProtocol = GroupProtocol.CLASSIC) -> dict[str, Any]:
    """librdkafka settings of a sink task's consumer: the connector's base Kafka properties
    (``spec.kafka``: bootstrap servers, TLS, SASL), the runtime's settings, then
    ``consumer.override.*`` (applied last; Java-only keys dropped). With ``protocol``
    ``consumer`` (KIP-848) the runtime sets none of :data:`CLASSIC_PROTOCOL_ONLY`: the broker
    owns the session, the heartbeats and the assignor."""
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
    if protocol is GroupProtocol.CONSUMER:
        settings = {k: v for k, v in settings.items() if k not in CLASSIC_PROTOCOL_ONLY}
    overrides = prefixed(spec.connector_config, "consumer.override.")
    return client_config(spec.kafka, settings,
                         {k: v for k, v in overrides.items() if k not in _JAVA_ONLY_CONSUMER_KEYS})


def producer_config(spec: TaskSpec) -> dict[str, Any]:
    """librdkafka settings for producers a sink task owns (the dead-letter queue): base
    Kafka properties, a client id, then ``producer.override.*``."""
    return client_config(spec.kafka, {"client.id": f"connector-dlq-producer-{spec.connector}-{spec.task_id}"},
                         prefixed(spec.connector_config, "producer.override."))


class SinkTaskRunner(SinkConversion, SinkCommits, SinkRebalance, SinkPausing, TaskRunner):
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
        self._retry_batch: list[InternalSinkRecord] | list[pa.RecordBatch] | None = None
        self._batches: BatchBuilder | None = None
        self._held_messages: HeldMessages | None = None  # the batch path's messages, for the dead-letter queue
        self._retry_offsets: dict[TopicPartition, int] = {}
        self._retry_at = 0.0
        self._paused_for_retry = False
        self._paused_by_directive = False
        self._consumer_paused: set[TopicPartition] = set()
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
        self._started_at = time.monotonic()
        self.settings = parse_sink_settings(spec.connector_config)
        connector_cls = load_connector_class(spec.connector_class)
        task_cls = connector_cls().task_class()
        self.task = task_cls()
        self._poison_errors = tuple(getattr(task_cls, "poison_errors", ()) or ())
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
        self._errant_reporter = RunnerErrantRecordReporter(self.tolerance, self.task)
        self.context = RunnerSinkContext(spec.task_config, self._errant_reporter)
        self.key_converter = load_converter(spec.connector_config, "key", self.settings.key_converter)
        self.value_converter = load_converter(spec.connector_config, "value", self.settings.value_converter)
        self.header_converter = load_header_converter(spec.connector_config)
        self.chain = TransformationChain.from_config(spec.connector_config)
        self.task.initialize(self.context)
        self.task.start(spec.task_config)
        self._batches = self._batch_builder()
        if self._batches is not None and (self.settings.dlq_topic or self.settings.errors_log_include_messages):
            self._held_messages = HeldMessages()
            self._errant_reporter.find_message = self._held_messages.find
        self._no_records = [self._batches.empty] if self._batches is not None else []
        config = consumer_config(spec, self.settings.group_protocol)
        config["on_commit"] = self._on_commit
        self._cooperative = (self.settings.group_protocol is GroupProtocol.CONSUMER  # incremental, as KIP-848 is
                             or "cooperative" in str(config.get("partition.assignment.strategy", "")))
        self.consumer = Consumer(config, logger=log)
        self.consumer.subscribe(
            self.settings.subscription, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self.state = TaskState.RUNNING
        log.debug("task %s: started and subscribed in %.2f s", self.where, time.monotonic() - self._started_at)
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
            if self._consumer_paused:
                self._release_holds()
            self._apply_rewinds()
            limit = self.settings.batch_max_records if self._batches is not None else self.settings.max_poll_records
            polled_at = time.monotonic()
            msgs = self.consumer.consume(limit, self._poll_timeout(now))
            if len(msgs) < limit:  # it waited for records that were not there
                self.meter.idle(time.monotonic() - polled_at)
            self._raise_callback_error()
            if msgs and not self.records_read:
                log.debug("task %s: first records %.2f s after the runner began (task start, group join, first "
                          "fetch)", self.where, time.monotonic() - self._started_at)
            if msgs and self._holding():
                msgs = self._hold_back(msgs)
            if not msgs:
                batch, offsets = self._no_records, {}
            elif self._batches is not None:
                batch, offsets = self._convert_batch(msgs)
            else:
                batch, offsets = self._convert(msgs)
            self.records_read += len(msgs)
            if self._retry_batch is not None:
                if time.monotonic() >= self._retry_at:
                    batch, offsets = self._retry_batch, self._retry_offsets
                    self._deliver(batch, offsets)
            elif not self._paused_by_directive:
                self._deliver(batch, offsets)
            self.report()

    def _batch_builder(self) -> BatchBuilder | None:
        """A builder of Arrow record batches when the batch path applies and the task takes
        its batches (``SinkTask.takes_batches``), else ``None`` (records through ``put``)."""
        assert self.settings and self.task
        cls = type(self.task)
        if cls.put is SinkTask.put and cls.put_batch is SinkTask.put_batch:
            raise TaskFailed(f"{cls.__name__} implements neither put() nor put_batch()")
        if cls.put_batch is SinkTask.put_batch:
            return None
        if not self.settings.batch_path:
            return self._records_only("conveyor.batch.path.enable is false")
        key, value = columnar(self.key_converter), columnar(self.value_converter)
        if self.header_converter is not None:
            return self._records_only("the batch path does not take a header.converter yet")
        if key is None or value is None:
            return self._records_only("the batch path does not take its converters yet")
        try:
            key_type, value_type = self.chain.batch_types(key.type, value.type)
        except NoBatchForm as exc:
            return self._records_only(str(exc))
        if not self.task.takes_batches(key_type, value_type):
            return self._records_only(f"the task takes no batches of {key_type or 'typed'} keys and "
                                      f"{value_type or 'typed'} values (typed: by their Connect schemas)")
        columns = self.task.batch_columns()
        if self.chain.is_empty or columns is None:
            return BatchBuilder(key, value, columns)
        self._chain_columns = [*ALWAYS, *columns]  # the chain may read any column: the task's are taken after it
        return BatchBuilder(key, value)

    def _records_only(self, why: str) -> None:
        """The records go to ``put``, for ``why``; a task that has only ``put_batch`` fails."""
        assert self.task
        if type(self.task).put is SinkTask.put:
            raise TaskFailed(f"{type(self.task).__name__} takes batches only (put_batch), but its records cannot come "
                             f"as batches: {why}")
        log.info("task %s: records go to put(), not put_batch(): %s", self.where, why)

    def _poll_timeout(self, now: float) -> float:
        if self._retry_batch is not None:
            return max(0.0, min(POLL_TIMEOUT_S, self._retry_at - now))
        return POLL_TIMEOUT_S

    _callback_error: TaskFailed | None = None
    _poison_errors: tuple[type[BaseException], ...] = ()
    _chain_columns: list[str] | None = None
    _cooperative = True
    _started_at = 0.0

    # ------------------------------------------------------------------ rewinds

    def _raise_callback_error(self) -> None:
        if self._callback_error is not None:
            error, self._callback_error = self._callback_error, None
            raise error

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
        if self._batches is not None:
            self._retry_batch = [drop_partitions(batch, partitions) for batch in self._retry_batch]
        else:
            self._retry_batch = [r for r in self._retry_batch
                                 if self._tp(r.original_topic, r.original_kafka_partition)  # type: ignore[arg-type]
                                 not in partitions]
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
            batch_path=self._batches is not None,
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
