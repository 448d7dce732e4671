"""JSON → Connect values: ``JsonConverter.convertToConnect`` and its logical converters.

Compiled once per schema into closures (see :func:`make_decoder`), so that each record
only walks its data. Error messages are Kafka Connect's (``Invalid null value for
required INT32 field``, ``Structs should be encoded as JSON objects, but found ARRAY``).
"""

from __future__ import annotations

import base64
import binascii
import decimal as _decimal
from collections.abc import Callable
from typing import Any

from conveyor.api.errors import DataError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters import logical

Decoder = Callable[[Any], Any]

INT_RANGES = {
    SchemaType.INT8: (-(2**7), 2**7 - 1),
    SchemaType.INT16: (-(2**15), 2**15 - 1),
    SchemaType.INT32: (-(2**31), 2**31 - 1),
    SchemaType.INT64: (-(2**63), 2**63 - 1),
}


def node_type(value: Any) -> str:
    """Jackson's ``JsonNodeType`` name for a decoded JSON value."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, (int, float, _decimal.Decimal)):
        return "NUMBER"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, list):
        return "ARRAY"
    if isinstance(value, dict):
        return "OBJECT"
    return type(value).__name__.upper()


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def require(schema: Schema | None, what: str) -> Schema:
    if schema is None:
        raise DataError(f"Invalid schema: the {what} schema is missing")
    return schema


# --- JSON → Connect ----------------------------------------------------------------


def make_decoder(schema: Schema, replace_null_with_default: bool = True) -> Decoder:
    """``convertToConnect`` for one schema, as a function of the decoded JSON value."""
    base = _logical_decoder(schema) or _type_decoder(schema, replace_null_with_default)
    default = schema.default
    optional = schema.optional
    use_default = default is not None and replace_null_with_default
    null_message = f"Invalid null value for required {schema.type.name} field"

    def decode(value: Any) -> Any:
        if value is None:
            if use_default:
                return default
            if optional:
                return None
            raise DataError(null_message)
        return base(value)

    return decode


def _type_decoder(schema: Schema, rnwd: bool) -> Decoder:
    t = schema.type
    if t in INT_RANGES:
        low, high = INT_RANGES[t]

        def decode_int(value: Any) -> Any:
            if type(value) is not int:
                if isinstance(value, bool) or not isinstance(value, (float, _decimal.Decimal)):
                    raise DataError(f"Invalid value for {t.name}: expected a number but found {node_type(value)}")
                value = int(value)
            if not low <= value <= high:
                raise DataError(f"Invalid value for {t.name}: {value} is out of range")
            return value

        return decode_int
    if t is SchemaType.FLOAT32 or t is SchemaType.FLOAT64:

        def decode_float(value: Any) -> Any:
            if isinstance(value, bool) or not isinstance(value, (int, float, _decimal.Decimal)):
                raise DataError(f"Invalid value for {t.name}: expected a number but found {node_type(value)}")
            return float(value)

        return decode_float
    if t is SchemaType.BOOLEAN:

        def decode_bool(value: Any) -> Any:
            if value is True or value is False:
                return value
            raise DataError(f"Invalid value for BOOLEAN: expected a boolean but found {node_type(value)}")

        return decode_bool
    if t is SchemaType.STRING:

        def decode_str(value: Any) -> Any:
            if type(value) is str:
                return value
            raise DataError(f"Invalid value for STRING: expected a string but found {node_type(value)}")

        return decode_str
    if t is SchemaType.BYTES:
        return _decode_bytes
    if t is SchemaType.ARRAY:
        element = make_decoder(require(schema.value_schema, "array"), rnwd)

        def decode_array(value: Any) -> Any:
            if type(value) is not list:
                raise DataError(f"Arrays should be encoded as JSON arrays, but found {node_type(value)}")
            return [element(item) for item in value]

        return decode_array
    if t is SchemaType.MAP:
        key_schema = require(schema.key_schema, "map key")
        decode_key = make_decoder(key_schema, rnwd)
        decode_value = make_decoder(require(schema.value_schema, "map value"), rnwd)
        if key_schema.type is SchemaType.STRING:

            def decode_object_map(value: Any) -> Any:
                if type(value) is not dict:
                    raise DataError(
                        f"Maps with string fields should be encoded as JSON objects, but found {node_type(value)}"
                    )
                return {k: decode_value(v) for k, v in value.items()}

            return decode_object_map

        def decode_pair_map(value: Any) -> Any:
            if type(value) is not list:
                raise DataError(
                    f"Maps with non-string fields should be encoded as JSON array of tuples, but found {node_type(value)}"
                )
            result = {}
            for entry in value:
                if type(entry) is not list:
                    raise DataError(f"Found invalid map entry instead of array tuple: {node_type(entry)}")
                if len(entry) != 2:
                    raise DataError(f"Found invalid map entry, expected length 2 but found :{len(entry)}")
                key = decode_key(entry[0])
                try:
                    result[key] = decode_value(entry[1])
                except TypeError:
                    raise DataError(f"Map keys of type {key_schema.type.name} cannot be used in Python dicts") from None
            return result

        return decode_pair_map
    # STRUCT
    field_decoders = [(f.name, make_decoder(f.schema, rnwd)) for f in schema.fields]

    def decode_struct(value: Any) -> Any:
        if type(value) is not dict:
            raise DataError(f"Structs should be encoded as JSON objects, but found {node_type(value)}")
        get = value.get
        return {name: decode(get(name)) for name, decode in field_decoders}

    return decode_struct


def _decode_bytes(value: Any) -> bytes:
    if type(value) is not str:
        raise DataError(f"Invalid bytes field: expected a base64 string but found {node_type(value)}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise DataError("Invalid bytes field") from None


def _logical_decoder(schema: Schema) -> Decoder | None:
    name = schema.name
    if name == logical.DECIMAL:

        def decode_decimal(value: Any) -> Any:
            if isinstance(value, bool):
                pass
            elif isinstance(value, (int, _decimal.Decimal)):
                return _rescaled(schema, _decimal.Decimal(value))
            elif isinstance(value, float):
                return _rescaled(schema, _decimal.Decimal(repr(value)))
            elif isinstance(value, str):
                try:
                    return logical.decimal_to_logical(schema, base64.b64decode(value, validate=True))
                except (binascii.Error, ValueError):
                    raise DataError("Invalid bytes for Decimal field") from None
            raise DataError(
                f"Invalid type for Decimal, underlying representation should be numeric or bytes but was "
                f"{node_type(value)}"
            )

        return decode_decimal
    if name == logical.DATE:
        return _int_logical("Date", "integer", logical.date_to_logical)
    if name == logical.TIME:
        return _int_logical("Time", "integer", logical.time_to_logical)
    if name == logical.TIMESTAMP:
        return _int_logical("Timestamp", "integral", logical.timestamp_to_logical)
    return None


def _rescaled(schema: Schema, value: _decimal.Decimal) -> _decimal.Decimal:
    """A numeric Decimal at the schema's scale when that loses nothing, else as parsed."""
    try:
        return logical.rescale(schema, value)
    except DataError:
        return value


def _int_logical(what: str, kind: str, convert: Callable[[int], Any]) -> Decoder:
    def decode(value: Any) -> Any:
        if type(value) is not int:
            raise DataError(
                f"Invalid type for {what}, underlying representation should be {kind} but was {node_type(value)}"
            )
        return convert(value)

    return decode
