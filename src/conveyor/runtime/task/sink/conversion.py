"""How a sink task's runner turns fetched Kafka messages into the records ``put`` gets
(:class:`SinkConversion`, a part of :class:`~conveyor.runtime.task.sink.runner.SinkTaskRunner`):
key, value and header conversion, transformations and predicates, ``errors.tolerance`` at each
stage, and the delivery of a batch to ``put`` with its retries; or, on the batch path
(:mod:`.batches`), messages into Arrow record batches for ``put_batch``. Runs on the task's thread.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message

from conveyor.api import ConnectError, Header, HeaderConverter, RetriableError, TopicPartition
from conveyor.api.batches import OFFSET, ORIGINAL_TOPIC, PARTITION, original_topics
from conveyor.converters import ByteArrayConverter
from conveyor.converters.header_converters import to_connect_headers
from conveyor.runtime.errors.tolerance import Stage, class_name
from conveyor.runtime.task.runner import TaskFailed
from conveyor.runtime.task.sink.context import InternalSinkRecord, LazySinkRecord, failed_record
from conveyor.runtime.task.sink.isolation import Isolation, PartlyWritten, first_offsets, record_error, size

log = logging.getLogger("conveyor.runtime.task.sink.runner")  # the runner's: librdkafka's repeats collapse there

DEFAULT_RETRY_BACKOFF_S = 1.0
_FAILED = object()


class _FailedRows:
    """``failed(row, class, error)`` of ``TransformationChain.apply_batch``: the row's message
    (found by where it was read) takes the tolerance path."""

    def __init__(self, runner: Any, msgs: list[Message]) -> None:
        self._runner, self._msgs = runner, msgs
        self._index: dict[tuple[str, int, int], Message] | None = None

    def __call__(self, row: pa.RecordBatch, cls_name: str, error: Exception) -> None:
        if self._index is None:
            self._index = {(m.topic(), m.partition(), m.offset()): m for m in self._msgs}
        coordinates = (original_topics(row)[0].as_py(), row.column(PARTITION)[0].as_py(), row.column(OFFSET)[0].as_py())
        self._runner._untransformable(self._index[coordinates], cls_name, error)


def _project(batch: pa.RecordBatch, columns: list[str]) -> pa.RecordBatch:
    """``batch`` with only ``columns`` (and ``original_topic`` when it has one)."""
    names = [name for name in batch.schema.names if name in columns or name == ORIGINAL_TOPIC]
    return batch if len(names) == batch.num_columns else batch.select(names)


class SinkConversion:
    """Records from messages, and their delivery to the task; uses the runner's task,
    converters, transformation chain and tolerance."""

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

    def _convert_batch(self, msgs: list[Message]) -> tuple[list[pa.RecordBatch], dict[TopicPartition, int]]:
        """Messages → Arrow record batches (the batch path, :mod:`.batches`: one, or one per
        run of records of one schema for typed columns); offsets as :meth:`_convert`'s."""
        if any(map(Message.error, msgs)):
            for m in msgs:
                if m.error() is not None:
                    self._consume_error(m.error())
            msgs = [m for m in msgs if m.error() is None]
        batches, last = self._batches.build(msgs, self._unconvertible)
        if not self.chain.is_empty:
            failed = _FailedRows(self, msgs)
            batches = [out for batch in batches for out in self.chain.apply_batch(batch, failed)]
            if len(batches) > 1:
                batches = [batch for batch in batches if batch.num_rows] or batches[:1]
            if self._chain_columns is not None:
                batches = [_project(batch, self._chain_columns) for batch in batches]
        if self._held_messages is not None:
            self._held_messages.hold(msgs)
        return batches, {self._tp(t, p): off + 1 for (t, p), off in last.items()}

    def _put_batches(self, batches: list[pa.RecordBatch]) -> None:
        """``put_batch`` of each batch in turn. On an error the batches already taken leave
        the list (it is what is delivered again, or isolated) and the error goes on."""
        for i, batch in enumerate(batches):
            try:
                self.task.put_batch(batch)
            except Exception:
                del batches[:i]
                raise

    def _put_part(self, part: list[InternalSinkRecord] | list[pa.RecordBatch]) -> None:
        """``put`` of records, or ``put_batch`` of each record batch (:meth:`_put_batches`)."""
        assert self.task
        if part and isinstance(part[0], pa.RecordBatch):
            self._put_batches(part)  # type: ignore[arg-type]
        else:
            self.task.put(part)

    def _isolate(self, part: list[InternalSinkRecord] | list[pa.RecordBatch], error: BaseException | None) -> int:
        """Write ``part`` but for the records refused (:mod:`.isolation`); ``error`` is the
        record error its whole write raised (``None``: not tried yet). Returns how many were
        written. Raises as :meth:`.isolation.Isolation.run` (a refused record under
        ``errors.tolerance=none``: :class:`TaskFailed` naming it)."""
        assert self.task and self.context
        if error is not None:
            log.warning("task %s: the write of %d record(s) was refused (%s: %s); finding the record(s) refused",
                        self.where, size(part), type(error).__name__, error)

        def probe(isolated: dict[tuple[str, int], int]) -> None:
            offsets = dict(self.current)
            offsets.update({self._tp(t, p): off for (t, p), off in isolated.items()})
            self.task.pre_commit(offsets)  # what it returns is committed at the next commit, not here

        def report(record: Any, refused: BaseException) -> None:
            try:
                self._errant_reporter.report(record, refused)
            except ConnectError as exc:  # errors.tolerance=none
                raise TaskFailed(str(exc)) from exc

        isolation = Isolation(self._put_part, probe, report, self._poison_errors)
        try:
            isolation.run(part, error)
        except BaseException:
            self._commit_below(isolation.remainder or [])
            raise
        log.warning("task %s: %d record(s) refused and %d written in %d call(s)", self.where, isolation.refused,
                    isolation.written, isolation.calls)
        return isolation.written

    def _commit_below(self, unwritten: list[InternalSinkRecord] | list[pa.RecordBatch]) -> None:
        """Offsets to commit stop before the first record of each partition in ``unwritten``
        (records handed back by a refused write, neither written nor tolerated yet): a task
        that buffers gave them back from earlier ``put`` calls, whose offsets ``current``
        already holds."""
        for (topic, partition), first in first_offsets(unwritten).items():
            tp = self._tp(topic, partition)
            if tp in self.current:
                self.current[tp] = min(self.current[tp], first)

    def _untransformable(self, msg: Message, cls_name: str, error: Exception) -> None:
        """A row the batch path's transformations could not transform: tolerated, or the task fails."""
        self._tolerate(msg, Stage.TRANSFORMATION, cls_name, error)

    def _unconvertible(self, msg: Message, stage: Stage, error: Exception) -> None:
        """A message the batch path's converters could not read: tolerated, or the task fails."""
        converter = self.key_converter if stage is Stage.KEY_CONVERTER else self.value_converter
        self._tolerate(msg, stage, class_name(converter), error)

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

    def _deliver(self, batch: list[InternalSinkRecord] | list[pa.RecordBatch],
                 offsets: dict[TopicPartition, int]) -> None:
        """``put`` a batch of records (or ``put_batch`` each record batch); on RetriableError
        keep what is left of it for redelivery with consumption paused; on a record error
        find the records refused (:mod:`.isolation`)."""
        assert self.task and self.context
        started = time.monotonic()
        count = size(batch)
        try:
            try:
                self._put_part(batch)
            except Exception as exc:  # noqa: BLE001 - a record error is isolated, others raise on
                if not record_error(exc, self._poison_errors):
                    raise
                held = getattr(exc, "records", None)  # a task that buffers: all its refused write held
                part = list(held) if held is not None else batch  # else the batches not yet taken
                isolation_refused = size(part) - self._isolate(part, exc)
                count = max(0, count - isolation_refused)
        except RetriableError as exc:
            delay = exc.delay or self.context.retry_timeout
            self.context.retry_timeout = None
            backoff = delay.total_seconds() if delay is not None else DEFAULT_RETRY_BACKOFF_S
            log.info("task %s-%d: put() asked for a retry in %.3fs: %s", self.spec.connector, self.spec.task_id,
                     backoff, exc)
            self._retry_batch = exc.remainder if isinstance(exc, PartlyWritten) else batch
            self._retry_offsets = offsets
            self._retry_at = time.monotonic() + backoff
            self._pause_for_retry(True)
            return
        except TaskFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - the task fails
            raise TaskFailed(f"put() failed: {exc}") from exc
        self.meter.batch(count, time.monotonic() - started)
        if self._retry_batch is not None:
            self._retry_batch, self._retry_offsets = None, {}
            self._pause_for_retry(False)
        self.current.update(offsets)
        self.records_put += count
        if self.context.commit_requested:
            self.context.commit_requested = False
            self._commit(closing=False)
