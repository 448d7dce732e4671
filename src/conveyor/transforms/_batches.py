"""What the batch forms of transformations share (:meth:`TransformationChain.apply_batch
<conveyor.transforms.chain.TransformationChain.apply_batch>`).

A transformation has a batch form when it defines ``apply_batch(batch, where)``: the batch
after the transformation, as one record batch or a list of them (a change of schema starts
another), for the rows ``where`` is true for (every row when ``where`` is ``None``); the
other rows are left as they are. It may also define ``batch_types(key_type, value_type)``:
the types of the ``key`` and ``value`` columns it leaves (``None``: typed by Connect schemas,
:mod:`conveyor.api.batches`), raising :class:`NoBatchForm` for columns it takes no batches of.

A batch form that raises fails every row it was to transform, alone; one that can tell
which rows failed raises :class:`RowsFailed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from conveyor.api.arrow_types import field_schema, required_arrow_type, schema_field
from conveyor.api.batches import record_batches, row_runs, sink_records
from conveyor.api.schema import Field, Schema


class NoBatchForm(Exception):
    """A transformation takes no batches of these column types; the message says why."""


class RecordForm(Exception):
    """Raised by a columnar form: its rows are for the record form, row by row, which
    decides as on the record path (the message says why)."""


def no_nulls(column: pa.Array) -> None:
    """Refuse (:class:`RecordForm`) a column holding nulls: on the record path a null key or
    value passes a transformation with its schema unchanged, unlike the rows around it."""
    if column.null_count:
        raise RecordForm("nulls keep their schema")


def no_defaults(fields: Iterable[Field], replace_null_with_default: bool) -> None:
    """Refuse (:class:`RecordForm`) fields with schema defaults when nulls are to be replaced
    by them (``replace.null.with.default``)."""
    if replace_null_with_default and any(f.schema.default is not None for f in fields):
        raise RecordForm("schema defaults")


class RowsFailed(Exception):
    """Some rows could not be transformed.

    Attributes:
        batches: the other rows, transformed (and those ``where`` left out, as they were).
        failures: ``(row, error)`` for each failed row of the batch given, in row order.
    """

    def __init__(self, batches: list[pa.RecordBatch], failures: list[tuple[int, Exception]]) -> None:
        super().__init__(f"{len(failures)} rows failed")
        self.batches = batches
        self.failures = failures


def typed_only(column: str, kind: pa.DataType | None, transformation: Any) -> None:
    """Refuse (:class:`NoBatchForm`) a ``column`` whose values have no Connect schema:
    ``transformation``'s record form is then cheaper than its batch form."""
    if kind is not None:
        raise NoBatchForm(f"{type(transformation).__name__} takes batches of {column}s with Connect schemas "
                          f"(typed columns), not {kind}")


def is_typed(batch: pa.RecordBatch, column: str) -> bool:
    """Whether ``column`` of ``batch`` is typed (carries a Connect schema)."""
    return field_schema(batch.schema.field(column)) is not None


def per_record(batch: pa.RecordBatch, where: pa.BooleanArray | None,
               apply: Callable[[Any], Any]) -> list[pa.RecordBatch]:
    """A batch form made of a record form: ``apply`` on each row ``where`` selects, as a
    record (:func:`~conveyor.api.batches.sink_records`), and the rows back as batches
    (:func:`~conveyor.api.batches.record_batches`). For the rows a columnar form cannot
    take (values without a schema in a typed column, for one).

    Raises:
        RowsFailed: ``apply`` raised for some rows.
    """
    records = sink_records(batch)
    selected = where.to_pylist() if where is not None else None
    out, failures = [], []
    for i, record in enumerate(records):
        if selected is not None and not selected[i]:
            out.append(record)
            continue
        try:
            result = apply(record)
        except Exception as exc:  # noqa: BLE001 - the row fails alone
            failures.append((i, exc))
            continue
        if result is not None:
            out.append(result)
    batches = record_batches(out) or [batch.slice(0, 0)]
    if failures:
        raise RowsFailed(batches, failures)
    return batches


def typed_batch_form(batch: pa.RecordBatch, where: pa.BooleanArray | None, column: str,
                     columnar: Callable[[pa.RecordBatch, Schema], pa.RecordBatch],
                     record_form: Callable[[Any], Any]) -> list[pa.RecordBatch]:
    """The batch form of a transformation of typed ``column`` (``key`` or ``value``):
    ``columnar(rows, schema)`` on each run of rows ``where`` selects (``schema``: the
    column's), the other runs left as they are. A run it cannot take (it raises), and a
    batch whose ``column`` has no schema (a JSON run of a typed column), go row by row
    through ``record_form``, which decides as on the record path (``columnar`` raises
    :class:`RecordForm` for rows it leaves to it).

    Raises:
        RowsFailed: ``record_form`` raised for some rows.
    """
    schema = field_schema(batch.schema.field(column))
    if schema is None:
        return per_record(batch, where, record_form)
    out: list[pa.RecordBatch] = []
    failures: list[tuple[int, Exception]] = []
    for start, stop, selected in _where_runs(batch, where):
        rows = batch.slice(start, stop - start)
        if not selected:
            out.append(rows)
            continue
        try:
            out.append(columnar(rows, schema))
        except Exception:  # noqa: BLE001 - the record form decides, row by row
            try:
                out.extend(per_record(rows, None, record_form))
            except RowsFailed as exc:
                out.extend(exc.batches)
                failures.extend((start + row, error) for row, error in exc.failures)
    if failures:
        raise RowsFailed(out, failures)
    return out


def with_column(rows: pa.RecordBatch, column: str, schema: Schema, array: pa.Array) -> pa.RecordBatch:
    """``rows`` with ``array`` (of ``schema``'s Arrow type) as typed ``column``."""
    return rows.set_column(rows.schema.get_field_index(column), schema_field(column, schema), array)


def struct_of(schema: Schema, children: list[pa.Array], mask: pa.Array | None) -> pa.StructArray:
    """A struct column of ``schema`` (a STRUCT) from one child array per field, null where
    ``mask`` is true."""
    type_, _ = required_arrow_type(schema)
    return pa.StructArray.from_arrays(children, fields=list(type_), mask=mask)


def _where_runs(batch: pa.RecordBatch, where: pa.BooleanArray | None) -> list[tuple[int, int, bool]]:
    if where is None:
        return [(0, batch.num_rows, True)]
    return [(start, stop, where[start].as_py()) for start, stop in row_runs([where])]


class TypedBatchForm:
    """The batch form of a ``$Key``/``$Value`` transformation with a columnar form for typed
    columns (:meth:`_columnar`); its record form (``apply``) takes what that cannot. Mixed
    in before :class:`~conveyor.transforms._base.KeyOrValueTransformation`."""

    side: str
    apply: Callable[[Any], Any]
    _columnar: Callable[[pa.RecordBatch, Schema], pa.RecordBatch]
    """``rows`` transformed, their ``side`` column of ``schema``; raises (:class:`RecordForm`)
    for rows the record form must decide."""

    def batch_types(self, key_type: pa.DataType | None,
                    value_type: pa.DataType | None) -> tuple[pa.DataType | None, pa.DataType | None]:
        """Typed columns only (:func:`typed_only`); they stay typed."""
        typed_only(self.side, key_type if self.side == "key" else value_type, self)
        return key_type, value_type

    def apply_batch(self, batch: pa.RecordBatch, where: pa.BooleanArray | None) -> list[pa.RecordBatch]:
        """:func:`typed_batch_form` with :meth:`_columnar` and the record form."""
        return typed_batch_form(batch, where, self.side, self._columnar, self.apply)
