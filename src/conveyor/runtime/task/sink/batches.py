"""The sink's batch path: Kafka messages → one Arrow record batch per ``consume``
(:mod:`conveyor.api.batches`), for a task that overrides ``SinkTask.put_batch``. Runs on
the task's thread.

Keys and values become Arrow arrays through their converters' columnar forms
(:mod:`conveyor.converters.columnar`); a message whose key or value cannot be converted is
handed to the caller (its ``errors.tolerance`` path) and left out of the batch. No Python
object is made per record beyond what librdkafka's messages are and what JSON parsing needs.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from conveyor.api import TopicPartition
from conveyor.api.batches import HEADERS_TYPE, PARTITION, TIMESTAMP_TYPE, TOPIC, batch_schema
from conveyor.converters.columnar import ColumnarConverter
from conveyor.runtime.errors.tolerance import Stage

Unconvertible = Callable[[Message, Stage, Exception], None]
"""``unconvertible(message, stage, error)``: the message's key (``Stage.KEY_CONVERTER``) or
value (``Stage.VALUE_CONVERTER``) could not be converted; it is left out of the batch."""


class BatchBuilder:
    """Record batches of one schema from lists of Kafka messages (none with an error)."""

    def __init__(self, key: ColumnarConverter, value: ColumnarConverter) -> None:
        self.schema = batch_schema(key.type, value.type)
        self.empty = pa.RecordBatch.from_pylist([], schema=self.schema)
        self._key, self._value = key, value

    def build(self, msgs: list[Message], unconvertible: Unconvertible) -> pa.RecordBatch:
        """One row per message, in order, but for those whose key or value cannot be
        converted: each goes to ``unconvertible``, in the order of the messages (a message
        whose key failed is not reported again for its value), as on the record path."""
        n = len(msgs)
        failed: dict[int, tuple[Stage, Exception]] = {}

        def key_failed(i: int, error: Exception) -> None:
            failed[i] = (Stage.KEY_CONVERTER, error)

        def value_failed(i: int, error: Exception) -> None:
            failed.setdefault(i, (Stage.VALUE_CONVERTER, error))

        topics = list(map(Message.topic, msgs))
        headers = list(map(Message.headers, msgs))
        columns = [
            pa.repeat(topics[0], n).cast(pa.string()) if n and topics.count(topics[0]) == n
            else pa.array(topics, pa.string()),
            _fixed_width(pa.int32(), "i", list(map(Message.partition, msgs))),
            _fixed_width(pa.int64(), "q", list(map(Message.offset, msgs))),
            _timestamps([ts if kind else -1 for kind, ts in map(Message.timestamp, msgs)]),
            self._key.to_column(list(map(Message.key, msgs)), key_failed),
            self._value.to_column(list(map(Message.value, msgs)), value_failed),
            pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in headers], HEADERS_TYPE)
            if any(headers) else pa.nulls(n, HEADERS_TYPE),
        ]
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        if failed:
            for i in sorted(failed):
                unconvertible(msgs[i], *failed[i])
            batch = batch.filter(pa.array([i not in failed for i in range(n)], pa.bool_()))
        return batch


def _fixed_width(type_: pa.DataType, code: str, values: list[int]) -> pa.Array:
    """An Arrow array of ``values`` (no nulls) through a Python ``array`` of ``code``."""
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(array(code, values))])


def _timestamps(stamps: list[int]) -> pa.Array:
    """librdkafka's timestamps (ms; -1: none) as a timestamp column (null: none)."""
    column = _fixed_width(TIMESTAMP_TYPE, "q", stamps)
    if -1 in stamps:
        column = pc.if_else(pc.equal(column.cast(pa.int64()), -1), pa.scalar(None, TIMESTAMP_TYPE), column)
    return column


def drop_partitions(batch: pa.RecordBatch, partitions: Iterable[TopicPartition]) -> pa.RecordBatch:
    """``batch`` without the rows of ``partitions``."""
    keep = None
    for tp in partitions:
        of_tp = pc.and_(pc.equal(batch.column(TOPIC), tp.topic), pc.equal(batch.column(PARTITION), tp.partition))
        keep = pc.invert(of_tp) if keep is None else pc.and_(keep, pc.invert(of_tp))
    return batch if keep is None else batch.filter(keep)
