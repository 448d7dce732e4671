"""The sink's batch path: Kafka messages → one Arrow record batch per ``consume``
(:mod:`conveyor.api.batches`), for a task that overrides ``SinkTask.put_batch``. Runs on
the task's thread.

Keys and values go into Arrow arrays whole: bytes as they are (``ByteArrayConverter``), or
validated as UTF-8 in one pass (``StringConverter``); a batch holding malformed UTF-8 is
decoded per record with replacement characters, as the converter does. No Python object is
made per record beyond what librdkafka's messages are.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from conveyor.api import SinkTask, TopicPartition
from conveyor.api.batches import HEADERS_TYPE, PARTITION, TIMESTAMP_TYPE, TOPIC, batch_schema
from conveyor.converters.bytearray_converter import ByteArrayConverter
from conveyor.converters.string_converter import StringConverter

_UTF8 = ("utf-8", "utf8")


def column_type(converter: Any) -> pa.DataType | None:
    """The Arrow type ``converter`` fills a column with on the batch path, or ``None`` when
    the batch path does not take it."""
    if type(converter) is ByteArrayConverter:
        return pa.binary()
    if type(converter) is StringConverter and converter.encoding.lower() in _UTF8:
        return pa.string()
    return None


def takes_batches(task: SinkTask) -> bool:
    """Whether ``task`` overrides ``put_batch``."""
    return type(task).put_batch is not SinkTask.put_batch


class BatchBuilder:
    """Record batches of one schema from lists of Kafka messages (none with an error)."""

    def __init__(self, key_type: pa.DataType, value_type: pa.DataType) -> None:
        self.schema = batch_schema(key_type, value_type)
        self.empty = pa.RecordBatch.from_pylist([], schema=self.schema)
        self._key_type, self._value_type = key_type, value_type

    def build(self, msgs: list[Message]) -> pa.RecordBatch:
        """One row per message, in order."""
        n = len(msgs)
        topics = list(map(Message.topic, msgs))
        headers = list(map(Message.headers, msgs))
        columns = [
            pa.repeat(topics[0], n).cast(pa.string()) if n and topics.count(topics[0]) == n
            else pa.array(topics, pa.string()),
            _fixed_width(pa.int32(), "i", list(map(Message.partition, msgs))),
            _fixed_width(pa.int64(), "q", list(map(Message.offset, msgs))),
            _timestamps([ts for _, ts in map(Message.timestamp, msgs)]),
            _column(list(map(Message.key, msgs)), self._key_type),
            _column(list(map(Message.value, msgs)), self._value_type),
            pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in headers], HEADERS_TYPE)
            if any(headers) else pa.nulls(n, HEADERS_TYPE),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def _fixed_width(type_: pa.DataType, code: str, values: list[int]) -> pa.Array:
    """An Arrow array of ``values`` (no nulls) through a Python ``array`` of ``code``."""
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(array(code, values))])


def _timestamps(stamps: list[int]) -> pa.Array:
    """librdkafka's timestamps (ms; -1: none) as a timestamp column (null: none)."""
    column = _fixed_width(TIMESTAMP_TYPE, "q", stamps)
    if -1 in stamps:
        column = pc.if_else(pc.equal(column.cast(pa.int64()), -1), pa.scalar(None, TIMESTAMP_TYPE), column)
    return column


def _column(data: list[bytes | None], type_: pa.DataType) -> pa.Array:
    raw = pa.array(data, pa.binary())
    if type_ == pa.binary():
        return raw
    try:
        return raw.cast(pa.string())  # validates UTF-8
    except pa.ArrowInvalid:
        return pa.array([str(b, "utf-8", "replace") if b is not None else None for b in data], pa.string())


def drop_partitions(batch: pa.RecordBatch, partitions: Iterable[TopicPartition]) -> pa.RecordBatch:
    """``batch`` without the rows of ``partitions``."""
    keep = None
    for tp in partitions:
        of_tp = pc.and_(pc.equal(batch.column(TOPIC), tp.topic), pc.equal(batch.column(PARTITION), tp.partition))
        keep = pc.invert(of_tp) if keep is None else pc.and_(keep, pc.invert(of_tp))
    return batch if keep is None else batch.filter(keep)
