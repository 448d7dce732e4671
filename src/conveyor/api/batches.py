"""Record batches: the columnar form in which a sink task may take its records
(:meth:`conveyor.api.sink.SinkTask.put_batch`), as Apache Arrow record batches.

One row per Kafka record, in the order consumed (per partition, by offset). The columns:

========== ========================================== =========================================
column     Arrow type                                 holds
========== ========================================== =========================================
topic      ``string``                                 the topic
partition  ``int32``                                  the partition
offset     ``int64``                                  the record's offset
timestamp  ``timestamp("ms", tz="UTC")``, nullable    the record's timestamp (null: none)
key        ``binary``, ``string`` or ``arrow.json``,  the key, as its converter gives it
           nullable
value      ``binary``, ``string`` or ``arrow.json``,  the value, as its converter gives it
           nullable
headers    ``list<struct<key: string, value:          the headers, in order (raw bytes)
           binary>>``, nullable
========== ========================================== =========================================

A transformation that changes topics (``RegexRouter``) adds an ``original_topic`` column
(``string``) after ``headers``: the topic the record was read from, as
``SinkRecord.original_topic`` (KIP-793), for a task's offset bookkeeping
(:func:`partition_runs` uses it). Without it the two are the same.

``key`` and ``value`` are ``string`` under ``StringConverter`` (UTF-8), ``binary`` under
``ByteArrayConverter`` and ``arrow.json`` (Arrow's canonical JSON extension type over
``string``: compact JSON text, see :mod:`conveyor.converters.columnar`) under
``JsonConverter`` with ``schemas.enable=false``. Under a converter that gives Connect
schemas (``JsonConverter`` with schemas, Avro, Protobuf, JSON Schema, the number converters)
they are **typed**: the column has the Arrow type of the records' schema
(:mod:`conveyor.api.arrow_types`) and carries that schema (:func:`column_schema`), so one
batch holds records of one key schema and one value schema, and a change of schema starts
another batch. A typed column's null has the column's schema (a null read with an optional
schema); records without a schema (tombstones included) get an ``arrow.json`` column. Another converter, a
transformation without a batch form or a ``header.converter`` gives the task records through
``put``. A record its converter cannot read never reaches the batch: it takes the
``errors.tolerance`` path alone, as on the record path.

:func:`sink_records` turns a batch back into :class:`~conveyor.api.records.SinkRecord` objects,
for a task that handles some batches per record.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.arrow_types import arrow_type, connect_values, field_schema, schema_field
from conveyor.api.errors import DataError
from conveyor.api.records import Header, SinkRecord, SourceRecord, TimestampType, TopicPartition
from conveyor.api.schema import Schema, SchemaType

TOPIC, PARTITION, OFFSET, TIMESTAMP, KEY, VALUE, HEADERS = (
    "topic", "partition", "offset", "timestamp", "key", "value", "headers")
ORIGINAL_TOPIC = "original_topic"
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
JSON_TYPE = pa.json_(pa.string())

_OPTIONAL = {pa.string(): Schema(SchemaType.STRING, optional=True),
             pa.binary(): Schema(SchemaType.BYTES, optional=True),
             JSON_TYPE: None}  # schemaless, as JsonConverter reads it without schemas


def batch_schema(key_type: pa.DataType, value_type: pa.DataType) -> pa.Schema:
    """The schema of a record batch whose keys are ``key_type`` and values ``value_type``
    (each ``pa.string()``, ``pa.binary()`` or :data:`JSON_TYPE`).

    Raises:
        ValueError: another type.
    """
    for name, type_ in (("key", key_type), ("value", value_type)):
        if type_ not in _OPTIONAL:
            raise ValueError(f"a record batch's {name} column is string, binary or arrow.json, not {type_}")
    return pa.schema([(TOPIC, pa.string()), (PARTITION, pa.int32()), (OFFSET, pa.int64()),
                      (TIMESTAMP, TIMESTAMP_TYPE), (KEY, key_type), (VALUE, value_type), (HEADERS, HEADERS_TYPE)])


def column_schema(field: pa.Field) -> Schema | None:
    """The Connect schema the keys or values of a batch's ``key`` or ``value`` field have on
    the record path: a typed column's own, nulls included; ``OPTIONAL_STRING`` or
    ``OPTIONAL_BYTES`` for a ``string`` or ``binary`` column's non-null cells (a null has
    none there); ``None`` for JSON."""
    return field_schema(field) or _OPTIONAL.get(field.type)


def sink_records(batch: pa.RecordBatch) -> list[SinkRecord]:
    """The batch's rows as records, as ``put`` would have received them (a null value has
    no schema, as under Kafka Connect's converters, but in a typed column, and JSON has none;
    JSON text is parsed as ``json.loads`` does; a record without a timestamp has
    ``TimestampType.NO_TIMESTAMP_TYPE``). A column the batch lacks (``SinkTask.batch_columns``)
    reads as null: no key, value, timestamp or headers.
    One Python object per row: for a task's fallback, not its hot path."""
    names = batch.schema.names
    fields = {name: batch.schema.field(name) for name in (KEY, VALUE) if name in names}
    key_schema, value_schema = (column_schema(fields[name]) if name in fields else None for name in (KEY, VALUE))
    typed = {name: name in fields and field_schema(fields[name]) is not None for name in (KEY, VALUE)}
    absent = [None] * batch.num_rows
    columns = [_values(batch.column(name), column_schema(fields[name]) if name in fields else None)
               if name in names else absent for name in (TOPIC, PARTITION, OFFSET, KEY, VALUE, HEADERS)]
    originals = original_topics(batch).to_pylist()
    stamps = batch.column(TIMESTAMP).cast(pa.int64()).to_pylist() if TIMESTAMP in names else absent
    records = []
    for (topic, partition, offset, key, value, headers), stamp, original in zip(zip(*columns), stamps, originals,
                                                                                strict=True):
        records.append(SinkRecord(
            topic=topic, kafka_partition=partition, original_topic=original, key=key, value=value, kafka_offset=offset, timestamp=stamp,
            timestamp_type=TimestampType.CREATE_TIME if stamp is not None else TimestampType.NO_TIMESTAMP_TYPE,
            headers=_headers(headers), key_schema=key_schema if key is not None or typed[KEY] else None,
            value_schema=value_schema if value is not None or typed[VALUE] else None))
    return records


@dataclass(frozen=True)
class SourceBatch:
    """Records a source task returns at once from ``SourceTask.poll_batch``: rows for one
    topic, read from one source partition, in order.

    Attributes:
        topic: the Kafka topic every row goes to.
        values: the rows' values: ``string`` (written as UTF-8 under ``StringConverter``, as a
            ``STRING`` value would be), ``binary``, or :data:`JSON_TYPE` (schemaless values as
            compact JSON text, :func:`json_text`'s form: written under ``JsonConverter`` as a
            value without a schema is, in its ``{"schema":null,"payload":...}`` envelope with
            ``schemas.enable``); nulls allowed. ``SourceTask.batch_types`` says which.
        source_partition: where the rows were read (Kafka Connect's ``sourcePartition``).
        source_offset: the offset after the last row (``sourceOffset``): committed once every
            row is written, and where a restarted task resumes.
        keys: the rows' keys (as ``values``), or ``None``: no keys.
        timestamps: the rows' Kafka timestamps, ``int64`` milliseconds since the epoch (a
            null: the producer's time), or ``None``: the producer's time for every row.
    """

    topic: str
    values: pa.Array
    source_partition: Mapping[str, Any]
    source_offset: Mapping[str, Any]
    keys: pa.Array | None = None
    timestamps: pa.Array | None = None

    def __len__(self) -> int:
        return len(self.values)

    def records(self) -> list[SourceRecord]:
        """The rows as source records, as ``poll`` would have returned them (each with the
        batch's source offset: only the last row's is the batch's own)."""
        value_schema = _OPTIONAL.get(self.values.type)
        key_schema = _OPTIONAL.get(self.keys.type) if self.keys is not None else None
        none = [None] * len(self.values)
        keys = _values(self.keys) if self.keys is not None else none
        stamps = self.timestamps.to_pylist() if self.timestamps is not None else none
        return [SourceRecord(source_partition=self.source_partition, source_offset=self.source_offset,
                             topic=self.topic, key=key, key_schema=key_schema if key is not None else None,
                             value=value, value_schema=value_schema if value is not None else None, timestamp=stamp)
                for key, value, stamp in zip(keys, _values(self.values), stamps, strict=True)]


def original_topics(batch: pa.RecordBatch) -> pa.Array:
    """The topic each row was read from: ``original_topic`` when a transformation changed
    topics, else ``topic``."""
    return batch.column(ORIGINAL_TOPIC) if ORIGINAL_TOPIC in batch.schema.names else batch.column(TOPIC)


def partition_runs(batch: pa.RecordBatch) -> list[tuple[TopicPartition, int, int]]:
    """The batch's runs of consecutive rows of one partition (where they were read: the
    original topic), in order, as ``(partition, start, stop)`` row ranges (``stop``
    exclusive). A partition's offsets ascend within a run and from one of its runs to the
    next."""
    topics, partitions = original_topics(batch), batch.column(PARTITION)
    return [(TopicPartition(topics[start].as_py(), partitions[start].as_py()), start, stop)
            for start, stop in row_runs([topics, partitions])]


def row_runs(columns: Sequence[pa.Array]) -> list[tuple[int, int]]:
    """``(start, stop)`` of each run of consecutive rows equal in every one of ``columns``
    (arrays of one length, without nulls), in order; none for no rows."""
    n = len(columns[0])
    if n == 0:
        return []
    changes = None
    for column in columns:
        changed = pc.not_equal(column.slice(1), column.slice(0, n - 1))
        changes = changed if changes is None else pc.or_(changes, changed)
    starts = [0, *(i + 1 for i in pc.indices_nonzero(changes).to_pylist())]
    return list(zip(starts, [*starts[1:], n], strict=True))


def record_batches(records: Sequence[SinkRecord]) -> list[pa.RecordBatch]:
    """Records as record batches, :func:`sink_records`' inverse: one batch per run of
    records of one key schema and one value schema (a run without a schema has a JSON
    column), ``original_topic`` when a record's topic
    is not the one it was read from. One Python object per row: for the rows a
    transformation's batch form hands to its record form, not a task's hot path.

    Raises:
        DataError: a key or value does not match its schema, or a schema has no Arrow form.
    """
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(records)):
        a, b = records[i - 1], records[i]
        if not (_same(a.key_schema, b.key_schema) and _same(a.value_schema, b.value_schema)):
            runs.append((start, i))
            start = i
    if records:
        runs.append((start, len(records)))
    return [_record_batch(records[start:stop], records[start].key_schema, records[start].value_schema)
            for start, stop in runs]


def _same(a: Schema | None, b: Schema | None) -> bool:
    return a is b or a == b


def _record_batch(records: Sequence[SinkRecord], key_schema: Schema | None,
                  value_schema: Schema | None) -> pa.RecordBatch:
    fields, arrays = [], []
    for name, schema, values in ((KEY, key_schema, [r.key for r in records]),
                                 (VALUE, value_schema, [r.value for r in records])):
        if schema is None:
            fields.append(pa.field(name, JSON_TYPE))
            texts = [None if v is None else json_text(v) for v in values]
            arrays.append(pa.ExtensionArray.from_storage(JSON_TYPE, pa.array(texts, pa.binary()).view(pa.string())))
        else:
            type_, check = arrow_type(dataclasses.replace(schema, optional=True))
            fields.append(schema_field(name, schema))
            arrays.append(pa.array([check(v) for v in values], type_))
    columns = {
        TOPIC: pa.array([r.topic for r in records], pa.string()),
        PARTITION: pa.array([r.kafka_partition for r in records], pa.int32()),
        OFFSET: pa.array([r.kafka_offset for r in records], pa.int64()),
        TIMESTAMP: pa.array([r.timestamp for r in records], pa.int64()).cast(TIMESTAMP_TYPE),
        HEADERS: pa.array([[{"key": h.key, "value": h.value} for h in r.headers] if r.headers else None
                           for r in records], HEADERS_TYPE),
    }
    schema = pa.schema([(TOPIC, pa.string()), (PARTITION, pa.int32()), (OFFSET, pa.int64()),
                        (TIMESTAMP, TIMESTAMP_TYPE), *fields, (HEADERS, HEADERS_TYPE)])
    batch = pa.RecordBatch.from_arrays([*(columns[n] for n in (TOPIC, PARTITION, OFFSET, TIMESTAMP)), *arrays,
                                        columns[HEADERS]], schema=schema)
    originals = [r.original_topic for r in records]
    if originals != [r.topic for r in records]:
        batch = batch.append_column(pa.field(ORIGINAL_TOPIC, pa.string()), pa.array(originals, pa.string()))
    return batch


def json_text(value: Any) -> bytes:
    """``value`` (as ``json.loads`` gives it) as compact JSON: orjson's form, or the
    standard library's for what orjson refuses (integers beyond 64 bits).

    Raises:
        DataError: a string that is not valid Unicode (a lone surrogate escape).
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DataError(f"cannot write the value as JSON text: {exc.reason} in a string") from None


def _values(column: pa.Array, schema: Schema | None = None) -> list[Any]:
    if schema is not None and schema.type in (SchemaType.MAP, SchemaType.ARRAY, SchemaType.STRUCT):
        return list(map(connect_values(schema), column.to_pylist()))
    if column.type != JSON_TYPE:
        return column.to_pylist()
    return [None if text is None else json.loads(text) for text in column.storage.to_pylist()]


def _headers(headers: Sequence[dict] | None) -> tuple[Header, ...]:
    return tuple(Header(h["key"], h["value"]) for h in headers) if headers else ()
