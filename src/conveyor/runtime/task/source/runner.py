"""Runs one source task inside a Spark executor: Kafka Connect's ``WorkerSourceTask`` and,
with ``exactly.once.support``, its ``ExactlyOnceWorkerSourceTask`` (KIP-618).

One thread (the Spark task's) calls every task hook and serves the producer's delivery
callbacks, so ``commit_record`` runs on the task's thread.

At least once (no ``exactly.once.support``): an idempotent producer; a source
partition's offset becomes committable only up to the contiguous prefix of records the
broker acknowledged; every ``offset.flush.interval.ms`` those offsets are written to the
offsets topic and, once acknowledged, ``task.commit()`` runs. A clean stop flushes first.

Exactly once: a transactional producer ``conveyor-<namespace>-<connector>-<task>``;
the records of a transaction and the offsets of their source partitions are written in
the same transaction, which ends after every non-empty ``poll`` (``poll``), every
``transaction.boundary.interval.ms`` (``interval``) or when the task asks through its
``TransactionContext`` (``connector``). A fenced producer stops the task as ``FENCED``.

``commit_record(record, metadata)`` (KIP-416): called on the task's thread, in send
order per source partition, with the broker's metadata once the record is acknowledged
(exactly once: once its transaction committed), and with ``None`` right away for a record
a transformation dropped or ``errors.tolerance=all`` skipped. Records of an aborted
transaction get no call.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from conveyor.api import (
    ConnectError,
    RecordMetadata,
    RetriableError,
    SourceRecord,
    SourceTask,
)
from conveyor.control.protocol import Action, TaskReport, TaskSpec, TaskState
from conveyor.converters import load_converter
from conveyor.converters.header_converters import load_header_converter, to_kafka_headers
from conveyor.runtime.config.plugins import load_connector_class
from conveyor.runtime.config.settings import SourceSettings, TransactionBoundary, parse_source_settings, prefixed
from conveyor.runtime.config.topic_creation import topic_groups
from conveyor.runtime.errors.tolerance import FailedRecord, LogReporter, Reporter, Stage, ToleranceOperator, class_name
from conveyor.runtime.kafka.clients import client_config
from conveyor.runtime.kafka.fencing import read_task_count, transactional_id
from conveyor.runtime.kafka.offsets_topic import TopicOffsetReader, offset_key, offset_value, read_offsets
from conveyor.runtime.kafka.topic_creation import TopicCreator
from conveyor.runtime.task.runner import TaskFailed, TaskFenced, TaskRunner
from conveyor.runtime.task.source.batches import SourceBatches
from conveyor.runtime.task.source.context import RunnerSourceContext, RunnerTransactionContext
from conveyor.runtime.task.source.partitions import PartitionOffset, SourcePartitions
from conveyor.runtime.task.source.produce_failures import ProduceFailures
from conveyor.transforms.chain import TransformationChain

log = logging.getLogger(__name__)

T = TypeVar("T")
DEFAULT_RETRY_BACKOFF_S = 1.0
IDLE_SLEEP_S = 0.05


def _is_fenced(err: KafkaError) -> bool:
    return err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
                          KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


class _Pending:
    """One record in flight: what ``commit_record`` gets once it is done. ``done``: acknowledged
    or never to be written; ``written``: acknowledged by the broker."""

    __slots__ = ("done", "metadata", "partition_id", "record", "written")

    def __init__(self, record: SourceRecord, pid: str, done: bool) -> None:
        self.record = record
        self.partition_id = pid
        self.done = done
        self.written = False
        self.metadata: RecordMetadata | None = None

    @property
    def partition(self) -> Mapping[str, Any]:
        return self.record.source_partition

    @property
    def offset(self) -> Mapping[str, Any]:
        return self.record.source_offset


class SourceTaskRunner(SourceBatches, TaskRunner):
    """One run of one source task; ``run()`` returns its final report."""

    def __init__(self, spec: TaskSpec) -> None:
        super().__init__(spec)
        self.settings: SourceSettings | None = None
        self.task: SourceTask | None = None
        self.producer: Producer | None = None
        self.topic_creator: TopicCreator | None = None
        self.reader: TopicOffsetReader | None = None
        self._offsets = SourcePartitions()
        self._offset_flush: dict[str, Any] | None = None
        self._txn_records: list[_Pending] = []
        self._acked: collections.deque[_Pending] = collections.deque()
        self._send_error: BaseException | None = None
        self._wants_commit_record = True
        self._batches_on = False  # records come from poll_batch() (.batches)
        self._in_txn = False
        self._next_flush = 0.0
        self._next_txn_commit = 0.0
        self.records_polled = 0
        self.records_written = 0
        self.commits = 0
        self.transactions = 0

    @property
    def exactly_once(self) -> bool:
        return bool(self.settings and self.settings.exactly_once)

    # ------------------------------------------------------------------ lifecycle

    def _start(self) -> None:
        spec = self.spec
        self.settings = parse_source_settings(spec.connector_config)
        connector_cls = load_connector_class(spec.connector_class)
        self.task = connector_cls().task_class()()  # type: ignore[assignment]
        # KIP-416's hook costs a RecordMetadata and a call per record: skipped when not overridden.
        self._wants_commit_record = type(self.task).commit_record is not SourceTask.commit_record
        reporters: list[Reporter] = []
        if self.settings.errors_log_enable:
            reporters.append(LogReporter(spec.connector, spec.task_id, self.settings.errors_log_include_messages))
        self.tolerance = ToleranceOperator(self.settings, reporters)
        self._produce_failures = ProduceFailures(self.tolerance, class_name(self))
        self.key_converter = load_converter(spec.connector_config, "key", self.settings.key_converter)
        self.value_converter = load_converter(spec.connector_config, "value", self.settings.value_converter)
        self.header_converter = load_header_converter(spec.connector_config)
        self.chain = TransformationChain.from_config(spec.connector_config)
        self._batches_on = self._batch_path()
        groups = topic_groups(spec.connector_config)
        self.topic_creator = None if groups is None else TopicCreator(AdminClient(client_config(spec.kafka)), groups)
        began = time.monotonic()
        self.producer = Producer(self._producer_config())
        if self.exactly_once:
            self._init_transactions()
        initialised = time.monotonic()
        self.reader = TopicOffsetReader(
            read_offsets(spec.kafka, self.settings.offsets_storage_topic, spec.connector)
        )
        log.info("task %s-%d: producer ready in %.2fs, offsets read in %.2fs", spec.connector, spec.task_id,
                 initialised - began, time.monotonic() - initialised)
        transaction_context = None
        if self.exactly_once and self.settings.transaction_boundary is TransactionBoundary.CONNECTOR:
            transaction_context = RunnerTransactionContext()
        self.context = RunnerSourceContext(spec.task_config, self.reader, transaction_context)
        assert self.task is not None
        self.task.initialize(self.context)
        self.task.start(spec.task_config)
        self.state = TaskState.RUNNING
        now = time.monotonic()
        self._next_flush = now + self.settings.offset_flush_interval_ms / 1000
        self._next_txn_commit = now + self.settings.transaction_interval_ms / 1000

    def _producer_config(self) -> dict[str, Any]:
        """The task's producer: base Kafka properties (``spec.kafka``), the runtime's
        settings (idempotence, the transactional id with exactly-once), then
        ``producer.override.*``."""
        spec = self.spec
        assert self.settings is not None
        settings: dict[str, Any] = {
            "client.id": f"connector-producer-{spec.connector}-{spec.task_id}",
            "enable.idempotence": True,
            "linger.ms": 5,
            "partitioner": "murmur2_random",
        }
        if self._batches_on:
            settings.update(self._batch_producer_settings())
        if self.exactly_once:
            settings["transactional.id"] = transactional_id(spec.namespace, spec.connector, spec.task_id)
            settings["transaction.timeout.ms"] = self.settings.transaction_timeout_ms
        return client_config(spec.kafka, settings, prefixed(spec.connector_config, "producer.override."))

    def _init_transactions(self) -> None:
        """Initialise the transactional producer (fencing any older holder of the id), then
        check that no newer generation exists (else this task is a zombie)."""
        assert self.producer and self.settings
        try:
            self.producer.init_transactions(60)
        except KafkaException as exc:
            if _is_fenced(exc.args[0]):
                raise TaskFenced(exc.args[0].str()) from exc
            raise
        latest = read_task_count(self.spec.kafka, self.settings.config_storage_topic, self.spec.connector)
        if latest is not None and latest.generation > self.spec.generation:
            raise TaskFenced(
                f"generation {latest.generation} of connector {self.spec.connector} exists; this task belongs to "
                f"generation {self.spec.generation} and will not start"
            )

    def _loop(self) -> tuple[TaskState, bool]:
        assert self.settings and self.task and self.producer
        while True:
            leaving = self._leaving()
            if leaving is not None:
                return leaving
            paused = self.link.directive.action is Action.PAUSE
            self.state = TaskState.PAUSED if paused else TaskState.RUNNING
            if not paused and self._batches_on and not self._produce_failures:
                batch = self._poll_batch()
                if batch is not None:
                    self._send_batch(batch)
            elif not paused and not self._produce_failures:  # records to produce again go first
                records = self._poll()
                if records:
                    self._send(records)
                    if self.exactly_once:
                        self._after_batch()
            self.producer.poll(0 if not paused and not self._produce_failures else IDLE_SLEEP_S)
            self._raise_send_error()
            self._handle_produce_failures()
            self._deliver_commit_records()
            now = time.monotonic()
            if self._batches_on:
                if now >= self._next_flush:
                    self._flush_batches(self.settings.offset_flush_timeout_ms / 1000)
                    self._next_flush = now + self.settings.offset_flush_interval_ms / 1000
            elif not self.exactly_once:
                self._complete_offset_flush()
                if now >= self._next_flush:
                    self._flush_offsets()
                    self._next_flush = now + self.settings.offset_flush_interval_ms / 1000
            elif self.exactly_once and self._in_txn and self.settings.transaction_boundary is \
                    TransactionBoundary.INTERVAL and now >= self._next_txn_commit:
                self._commit_transaction()
            self.report()

    # ------------------------------------------------------------------ polling and sending

    def _poll(self) -> list[SourceRecord]:
        assert self.task is not None
        started = time.monotonic()
        records = self._call_poll(self.task.poll)
        if records is not None:  # as Connect, a poll that returned a (maybe empty) batch
            self.meter.batch(len(records), time.monotonic() - started)
        records = records or []
        self.records_polled += len(records)
        return records

    def _call_poll(self, poll: Callable[[], T]) -> T | None:
        """``poll()`` (or ``poll_batch()``); ``None`` after sleeping out a ``RetriableError``.

        Raises:
            TaskFailed: it raised anything else.
        """
        try:
            return poll()
        except RetriableError as exc:
            delay = exc.delay.total_seconds() if exc.delay is not None else DEFAULT_RETRY_BACKOFF_S
            log.info("task %s: %s() asked for a retry in %.3fs: %s", self.where, poll.__name__, delay, exc)
            time.sleep(delay)
            return None
        except Exception as exc:  # noqa: BLE001 - the task fails
            raise TaskFailed(f"{poll.__name__}() failed: {exc}") from exc

    def _send(self, records: list[SourceRecord]) -> None:
        assert self.producer is not None
        transaction = getattr(self.context, "transaction", None)
        exactly_once = self.exactly_once
        id_of, sent, transform, convert = self._offsets.id_of, self._offsets.sent, self._transform, self._convert
        for record in records:
            if exactly_once and not self._in_txn:
                self.producer.begin_transaction()
                self._in_txn = True
                self._next_txn_commit = time.monotonic() + self.settings.transaction_interval_ms / 1000  # type: ignore
            pending = _Pending(record, id_of(record.source_partition), False)
            outgoing = transform(record)
            converted = convert(record, outgoing) if outgoing is not None else None
            if converted is None:
                pending.done = True
                sent(pending)
                self.meter.records_dropped += 1
                if self._wants_commit_record:
                    self._call_commit_record(record, None)
            else:
                sent(pending)
                self._produce(pending, outgoing, *converted)  # type: ignore[arg-type]
            if exactly_once:
                self._txn_records.append(pending)
                if transaction is not None and transaction.after_record(record):
                    self._end_transaction_as_asked(transaction)

    def _transform(self, record: SourceRecord) -> SourceRecord | None:
        if self.chain.is_empty:
            return record
        try:
            return self.chain.apply(record)
        except Exception as exc:  # noqa: BLE001 - tolerance decides
            cls = getattr(exc, "transformation_class", None) or class_name(self.chain)
            self._tolerate(record, Stage.TRANSFORMATION, cls, exc)
            return None

    def _convert(self, original: SourceRecord,
                 record: SourceRecord) -> tuple[str, bytes | None, bytes | None, list | None] | None:
        """The record's topic, key, value and headers as the producer takes them; ``None``
        when a converter failed and ``errors.tolerance`` skipped the record."""
        headers = list(record.headers)
        try:
            key = self.key_converter.from_connect_data(record.topic, headers, record.key_schema, record.key)
        except Exception as exc:  # noqa: BLE001
            self._tolerate(original, Stage.KEY_CONVERTER, class_name(self.key_converter), exc)
            return None
        try:
            value = self.value_converter.from_connect_data(record.topic, headers, record.value_schema, record.value)
        except Exception as exc:  # noqa: BLE001
            self._tolerate(original, Stage.VALUE_CONVERTER, class_name(self.value_converter), exc)
            return None
        if not headers:
            return record.topic, key, value, None
        try:
            kafka_headers = to_kafka_headers(self.header_converter, record.topic, headers)
        except Exception as exc:  # noqa: BLE001
            self._tolerate(original, Stage.HEADER_CONVERTER, class_name(self.header_converter), exc)
            return None
        return record.topic, key, value, kafka_headers

    def _tolerate(self, record: SourceRecord, stage: Stage, cls_name: str, error: BaseException) -> None:
        failed = FailedRecord(record.topic, record.kafka_partition if record.kafka_partition is not None else -1, -1,
                              None, None, None, record.timestamp)
        try:
            self.tolerance.failed(failed, stage, cls_name, error)
        except ConnectError as exc:
            raise TaskFailed(str(exc)) from exc

    def _produce(self, pending: _Pending, record: SourceRecord, topic: str, key: bytes | None,
                 value: bytes | None, headers: list | None) -> None:
        assert self.producer is not None
        on_delivery = self._on_delivery(pending)
        partition, timestamp = record.kafka_partition, record.timestamp
        if self.topic_creator is not None:
            self.topic_creator.ensure(topic)
        produce = self.producer.produce
        while True:
            try:
                if partition is None and timestamp is None and not headers:  # the common case, without a kwargs dict
                    produce(topic, value, key, on_delivery=on_delivery)
                else:
                    extra: dict[str, Any] = {}
                    if partition is not None:
                        extra["partition"] = partition
                    if timestamp is not None:
                        extra["timestamp"] = timestamp
                    if headers:
                        extra["headers"] = headers
                    produce(topic, value, key, on_delivery=on_delivery, **extra)
                return
            except BufferError:
                self.producer.poll(0.05)
                self._raise_send_error()
            except KafkaException as exc:  # refused before it was sent (e.g. larger than message.max.bytes)
                if self.exactly_once:
                    raise
                self._tolerate(record, Stage.KAFKA_PRODUCE, class_name(self), exc)
                self._skipped(pending)
                return

    def _on_delivery(self, pending: _Pending) -> Any:
        """The producer's delivery callback for ``pending`` (runs on the task's thread, inside
        ``producer.poll``/``flush``)."""
        with_metadata = self._wants_commit_record
        acked = None if self.exactly_once or not with_metadata else self._acked

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                if self.exactly_once or _is_fenced(err):
                    if self._send_error is None:
                        self._send_error = KafkaException(err)
                else:
                    self._produce_failures.failed(err, msg, on_delivery, lambda: self._skipped(pending))
                return
            if with_metadata:
                ts_type, ts = msg.timestamp()
                pending.metadata = RecordMetadata(msg.topic(), msg.partition(), msg.offset(), ts if ts_type else None)
                if acked is not None:
                    acked.append(pending)
            pending.done = pending.written = True
            self.records_written += 1

        return on_delivery

    def _skipped(self, pending: _Pending) -> None:
        """A record the producer could not write, skipped under ``errors.tolerance=all``: its
        offset may be committed, and ``commit_record`` gets it without metadata (as Connect's)."""
        pending.done = True
        if self._wants_commit_record:
            self._call_commit_record(pending.record, None)

    def _handle_produce_failures(self) -> None:
        """Produce again what is due, skip or fail on what may not be tried again
        (:mod:`.produce_failures`).

        Raises:
            TaskFailed: a record that cannot be written under ``errors.tolerance=none``.
        """
        if not self._produce_failures:
            return
        assert self.producer is not None
        try:
            self._produce_failures.handle(self.producer)
        except ConnectError as exc:
            raise TaskFailed(str(exc)) from exc

    def _raise_send_error(self) -> None:
        if self._send_error is None:
            return
        error, self._send_error = self._send_error, None
        err = error.args[0] if error.args else None
        if isinstance(err, KafkaError) and _is_fenced(err):
            raise TaskFenced(err.str()) from error
        raise TaskFailed(f"could not write a record to Kafka: {error}") from error

    # ------------------------------------------------------------------ at-least-once offsets

    def _deliver_commit_records(self) -> None:
        """Non-transactional: ``commit_record`` for acknowledged records, and the
        contiguous acknowledged prefix of each source partition becomes committable."""
        if self.exactly_once:
            return
        while self._acked:
            pending = self._acked.popleft()
            self._call_commit_record(pending.record, pending.metadata)
        self._offsets.advance()

    def _flush_offsets(self, wait_s: float | None = None) -> None:
        """Write the committable offsets to the offsets topic; once the broker has them,
        ``commit()`` runs. Without ``wait_s`` this does not wait (the data records need no
        flush: only acknowledged prefixes are committable); one flush is in flight at a time.
        """
        assert self.producer and self.settings
        if self._offset_flush is None:
            changed = self._offsets.committable()
            if changed:
                flush: dict[str, Any] = {"offsets": changed, "remaining": len(changed), "error": None,
                                         "started": time.monotonic()}
                self._offset_flush = flush

                def on_delivery(err: KafkaError | None, _msg: Any) -> None:
                    if err is not None:
                        flush["error"] = err
                    flush["remaining"] -= 1

                for partition, offset in changed.values():
                    self.producer.produce(self.settings.offsets_storage_topic,
                                          key=offset_key(self.spec.connector, partition),
                                          value=offset_value(offset), on_delivery=on_delivery)
        if wait_s is not None:
            self.producer.flush(wait_s)
        self._complete_offset_flush()

    def _complete_offset_flush(self) -> None:
        """After the offset records of a flush are acknowledged: record them, ``commit()``."""
        flush = self._offset_flush
        if flush is None or flush["remaining"] > 0:
            return
        self._offset_flush = None
        if flush["error"] is not None:
            log.warning("task %s-%d: writing offsets failed, will retry: %s", self.spec.connector,
                        self.spec.task_id, flush["error"])
            return
        self._committed(flush["offsets"])
        self.commits += 1
        self.meter.commit(time.monotonic() - flush["started"])
        self._call_commit()

    def _committed(self, offsets: Mapping[str, PartitionOffset]) -> None:
        """``offsets`` (``{partition id: (partition, offset)}``) are in the offsets topic."""
        assert self.reader is not None
        self._offsets.committed(offsets)
        for partition, offset in offsets.values():
            self.reader.update(partition, offset)

    # ------------------------------------------------------------------ transactions

    def _after_batch(self) -> None:
        assert self.settings is not None
        transaction = getattr(self.context, "transaction", None)
        if self.settings.transaction_boundary is TransactionBoundary.POLL and self._in_txn:
            self._commit_transaction()
        elif transaction is not None:
            self._end_transaction_as_asked(transaction, batch_end=True)

    def _end_transaction_as_asked(self, transaction: Any, batch_end: bool = False) -> None:
        action = transaction.take(batch_end)
        if action == "commit" and self._in_txn:
            self._commit_transaction()
        elif action == "abort" and self._in_txn:
            self._abort_transaction()

    def _commit_transaction(self) -> None:
        """Offsets of this transaction's records go in with them; then ``commit_record``
        for each written record and ``commit()``."""
        assert self.producer and self.settings and self.reader and self.task
        started = time.monotonic()
        latest = {pending.partition_id: (pending.partition, pending.offset) for pending in self._txn_records}
        for partition, offset in latest.values():
            self.producer.produce(self.settings.offsets_storage_topic,
                                  key=offset_key(self.spec.connector, partition),
                                  value=offset_value(offset))
        try:
            self.producer.commit_transaction(self.settings.transaction_timeout_ms / 1000)
        except KafkaException as exc:
            if _is_fenced(exc.args[0]):
                raise TaskFenced(exc.args[0].str()) from exc
            raise TaskFailed(f"transaction commit failed: {exc.args[0].str()}") from exc
        self._in_txn = False
        self.transactions += 1
        records, self._txn_records = self._txn_records, []
        self.meter.commit(time.monotonic() - started)
        self.meter.transaction(sum(1 for pending in records if pending.written))
        self._offsets.drop_in_flight()
        self._committed(latest)
        if self._wants_commit_record:
            for pending in records:
                if pending.written:
                    self._call_commit_record(pending.record, pending.metadata)
        self.commits += 1
        self._call_commit()

    def _abort_transaction(self) -> None:
        assert self.producer is not None
        try:
            self.producer.abort_transaction(60)
        except KafkaException as exc:
            if _is_fenced(exc.args[0]):
                raise TaskFenced(exc.args[0].str()) from exc
            raise TaskFailed(f"transaction abort failed: {exc.args[0].str()}") from exc
        self._in_txn = False
        self._txn_records = []
        self._offsets.drop_in_flight()

    # ------------------------------------------------------------------ hooks and stopping

    def _call_commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        assert self.task is not None
        try:
            self.task.commit_record(record, metadata)
        except Exception:  # noqa: BLE001 - KIP-416: logged and ignored
            log.exception("task %s-%d: commit_record failed", self.spec.connector, self.spec.task_id)

    def _call_commit(self) -> None:
        assert self.task is not None
        try:
            self.task.commit()
        except Exception:  # noqa: BLE001 - logged, as Kafka Connect does
            log.exception("task %s-%d: commit failed", self.spec.connector, self.spec.task_id)

    def _close(self, clean: bool) -> None:
        """Exactly once: commit (poll/interval boundaries) or abort (connector boundaries:
        the task did not ask) the open transaction; after a failure, abort it. Otherwise
        flush the producer and write the final offsets."""
        if self.producer is None or self.settings is None:
            return
        if self.exactly_once:
            if not self._in_txn:
                return
            if clean and self.settings.transaction_boundary is not TransactionBoundary.CONNECTOR:
                self._commit_transaction()
            else:
                self._abort_transaction()
            return
        if self._batches_on:
            self._flush_batches(self.spec.closing_timeout_s)
            return
        self.producer.flush(self.spec.closing_timeout_s)
        self._raise_send_error()
        self._drain_produce_failures()
        self._deliver_commit_records()
        self._flush_offsets(wait_s=self.settings.offset_flush_timeout_ms / 1000)
        self._flush_offsets(wait_s=self.settings.offset_flush_timeout_ms / 1000)  # after one already in flight

    def _drain_produce_failures(self) -> None:
        """Before the last offsets: the records to produce again, while the closing deadline
        allows; those left are not committed (the next start reads them again)."""
        assert self.producer is not None
        while self._produce_failures and self.closing_time_left() > 1.0:
            self._handle_produce_failures()
            self.producer.flush(min(0.2, self.closing_time_left()))
        if self._produce_failures:
            log.warning("task %s: records the producer could not write yet are left to the next start", self.where)

    def _release(self) -> None:
        if self.producer is not None:
            self.producer.flush(5)

    def _build_report(self, **common: Any) -> TaskReport:
        return TaskReport(
            **common,
            records_read=self.records_polled,
            records_put=self.records_polled,
            records_written=self.records_written,
            records_skipped=getattr(getattr(self, "tolerance", None), "failed_count", 0),
            commits=self.commits,
            transactions=self.transactions,
            source_offsets=self._offsets.recently_committed(),
            batch_path=self._batches_on,
        )
