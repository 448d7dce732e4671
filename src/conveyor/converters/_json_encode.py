"""Connect values → JSON-ready Python values: ``JsonConverter.convertToJson``.

Bytes become base64 strings; maps with string keys JSON objects, other maps arrays of
``[key, value]`` pairs; Decimal base64 of the unscaled bytes (``decimal.format=BASE64``)
or a plain JSON number (``NUMERIC``); Date/Time/Timestamp integers; non-finite doubles
the strings ``"NaN"``/``"Infinity"``/``"-Infinity"`` (Jackson's default); FLOAT32 values
the shortest text of the 32-bit float (Java's ``Float.toString``).
"""

from __future__ import annotations

import base64
import dataclasses
import math
import re
import struct
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.api.errors import DataError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters import logical
from conveyor.converters._json_decode import INT_RANGES as _INT_RANGES
from conveyor.converters._json_decode import require as _require
from conveyor.converters._json_decode import type_name

Encoder = Callable[[Any], Any]

#: Marks a Decimal written as a plain JSON number (``decimal.format=NUMERIC``) until the
#: serialised text replaces the quoted marker by the number itself.
RAW_NUMBER_PREFIX = "\x00conveyor-number:"
RAW_NUMBER_QUOTED = re.compile(rb'"\\u0000conveyor-number:([-+.0-9Ee]+)\\u0000"')


# --- Connect → JSON ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EncodeOptions:
    """``decimal.format`` (``BASE64`` or ``NUMERIC``) and ``replace.null.with.default``."""

    decimal_numeric: bool = False
    replace_null_with_default: bool = True


def make_encoder(schema: Schema, options: EncodeOptions) -> Encoder:
    """``convertToJson`` for one schema: a Connect value → a JSON-ready Python value."""
    base = _logical_encoder(schema, options) or _type_encoder(schema, options)
    optional = schema.optional
    default = schema.default
    use_default = default is not None and options.replace_null_with_default

    def encode(value: Any) -> Any:
        if value is None:
            if use_default:
                return encode(default)
            if optional:
                return None
            raise DataError("Conversion error: null value for field that is required and has no default value")
        return base(value)

    return encode


def _invalid(schema_type: SchemaType, value: Any) -> DataError:
    return DataError(f"Invalid type for {schema_type.name}: {type_name(value)}")


def _type_encoder(schema: Schema, options: EncodeOptions) -> Encoder:
    t = schema.type
    if t in _INT_RANGES:
        low, high = _INT_RANGES[t]

        def encode_int(value: Any) -> Any:
            if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
                raise _invalid(t, value)
            if not low <= value <= high:
                raise DataError(f"Invalid value for {t.name}: {value} is out of range")
            return int(value)

        return encode_int
    if t is SchemaType.FLOAT32:

        def encode_float32(value: Any) -> Any:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _invalid(t, value)
            return _json_float(float32_shortest(float(value)))

        return encode_float32
    if t is SchemaType.FLOAT64:

        def encode_float64(value: Any) -> Any:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _invalid(t, value)
            return _json_float(float(value))

        return encode_float64
    if t is SchemaType.BOOLEAN:

        def encode_bool(value: Any) -> Any:
            if value is True or value is False:
                return value
            raise _invalid(t, value)

        return encode_bool
    if t is SchemaType.STRING:

        def encode_str(value: Any) -> Any:
            if isinstance(value, str):
                return value
            raise _invalid(t, value)

        return encode_str
    if t is SchemaType.BYTES:

        def encode_bytes(value: Any) -> Any:
            if isinstance(value, (bytes, bytearray, memoryview)):
                return base64.b64encode(value).decode("ascii")
            raise DataError(f"Invalid type for bytes type: {type_name(value)}")

        return encode_bytes
    if t is SchemaType.ARRAY:
        element = make_encoder(_require(schema.value_schema, "array"), options)

        def encode_array(value: Any) -> Any:
            if not isinstance(value, (list, tuple)):
                raise _invalid(t, value)
            return [element(item) for item in value]

        return encode_array
    if t is SchemaType.MAP:
        key_schema = _require(schema.key_schema, "map key")
        encode_key = make_encoder(key_schema, options)
        encode_value = make_encoder(_require(schema.value_schema, "map value"), options)
        if key_schema.type is SchemaType.STRING:

            def encode_object_map(value: Any) -> Any:
                if not isinstance(value, Mapping):
                    raise _invalid(t, value)
                return {_as_text(encode_key(k)): encode_value(v) for k, v in value.items()}

            return encode_object_map

        def encode_pair_map(value: Any) -> Any:
            if not isinstance(value, Mapping):
                raise _invalid(t, value)
            return [[encode_key(k), encode_value(v)] for k, v in value.items()]

        return encode_pair_map
    field_encoders = [(f.name, make_encoder(f.schema, options)) for f in schema.fields]

    def encode_struct(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _invalid(t, value)
        get = value.get
        return {name: encode(get(name)) for name, encode in field_encoders}

    return encode_struct


def _as_text(key: Any) -> str:
    """Jackson's ``JsonNode.asText()`` of an encoded map key."""
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _logical_encoder(schema: Schema, options: EncodeOptions) -> Encoder | None:
    name = schema.name
    if name == logical.DECIMAL:
        if options.decimal_numeric:

            def encode_numeric(value: Any) -> Any:
                rescaled = logical.rescale(schema, value)
                return RAW_NUMBER_PREFIX + format(rescaled, "f") + "\x00"

            return encode_numeric

        def encode_base64(value: Any) -> Any:
            return base64.b64encode(logical.decimal_from_logical(schema, value)).decode("ascii")

        return encode_base64
    if name == logical.DATE:
        return logical.date_from_logical
    if name == logical.TIME:
        return logical.time_from_logical
    if name == logical.TIMESTAMP:
        return logical.timestamp_from_logical
    return None


def encode_schemaless(value: Any) -> Any:
    """``convertToJson(null, value)``: the type comes from the Python value."""
    if value is None or value is True or value is False:
        return value
    cls = type(value)
    if cls is str or cls is int:
        return value
    if cls is float:
        return _json_float(value)
    if cls is dict or isinstance(value, Mapping):
        if all(type(k) is str for k in value):
            return {k: encode_schemaless(v) for k, v in value.items()}
        return [[encode_schemaless(k), encode_schemaless(v)] for k, v in value.items()]
    if cls is list or cls is tuple:
        return [encode_schemaless(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _json_float(float(value))
    raise DataError(f"Python type {cls.__module__}.{cls.__qualname__} does not have corresponding schema type.")


def _json_float(value: float) -> Any:
    """Jackson writes non-finite doubles as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


_F32 = struct.Struct("<f")


def float32_shortest(value: float) -> float:
    """``value`` rounded to a 32-bit float and printed as Java's ``Float.toString`` would
    (the shortest decimal that reads back as that float), as a Python float."""
    if not math.isfinite(value):
        return value
    try:
        packed = _F32.pack(value)
    except OverflowError:
        raise DataError(f"Invalid value for FLOAT32: {value} is out of range") from None
    single = _F32.unpack(packed)[0]
    for digits in range(1, 10):
        candidate = float(f"{single:.{digits}g}")
        if _F32.pack(candidate) == packed:
            return candidate
    return single
