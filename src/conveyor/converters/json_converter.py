"""``JsonConverter``: JSON, with or without Kafka Connect's schema envelope.

Kafka Connect: ``org.apache.kafka.connect.json.JsonConverter`` (alias ``json``).

Configuration (prefix ``key.converter.`` / ``value.converter.``), as ``JsonConverterConfig``:

``schemas.enable`` (boolean, default ``true``)
    Read and write ``{"schema": ..., "payload": ...}``. Reading a message that is not
    exactly that envelope raises :class:`~conveyor.api.DataError`.
``schemas.cache.size`` (int, default ``1000``)
    How many parsed and written schemas to keep.
``decimal.format`` (``BASE64`` or ``NUMERIC``, any case; default ``BASE64``)
    How Decimal values are written; both are read.
``replace.null.with.default`` (boolean, default ``true``)
    A null with a schema default becomes the default, when reading and writing.

Reading without a schema gives plain Python data (``dict``, ``list``, ``str``, ``int``,
``float``, ``bool``, ``None``), exactly what ``json.loads`` gives: orjson parses when
it is installed and the stdlib parser takes over for what orjson would read
differently (integers beyond 64 bits, non-UTF-8 encodings, a byte-order mark) or
rejects, so results and error messages do not depend on orjson. ``NaN`` and
``Infinity`` are invalid JSON, as for Jackson. An empty message reads as ``None``
without a schema (Jackson's missing node) and fails the envelope check with one.

With a schema, values follow :mod:`conveyor.api.schema` (a STRUCT is a ``dict`` by
field name) and :mod:`conveyor.converters.logical` (Decimal, Date, Time, Timestamp as
``decimal.Decimal``, ``date``, ``time``, UTC ``datetime``). A Decimal read from a JSON
number keeps every digit.

Writing uses compact JSON (no spaces), UTF-8, as Jackson does. Non-finite doubles are
written as the strings ``"NaN"``/``"Infinity"``, as Jackson does by default.
"""

from __future__ import annotations

import decimal as _decimal
import json as _json
from collections.abc import Mapping, Sequence
from math import isfinite as _isfinite
from typing import Any

from conveyor.api.converters import Converter
from conveyor.api.errors import DataError
from conveyor.api.records import Header
from conveyor.api.schema import NULL, Schema, SchemaAndValue
from conveyor.converters import _json_decode, _json_encode, _json_schema
from conveyor.converters._config import get_bool, get_choice, get_int

try:  # pragma: no cover - both branches are exercised by the tests
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

SCHEMAS_ENABLE_CONFIG = "schemas.enable"
SCHEMAS_CACHE_SIZE_CONFIG = "schemas.cache.size"
DECIMAL_FORMAT_CONFIG = "decimal.format"
REPLACE_NULL_WITH_DEFAULT_CONFIG = "replace.null.with.default"

ENVELOPE_ERROR = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain additional '
    "fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter "
    "configuration."
)
_SERIALIZATION_ERROR = "Converting byte[] to Kafka Connect data failed due to serialization error: "

_INT64_LIMIT = 2.0**63
"""orjson reads an integer literal that fits neither 64-bit type as a float: every float
of this magnitude or more may be such an integer, and the stdlib parse decides."""


_new_tuple = tuple.__new__  # SchemaAndValue without its Python-level __new__: half the cost, once per record


def _reject_constant(name: str) -> Any:
    raise ValueError(f"Non-standard token '{name}': NaN and Infinity are not valid JSON")


def stdlib_loads(data: Any, parse_float: Any = None) -> Any:
    """The stdlib parse, the reference behaviour (UTF-8/16/32 detection, BOM allowed)."""
    if isinstance(data, memoryview):
        data = data.tobytes()
    return _json.loads(data, parse_constant=_reject_constant, parse_float=parse_float)


def loads(data: Any) -> Any:
    """Parse JSON bytes; the result never depends on whether orjson is installed.

    Raises:
        ValueError: invalid JSON (the stdlib parser's message).
    """
    if _orjson is not None:
        try:
            node = _orjson.loads(data if isinstance(data, bytes) else bytes(data))
        except _orjson.JSONDecodeError:
            return stdlib_loads(data)  # let the stdlib decide, with its message
        try:
            if not _may_hold_wide_integer(node):
                return node
        except RecursionError:
            pass
    return stdlib_loads(data)


def _may_hold_wide_integer(node: Any) -> bool:
    """Whether ``node`` (orjson's result) holds a float of magnitude 2**63 or more anywhere,
    which may be an integer literal too wide for 64 bits that the stdlib reads exactly.
    Raises RecursionError for documents nested deeper than Python's recursion limit."""
    kind = type(node)
    if kind is dict:
        values: Any = node.values()
    elif kind is list:
        values = node
    else:
        return kind is float and not -_INT64_LIMIT < node < _INT64_LIMIT
    for value in values:
        kind = type(value)
        if kind is float:
            if not -_INT64_LIMIT < value < _INT64_LIMIT:
                return True
        elif (kind is dict or kind is list) and _may_hold_wide_integer(value):
            return True
    return False


_PLAIN_OPTIONS = 0
if _orjson is not None:
    _PLAIN_OPTIONS = _orjson.OPT_PASSTHROUGH_DATETIME | _orjson.OPT_PASSTHROUGH_SUBCLASS | _orjson.OPT_PASSTHROUGH_DATACLASS


def _plain_json(value: Any) -> bytes | None:
    """Fast path for schemaless values made only of JSON's own types: orjson's bytes, which
    are what the full encoder would produce, or ``None`` to take the full path (bytes, maps
    with non-string keys, datetimes, subclasses, integers beyond 64 bits, and any value
    holding a non-finite float, which orjson would write as ``null``)."""
    if _orjson is None:
        return None
    try:
        out = _orjson.dumps(value, option=_PLAIN_OPTIONS)
    except TypeError:
        return None
    if b"null" in out and _has_non_finite(value):
        return None
    return out


def _has_non_finite(value: Any) -> bool:
    kind = type(value)
    if kind is float:
        return not _isfinite(value)
    if kind is dict:
        value = value.values()
    elif kind is not list and kind is not tuple:
        return False
    for item in value:
        kind = type(item)
        if kind is float:
            if not _isfinite(item):
                return True
        elif (kind is dict or kind is list or kind is tuple) and _has_non_finite(item):
            return True
    return False


def dumps(tree: Any) -> bytes:
    """Compact UTF-8 JSON of an already JSON-ready tree."""
    if _orjson is not None:
        try:
            return _orjson.dumps(tree)
        except TypeError:
            pass  # e.g. integers beyond 64 bits: the stdlib writes them
    try:
        return _json.dumps(tree, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise DataError(f"Converting Kafka Connect data to byte[] failed due to serialization error: {exc}") from exc


class _Cache:
    """A bounded map, oldest entry evicted first."""

    __slots__ = ("data", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def put(self, key: Any, value: Any) -> None:
        if self.size <= 0:
            return
        data = self.data
        if len(data) >= self.size:
            del data[next(iter(data))]
        data[key] = value


class JsonConverter(Converter):
    """Kafka Connect's JSON converter."""

    def __init__(self) -> None:
        self.schemas_enabled = True
        self.decimal_numeric = False
        self.replace_null_with_default = True
        self.is_key = False
        self._options = _json_encode.EncodeOptions()
        self._read_cache = _Cache(1000)
        self._write_cache = _Cache(1000)
        self._write_last: tuple[Any, Any] | None = None

    def configure(self, config: Mapping[str, Any], is_key: bool) -> None:
        self.is_key = is_key
        self.schemas_enabled = get_bool(config, SCHEMAS_ENABLE_CONFIG, True)
        cache_size = get_int(config, SCHEMAS_CACHE_SIZE_CONFIG, 1000, minimum=0)
        self.decimal_numeric = get_choice(config, DECIMAL_FORMAT_CONFIG, ("BASE64", "NUMERIC"), "BASE64") == "NUMERIC"
        self.replace_null_with_default = get_bool(config, REPLACE_NULL_WITH_DEFAULT_CONFIG, True)
        self._options = _json_encode.EncodeOptions(self.decimal_numeric, self.replace_null_with_default)
        self._read_cache = _Cache(cache_size)
        self._write_cache = _Cache(cache_size)
        self._write_last = None

    @property  # type: ignore[override]
    def gives_schemas(self) -> bool:  # the envelope's schema may still be null: the value is then schemaless
        return self.schemas_enabled

    # --- bytes → Connect ------------------------------------------------------------

    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        if data is None:
            return NULL
        try:
            node = loads(data)
        except ValueError as exc:
            if not bytes(data).strip():
                if self.schemas_enabled:
                    raise DataError(ENVELOPE_ERROR) from None
                return NULL
            raise DataError(_SERIALIZATION_ERROR + str(exc)) from exc
        if not self.schemas_enabled:
            return _new_tuple(SchemaAndValue, (None, node))
        if type(node) is not dict or len(node) != 2 or "schema" not in node or "payload" not in node:
            raise DataError(ENVELOPE_ERROR)
        schema_node = node["schema"]
        if schema_node is None:
            return SchemaAndValue(None, node["payload"])
        schema, decode, has_decimal = self._read_schema(schema_node)
        payload = node["payload"]
        if has_decimal:
            # Re-read with exact decimals so that a NUMERIC Decimal keeps every digit.
            payload = stdlib_loads(data, parse_float=_decimal.Decimal)["payload"]
        return SchemaAndValue(schema, decode(payload))

    def _read_schema(self, schema_node: Any) -> tuple[Schema, Any, bool]:
        key = dumps(schema_node)
        cached = self._read_cache.get(key)
        if cached is None:
            schema = _json_schema.schema_from_json(schema_node, self.replace_null_with_default)
            assert schema is not None
            cached = (
                schema,
                _json_decode.make_decoder(schema, self.replace_null_with_default),
                _json_schema.contains_decimal(schema),
            )
            self._read_cache.put(key, cached)
        return cached

    # --- Connect → bytes ------------------------------------------------------------

    def from_connect_data(
        self, topic: str, headers: Sequence[Header], schema: Schema | None, value: Any
    ) -> bytes | None:
        if schema is None:
            if value is None:
                return None
            payload = _plain_json(value)
            if payload is None:
                payload = dumps(_json_encode.encode_schemaless(value))
            return b'{"schema":null,"payload":' + payload + b"}" if self.schemas_enabled else payload
        schema_json, encode = self._writer(schema)
        payload = dumps(encode(value))
        if self.decimal_numeric and b"\\u0000conveyor-number:" in payload:
            payload = _json_encode.RAW_NUMBER_QUOTED.sub(rb"\1", payload)
        if not self.schemas_enabled:
            return payload
        return b'{"schema":' + schema_json + b',"payload":' + payload + b"}"

    def _writer(self, schema: Schema) -> tuple[bytes, Any]:
        last = self._write_last
        if last is not None and last[0] is schema:
            return last[1]
        try:
            writer = self._write_cache.get(schema)
        except TypeError:  # a default value that cannot be hashed
            writer = None
        if writer is None:
            writer = self._build_writer(schema)
            try:
                self._write_cache.put(schema, writer)
            except TypeError:
                pass
        self._write_last = (schema, writer)
        return writer

    def _build_writer(self, schema: Schema) -> tuple[bytes, Any]:
        options = self._options

        def factory(s: Schema) -> Any:
            return _json_encode.make_encoder(s, options)

        schema_json = dumps(_json_schema.schema_to_json(schema, factory))
        if self.decimal_numeric and b"\\u0000conveyor-number:" in schema_json:
            schema_json = _json_encode.RAW_NUMBER_QUOTED.sub(rb"\1", schema_json)
        return schema_json, _json_encode.make_encoder(schema, options)
