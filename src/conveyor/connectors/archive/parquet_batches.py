"""The archive's ``parquet`` files from record batches (:mod:`conveyor.api.batches`): the
batch's columns become the file's, with no Python object per record, in the same files the
record path writes.

A file has one layout (:class:`~.parquet_format.ParquetLayout`, from the records' Connect
schemas). On the record path a null key or value has no schema while the others of a
``StringConverter`` or ``ByteArrayConverter`` column have one, so a partition's rows are
cut into runs of one layout (:func:`layout_runs`), and a file ends where the layout
changes, as it does there. A typed column (a converter with schemas) has one schema for
the batch, its nulls included: the runtime starts another batch where it changes.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api import Schema, TopicPartition
from conveyor.api.arrow_types import field_schema
from conveyor.api.batches import HEADERS, JSON_TYPE, KEY, TIMESTAMP, VALUE, column_schema, row_runs
from conveyor.connectors.archive.formats import FileBuffer
from conveyor.connectors.archive.parquet_format import HEADERS_TYPE, ParquetBuffer, ParquetBuffers, ParquetLayout


def layout_runs(rows: pa.RecordBatch) -> list[tuple[Schema | None, Schema | None, int, int]]:
    """``rows`` as runs of consecutive rows whose keys and values have the same Connect
    schemas on the record path: ``(key schema, value schema, start, stop)``."""
    sides = [rows.column(KEY), rows.column(VALUE)]
    fields = [rows.schema.field(KEY), rows.schema.field(VALUE)]
    schemas = [column_schema(field) for field in fields]
    nulls = [pc.is_null(side) if side.type in _NULL_WITHOUT_SCHEMA and not field_schema(field) and side.null_count
             else None for side, field in zip(sides, fields, strict=True)]
    marks = [is_null for is_null in nulls if is_null is not None]
    runs = row_runs(marks) if marks else [(0, rows.num_rows)]

    def schema(side: int, row: int) -> Schema | None:
        is_null = nulls[side]
        if is_null is not None and is_null[row].as_py():
            return None
        return schemas[side]

    return [(schema(0, start), schema(1, start), start, stop) for start, stop in runs]


_NULL_WITHOUT_SCHEMA = (pa.string(), pa.binary())  # a typed column's nulls have its schema; JSON has none


def parquet_columns(rows: pa.RecordBatch, layout: ParquetLayout) -> list[pa.Array]:
    """``[timestamp, key, value, headers]`` of ``rows`` (of one layout run) as the file's
    columns of ``layout``."""
    return [rows.column(TIMESTAMP), _cells(rows.column(KEY), layout.key.type),
            _cells(rows.column(VALUE), layout.value.type), _empty_for_null(rows.column(HEADERS)).cast(HEADERS_TYPE)]


def _empty_for_null(headers: pa.Array) -> pa.Array:
    """``headers`` with an empty list for each null (no headers). A column of nulls only (the
    common case) is built from zero offsets: ``fill_null`` on a list column costs about 2 us a
    row."""
    if not headers.null_count:
        return headers
    if headers.null_count == len(headers):
        offsets = pa.py_buffer(bytes(4 * (len(headers) + 1)))
        return pa.Array.from_buffers(headers.type, len(headers), [None, offsets],
                                     children=[pa.array([], headers.type.value_type)])
    return pc.fill_null(headers, pa.scalar([], headers.type))


def _cells(column: pa.Array, type_: pa.DataType) -> pa.Array:
    if column.type == JSON_TYPE:
        column = column.storage  # JSON text: the schemaless column's cells
    if column.type == type_:
        return column
    return pa.nulls(len(column), type_)  # a run of nulls: no schema, so the layout's column is a string


class ParquetRows:
    """Rows of one layout into ``parquet`` buffers (the archive task's batch path)."""

    def __init__(self, buffers: ParquetBuffers, layout: ParquetLayout) -> None:
        self._buffers, self.layout = buffers, layout

    def fits(self, buffer: FileBuffer) -> bool:
        return isinstance(buffer, ParquetBuffer) and buffer.layout.matches(self.layout.key_schema,
                                                                           self.layout.value_schema)

    def new(self, start: int, opened: float) -> ParquetBuffer:
        return self._buffers.new_for(self.layout, start, opened)

    def add(self, buffer: FileBuffer, rows: pa.RecordBatch, offsets: list[int], tp: TopicPartition) -> None:
        """Append ``rows`` (at ``offsets``) to ``buffer``, a :class:`ParquetBuffer` of this layout."""
        assert isinstance(buffer, ParquetBuffer)
        buffer.extend(parquet_columns(rows, self.layout), offsets)
