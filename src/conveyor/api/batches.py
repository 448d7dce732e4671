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
key        ``binary`` or ``string``, nullable         the key, as its converter gives it
value      ``binary`` or ``string``, nullable         the value, as its converter gives it
headers    ``list<struct<key: string, value:          the headers, in order (raw bytes)
           binary>>``, nullable
========== ========================================== =========================================

``key`` and ``value`` are ``string`` under ``StringConverter`` (UTF-8) and ``binary`` under
``ByteArrayConverter``; these are the converters the batch path takes today (any other, a
transformation chain or a ``header.converter`` gives the task records through ``put``).

:func:`sink_records` turns a batch back into :class:`~conveyor.api.records.SinkRecord` objects,
for a task that handles some batches per record.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from conveyor.api.records import Header, SinkRecord, TimestampType
from conveyor.api.schema import Schema, SchemaType

TOPIC, PARTITION, OFFSET, TIMESTAMP, KEY, VALUE, HEADERS = (
    "topic", "partition", "offset", "timestamp", "key", "value", "headers")
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

_OPTIONAL = {pa.string(): Schema(SchemaType.STRING, optional=True),
             pa.binary(): Schema(SchemaType.BYTES, optional=True)}


def batch_schema(key_type: pa.DataType, value_type: pa.DataType) -> pa.Schema:
    """The schema of a record batch whose keys are ``key_type`` and values ``value_type``
    (each ``pa.string()`` or ``pa.binary()``).

    Raises:
        ValueError: another type.
    """
    for name, type_ in (("key", key_type), ("value", value_type)):
        if type_ not in _OPTIONAL:
            raise ValueError(f"a record batch's {name} column is string or binary, not {type_}")
    return pa.schema([(TOPIC, pa.string()), (PARTITION, pa.int32()), (OFFSET, pa.int64()),
                      (TIMESTAMP, TIMESTAMP_TYPE), (KEY, key_type), (VALUE, value_type), (HEADERS, HEADERS_TYPE)])


def sink_records(batch: pa.RecordBatch) -> list[SinkRecord]:
    """The batch's rows as records, as ``put`` would have received them (a null value has
    no schema, as under Kafka Connect's converters; a record without a timestamp has
    ``TimestampType.NO_TIMESTAMP_TYPE``). One Python object per row: for a task's fallback,
    not its hot path."""
    key_schema = _OPTIONAL[batch.schema.field(KEY).type]
    value_schema = _OPTIONAL[batch.schema.field(VALUE).type]
    columns = [batch.column(name).to_pylist() for name in (TOPIC, PARTITION, OFFSET, KEY, VALUE, HEADERS)]
    stamps = batch.column(TIMESTAMP).cast(pa.int64()).to_pylist()
    records = []
    for (topic, partition, offset, key, value, headers), stamp in zip(zip(*columns), stamps, strict=True):
        records.append(SinkRecord(
            topic=topic, kafka_partition=partition, key=key, value=value, kafka_offset=offset, timestamp=stamp,
            timestamp_type=TimestampType.CREATE_TIME if stamp is not None else TimestampType.NO_TIMESTAMP_TYPE,
            headers=_headers(headers), key_schema=key_schema if key is not None else None,
            value_schema=value_schema if value is not None else None))
    return records


def _headers(headers: Sequence[dict] | None) -> tuple[Header, ...]:
    return tuple(Header(h["key"], h["value"]) for h in headers) if headers else ()
