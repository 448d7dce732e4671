"""Connect schemas as Apache Arrow types, and Connect values as Arrow arrays: how a key or a
value with a schema becomes a typed column of a record batch (:mod:`conveyor.api.batches`),
and how the archive sink's ``parquet`` files type their columns.

=============================================  =========================================
Connect schema                                 Arrow type
=============================================  =========================================
``int8``, ``int16``, ``int32``, ``int64``      ``int8``, ``int16``, ``int32``, ``int64``
``float32``, ``float64``                       ``float``, ``double``
``boolean``, ``string``, ``bytes``             ``bool``, ``string``, ``binary``
``array``                                      ``list<element>`` (nullable when the
                                               element schema is optional)
``map``                                        ``map<key, value>`` (keys never null)
``struct``                                     ``struct`` (every field nullable; names kept)
``Decimal``                                    ``decimal128(p, scale)``: ``p`` is the
                                               ``connect.decimal.precision`` parameter,
                                               else 38; ``decimal256`` above 38 (to 76)
``Date`` / ``Time`` / ``Timestamp``            ``date32`` / ``time32[ms]`` /
                                               ``timestamp[ms, tz=UTC]``
=============================================  =========================================

A column's field carries its Connect schema in the metadata key ``connect.schema``: Kafka
Connect's JSON schema form (``JsonConverter``'s ``schema`` envelope), with the defaults of
``int``, ``float``, ``boolean`` and ``string`` schemas; other defaults (bytes, logical types,
containers) are left out (a converter has applied them to the data already; a
transformation's ``replace.null.with.default`` then finds none). :func:`schema_field` writes
it, :func:`field_schema` reads it back.

FLOAT32 values hold a ``float``'s precision in Arrow (as a Java ``Float`` does in Kafka
Connect), where a Python value of a ``float32`` schema may hold more.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from conveyor.api.errors import DataError
from conveyor.api.schema import DATE, DECIMAL, TIME, TIMESTAMP, Field, Schema, SchemaType

DEFAULT_DECIMAL_PRECISION = 38
MAX_DECIMAL_PRECISION = 76
SCHEMA_METADATA = b"connect.schema"
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")

Convert = Callable[[Any], Any]

_INT_RANGES = {
    SchemaType.INT8: (pa.int8(), 7),
    SchemaType.INT16: (pa.int16(), 15),
    SchemaType.INT32: (pa.int32(), 31),
    SchemaType.INT64: (pa.int64(), 63),
}
_TYPE_BY_NAME = {t.value: t for t in SchemaType}


def value_mismatch(expected: str, value: Any) -> DataError:
    if value is None:
        return DataError("null for a required (non-optional) field")
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return DataError(f"expected {expected}, got {type(value).__name__} {shown}")


def _int_conv(bits: int) -> Convert:
    low, high = -(1 << bits), (1 << bits) - 1

    def conv(v: Any) -> Any:
        if type(v) is not int and (not isinstance(v, int) or isinstance(v, bool)):
            raise value_mismatch(f"an int{bits + 1}", v)
        if not low <= v <= high:
            raise DataError(f"{v} is out of the range of int{bits + 1}")
        return v

    return conv


def _float_conv(v: Any) -> Any:
    if type(v) is float:
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise value_mismatch("a float", v)


def _bool_conv(v: Any) -> Any:
    if v is True or v is False:
        return v
    raise value_mismatch("a boolean", v)


def _str_conv(v: Any) -> Any:
    if type(v) is not str and not isinstance(v, str):
        raise value_mismatch("a string", v)
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DataError(f"string is not valid Unicode: {exc.reason}") from None
    return v


def _bytes_conv(v: Any) -> Any:
    if type(v) is bytes:
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise value_mismatch("bytes", v)


def _decimal_conv(precision: int, scale: int) -> Convert:
    def conv(v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            v = decimal.Decimal(v)
        elif not isinstance(v, decimal.Decimal):
            raise value_mismatch("a Decimal", v)
        if not v.is_finite():
            raise DataError(f"decimal {v} is not finite")
        t = v.as_tuple()
        exponent = int(t.exponent)
        if exponent < -scale and v != v.quantize(decimal.Decimal(1).scaleb(-scale)):
            raise DataError(f"decimal {v} has more than {scale} digits after the point (the column's scale)")
        digits = len(t.digits) + exponent + scale if v else 1
        if digits > precision:
            raise DataError(f"decimal {v} has more than {precision} digits (the column's precision)")
        return v

    return conv


def _date_conv(v: Any) -> Any:
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return v
    if isinstance(v, int) and not isinstance(v, bool) and -(1 << 31) <= v < (1 << 31):
        return v
    raise value_mismatch("a date (datetime.date or days since the epoch)", v)


def _time_conv(v: Any) -> Any:
    if isinstance(v, dt.time) or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 86_400_000):
        return v
    raise value_mismatch("a time (datetime.time or milliseconds since midnight)", v)


def _timestamp_conv(v: Any) -> Any:
    if isinstance(v, dt.datetime) or (isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)):
        return v
    raise value_mismatch("a timestamp (datetime.datetime or milliseconds since the epoch)", v)


def _optional(conv: Convert) -> Convert:
    return lambda v: None if v is None else conv(v)


def arrow_type(schema: Schema) -> tuple[pa.DataType, Convert]:
    """``(Arrow type, converter)`` of a Connect schema (see the module docstring).

    The converter takes a Python value shaped like ``schema`` and returns what pyarrow
    builds the column from; it accepts ``None`` exactly when ``schema.optional``.

    Raises:
        DataError: the schema cannot be expressed in Arrow (a decimal of more than 76
            digits, a struct without fields, an array or map without element schemas, an
            unknown type); from the
            converter: a value that does not match the schema.
    """
    atype, conv = required_arrow_type(schema)  # every converter refuses None (see _bad)
    return atype, (_optional(conv) if schema.optional else conv)


def required_arrow_type(schema: Schema) -> tuple[pa.DataType, Convert]:
    t = schema.type
    params = schema.parameters or {}
    if schema.name == DECIMAL and t is SchemaType.BYTES:
        try:
            scale = int(params.get("scale", "0"))
            precision = int(params.get("connect.decimal.precision", DEFAULT_DECIMAL_PRECISION))
        except (TypeError, ValueError):
            raise DataError(f"a Decimal schema with unusable parameters {dict(params)!r}") from None
        if scale < 0:
            raise DataError(f"a Decimal of negative scale {scale} (Arrow decimals need a scale >= 0)")
        precision = max(precision, scale, 1)
        if precision > MAX_DECIMAL_PRECISION:
            raise DataError(f"a decimal of precision {precision} does not fit Arrow's decimal256 (76 digits)")
        atype = pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        return atype, _decimal_conv(precision, scale)
    if schema.name == DATE and t is SchemaType.INT32:
        return pa.date32(), _date_conv
    if schema.name == TIME and t is SchemaType.INT32:
        return pa.time32("ms"), _time_conv
    if schema.name == TIMESTAMP and t is SchemaType.INT64:
        return TIMESTAMP_TYPE, _timestamp_conv
    if t in _INT_RANGES:
        atype, bits = _INT_RANGES[t]
        return atype, _int_conv(bits)
    if t is SchemaType.FLOAT32:
        return pa.float32(), _float_conv
    if t is SchemaType.FLOAT64:
        return pa.float64(), _float_conv
    if t is SchemaType.BOOLEAN:
        return pa.bool_(), _bool_conv
    if t is SchemaType.STRING:
        return pa.string(), _str_conv
    if t is SchemaType.BYTES:
        return pa.binary(), _bytes_conv
    if t is SchemaType.ARRAY:
        if schema.value_schema is None:
            raise DataError("ARRAY schema without an element schema")
        item_type, item_conv = arrow_type(schema.value_schema)

        def array_conv(v: Any, c: Convert = item_conv) -> Any:
            if not isinstance(v, (list, tuple)):
                raise value_mismatch("a list", v)
            return [c(x) for x in v]

        return pa.list_(pa.field("element", item_type, nullable=schema.value_schema.optional)), array_conv
    if t is SchemaType.MAP:
        if schema.key_schema is None or schema.value_schema is None:
            raise DataError("MAP schema without key and value schemas")
        key_type, key_conv = required_arrow_type(schema.key_schema)  # map keys are never null
        value_type, value_conv = arrow_type(schema.value_schema)

        def map_conv(v: Any, kc: Convert = key_conv, vc: Convert = value_conv) -> Any:
            if not isinstance(v, Mapping):
                raise value_mismatch("a mapping", v)
            return [(kc(k), vc(x)) for k, x in v.items()]

        atype = pa.map_(
            pa.field("key", key_type, nullable=False),
            pa.field("value", value_type, nullable=schema.value_schema.optional),
        )
        return atype, map_conv
    if t is SchemaType.STRUCT:
        if not schema.fields:
            raise DataError("a STRUCT without fields (Parquet has no empty groups)")
        fields: list[pa.Field] = []
        plan: list[tuple[str, Convert]] = []
        for field in schema.fields:
            ftype, fconv = arrow_type(field.schema)
            fields.append(pa.field(field.name, ftype, nullable=True))
            plan.append((field.name, fconv))

        def struct_conv(v: Any, plan: list[tuple[str, Convert]] = plan) -> Any:
            get = getattr(v, "get", None)
            if get is None:
                raise value_mismatch("a struct (mapping)", v)
            return {name: conv(get(name)) for name, conv in plan}

        return pa.struct(fields), struct_conv
    raise DataError(f"unsupported Connect schema type {t!r}")


# -- the Connect schema in a field's metadata -------------------------------------------------


def schema_field(name: str, schema: Schema) -> pa.Field:
    """A nullable field ``name`` of ``schema``'s Arrow type, ``schema`` in its metadata.

    Raises:
        DataError: ``schema`` has no Arrow form (see :func:`arrow_type`).
    """
    type_, _ = required_arrow_type(schema)
    return pa.field(name, type_, nullable=True, metadata={SCHEMA_METADATA: schema_text(schema)})


def field_schema(field: pa.Field) -> Schema | None:
    """The Connect schema in ``field``'s metadata (:func:`schema_field`), or ``None``."""
    text = (field.metadata or {}).get(SCHEMA_METADATA)
    return None if text is None else schema_from_text(text)


def schema_text(schema: Schema) -> bytes:
    """``schema`` in Kafka Connect's JSON schema form, with its scalar defaults only (see
    the module docstring)."""
    return json.dumps(_schema_node(schema), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@functools.lru_cache(maxsize=256)
def schema_from_text(text: bytes) -> Schema:
    """The schema :func:`schema_text` wrote (cached: batches of one schema share it)."""
    return _schema_from_node(json.loads(text))


def _schema_node(schema: Schema) -> dict[str, Any]:
    node: dict[str, Any] = {"type": schema.type.value}
    if schema.type is SchemaType.ARRAY and schema.value_schema is not None:
        node["items"] = _schema_node(schema.value_schema)
    elif schema.type is SchemaType.MAP and schema.key_schema is not None and schema.value_schema is not None:
        node["keys"] = _schema_node(schema.key_schema)
        node["values"] = _schema_node(schema.value_schema)
    elif schema.type is SchemaType.STRUCT:
        node["fields"] = [{**_schema_node(f.schema), "field": f.name} for f in schema.fields]
    node["optional"] = schema.optional
    for key in ("name", "version", "doc", "parameters"):
        if getattr(schema, key) is not None:
            node[key] = getattr(schema, key)
    if _scalar_default(schema):
        node["default"] = schema.default
    return node


_SCALAR_DEFAULTS = {SchemaType.INT8: int, SchemaType.INT16: int, SchemaType.INT32: int, SchemaType.INT64: int,
                    SchemaType.FLOAT32: float, SchemaType.FLOAT64: float, SchemaType.BOOLEAN: bool,
                    SchemaType.STRING: str}


def _scalar_default(schema: Schema) -> bool:
    kind, value = _SCALAR_DEFAULTS.get(schema.type), schema.default
    if value is None or schema.name is not None or kind is None:
        return False
    return type(value) is bool if kind is bool else isinstance(value, kind) and not isinstance(value, bool)


def _schema_from_node(node: dict[str, Any]) -> Schema:
    kind = _TYPE_BY_NAME[node["type"]]
    return Schema(kind, optional=node["optional"], name=node.get("name"), version=node.get("version"),
                  doc=node.get("doc"), parameters=node.get("parameters"), default=node.get("default"),
                  fields=tuple(Field(f["field"], _schema_from_node(f)) for f in node.get("fields", ())),
                  key_schema=_schema_from_node(node["keys"]) if "keys" in node else None,
                  value_schema=_schema_from_node(node["items"] if "items" in node else node["values"])
                  if "items" in node or "values" in node else None)


# -- Arrow's Python values back to Connect values ----------------------------------------------


@functools.lru_cache(maxsize=256)
def connect_values(schema: Schema) -> Convert:
    """A function from a cell's ``as_py()`` (or ``to_pylist()``) value to the Connect value of
    ``schema`` (maps come from Arrow as lists of pairs; the rest is already Connect's form:
    ``dict`` for a struct, ``Decimal``, ``date``, ``time``, tz-aware ``datetime``)."""
    if schema.type is SchemaType.MAP and schema.key_schema is not None and schema.value_schema is not None:
        key, value = connect_values(schema.key_schema), connect_values(schema.value_schema)
        return lambda v: None if v is None else {key(k): value(x) for k, x in v}
    if schema.type is SchemaType.ARRAY and schema.value_schema is not None:
        item = connect_values(schema.value_schema)
        return lambda v: None if v is None else [item(x) for x in v]
    if schema.type is SchemaType.STRUCT:
        plan = [(f.name, connect_values(f.schema)) for f in schema.fields]
        return lambda v: None if v is None else {name: conv(v[name]) for name, conv in plan}
    return _same


def _same(value: Any) -> Any:
    return value
