"""The archive's ``jsonl`` lines from a record batch (:mod:`conveyor.api.batches`) in Arrow
compute kernels: the same bytes :class:`~.formats.JsonlBuffer` writes for each record on the
record path, with Python per row only for what Arrow has no kernel for (base64 of bytes and
headers, strings that need JSON escapes).
"""

from __future__ import annotations

import base64
from array import array
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api import TopicPartition
from conveyor.api.batches import HEADERS, JSON_TYPE, KEY, OFFSET, TIMESTAMP, VALUE
from conveyor.connectors.archive.formats import FileBuffer, JsonlBuffer

_NEEDS_ESCAPE = '["\\\\\\x00-\\x1f]'  # what orjson escapes in a string; it writes the rest as UTF-8


def jsonl_lines(rows: pa.RecordBatch, tp: TopicPartition) -> pa.Array:
    """One ``string`` per row of ``rows`` (all of partition ``tp``): its ``jsonl`` line,
    newline included."""
    return pc.binary_join_element_wise(
        f'{{"topic":{orjson.dumps(tp.topic).decode()},"partition":{tp.partition},"offset":',
        rows.column(OFFSET).cast(pa.string()),
        ',"timestamp":', pc.fill_null(rows.column(TIMESTAMP).cast(pa.int64()).cast(pa.string()), "null"),
        ',"key":', _json_cells(rows.column(KEY)),
        ',"value":', _json_cells(rows.column(VALUE)),
        ',"headers":', _headers_json(rows.column(HEADERS)),
        "}\n",
        "",
    )


def line_data(lines: pa.Array, base: int) -> tuple[memoryview, array]:
    """``lines`` (:func:`jsonl_lines`, or a slice) as one run of bytes, and the end of each
    line in it, plus ``base``."""
    buffers = lines.buffers()
    offsets = pa.Array.from_buffers(pa.int32(), len(lines) + 1, [None, buffers[1]], offset=lines.offset)
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    ends = pc.add(offsets.slice(1).cast(pa.int64()), base - first)
    end_buffer = ends.buffers()[1]
    return (memoryview(buffers[2])[first:last],
            array("q", memoryview(end_buffer)[ends.offset * 8:(ends.offset + len(ends)) * 8].cast("q")))


def _json_cells(column: pa.Array) -> pa.Array:
    """Each cell as JSON text: ``null``, JSON text as it is, a string quoted (escaped as
    orjson does), bytes as a base64 string (as the record path's ``json_bytes``)."""
    if column.type == JSON_TYPE:
        return pc.fill_null(column.storage, "null") if column.null_count else column.storage
    if column.type == pa.string():
        if not pc.any(pc.match_substring_regex(column, _NEEDS_ESCAPE)).as_py():
            return pc.fill_null(pc.binary_join_element_wise('"', column, '"', ""), "null")
        return _per_cell(column, orjson.dumps)
    if column.type == pa.binary():
        return _per_cell(column, lambda b: b'"' + base64.b64encode(b) + b'"')
    raise TypeError(f"no jsonl form for a {column.type} column")


def _per_cell(column: pa.Array, write: Any) -> pa.Array:
    return pa.array([b"null" if v is None else write(v) for v in column.to_pylist()], pa.binary()).cast(pa.string())


def _headers_json(column: pa.Array) -> pa.Array:
    if column.null_count == len(column):
        return pa.repeat("[]", len(column)).cast(pa.string())
    return pa.array([
        orjson.dumps([{"key": h["key"], "value": None if h["value"] is None else base64.b64encode(h["value"]).decode()}
                      for h in headers]) if headers else b"[]"
        for headers in column.to_pylist()], pa.binary()).cast(pa.string())


class JsonlRows:
    """Rows of a record batch into ``jsonl`` buffers (the archive task's batch path)."""

    def fits(self, buffer: FileBuffer) -> bool:
        return isinstance(buffer, JsonlBuffer)

    def new(self, start: int, opened: float) -> JsonlBuffer:
        return JsonlBuffer(start, opened)

    def add(self, buffer: FileBuffer, rows: pa.RecordBatch, offsets: list[int], tp: TopicPartition) -> None:
        """Append ``rows`` (of ``tp``, at ``offsets``) to ``buffer``, a :class:`JsonlBuffer`."""
        assert isinstance(buffer, JsonlBuffer)
        data, ends = line_data(jsonl_lines(rows, tp), buffer.size)
        buffer.extend(data, ends, offsets)
