"""Converters in columnar form: the raw keys or values of a batch of Kafka records into one
Apache Arrow array, for the sink's batch path (:mod:`conveyor.api.batches`).

=================================== ===================== ==========================================
converter                           Arrow type            a cell holds
=================================== ===================== ==========================================
``ByteArrayConverter``              ``binary``            the bytes as they are
``StringConverter`` (UTF-8)         ``string``            the text; malformed UTF-8 replaced (U+FFFD)
``JsonConverter``, no schemas       ``arrow.json``        the JSON text, compact (see below)
one that ``gives_schemas``          the schema's type     the Connect value, typed
(``JsonConverter`` with schemas,    (:mod:`conveyor.api.  (:class:`TypedColumns`)
Avro, Protobuf, JSON Schema,        arrow_types`)
``IntegerConverter``…)
=================================== ===================== ==========================================

A ``null`` cell is a null key or value (for JSON also an empty message and the literal
``null``, which the converter reads as ``None``).

The JSON text of a cell is what the record path's value, ``JsonConverter.to_connect_data``'s,
gives when written back as compact JSON (orjson's form: no spaces, non-ASCII as UTF-8,
floats of 1e16 or more with an exponent): each message is parsed once and the whole batch
written back in one call. A message the converter cannot read is reported, not converted:
its cell is null and ``failed`` is called with its index and the converter's
:class:`~conveyor.api.DataError` (the only error these converters raise, never retried:
``errors.retry.timeout`` retries only ``RetriableError``, as KIP-298).

One difference from the record path: a JSON string holding a lone surrogate escape
(``"\\ud800"``) has no UTF-8 form, so it fails here, at the converter's stage; on the record path it
reaches the task, which may reject it later (the archive sink does: another
``__connect.errors.stage`` in its dead-letter record).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import orjson
import pyarrow as pa

from conveyor.api.arrow_types import arrow_type, required_arrow_type
from conveyor.api.batches import json_text
from conveyor.api.errors import DataError
from conveyor.api.schema import Schema
from conveyor.converters.bytearray_converter import ByteArrayConverter
from conveyor.converters.json_converter import JsonConverter
from conveyor.converters.string_converter import StringConverter

Failed = Callable[[int, Exception], None]
"""``failed(index, error)``: the message at ``index`` could not be converted."""

JSON_TYPE = pa.json_(pa.string())
_UTF8 = ("utf-8", "utf8")
_SEPARATOR = orjson.Fragment(b"\n")  # compact JSON has no raw newline: it can only be ours
_WIDE_FLOAT = b"e+"  # orjson writes every float of magnitude 1e16 or more with one


class ColumnarConverter(Protocol):
    """One converter's columnar form."""

    type: pa.DataType

    def to_column(self, data: list[bytes | None], failed: Failed) -> pa.Array:
        """One cell per element of ``data``, in order; calls ``failed`` for each element that
        cannot be converted (its cell is null)."""
        ...


def columnar(converter: Any) -> ColumnarConverter | TypedColumns | None:
    """The columnar form of ``converter``, or ``None`` when it has none (records then take
    the record path)."""
    kind = type(converter)
    if getattr(converter, "gives_schemas", False):
        return TypedColumns(converter)
    if kind is ByteArrayConverter:
        return BytesColumns()
    if kind is StringConverter and converter.encoding.lower() in _UTF8:
        return Utf8Columns()
    if kind is JsonConverter and not converter.schemas_enabled:
        return JsonColumns(converter)
    return None


class BytesColumns:
    """``ByteArrayConverter``: the bytes as they are."""

    type = pa.binary()

    def to_column(self, data: list[bytes | None], failed: Failed) -> pa.Array:
        return pa.array(data, pa.binary())


class Utf8Columns:
    """``StringConverter`` with UTF-8: validated in one pass; a batch holding malformed
    UTF-8 is decoded per message with replacement characters, as the converter does."""

    type = pa.string()

    def to_column(self, data: list[bytes | None], failed: Failed) -> pa.Array:
        text = pa.array(data, pa.binary()).view(pa.string())
        try:
            text.validate(full=True)  # UTF-8 included; cheaper than a cast, which validates too
            return text
        except pa.ArrowInvalid:
            return pa.array([str(b, "utf-8", "replace") if b is not None else None for b in data], pa.string())


class JsonColumns:
    """``JsonConverter`` with ``schemas.enable=false``: compact JSON text (see the module
    docstring). A batch holding a message orjson cannot read (invalid JSON, an empty
    message, a byte-order mark, other encodings than UTF-8) or an integer too wide for 64
    bits is converted per message through the converter itself, which decides exactly as
    on the record path."""

    type = JSON_TYPE

    def __init__(self, converter: JsonConverter) -> None:
        self._converter = converter

    def to_column(self, data: list[bytes | None], failed: Failed) -> pa.Array:
        texts = self._fast(data)
        if texts is None:
            texts = self._per_message(data, failed)
        return pa.ExtensionArray.from_storage(JSON_TYPE, pa.array(texts, pa.binary()).view(pa.string()))

    @staticmethod
    def _fast(data: list[bytes | None]) -> list[bytes | None] | None:
        if not data:
            return []
        try:
            nodes = list(map(orjson.loads, [b"null" if d is None else d for d in data] if None in data else data))
            sequence: list[Any] = [_SEPARATOR] * (2 * len(nodes) - 1)
            sequence[::2] = nodes
            written = orjson.dumps(sequence)
        except (orjson.JSONDecodeError, orjson.JSONEncodeError, TypeError):
            return None
        if _WIDE_FLOAT in written:  # maybe an integer orjson read as a float: the stdlib decides
            return None
        texts: list[bytes | None] = written[1:-1].split(b",\n,")
        if None in nodes:
            texts = [None if node is None else text for node, text in zip(nodes, texts, strict=True)]
        return texts

    def _per_message(self, data: list[bytes | None], failed: Failed) -> list[bytes | None]:
        to_connect = self._converter.to_connect_data
        texts: list[bytes | None] = []
        for i, raw in enumerate(data):
            try:
                value = to_connect("", (), raw).value
                texts.append(None if value is None else json_text(value))
            except Exception as exc:  # noqa: BLE001 - the caller's tolerance decides
                failed(i, exc)
                texts.append(None)
        return texts


class TypedColumns:
    """A converter whose keys or values come with Connect schemas (``Converter.gives_schemas``):
    each message through ``to_connect_data`` (with its topic and empty headers), as on the record path. A
    batch's rows are typed by their schemas, so the caller cuts them into runs of one schema
    (:meth:`cells`): a null read with a schema (an optional schema's null) is a null cell of
    that schema's run; a value without a schema (a null, a tombstone, or ``JsonConverter``'s
    envelope with a null schema) is held as JSON text, as :class:`JsonColumns` holds it.

    A message is reported to ``failed`` when the converter cannot read it, when its value
    does not match its schema, or when its schema has no Arrow form (a struct without fields,
    a decimal of more than 76 digits: :func:`~conveyor.api.arrow_types.arrow_type`).
    """

    type = None  # one per batch: the records' schema's

    def __init__(self, converter: Any) -> None:
        self._converter = converter
        self._types: dict[Schema, tuple[pa.DataType, Callable[[Any], Any]]] = {}

    def cells(self, topics: list[str], data: list[bytes | None],
              failed: Failed) -> tuple[list[Schema | None], list[Any]]:
        """Per message (read from ``topics``, one per message): its Connect schema (``None``:
        schemaless or null) and its value (compact JSON text for a schemaless one), for
        :meth:`column`."""
        to_connect = self._converter.to_connect_data
        schemas: list[Schema | None] = []
        cells: list[Any] = []
        for i, (topic, raw) in enumerate(zip(topics, data, strict=True)):
            try:
                schema, value = to_connect(topic, (), raw)
                if schema is None and value is not None:
                    value = json_text(value)
            except Exception as exc:  # noqa: BLE001 - the caller's tolerance decides
                failed(i, exc)
                schema = value = None
            schemas.append(schema)
            cells.append(value)
        return schemas, cells

    def column(self, schema: Schema | None, values: list[Any]) -> tuple[pa.Array, list[tuple[int, Exception]]]:
        """The column of ``values`` of ``schema`` (``None``: JSON text), and the values that do
        not match it, as ``(index, DataError)`` (their cells are null; the caller drops their
        rows). In one ``pa.array`` call; only a run it refuses is checked value by value
        (:func:`~conveyor.api.arrow_types.arrow_type`), to name the values at fault."""
        if schema is None:
            return pa.ExtensionArray.from_storage(JSON_TYPE, pa.array(values, pa.binary()).view(pa.string())), []
        try:
            type_, check = self._type(schema)
        except DataError as exc:  # no Arrow form: every value fails
            return pa.nulls(len(values)), [(i, exc) for i in range(len(values))]
        try:
            return pa.array(values, type_), []
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            pass
        checked, bad = [], []
        for i, value in enumerate(values):
            try:
                checked.append(None if value is None else check(value))
            except Exception as exc:  # noqa: BLE001 - the caller's tolerance decides
                bad.append((i, exc))
                checked.append(None)
        try:
            return pa.array(checked, type_), bad
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:  # what the checks let through
            return pa.nulls(len(values), type_), [(i, DataError(f"{exc}")) for i in range(len(values))]

    def _type(self, schema: Schema) -> tuple[pa.DataType, Callable[[Any], Any]]:
        try:
            found = self._types.get(schema)
        except TypeError:  # a default that cannot be hashed
            return required_arrow_type(schema)[0], arrow_type(schema)[1]
        if found is None:
            if len(self._types) >= 64:
                self._types.clear()
            found = self._types[schema] = (required_arrow_type(schema)[0], arrow_type(schema)[1])
        return found


