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
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from conveyor.api import Schema, TopicPartition
from conveyor.api.arrow_types import schema_field, schema_text
from conveyor.api.batches import (
    HEADERS,
    HEADERS_TYPE,
    JSON_TYPE,
    KEY,
    OFFSET,
    PARTITION,
    TIMESTAMP,
    TIMESTAMP_TYPE,
    TOPIC,
    VALUE,
    batch_schema,
    original_topics,
)
from conveyor.converters.columnar import ColumnarConverter, JsonColumns, TypedColumns
from conveyor.runtime.errors.tolerance import Stage

Unconvertible = Callable[[Message, Stage, Exception], None]
"""``unconvertible(message, stage, error)``: the message's key (``Stage.KEY_CONVERTER``) or
value (``Stage.VALUE_CONVERTER``) could not be converted; it is left out of the batch."""

_TYPE, _MS = itemgetter(0), itemgetter(1)
ALWAYS = frozenset((TOPIC, PARTITION, OFFSET))
"""The columns every batch has, whatever the task asks for (``SinkTask.batch_columns``)."""


class BatchBuilder:
    """Record batches from lists of Kafka messages (none with an error).

    Keys and values of converters without schemas (``ByteArrayConverter``,
    ``StringConverter``, ``JsonConverter`` without schemas) give one batch schema for every
    batch. Those of a converter that gives schemas (:class:`~conveyor.converters.columnar.TypedColumns`)
    are typed by the records' Connect schemas: a list of messages gives one batch per run of
    records with the same key and value schemas, each field carrying its schema
    (:func:`~conveyor.api.arrow_types.schema_field`; a null cell has that schema, as a null
    read with a schema has on the record path); a run of records without a schema (tombstones
    included) has a JSON column, as ``JsonConverter`` without schemas gives.
    """

    def __init__(self, key: ColumnarConverter | TypedColumns, value: ColumnarConverter | TypedColumns,
                 columns: Collection[str] | None = None) -> None:
        """``columns``: of ``timestamp``, ``key``, ``value`` and ``headers``, those to build
        (``SinkTask.batch_columns``; ``None``: all); ``topic``, ``partition`` and ``offset``
        always come. A key or value its converter may fail to read is converted whether
        its column is built or not, so that failures take the tolerance path as always."""
        self._typed_key, self._typed_value = isinstance(key, TypedColumns), isinstance(value, TypedColumns)
        full = batch_schema(JSON_TYPE if self._typed_key else key.type, JSON_TYPE if self._typed_value else value.type)
        self.schema = pa.schema([f for f in full if columns is None or f.name in ALWAYS or f.name in columns])
        self.empty = pa.RecordBatch.from_pylist([], schema=self.schema)
        self._key, self._value = key, value
        built = set(self.schema.names)
        self._timestamps, self._headers = TIMESTAMP in built, HEADERS in built
        self._keys = KEY in built or type(key) in _MAY_FAIL
        self._values = VALUE in built or type(value) in _MAY_FAIL
        self._typed = [(name, side) for name, side, typed in ((KEY, key, self._typed_key),
                                                              (VALUE, value, self._typed_value))
                       if typed and name in built]
        self._schemas: dict[tuple[bytes | None, ...], pa.Schema] = {}

    def build(self, msgs: list[Message],
              unconvertible: Unconvertible) -> tuple[list[pa.RecordBatch], dict[tuple[str, int], int]]:
        """Batches of the messages' rows, in order (one unless typed columns change schema),
        but for those whose key or value cannot be converted: each goes to
        ``unconvertible``, in the order of the messages (a message whose key failed is not
        reported again for its value), as on the record path.

        Returns the batches and, per ``(topic, partition)`` of ``msgs``, the offset of its last
        message (whether converted or not)."""
        n = len(msgs)
        if not n:
            return [self.empty], {}
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
        typed: dict[str, tuple[list[Schema | None], list[Any]]] = {}
        for name, side, wanted, get, on_failure in ((KEY, self._key, self._keys, Message.key, key_failed),
                                                    (VALUE, self._value, self._values, Message.value, value_failed)):
            if isinstance(side, TypedColumns):
                typed[name] = side.cells(topics, list(map(get, msgs)), on_failure)
                columns[name] = pa.nulls(n, JSON_TYPE)  # each run's column replaces it
            elif wanted:
                columns[name] = side.to_column(list(map(get, msgs)), on_failure)
        if self._headers:
            headers = list(map(Message.headers, msgs))
            columns[HEADERS] = pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in headers],
                                        HEADERS_TYPE) if any(headers) else pa.nulls(n, HEADERS_TYPE)
        batch = pa.RecordBatch.from_arrays([columns[name] for name in self.schema.names], schema=self.schema)
        if failed:
            for i in sorted(failed):
                unconvertible(msgs[i], *failed[i])
            keep = [i not in failed for i in range(n)]
            batch = batch.filter(pa.array(keep, pa.bool_()))
            typed = {name: ([s for s, k in zip(schemas, keep) if k], [c for c, k in zip(cells, keep) if k])
                     for name, (schemas, cells) in typed.items()}
        if not self._typed:
            return [batch], last
        kept = [m for i, m in enumerate(msgs) if i not in failed] if failed else msgs
        return self._typed_runs(batch, typed, kept, unconvertible), last

    def _typed_runs(self, batch: pa.RecordBatch, typed: dict[str, tuple[list[Schema | None], list[Any]]],
                    msgs: list[Message], unconvertible: Unconvertible) -> list[pa.RecordBatch]:
        """``batch`` (of ``msgs``) cut into runs of rows of one key schema and value schema,
        their typed columns built; a row whose value its schema's column refuses goes to
        ``unconvertible`` and leaves its run."""
        names = [name for name, _ in self._typed]
        sides = dict(self._typed)
        rows = list(zip(*(typed[name][0] for name in names)))
        runs: list[tuple[int, int]] = []
        start = 0
        for i in range(1, len(rows)):
            if not _same_schemas(rows[i], rows[i - 1]):
                runs.append((start, i))
                start = i
        if rows:
            runs.append((start, len(rows)))
        batches = []
        for start, stop in runs:
            schemas = rows[start]
            arrays, refused = {}, {}
            for name, schema in zip(names, schemas, strict=True):
                arrays[name], bad = sides[name].column(schema, typed[name][1][start:stop])  # type: ignore[union-attr]
                stage = Stage.KEY_CONVERTER if name == KEY else Stage.VALUE_CONVERTER
                for i, error in bad:
                    refused.setdefault(i, (stage, error))
            part = batch.slice(start, stop - start)
            if refused:
                for i in sorted(refused):
                    unconvertible(msgs[start + i], *refused[i])
                keep = pa.array([i not in refused for i in range(stop - start)], pa.bool_())
                part = part.filter(keep)
                if not part.num_rows:
                    continue
                arrays = {name: array.filter(keep) for name, array in arrays.items()}
            run_schema = self._run_schema(names, schemas)
            batches.append(pa.RecordBatch.from_arrays([arrays.get(name, part.column(name)) for name in run_schema.names],
                                                      schema=run_schema))
        return batches or [self.empty]

    def _run_schema(self, names: list[str], schemas: tuple[Schema | None, ...]) -> pa.Schema:
        texts = tuple(None if schema is None else schema_text(schema) for schema in schemas)
        run_schema = self._schemas.get(texts)
        if run_schema is None:
            if len(self._schemas) >= 64:
                self._schemas.clear()
            run_schema = self.schema
            for name, schema in zip(names, schemas, strict=True):
                if schema is not None:
                    run_schema = run_schema.set(run_schema.get_field_index(name), schema_field(name, schema))
            self._schemas[texts] = run_schema
        return run_schema


_MAY_FAIL = (JsonColumns, TypedColumns)


def _same_schemas(a: tuple[Schema | None, ...], b: tuple[Schema | None, ...]) -> bool:
    return all(x is y or x == y for x, y in zip(a, b, strict=True))


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
    """``batch`` without the rows read from ``partitions``."""
    keep = None
    topics = original_topics(batch)
    for tp in partitions:
        of_tp = pc.and_(pc.equal(topics, tp.topic), pc.equal(batch.column(PARTITION), tp.partition))
        keep = pc.invert(of_tp) if keep is None else pc.and_(keep, pc.invert(of_tp))
    return batch if keep is None else batch.filter(keep)
