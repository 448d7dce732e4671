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
from collections.abc import Callable, Collection, Iterable
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from conveyor.api import TopicPartition
from conveyor.api.batches import (
    HEADERS,
    HEADERS_TYPE,
    KEY,
    OFFSET,
    PARTITION,
    TIMESTAMP,
    TIMESTAMP_TYPE,
    TOPIC,
    VALUE,
    batch_schema,
)
from conveyor.converters.columnar import ColumnarConverter, JsonColumns
from conveyor.runtime.errors.tolerance import Stage

Unconvertible = Callable[[Message, Stage, Exception], None]
"""``unconvertible(message, stage, error)``: the message's key (``Stage.KEY_CONVERTER``) or
value (``Stage.VALUE_CONVERTER``) could not be converted; it is left out of the batch."""

_TYPE, _MS = itemgetter(0), itemgetter(1)
ALWAYS = frozenset((TOPIC, PARTITION, OFFSET))
"""The columns every batch has, whatever the task asks for (``SinkTask.batch_columns``)."""


class BatchBuilder:
    """Record batches of one schema from lists of Kafka messages (none with an error)."""

    def __init__(self, key: ColumnarConverter, value: ColumnarConverter,
                 columns: Collection[str] | None = None) -> None:
        """``columns``: of ``timestamp``, ``key``, ``value`` and ``headers``, those to build
        (``SinkTask.batch_columns``; ``None``: all); ``topic``, ``partition`` and ``offset``
        always come. A key or value its converter may fail to read is converted whether
        its column is built or not, so that failures take the tolerance path as always."""
        full = batch_schema(key.type, value.type)
        self.schema = pa.schema([f for f in full if columns is None or f.name in ALWAYS or f.name in columns])
        self.empty = pa.RecordBatch.from_pylist([], schema=self.schema)
        self._key, self._value = key, value
        built = set(self.schema.names)
        self._timestamps, self._headers = TIMESTAMP in built, HEADERS in built
        self._keys = KEY in built or type(key) is JsonColumns
        self._values = VALUE in built or type(value) is JsonColumns

    def build(self, msgs: list[Message], unconvertible: Unconvertible) -> tuple[pa.RecordBatch, dict[tuple[str, int], int]]:
        """One row per message, in order, but for those whose key or value cannot be
        converted: each goes to ``unconvertible``, in the order of the messages (a message
        whose key failed is not reported again for its value), as on the record path.

        Returns the batch and, per ``(topic, partition)`` of ``msgs``, the offset of its last
        message (whether converted or not)."""
        n = len(msgs)
        if not n:
            return self.empty, {}
        failed: dict[int, tuple[Stage, Exception]] = {}

        def key_failed(i: int, error: Exception) -> None:
            failed[i] = (Stage.KEY_CONVERTER, error)

        def value_failed(i: int, error: Exception) -> None:
            failed.setdefault(i, (Stage.VALUE_CONVERTER, error))

        topics = list(map(Message.topic, msgs))
        partitions = list(map(Message.partition, msgs))
        offsets = list(map(Message.offset, msgs))
        topic = topics[0]
        if topics.count(topic) == n:
            topic_column = pa.repeat(topic, n).cast(pa.string())
            last = {(topic, p): off for p, off in dict(zip(partitions, offsets)).items()}
        else:
            topic_column = pa.array(topics, pa.string())
            last = dict(zip(zip(topics, partitions), offsets))  # a later offset of a partition replaces an earlier
        columns = {TOPIC: topic_column, PARTITION: _fixed_width(pa.int32(), "i", partitions),
                   OFFSET: _fixed_width(pa.int64(), "q", offsets)}
        if self._timestamps:
            columns[TIMESTAMP] = _timestamps(list(map(Message.timestamp, msgs)))
        if self._keys:
            columns[KEY] = self._key.to_column(list(map(Message.key, msgs)), key_failed)
        if self._values:
            columns[VALUE] = self._value.to_column(list(map(Message.value, msgs)), value_failed)
        if self._headers:
            headers = list(map(Message.headers, msgs))
            columns[HEADERS] = pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in headers],
                                        HEADERS_TYPE) if any(headers) else pa.nulls(n, HEADERS_TYPE)
        batch = pa.RecordBatch.from_arrays([columns[name] for name in self.schema.names], schema=self.schema)
        if failed:
            for i in sorted(failed):
                unconvertible(msgs[i], *failed[i])
            batch = batch.filter(pa.array([i not in failed for i in range(n)], pa.bool_()))
        return batch, last


def _fixed_width(type_: pa.DataType, code: str, values: list[int]) -> pa.Array:
    """An Arrow array of ``values`` (no nulls) through a Python ``array`` of ``code``."""
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(array(code, values))])


def _timestamps(stamps: list[tuple[int, int]]) -> pa.Array:
    """librdkafka's ``(type, ms)`` timestamps as a timestamp column: null where the type is
    ``TIMESTAMP_NOT_AVAILABLE`` (0), as the record path's ``None``."""
    column = _fixed_width(TIMESTAMP_TYPE, "q", list(map(_MS, stamps)))
    if 0 in map(_TYPE, stamps):
        column = pc.if_else(pa.array([kind != 0 for kind, _ in stamps], pa.bool_()), column,
                            pa.scalar(None, TIMESTAMP_TYPE))
    return column


def drop_partitions(batch: pa.RecordBatch, partitions: Iterable[TopicPartition]) -> pa.RecordBatch:
    """``batch`` without the rows of ``partitions``."""
    keep = None
    for tp in partitions:
        of_tp = pc.and_(pc.equal(batch.column(TOPIC), tp.topic), pc.equal(batch.column(PARTITION), tp.partition))
        keep = pc.invert(of_tp) if keep is None else pc.and_(keep, pc.invert(of_tp))
    return batch if keep is None else batch.filter(keep)
