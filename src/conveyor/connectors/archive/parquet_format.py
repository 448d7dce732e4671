"""The archive's ``parquet`` format: Parquet files written with pyarrow.

Columns (one row per archived record)::

    topic      string     not null
    partition  int32      not null
    offset     int64      not null
    timestamp  timestamp[ms, tz=UTC]           (null when the record has none)
    key        K                               (null for a null key)
    value      V                               (null for a tombstone)
    headers    list<struct<key: string not null, value: binary>>  not null

``K`` / ``V`` are derived from the record's Connect key / value schema (as for ``avro``,
see :mod:`.formats`): ``int8`` → ``int8``, ``int16`` → ``int16``, ``int32`` → ``int32``,
``int64`` → ``int64``, ``float32`` → ``float``, ``float64`` → ``double``, ``boolean`` →
``bool``, ``string`` → ``string``, ``bytes`` → ``binary``, ``array`` → ``list``, ``map`` →
``map`` (any key type), ``struct`` → ``struct`` (field names kept as they are). Logical
types: ``Decimal`` → ``decimal128(p, scale)`` with ``p`` the ``connect.decimal.precision``
parameter, else 38 (the most ``decimal128`` holds, what Spark / Hive read), and
``decimal256`` when the parameter asks for more than 38 digits (up to 76); ``Date`` →
``date32``; ``Time`` → ``time32[ms]``; ``Timestamp`` → ``timestamp[ms, tz=UTC]``.
A **schemaless** key or value is stored as JSON text in a ``string`` column (encoded as for
``jsonl``: read it back with ``json.loads``).

Nullability: the fields of a struct are always nullable in Arrow (a null key, value or
struct has null children, which Arrow refuses in non-nullable fields); list elements and
map values are nullable when their Connect schema is optional; map keys never are. Whether
a Connect field is optional is checked when the record is buffered: a ``None`` for a
required field, a value of the wrong Python type, an integer out of its type's range, a
string that is not valid Unicode, a decimal with more digits than the column holds or a
finer scale is a :class:`~conveyor.api.DataError` (the record goes to the dead-letter
queue, or fails the task), never a broken file; so is a record whose schema has no Parquet
form (a struct without fields, a decimal of more than 76 digits or of negative scale).

One file has one Arrow schema: when a partition's records change schema, the open buffer
is written as a file first (as for ``avro``). A file holds up to ``flush.size`` records, in
row groups of ``min(flush.size, 100_000)`` records (:data:`ROW_GROUP_MAX_RECORDS`): with the
default ``flush.size`` one row group per file; a partial file (a closing commit, a time
rotation) has one row group unless it holds more than 100,000 records. Compression is
``parquet.codec`` (pyarrow's codec names and codecs). The
schema's key-value metadata holds ``conveyor.topic``, ``conveyor.partition`` and
``conveyor.start.offset``.

Memory: a buffer converts its records to Arrow arrays every 8,192 records
(:data:`CHUNK_RECORDS`; until then they are Python values in one list per column), so it
holds about the records' uncompressed Arrow size plus up to 8,192 records as Python objects
(~750 bytes each for a string key, one header and an 8-field struct value). Measured for
such records (``benchmarks/archive_throughput.py``'s) at 100,000 buffered: ~160 bytes per
record in all (~110 in Arrow's pool, ~55 in Python), against ~150 for ``avro``. The file is
assembled when it is written, costing about its uncompressed size again for that moment.
Lower ``flush.size`` for tasks with many partitions.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from conveyor.api import ConnectError, DataError, Schema, SchemaType, SinkRecord
from conveyor.api.arrow_types import TIMESTAMP_TYPE, Convert, arrow_type, required_arrow_type, value_mismatch
from conveyor.connectors.archive.config import ArchiveSinkConfig
from conveyor.connectors.archive.formats import FileBuffer, json_bytes

ROW_GROUP_MAX_RECORDS = 100_000
#: records a buffer holds as Python values before converting them to Arrow arrays
CHUNK_RECORDS = 8192

HEADERS_TYPE = pa.list_(
    pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
)


# -- layout: the columns of files with one pair of Connect schemas ----------------------------


class _Side:
    """How a key or a value is held: one column, or for a struct one column per field."""

    def __init__(self, name: str, schema: Schema | None) -> None:
        self.name = name
        self.struct_fields: list[pa.Field] | None = None
        self.plan: list[tuple[str, Convert]] = []
        if schema is None:
            self.type: pa.DataType = pa.string()
            self.conv: Convert = lambda v: None if v is None else json_bytes(v).decode("utf-8")
            return
        self.type, conv = required_arrow_type(schema)
        if schema.type is SchemaType.STRUCT:
            self.struct_fields = list(self.type)
            for field in schema.fields:
                _, fconv = arrow_type(field.schema)
                self.plan.append((field.name, fconv))
        self.conv = lambda v, c=conv: None if v is None else c(v)

    @property
    def width(self) -> int:
        """Number of buffer columns (a struct: its null mask and one per field)."""
        return 1 if self.struct_fields is None else 1 + len(self.plan)

    def cells(self, v: Any) -> list[Any]:
        """The buffer cells of one key / value."""
        if self.struct_fields is None:
            return [self.conv(v)]
        if v is None:
            return [True] + [None] * len(self.plan)
        get = getattr(v, "get", None)
        if get is None:
            raise value_mismatch("a struct (mapping)", v)
        try:
            return [False] + [conv(get(name)) for name, conv in self.plan]
        except DataError as exc:
            for name, conv in self.plan:  # which field (rare: only for a rejected record)
                try:
                    conv(get(name))
                except DataError:
                    raise DataError(f"field {name!r}: {exc}") from None
            raise

    def build(self, columns: list[list[Any]]) -> pa.Array:
        if self.struct_fields is None:
            return pa.array(columns[0], type=self.type)
        children = [pa.array(col, type=f.type) for col, f in zip(columns[1:], self.struct_fields)]
        mask = pa.array(columns[0], type=pa.bool_())
        return pa.StructArray.from_arrays(children, fields=self.struct_fields, mask=mask)


class ParquetLayout:
    """The Arrow schema of files whose records have these key and value schemas.

    Raises:
        DataError: a Connect schema cannot be expressed in Arrow.
    """

    def __init__(self, key_schema: Schema | None, value_schema: Schema | None) -> None:
        self.key_schema = key_schema
        self.value_schema = value_schema
        self.key = _Side("key", key_schema)
        self.value = _Side("value", value_schema)
        self.schema = pa.schema(
            [
                pa.field("topic", pa.string(), nullable=False),
                pa.field("partition", pa.int32(), nullable=False),
                pa.field("offset", pa.int64(), nullable=False),
                pa.field("timestamp", TIMESTAMP_TYPE),
                pa.field("key", self.key.type),
                pa.field("value", self.value.type),
                pa.field("headers", HEADERS_TYPE, nullable=False),
            ]
        )

    def matches(self, key_schema: Schema | None, value_schema: Schema | None) -> bool:
        return (key_schema is self.key_schema or key_schema == self.key_schema) and (
            value_schema is self.value_schema or value_schema == self.value_schema
        )


class ParquetLayouts:
    """A small cache of :class:`ParquetLayout` by (key schema, value schema)."""

    def __init__(self, limit: int = 64) -> None:
        self._layouts: list[ParquetLayout] = []
        self._limit = limit

    def get(self, key_schema: Schema | None, value_schema: Schema | None) -> ParquetLayout:
        """The layout for these schemas. Raises :class:`DataError` as :class:`ParquetLayout`."""
        for layout in self._layouts:
            if layout.matches(key_schema, value_schema):
                return layout
        layout = ParquetLayout(key_schema, value_schema)
        self._layouts.insert(0, layout)
        del self._layouts[self._limit :]
        return layout


# -- buffer ----------------------------------------------------------------------------------


_NO_HEADERS: list[Any] = []


class ParquetBuffer(FileBuffer):
    """The records of a ``.parquet`` file with one :class:`ParquetLayout`, column by column.

    Records are held as Python values in one list per column until :data:`CHUNK_RECORDS` of
    them are buffered; those are then converted to Arrow arrays (a *chunk*) and the lists
    emptied, so most of a buffer is compact Arrow memory. ``payload`` assembles the chunks
    (sliced for a partial file) and the pending lists into one table.

    Args:
        row_group_records: records per row group (``min(flush.size, 100_000)``).
        codec: pyarrow compression name (``none``, ``snappy``, ``gzip``, ``zstd``, ``lz4``).
    """

    def __init__(self, start: int, opened: float, layout: ParquetLayout, codec: str, row_group_records: int) -> None:
        super().__init__(start, opened)
        self.layout = layout
        self._codec = codec
        self._row_group = max(1, row_group_records)
        # sealed chunks: [timestamps, key, value, headers] Arrow arrays of equal length each
        self._chunks: list[list[pa.Array]] = []
        self._sealed = 0  # records in self._chunks
        self._seal_failed = False
        # pending records (after the sealed ones), as Python values
        self._timestamps: list[int | None] = []
        self._headers: list[Any] = []
        self._key_cols: list[list[Any]] = [[] for _ in range(layout.key.width)]
        self._value_cols: list[list[Any]] = [[] for _ in range(layout.value.width)]
        self._columns = [*self._key_cols, *self._value_cols]

    def accepts(self, record: SinkRecord) -> bool:
        return self.layout.matches(record.key_schema, record.value_schema)

    def append(self, record: SinkRecord, offset: int) -> None:
        layout = self.layout
        try:
            key = layout.key.cells(record.key)
        except DataError as exc:
            raise DataError(f"key does not match its Connect schema: {exc}") from None
        try:
            value = layout.value.cells(record.value)
        except DataError as exc:
            raise DataError(f"value does not match its Connect schema: {exc}") from None
        # nothing can fail from here on: the record is added to every column or to none
        for col, cell in zip(self._columns, key + value):
            col.append(cell)
        self._timestamps.append(record.timestamp)
        self._headers.append(
            [{"key": h.key, "value": h.value} for h in record.headers] if record.headers else _NO_HEADERS
        )
        self.offsets.append(offset)
        if len(self._timestamps) >= CHUNK_RECORDS and not self._seal_failed:
            self._seal()

    def extend(self, columns: list[pa.Array], offsets: list[int]) -> None:
        """Add records already in Arrow form (the batch path): ``columns`` are their
        ``[timestamp, key, value, headers]`` arrays, of the layout's types, one cell per
        offset. They become a chunk of their own, after the pending records.

        Raises:
            ConnectError: pending records could not be converted (see :meth:`table`).
        """
        if self._timestamps:
            self._seal()
            if self._timestamps:
                raise ConnectError(f"cannot convert the buffered records from offset {self.start} to Arrow")
        self._chunks.append(columns)
        self._sealed += len(offsets)
        self.offsets.extend(offsets)

    def _pending_arrays(self, n: int) -> list[pa.Array]:
        """The first ``n`` pending records as ``[timestamps, key, value, headers]`` arrays."""

        def head(col: list[Any]) -> list[Any]:
            return col if n == len(col) else col[:n]

        return [
            pa.array(head(self._timestamps), type=TIMESTAMP_TYPE),
            self.layout.key.build([head(c) for c in self._key_cols]),
            self.layout.value.build([head(c) for c in self._value_cols]),
            pa.array(head(self._headers), type=HEADERS_TYPE),
        ]

    def _seal(self) -> None:
        """Convert the pending records to a chunk of Arrow arrays. Should pyarrow refuse a
        value the checks let through, the records stay pending (``payload`` reports it)."""
        n = len(self._timestamps)
        try:
            chunk = self._pending_arrays(n)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            self._seal_failed = True
            return
        self._chunks.append(chunk)
        self._sealed += n
        for col in (self._timestamps, self._headers, *self._columns):
            col.clear()

    def table(self, count: int, topic: str, partition: int) -> pa.Table:
        """The first ``count`` records as an Arrow table of the layout's schema.

        Raises:
            ConnectError: pyarrow refused a value the checks let through (a bug: the
                buffer is unchanged).
        """
        layout = self.layout
        parts: list[list[pa.Array]] = []
        left = count
        for chunk in self._chunks:
            if left <= 0:
                break
            size = len(chunk[0])
            parts.append(chunk if size <= left else [a.slice(0, left) for a in chunk])
            left -= size
        try:
            if left > 0:
                parts.append(self._pending_arrays(left))
            types = [TIMESTAMP_TYPE, layout.key.type, layout.value.type, HEADERS_TYPE]
            stamps, keys, values, headers = (
                pa.chunked_array([part[i] for part in parts], type=types[i]) for i in range(4)
            )
            columns = [
                pa.repeat(pa.scalar(topic, type=pa.string()), count),
                pa.repeat(pa.scalar(partition, type=pa.int32()), count),
                pa.array(self.offsets[:count], type=pa.int64()),
                stamps,
                keys,
                values,
                headers,
            ]
            return pa.Table.from_arrays(columns, schema=layout.schema)
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            raise ConnectError(
                f"cannot build the Parquet file of {topic}-{partition} from offset {self.start}:"
                f" {type(exc).__name__}: {exc}"
            ) from exc

    def payload(self, count: int, topic: str, partition: int) -> bytes:
        table = self.table(count, topic, partition)
        table = table.replace_schema_metadata(
            {
                "conveyor.topic": topic,
                "conveyor.partition": str(partition),
                "conveyor.start.offset": str(self.start),
            }
        )
        out = io.BytesIO()
        pq.write_table(table, out, compression=self._codec, row_group_size=self._row_group)
        return out.getvalue()

    def drop_first(self, count: int) -> None:
        if count <= 0:
            return
        left = count
        while self._chunks and left > 0:
            chunk = self._chunks[0]
            size = len(chunk[0])
            if size <= left:
                self._chunks.pop(0)
                self._sealed -= size
                left -= size
            else:
                self._chunks[0] = [a.slice(left) for a in chunk]
                self._sealed -= left
                left = 0
        if left > 0:
            for col in (self._timestamps, self._headers, *self._columns):
                del col[:left]
        del self.offsets[:count]
        if self.offsets:
            self.start = self.offsets[0]


class ParquetBuffers:
    """Makes the task's :class:`ParquetBuffer` s (caching layouts) from its configuration."""

    def __init__(self, config: ArchiveSinkConfig) -> None:
        self._layouts = ParquetLayouts()
        self._codec = config.parquet_codec.value
        self._row_group = min(config.flush_size, ROW_GROUP_MAX_RECORDS)

    def layout(self, key_schema: Schema | None, value_schema: Schema | None) -> ParquetLayout:
        """The layout of files of records with these schemas (:class:`ParquetLayouts`).

        Raises:
            DataError: the schemas cannot be expressed in Arrow.
        """
        return self._layouts.get(key_schema, value_schema)

    def new_for(self, layout: ParquetLayout, offset: int, opened: float) -> ParquetBuffer:
        """An empty buffer of ``layout``, its first offset ``offset``."""
        return ParquetBuffer(offset, opened, layout, self._codec, self._row_group)

    def new(self, record: SinkRecord, offset: int, opened: float) -> ParquetBuffer:
        """An empty buffer for files of ``record``'s schemas, its first offset ``offset``.

        Raises:
            DataError: the record's Connect schemas cannot be expressed in Arrow.
        """
        layout = self._layouts.get(record.key_schema, record.value_schema)
        return ParquetBuffer(offset, opened, layout, self._codec, self._row_group)
