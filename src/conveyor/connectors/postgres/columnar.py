"""The batch path's write: schemaless JSON values from Arrow record batches to
``COPY ... (FORMAT csv)``, without a Python object per record.

:func:`plan` decodes the buffered batches' ``arrow.json`` values (``JsonConverter`` with
``schemas.enable=false``, :mod:`conveyor.api.batches`) with Arrow's JSON reader and renders
one CSV payload per destination table with Arrow's CSV writer; :func:`execute` COPYs them in
the caller's transaction (``upsert`` through the writer's staging table and ``INSERT ... ON
CONFLICT``, the last row of each key kept as the record path keeps it).

It writes what the record path (:class:`~conveyor.connectors.postgres.writer.Writer`) would
write for the same records, or nothing: where that does not follow from the column types
alone, :func:`plan` raises :class:`NotColumnar` before the database sees a row, and the task
writes those batches through the record path, which also makes the decisions taken per
record (rejected records, tombstones to delete, ``auto.create``, ``auto.evolve``, a row the
database refuses). The rules, each a reason to fall back:

* every value is a JSON object of scalars (no nested object or array, no duplicate key);
* every column written exists in the table;
* the text Arrow sends is the text psycopg sends for the value ``json.loads`` gives:
  integers within 64 bits, strings, ``t``/``f`` for booleans and nulls go to any column; a
  number with a fraction (or beyond 64 bits) only to a ``double precision`` column, where
  both texts read as the same double; a string Arrow reads as a timestamp is read again as
  the string it is;
* ``pk.mode=record_key``: keys are strings (``StringConverter``) or JSON scalars, none null,
  and ``pk.fields`` names at most one column; an upsert's key is not a fractional number;
* tombstones are skipped unless ``delete.enabled`` (then: record path);
* the connection's client encoding is UTF-8.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
from psycopg import sql
from psycopg.copy import QueuedLibpqWriter

from conveyor.api.batches import JSON_TYPE, KEY, TOPIC, VALUE
from conveyor.connectors.postgres.config import PRIMITIVE_KEY_COLUMN, InsertMode, PkMode, PostgresSinkConfig
from conveyor.connectors.postgres.plan import Table

_ANY_COLUMN = (pa.int64(), pa.string(), pa.bool_(), pa.null())
_FLOAT_COLUMN = "double precision"
_CSV = pa_csv.WriteOptions(include_header=False, quoting_style="needed")
_READ = pa_json.ReadOptions(use_threads=False, block_size=1 << 24)
_ROW = "__conveyor_row"


class NotColumnar(Exception):
    """The batches cannot be written from their columns alone; the message says why.
    Raised before anything is written; the task takes the record path."""


@dataclass(frozen=True)
class CsvCopy:
    """One table's rows as a CSV payload for ``COPY (FORMAT csv)``."""

    table: Table
    columns: tuple[str, ...]
    pk: tuple[str, ...]
    payload: pa.Buffer
    rows: int


class WriterLike(Protocol):
    """What this module uses of :class:`~conveyor.connectors.postgres.writer.Writer`."""

    def table_name(self, topic: str) -> tuple[str | None, str]: ...

    def table(self, conn: psycopg.Connection, name: tuple[str | None, str]) -> Table | None: ...

    def cached_table(self, name: tuple[str | None, str]) -> Table | None: ...

    def stage(self, cur: psycopg.Cursor, table: Table, cols: tuple[str, ...]) -> sql.Identifier: ...

    def merge(self, cur: psycopg.Cursor, table: Table, cols: tuple[str, ...], pk: tuple[str, ...],
              stage: sql.Identifier) -> None: ...


def plan(writer: WriterLike, conn: psycopg.Connection, config: PostgresSinkConfig,
         batches: Sequence[pa.RecordBatch], *, cached: bool = False) -> list[CsvCopy]:
    """The CSV payloads of ``batches`` (one record batch schema), one per table, in the
    order of the tables' first rows. Reads table metadata (outside a transaction; with
    ``cached``, only what the writer holds: a table it has not read is a reason to fall
    back); creates nothing.

    Raises:
        NotColumnar: the record path must write these batches (see the module docstring).
        psycopg.Error: reading the table metadata failed.
    """
    if conn.info.encoding != "utf-8":
        raise NotColumnar(f"the connection's client encoding is {conn.info.encoding}, not UTF-8")
    if config.pk_mode is PkMode.KAFKA:
        raise NotColumnar("pk.mode=kafka: the rows' keys are the records' coordinates")
    rows = pa.Table.from_batches(batches)
    if rows.schema.field(VALUE).type != JSON_TYPE:
        raise NotColumnar(f"values are {rows.schema.field(VALUE).type}, not schemaless JSON")
    if rows.column(VALUE).null_count:
        if config.delete_enabled:
            raise NotColumnar("tombstones to delete")
        rows = rows.filter(pc.is_valid(rows.column(VALUE)))  # skipped, as on the record path
    if rows.num_rows == 0:
        return []
    key_column = _key_column(config, rows)
    topics = pc.unique(rows.column(TOPIC)).to_pylist()
    by_table: dict[tuple[str | None, str], list[str]] = {}
    for topic in topics:
        by_table.setdefault(writer.table_name(topic), []).append(topic)
    copies = []
    for name, table_topics in by_table.items():
        table = writer.cached_table(name) if cached else writer.table(conn, name)
        if table is None:
            raise NotColumnar(f"table {name} does not exist yet")
        part = rows if len(by_table) == 1 else rows.filter(
            pc.is_in(rows.column(TOPIC), value_set=pa.array(table_topics, pa.string())))
        copies.append(_copy(config, table, part, key_column))
    return copies


def execute(writer: WriterLike, cur: psycopg.Cursor, config: PostgresSinkConfig, copies: Sequence[CsvCopy]) -> None:
    """COPY ``copies`` with ``cur``, inside the caller's transaction."""
    for copy in copies:
        if config.insert_mode is not InsertMode.INSERT:
            stage = writer.stage(cur, copy.table, copy.columns)
            _copy_csv(cur, stage, copy)
            writer.merge(cur, copy.table, copy.columns, copy.pk, stage)
        else:
            _copy_csv(cur, copy.table.ident, copy)


class CopyStream:
    """A transaction holding one open ``COPY ... (FORMAT csv)`` into one table's columns,
    fed payload by payload as batches arrive, so that PostgreSQL reads one batch while the
    task decodes the next (psycopg's queued writer sends from its own thread). The caller's
    thread only; nothing else runs on the connection until :meth:`commit` or :meth:`abort`.
    ``insert`` mode only (an upsert's last row per key needs the whole buffer).

    Raises (from every method but :meth:`abort`): psycopg.Error, as the database or the
    connection fails; the stream is then rolled back.
    """

    def __init__(self, conn: psycopg.Connection, copy: CsvCopy) -> None:
        self.table, self.columns = copy.table.display, copy.columns
        self._transaction: psycopg.Transaction | None = conn.transaction()
        self._transaction.__enter__()
        self._cursor = conn.cursor()
        self._copy: contextlib.AbstractContextManager[psycopg.Copy] | None = None
        try:
            opening = self._cursor.copy(_copy_statement(copy.table.ident, copy.columns),
                                        writer=QueuedLibpqWriter(self._cursor))
            self._stream = opening.__enter__()
            self._copy = opening
        except BaseException:
            self.abort()
            raise

    def write(self, copy: CsvCopy) -> None:
        """Send ``copy``'s rows (the stream's table and columns)."""
        assert self._copy is not None and (copy.table.display, copy.columns) == (self.table, self.columns)
        try:
            self._stream.write(copy.payload)
        except BaseException:
            self.abort()
            raise

    def commit(self, then: Callable[[psycopg.Cursor], None]) -> None:
        """End the COPY (waiting for PostgreSQL to take every row), run ``then`` in the same
        transaction, commit."""
        assert self._copy is not None and self._transaction is not None
        try:
            copy, self._copy = self._copy, None
            copy.__exit__(None, None, None)
            then(self._cursor)
            transaction, self._transaction = self._transaction, None
            transaction.__exit__(None, None, None)
        except BaseException:
            self.abort()
            raise
        finally:
            self._cursor.close()

    def abort(self) -> None:
        """Roll the transaction back, cancelling a COPY still open; never raises."""
        copy, self._copy = self._copy, None
        transaction, self._transaction = self._transaction, None
        for context in (copy, transaction):
            if context is not None:
                with contextlib.suppress(Exception):
                    context.__exit__(_Aborted, _Aborted(), None)
        with contextlib.suppress(Exception):
            self._cursor.close()


class _Aborted(Exception):
    """Handed to the stream's COPY and transaction on the way out, so that they roll back."""


def _copy_statement(target: sql.Composable, columns: tuple[str, ...]) -> sql.Composed:
    return sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
        target, sql.SQL(", ").join(map(sql.Identifier, columns)))


def _copy_csv(cur: psycopg.Cursor, target: sql.Composable, copy: CsvCopy) -> None:
    with cur.copy(_copy_statement(target, copy.columns)) as stream:
        stream.write(copy.payload)


def _key_column(config: PostgresSinkConfig, rows: pa.Table) -> str | None:
    if config.pk_mode is not PkMode.RECORD_KEY:
        return None
    if len(config.pk_fields) > 1:
        raise NotColumnar("pk.fields names more than one column of a record key")
    keys = rows.column(KEY)
    if keys.type not in (pa.string(), JSON_TYPE):
        raise NotColumnar(f"keys are {keys.type}")
    if keys.null_count:
        raise NotColumnar("a null key")
    return config.pk_fields[0] if config.pk_fields else PRIMITIVE_KEY_COLUMN


def _copy(config: PostgresSinkConfig, table: Table, rows: pa.Table, key_column: str | None) -> CsvCopy:
    values = _read_objects(rows.column(VALUE))
    key_cols: tuple[str, ...] = ()
    arrays: list[pa.Array] = []
    if key_column is not None:
        key_cols = (key_column,)
        keys = rows.column(KEY)
        if keys.type == JSON_TYPE:
            wrapped = _join(pa.scalar('{"k":'), _storage(keys), pa.scalar("}\n"))
            keys = _checked(_read(wrapped, {}), {"k": table.columns.get(key_column)}, f"key column {key_column}")
            arrays.append(keys.column("k").combine_chunks())
        else:
            arrays.append(keys.combine_chunks())
        if key_column not in table.columns:
            raise NotColumnar(f"table {table.display} has no column {key_column} yet")
    pk_cols = key_cols if key_column else tuple(config.pk_fields) if config.pk_mode is PkMode.RECORD_VALUE else ()
    whitelist = set(config.fields_whitelist)
    present = set(values.column_names)
    unknown = [col for col in values.column_names if col not in table.columns]
    if unknown and (not whitelist or any(col in whitelist or col in pk_cols for col in unknown)):
        raise NotColumnar(f"the table has no column {unknown[0]} yet")
    value_cols = tuple(col for col in table.columns  # the table's order: one for every batch of these columns
                       if col in present and col not in key_cols and (not whitelist or col in whitelist or col in pk_cols))
    missing_pk = [col for col in pk_cols if col not in key_cols and col not in value_cols]
    if missing_pk:
        raise NotColumnar(f"no record has primary-key field(s) {', '.join(missing_pk)}")
    columns = key_cols + value_cols
    if not columns:
        raise NotColumnar("no column to write")
    _checked(values.select(list(value_cols)), table.columns, "value field")
    arrays.extend(values.column(col).combine_chunks() for col in value_cols)
    out = pa.Table.from_arrays([_as_text(a) for a in arrays], names=list(columns))
    if config.insert_mode is not InsertMode.INSERT:
        out = _last_per_key(out, pk_cols)
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(out, sink, _CSV)
    return CsvCopy(table, columns, pk_cols, sink.getvalue(), out.num_rows)


def _read_objects(values: pa.ChunkedArray) -> pa.Table:
    """The JSON objects of ``values`` as columns, strings that Arrow took for timestamps
    read again as strings."""
    text = _join(_storage(values), pa.scalar("\n"))
    objects = _read(text, {})
    dated = {field.name: pa.string() for field in objects.schema if pa.types.is_temporal(field.type)}
    if dated:
        objects = _read(text, dated)
    if objects.num_rows != len(values):
        raise NotColumnar(f"{len(values)} values read as {objects.num_rows} rows")
    return objects


def _read(text: pa.Buffer, explicit: dict[str, pa.DataType]) -> pa.Table:
    options = pa_json.ParseOptions(explicit_schema=pa.schema(explicit) if explicit else None,
                                   unexpected_field_behavior="infer")
    try:
        return pa_json.read_json(pa.BufferReader(text), read_options=_READ, parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise NotColumnar(f"the values are not JSON objects of one type per field: {exc}") from None


def _checked(objects: pa.Table, sql_types: dict[str, str | None], what: str) -> pa.Table:
    """``objects`` when each column's type renders as psycopg renders its values for the
    table's column of that name (see the module docstring)."""
    for field in objects.schema:
        sql_type = sql_types.get(field.name)
        if sql_type is None:
            raise NotColumnar(f"the table has no column {field.name} yet")
        if field.type in _ANY_COLUMN or (field.type == pa.float64() and sql_type == _FLOAT_COLUMN):
            continue
        raise NotColumnar(f"{what} {field.name}: {field.type} values into a {sql_type} column")
    return objects


def _as_text(array: pa.Array) -> pa.Array:
    """Booleans as psycopg writes them (``t``/``f``); other columns as they are."""
    return pc.if_else(array, "t", "f") if array.type == pa.bool_() else array


def _last_per_key(rows: pa.Table, pk: tuple[str, ...]) -> pa.Table:
    """One row per primary key, the last (as the record path's upsert keeps it)."""
    if any(rows.schema.field(col).type == pa.float64() for col in pk):
        raise NotColumnar("a fractional primary-key value (0.0 and -0.0 are one key in Python)")
    indexed = rows.append_column(_ROW, pa.array(range(rows.num_rows), pa.int64()))
    try:
        last = indexed.group_by(list(pk), use_threads=False).aggregate([(_ROW, "max")])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise NotColumnar(f"cannot group the rows by primary key: {exc}") from None
    indices = last.column(f"{_ROW}_max")
    return rows.take(indices.take(pc.sort_indices(indices)))


def _storage(column: pa.ChunkedArray) -> pa.Array:
    """The column's strings in one array (an extension type's storage: concatenating the
    extension arrays themselves is far slower)."""
    return pa.concat_arrays([chunk.storage if isinstance(chunk, pa.ExtensionArray) else chunk
                             for chunk in column.chunks])


def _join(*parts: pa.Array | pa.Scalar) -> pa.Buffer:
    """The strings of ``parts`` joined element-wise and concatenated: one buffer."""
    joined = pc.binary_join_element_wise(*parts, "")
    _, offsets, data = joined.buffers()
    bounds = pa.Array.from_buffers(pa.int32(), len(joined) + 1, [None, offsets], offset=joined.offset)
    start, stop = bounds[0].as_py(), bounds[len(joined)].as_py()
    return data.slice(start, stop - start)
