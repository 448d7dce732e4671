"""A source task's batch path (``SourceTask.poll_batch``): rows written to Kafka from Arrow
arrays, with no Python object per record but the bytes the producer takes
(:class:`SourceBatches`, a part of :class:`~conveyor.runtime.task.source.runner.SourceTaskRunner`).
Runs on the task's thread.

Delivery is tracked per batch, not per record: the producer reports only failed deliveries
(``delivery.report.only.error``; a per-record delivery callback costs about as much as the
write itself). Every ``offset.flush.interval.ms``, and when the task stops, the producer is
flushed; once nothing is left in flight and nothing failed, the latest source offset of every
batch sent is written to the offsets topic, and ``commit()`` runs once those are acknowledged.
This is how Kafka Connect's ``WorkerSourceTask`` committed offsets before KIP-618 and KAFKA-12226
tracked them per record. A failed write fails the task, as on the record path.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException

from conveyor.api import SourceTask
from conveyor.api.batches import JSON_TYPE, SourceBatch
from conveyor.converters.columnar import Utf8Columns, columnar
from conveyor.converters.json_converter import JsonConverter
from conveyor.runtime.kafka.offsets_topic import offset_key, offset_value
from conveyor.runtime.task.runner import TaskFailed
from conveyor.runtime.task.source.partitions import PartitionOffset

log = logging.getLogger("conveyor.runtime.task.source.runner")


class SourceBatches:
    """Sends the batches ``poll_batch`` returns and commits their offsets; uses the runner's
    task, producer, settings, converters and offsets."""

    _batch_offsets: dict[str, PartitionOffset]
    _unflushed_rows = 0
    _skipped_before = 0  # rows skipped (errors.tolerance) counted at the flush before

    def _batch_path(self) -> bool:
        """Whether the task's records come through ``poll_batch`` (see
        ``SourceTask.poll_batch`` for when); says why not in the log when the task has one."""
        task = self.task
        if type(task).poll_batch is SourceTask.poll_batch:
            return False
        why = ("conveyor.batch.path.enable is false" if not self.settings.batch_path
               else "exactly.once.support is on" if self.exactly_once
               else "a transformation chain is configured" if not self.chain.is_empty
               else "the task has commit_record(), which takes records" if self._wants_commit_record
               else self._unwritable(*task.batch_types()))
        if why is not None:
            log.info("task %s: records come from poll(), not poll_batch(): %s", self.where, why)
            return False
        self._batch_offsets = {}
        return True

    def _unwritable(self, value_type: pa.DataType, key_type: pa.DataType | None) -> str | None:
        """Why the converters cannot write batches of these types as they are, or ``None``."""
        for what, type_, converter in (("value", value_type, self.value_converter),
                                       ("key", key_type, self.key_converter)):
            if type_ is not None and not _writes(converter, type_):
                return (f"{what}.converter does not write {type_} {what}s as they are (StringConverter with UTF-8 "
                        "writes string, JsonConverter arrow.json)")
        return None

    def _batch_producer_settings(self) -> dict[str, Any]:
        """Producer settings of the batch path: failed deliveries only, to one callback."""
        return {"delivery.report.only.error": True, "on_delivery": self._on_failed_delivery}

    def _on_failed_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            return
        if self.exactly_once:
            if self._send_error is None:
                self._send_error = KafkaException(err)
            return
        self._produce_failures.failed(err, msg, _written_again, _skipped_row)  # .produce_failures

    def _poll_batch(self) -> SourceBatch | None:
        started = time.monotonic()
        batch = self._call_poll(self.task.poll_batch)
        if batch is not None:
            self.meter.batch(len(batch), time.monotonic() - started)
            self.records_polled += len(batch)
        return batch

    def _send_batch(self, batch: SourceBatch) -> None:
        """Hand every row of ``batch`` to the producer (keys and values as UTF-8 bytes); its
        offset is committed once they are written."""
        if len(batch):
            self._produce_rows(batch)
        self._batch_offsets[self._offsets.id_of(batch.source_partition)] = (batch.source_partition,
                                                                             batch.source_offset)

    def _produce_rows(self, batch: SourceBatch) -> None:
        values = _message_bytes(batch.values, self.value_converter, "values")
        keys = _message_bytes(batch.keys, self.key_converter, "keys") if batch.keys is not None else None
        stamps = batch.timestamps.cast(pa.int64()).to_pylist() if batch.timestamps is not None else None
        if self.topic_creator is not None:
            self.topic_creator.ensure(batch.topic)
        produce, topic, sent = self.producer.produce, batch.topic, 0
        while sent < len(values):
            try:
                if keys is None and stamps is None:
                    for value in values[sent:] if sent else values:
                        produce(topic, value)
                        sent += 1
                else:
                    rows = zip(keys or [None] * len(values), values, stamps or [None] * len(values), strict=True)
                    for key, value, stamp in itertools.islice(rows, sent, None):
                        if stamp is None:
                            produce(topic, value, key)
                        else:
                            produce(topic, value, key, timestamp=stamp)
                        sent += 1
            except BufferError:  # the producer's queue is full: let it drain
                self.producer.poll(0.05)
                self._raise_send_error()
        self._unflushed_rows += sent

    def _flush_batches(self, timeout_s: float) -> None:
        """Flush the producer; when everything sent is written, write the batches' offsets
        to the offsets topic, and once those are written run ``commit()``."""
        assert self.producer and self.settings
        deadline = time.monotonic() + timeout_s
        left = self.producer.flush(timeout_s)
        self._raise_send_error()
        while not left and self._produce_failures and time.monotonic() < deadline:  # records to produce again
            self._handle_produce_failures()
            left = self.producer.flush(min(0.2, max(0.0, deadline - time.monotonic())))
            self._raise_send_error()
        if left or self._produce_failures:
            log.warning("task %s: records still in flight after %.1f s; offsets are committed later",
                        self.where, timeout_s)
            return
        skipped = self._produce_failures.skipped
        self.records_written += self._unflushed_rows - (skipped - self._skipped_before)
        self._skipped_before = skipped
        self._unflushed_rows = 0
        offsets, self._batch_offsets = self._batch_offsets, {}
        if not offsets:
            return
        started = time.monotonic()
        for partition, offset in offsets.values():
            self.producer.produce(self.settings.offsets_storage_topic, key=offset_key(self.spec.connector, partition),
                                  value=offset_value(offset))
        left = self.producer.flush(self.settings.offset_flush_timeout_ms / 1000)
        error, self._send_error = self._send_error, None
        if left or error is not None:
            log.warning("task %s: writing offsets failed, will retry: %s", self.where,
                        error or f"{left} offset record(s) not acknowledged in time")
            self._batch_offsets = {**offsets, **self._batch_offsets}
            return
        self._committed(offsets)
        self.commits += 1
        self.meter.commit(time.monotonic() - started)
        self._call_commit()


def _written_again(err: KafkaError | None, msg: Any) -> None:
    """A row produced again was written: the batch path counts rows at its flush."""


def _skipped_row() -> None:
    """A row skipped under ``errors.tolerance=all``: its batch's offset is committed with the others."""


def _writes(converter: Any, type_: pa.DataType) -> bool:
    """Whether ``converter`` writes cells of ``type_`` as they are (see :func:`_message_bytes`)."""
    if type_ == pa.string():
        return isinstance(columnar(converter), Utf8Columns)
    return type_ == JSON_TYPE and isinstance(converter, JsonConverter)


def _message_bytes(column: pa.Array, converter: Any, what: str) -> list[bytes | None]:
    """The message bytes of a column's cells, as ``converter`` writes them: a ``string``
    cell's UTF-8 under ``StringConverter``; an ``arrow.json`` cell's text under
    ``JsonConverter``, in its schemaless envelope with ``schemas.enable``; a null is null.

    Raises:
        TaskFailed: the column is not of a type its converter writes as it is (a batch that
            does not fit ``SourceTask.batch_types``).
    """
    if not _writes(converter, column.type):
        raise TaskFailed(f"poll_batch() returned {column.type} {what}, which {type(converter).__name__} does not "
                         "write as they are (string under StringConverter, arrow.json under JsonConverter)")
    if column.type == pa.string():
        return column.view(pa.binary()).to_pylist()
    texts = column.storage.view(pa.binary())
    if converter.schemas_enabled:
        texts = pc.binary_join_element_wise(b'{"schema":null,"payload":', texts, b"}", b"")
    return texts.to_pylist()
