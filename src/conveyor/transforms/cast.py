"""``Cast``: cast fields, or the whole key/value, to another primitive type.

Kafka Connect: ``org.apache.kafka.connect.transforms.Cast$Key`` /
``org.apache.kafka.connect.transforms.Cast$Value`` (aliases ``Cast$Key`` / ``Cast$Value``).

Configuration:

``spec`` (list, required)
    ``field:type`` pairs (``id:int32,price:float64``), or one bare ``type`` to cast the
    whole key/value. Types: ``int8``, ``int16``, ``int32``, ``int64``, ``float32``,
    ``float64``, ``boolean``, ``string`` (any case).
``replace.null.with.default`` (boolean, default true)
    a null field with a schema default is cast from the default.

Rules, as Kafka Connect's: inputs may be integers, floats, booleans, strings or bytes
(bytes only to ``string``, as base64); numbers narrow like Java's casts (wrapping,
truncating); strings parse like ``Integer.parseInt``/``Double.parseDouble``
(``Value (abc) was out of range for requested data type`` otherwise) and like
``Boolean.parseBoolean`` (``"true"`` in any case, anything else false); booleans give
1/0; ``string`` writes Java's ``toString`` (``true``, ``1.0E10``) and Date/Time/Timestamp
values as ``yyyy-MM-dd`` / ``HH:mm:ss.SSS`` / ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'``.
Date/Time/Timestamp cast to numbers use their encoded integers. Null keys/values pass
through. With a schema, the updated schema keeps each cast field's optionality and
casts its default.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal as _decimal
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.errors import ConfigError, DataError
from conveyor.api.schema import Field, Schema, SchemaType
from conveyor.converters import logical
from conveyor.converters._config import get_bool, get_list
from conveyor.java_text import values as jv
from conveyor.transforms._base import (
    KeyOrValueTransformation,
    SchemaCache,
    copy_schema_basics,
    key_and_value_variants,
    require_map,
    require_struct,
    struct_get,
)
from conveyor.transforms._batches import RecordForm, TypedBatchForm, no_defaults, no_nulls, struct_of, with_column
from conveyor.transforms.replace_field import java_split

PURPOSE = "cast types"

T = SchemaType
SUPPORTED_INPUT = (T.INT8, T.INT16, T.INT32, T.INT64, T.FLOAT32, T.FLOAT64, T.BOOLEAN, T.STRING, T.BYTES)
SUPPORTED_OUTPUT = (T.INT8, T.INT16, T.INT32, T.INT64, T.FLOAT32, T.FLOAT64, T.BOOLEAN, T.STRING)
_BITS = {T.INT8: 8, T.INT16: 16, T.INT32: 32, T.INT64: 64}
_WHOLE_VALUE = None


def _names(types: tuple[SchemaType, ...]) -> str:
    return "[" + ", ".join(t.name for t in types) + "]"


def parse_field_types(mappings: list[str]) -> dict[str | None, SchemaType]:
    """``spec`` → ``{field: type}``, with ``None`` as the field for a whole-value cast."""
    if not mappings:
        raise ConfigError({"spec": "Must specify at least one field to cast."})
    casts: dict[str | None, SchemaType] = {}
    whole = False
    for mapping in mappings:
        parts = java_split(mapping, ":")
        if len(parts) > 2 or not parts:
            raise ConfigError({"spec": f"Invalid cast mapping: {mapping}"})
        field: str | None
        if len(parts) == 1:
            field, type_text = _WHOLE_VALUE, parts[0]
            whole = True
        else:
            field, type_text = parts[0].strip(), parts[1]
        target = T.__members__.get(type_text.strip().upper())
        if target is None:
            raise ConfigError({"spec": f"Invalid type found in casting spec: {type_text.strip()}"})
        if target not in SUPPORTED_OUTPUT:
            raise ConfigError(
                {
                    "spec": f"Cast transformation does not support casting to {target.name}; supported types are "
                    f"{_names(SUPPORTED_OUTPUT)}"
                }
            )
        casts[field] = target
    if whole and len(mappings) > 1:
        raise ConfigError(
            {
                "spec": "Cast transformations that specify a type to cast the entire value to may only specify a "
                "single cast in their spec"
            }
        )
    return casts


def infer_type(value: Any) -> SchemaType | None:
    """``ConnectSchema.schemaType(value.getClass())`` for Python values."""
    if isinstance(value, bool):
        return T.BOOLEAN
    if isinstance(value, int):
        return T.INT64
    if isinstance(value, float):
        return T.FLOAT64
    if isinstance(value, str):
        return T.STRING
    if isinstance(value, (bytes, bytearray, memoryview)):
        return T.BYTES
    if isinstance(value, (list, tuple)):
        return T.ARRAY
    if isinstance(value, dict):
        return T.MAP
    return None


def cast_value(schema: Schema | None, value: Any, target: SchemaType) -> Any:
    """``Cast.castValueToType``."""
    if value is None:
        return None
    inferred = schema.type if schema is not None else infer_type(value)
    if inferred is None:
        raise DataError(
            f"Cast transformation was passed a value of type {type(value).__name__} which is not supported by "
            "Connect's data API"
        )
    if inferred not in SUPPORTED_INPUT:
        raise DataError(
            f"Cast transformation does not support casting from {inferred.name}; supported types are "
            f"{_names(SUPPORTED_INPUT)}"
        )
    if target is T.STRING:
        return _to_string(schema, value)
    if schema is not None and schema.name in (logical.DATE, logical.TIME, logical.TIMESTAMP):
        value = _encode_logical(schema, value)
    try:
        if target in _BITS:
            bits = _BITS[target]
            if isinstance(value, bool):
                return 1 if value else 0
            if isinstance(value, (int, float, _decimal.Decimal)):
                return jv.narrow(value, bits)
            if isinstance(value, str):
                return jv.parse_integer(value, bits)
        elif target is T.FLOAT32 or target is T.FLOAT64:
            if isinstance(value, bool):
                number = 1.0 if value else 0.0
            elif isinstance(value, (int, float, _decimal.Decimal)):
                number = float(value)
            elif isinstance(value, str):
                number = jv.parse_floating(value)
            else:
                raise _unexpected(value)
            return jv.to_float32(number) if target is T.FLOAT32 else number
        elif target is T.BOOLEAN:
            if isinstance(value, bool):
                return value
            if isinstance(value, (int, float, _decimal.Decimal)):
                return jv.narrow(value, 64) != 0
            if isinstance(value, str):
                return value.lower() == "true"
    except (ValueError, OverflowError):
        raise DataError(f"Value ({value}) was out of range for requested data type") from None
    raise _unexpected(value)


def _unexpected(value: Any) -> DataError:
    return DataError(f"Unexpected type in Cast transformation: {type(value).__name__}")


def _encode_logical(schema: Schema, value: Any) -> Any:
    if schema.name == logical.DATE:
        return logical.date_from_logical(value)
    if schema.name == logical.TIME:
        return logical.time_from_logical(value)
    return logical.timestamp_from_logical(value)


def _to_string(schema: Schema | None, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if schema is not None and schema.type is T.FLOAT32:
            return jv.float_to_string(value)
        return jv.double_to_string(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, _dt.date):
        return value.strftime("%Y-%m-%d")
    if isinstance(value, _dt.time):
        return value.strftime("%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    return str(value)


_INTS = (T.INT8, T.INT16, T.INT32, T.INT64)
_ARROW = {T.INT8: pa.int8(), T.INT16: pa.int16(), T.INT32: pa.int32(), T.INT64: pa.int64(), T.FLOAT32: pa.float32(),
          T.FLOAT64: pa.float64(), T.BOOLEAN: pa.bool_(), T.STRING: pa.string()}


def cast_column(column: pa.Array, schema: Schema, target: SchemaType) -> pa.Array:
    """:func:`cast_value` of every cell, where an Arrow cast gives exactly what it gives:
    integers and booleans to any type (wrapping, as Java narrows; to floats through a double,
    as :func:`cast_value`), floats to floats, a type to itself.

    Raises:
        RecordForm: any other cast (strings parsed as Java does, floats to integers
            or text, logical types): for :func:`cast_value`, row by row.
    """
    source = schema.type
    if schema.name is not None:
        raise RecordForm(f"a cast from {schema.name}")
    if source is target:
        return column
    if source in _INTS or source is T.BOOLEAN:
        if target is T.FLOAT32:
            return pc.cast(pc.cast(column, pa.float64(), safe=False), pa.float32(), safe=False)
        return pc.cast(column, _ARROW[target], safe=False)
    if source in (T.FLOAT32, T.FLOAT64) and target in (T.FLOAT32, T.FLOAT64):
        return pc.cast(column, _ARROW[target], safe=False)
    raise RecordForm(f"a cast from {source.name} to {target.name}")


class Cast(TypedBatchForm, KeyOrValueTransformation):
    """Cast fields or the whole value; use :class:`CastKey` or :class:`CastValue`. Batch form:
    typed columns, by Arrow casts where they give exactly what Connect's casts give
    (:func:`cast_column`), else row by row (:mod:`._batches`)."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.casts = parse_field_types(get_list(config, "spec"))
        self.whole_value_type = self.casts.get(_WHOLE_VALUE)
        self.replace_null_with_default = get_bool(config, "replace.null.with.default", True)
        self._schemas = SchemaCache()

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        whole = self.whole_value_type
        if schema is None:
            if whole is not None:
                return self.new_record(record, None, cast_value(None, value, whole))
            source = require_map(value, PURPOSE)
            updated = dict(source)
            for field, target in self.casts.items():
                updated[field] = cast_value(None, source.get(field), target)  # type: ignore[index]
            return self.new_record(record, None, updated)
        updated_schema = self._schemas.get(schema, self._updated_schema)
        if whole is not None:
            return self.new_record(record, updated_schema, cast_value(schema, value, whole))
        struct = require_struct(value, PURPOSE)
        with_default = self.replace_null_with_default
        casts = self.casts
        result = {}
        for field in schema.fields:
            original = struct_get(struct, field, with_default)
            target = casts.get(field.name)
            result[field.name] = original if target is None else cast_value(field.schema, original, target)
        return self.new_record(record, updated_schema, result)

    def _columnar(self, rows: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
        column = rows.column(self.side)
        no_nulls(column)
        updated_schema = self._schemas.get(schema, self._updated_schema)
        whole = self.whole_value_type
        if whole is not None:
            return with_column(rows, self.side, updated_schema, cast_column(column, schema, whole))
        if schema.type is not T.STRUCT:
            raise RecordForm("not a struct")
        no_defaults(schema.fields, self.replace_null_with_default)
        children = []
        for i, field in enumerate(schema.fields):
            child = pc.struct_field(column, [i])
            target = self.casts.get(field.name)
            children.append(child if target is None else cast_column(child, field.schema, target))
        return with_column(rows, self.side, updated_schema, struct_of(updated_schema, children, None))

    def _updated_schema(self, schema: Schema) -> Schema:
        whole = self.whole_value_type
        if whole is not None:
            updated = copy_schema_basics(schema, whole)
        else:
            fields = []
            for field in schema.fields:
                target = self.casts.get(field.name)
                if target is None:
                    fields.append(field)
                    continue
                default = None
                if field.schema.default is not None:
                    default = cast_value(field.schema, field.schema.default, target)
                fields.append(Field(field.name, Schema(target, optional=field.schema.optional, default=default)))
            updated = copy_schema_basics(schema, T.STRUCT, tuple(fields))
        default = schema.default
        if default is not None and whole is not None:
            default = cast_value(schema, default, whole)
        return Schema(
            updated.type,
            optional=schema.optional,
            name=updated.name,
            version=updated.version,
            doc=updated.doc,
            default=default,
            fields=updated.fields,
            parameters=updated.parameters,
        )


CastKey, CastValue = key_and_value_variants(Cast)
