"""Connect schemas ↔ JSON Schemas, as Confluent's ``io.confluent.connect.json.JsonSchemaData``.

Pure (no Schema Registry): used by the Schema Registry ``JsonSchemaConverter``
(:mod:`conveyor.schema_registry.json_schema_converter`). Not to be confused with
:mod:`conveyor.converters._json_schema`, ``JsonConverter``'s own schema envelope.

Connect → JSON Schema (draft-07 keywords, no ``$schema``: the converter adds it), as Confluent writes it:

* ``int8`` .. ``int64`` → ``{"type": "integer", "connect.type": "int8"}`` (``int16``,
  ``int32``, ``int64``); ``float`` / ``double`` → ``{"type": "number", "connect.type":
  "float32"}`` / ``"float64"``; ``boolean``; ``string``; ``bytes`` → ``{"type": "string",
  "connect.type": "bytes"}`` (values base64);
* ``array`` → ``{"type": "array", "items": ...}``; a ``map`` with non-optional ``string`` keys →
  ``{"type": "object", "additionalProperties": V, "connect.type": "map"}``, any other map →
  ``{"type": "array", "items": {"type": "object", "properties": {"key": K, "value": V}},
  "connect.type": "map"}`` (values: lists of ``{"key", "value"}`` objects);
* ``struct`` → ``{"type": "object", "properties": {...}}``, each property with its position in
  ``"connect.index"``; no ``required`` list; ``"additionalProperties": false`` only with
  ``object.additional.properties=false``;
* optional → ``{"oneOf": [{"type": "null"}, T]}`` (``connect.index`` on the ``oneOf``);
* name → ``title``, doc → ``description``, version → ``connect.version``, parameters →
  ``connect.parameters``, default → ``default``;
* logical types keep their Connect schema (Decimal: ``bytes``, Date/Time: ``int32``,
  Timestamp: ``int64``) with ``title`` the logical name; Decimal values are base64 of the
  unscaled two's-complement bytes (``decimal.format=BASE64``, Confluent's default) or JSON
  numbers (``NUMERIC``: ``{"type": "number", "connect.type": "bytes"}``); Date values are days
  since the epoch, Time ms since midnight, Timestamp ms since the epoch.

JSON Schema → Connect reads those keywords back, and also plain JSON Schemas from other
producers: an ``object`` with ``properties`` → ``struct`` (``connect.index`` order, else the
document's), ``integer`` → ``int64``, ``number`` → ``float64``, ``string``, ``boolean``,
``array``; ``oneOf``/``anyOf`` of ``null`` and one schema, or ``"type": [T, "null"]`` → optional;
an ``object`` without ``properties`` whose ``additionalProperties`` is a schema → ``map`` with
``string`` keys (Confluent reads it as an empty struct); local ``$ref`` (``#/definitions/...``,
``#/$defs/...``). A property not in ``required`` stays required in Connect unless
``use.optional.for.nonrequired=true`` (Confluent's default too). Not supported (``DataError``):
other unions (Confluent's ``io.confluent.connect.json.OneOf`` struct), ``allOf``, ``enum`` /
``const``, empty schemas (Confluent's Variant), recursive and remote ``$ref``.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
from collections.abc import Mapping
from typing import Any

from conveyor.api.errors import DataError
from conveyor.api.schema import Field, Schema, SchemaType
from conveyor.converters import logical as lg
from conveyor.converters._avro_data import hashable_key

CONNECT_TYPE = "connect.type"
CONNECT_VERSION = "connect.version"
CONNECT_PARAMETERS = "connect.parameters"
CONNECT_INDEX = "connect.index"
NAMESPACE = "io.confluent.connect.json"
KEY_FIELD = "key"
VALUE_FIELD = "value"

_CONNECT_TYPE_NAMES = {
    SchemaType.INT8: "int8",
    SchemaType.INT16: "int16",
    SchemaType.INT32: "int32",
    SchemaType.INT64: "int64",
    SchemaType.FLOAT32: "float32",
    SchemaType.FLOAT64: "float64",
}
_FROM_CONNECT_TYPE = {v: k for k, v in _CONNECT_TYPE_NAMES.items()}
_INTEGERS = frozenset({SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64})
_FLOATS = frozenset({SchemaType.FLOAT32, SchemaType.FLOAT64})
NULL_SCHEMA = {"type": "null"}


def is_string_keyed(schema: Schema) -> bool:
    """Whether a ``MAP`` schema has non-optional ``string`` keys (a JSON object)."""
    ks = schema.key_schema
    return ks is not None and ks.type is SchemaType.STRING and not ks.optional


# -- Connect → JSON Schema ----------------------------------------------------------------------


def to_json_schema(schema: Schema, *, numeric_decimals: bool = False, additional_properties: bool = True) -> dict:
    """The JSON Schema (a JSON-ready ``dict``) of a Connect schema.

    ``numeric_decimals``: Decimal as a JSON number (``decimal.format=NUMERIC``) rather than a
    base64 string; ``additional_properties=False`` closes objects
    (``object.additional.properties=false``).

    Raises:
        DataError: the Connect schema is malformed (an array without element schema...).
    """
    return _ToJson(numeric_decimals, additional_properties).convert(schema, None)


class _ToJson:
    def __init__(self, numeric_decimals: bool, additional_properties: bool) -> None:
        self.numeric_decimals = numeric_decimals
        self.additional_properties = additional_properties

    def convert(self, schema: Schema, index: int | None) -> dict:
        out = self._required(schema)
        if schema.optional:
            out = {"oneOf": [dict(NULL_SCHEMA), out]}
        if index is not None:
            out[CONNECT_INDEX] = index
        return out

    def _required(self, schema: Schema) -> dict:
        t = schema.type
        out: dict[str, Any]
        if t in _INTEGERS:
            out = {"type": "integer", CONNECT_TYPE: _CONNECT_TYPE_NAMES[t]}
        elif t in _FLOATS:
            out = {"type": "number", CONNECT_TYPE: _CONNECT_TYPE_NAMES[t]}
        elif t is SchemaType.BOOLEAN:
            out = {"type": "boolean"}
        elif t is SchemaType.STRING:
            out = {"type": "string"}
        elif t is SchemaType.BYTES:
            numeric = self.numeric_decimals and schema.name == lg.DECIMAL
            out = {"type": "number" if numeric else "string", CONNECT_TYPE: "bytes"}
        elif t is SchemaType.ARRAY:
            if schema.value_schema is None:
                raise DataError("ARRAY schema without an element schema")
            out = {"type": "array", "items": self.convert(schema.value_schema, None)}
        elif t is SchemaType.MAP:
            if schema.key_schema is None or schema.value_schema is None:
                raise DataError("MAP schema without key and value schemas")
            if is_string_keyed(schema):
                out = {"type": "object", "additionalProperties": self.convert(schema.value_schema, None)}
            else:
                entry = {
                    "type": "object",
                    "properties": {
                        KEY_FIELD: self.convert(schema.key_schema, 0),
                        VALUE_FIELD: self.convert(schema.value_schema, 1),
                    },
                }
                out = {"type": "array", "items": entry}
            out[CONNECT_TYPE] = "map"
        else:
            props = {f.name: self.convert(f.schema, i) for i, f in enumerate(schema.fields)}
            out = {"type": "object", "properties": props}
            if not self.additional_properties:
                out["additionalProperties"] = False
        if schema.name:
            out["title"] = schema.name
        if schema.version is not None:
            out[CONNECT_VERSION] = schema.version
        if schema.doc:
            out["description"] = schema.doc
        params = {k: v for k, v in (schema.parameters or {}).items() if not k.startswith(NAMESPACE)}
        if params:
            out[CONNECT_PARAMETERS] = params
        if schema.default is not None:
            out["default"] = value_to_json(schema, schema.default, self.numeric_decimals)
        return out


def value_to_json(schema: Schema, value: Any, numeric_decimals: bool = False) -> Any:
    """A Connect value as the JSON-ready value of :func:`to_json_schema` (``dict``, ``list``,
    ``str``, ``int``, ``float``, ``bool``, ``None``; ``decimal.Decimal`` for Decimal values when
    ``numeric_decimals``). ``None`` becomes the schema's default when it has one; a struct field
    whose value is ``None`` is left out when the field is required (as Confluent does).

    Raises:
        DataError: a value of the wrong Python type for its schema.
    """
    if value is None:
        if schema.default is None:
            return None
        value = schema.default
    name = schema.name
    t = schema.type
    if name == lg.DECIMAL and t is SchemaType.BYTES:
        if numeric_decimals:
            return lg.rescale(schema, value)
        return base64.b64encode(lg.decimal_from_logical(schema, value)).decode("ascii")
    if name == lg.DATE and t is SchemaType.INT32:
        return lg.date_from_logical(value)
    if name == lg.TIME and t is SchemaType.INT32:
        return lg.time_from_logical(value)
    if name == lg.TIMESTAMP and t is SchemaType.INT64:
        return lg.timestamp_from_logical(value)
    if t is SchemaType.BYTES:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return base64.b64encode(bytes(value)).decode("ascii")
        raise DataError(f"Invalid type for bytes type: {type(value).__name__}")
    if t is SchemaType.STRUCT:
        if not isinstance(value, Mapping):
            raise DataError(f"Invalid type for STRUCT: {type(value).__name__}")
        out = {}
        for f in schema.fields:
            v = value_to_json(f.schema, value.get(f.name), numeric_decimals)
            if v is not None or f.schema.optional:
                out[f.name] = v
        return out
    if t is SchemaType.ARRAY:
        if not isinstance(value, (list, tuple)):
            raise DataError(f"Invalid type for ARRAY: {type(value).__name__}")
        vs = schema.value_schema
        return [value_to_json(vs, v, numeric_decimals) for v in value]  # type: ignore[arg-type]
    if t is SchemaType.MAP:
        if not isinstance(value, Mapping):
            raise DataError(f"Invalid type for MAP: {type(value).__name__}")
        ks, vs = schema.key_schema, schema.value_schema
        if is_string_keyed(schema):
            return {str(k): value_to_json(vs, v, numeric_decimals) for k, v in value.items()}  # type: ignore[arg-type]
        return [
            {
                KEY_FIELD: value_to_json(ks, k, numeric_decimals),  # type: ignore[arg-type]
                VALUE_FIELD: value_to_json(vs, v, numeric_decimals),  # type: ignore[arg-type]
            }
            for k, v in value.items()
        ]
    return value


def dumps(value: Any) -> str:
    """Compact JSON text of a JSON-ready value; ``decimal.Decimal`` becomes a JSON number with all
    its digits (``json`` and ``orjson`` cannot write one)."""
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise DataError(f"Invalid value for Decimal: {value}")
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


# -- JSON Schema → Connect ----------------------------------------------------------------------


def to_connect_schema(json_schema: Any, *, optional_for_nonrequired: bool = False) -> Schema:
    """The Connect schema of a JSON Schema (parsed JSON).

    ``optional_for_nonrequired``: properties not listed in ``required`` become optional
    (``use.optional.for.nonrequired=true``).

    Raises:
        DataError: a JSON Schema construct Connect has no schema for (see the module doc).
    """
    return _ToConnect(json_schema, optional_for_nonrequired).convert(json_schema, False)


class _ToConnect:
    def __init__(self, root: Any, optional_for_nonrequired: bool) -> None:
        self.root = root
        self.optional_for_nonrequired = optional_for_nonrequired
        self.resolving: list[str] = []

    def convert(self, js: Any, optional: bool) -> Schema:
        if not isinstance(js, dict):
            raise DataError(f"unsupported JSON Schema {js!r} (boolean or empty schemas have no Connect schema)")
        if "$ref" in js:
            return self._ref(js, optional)
        for combiner in ("oneOf", "anyOf"):
            if combiner in js:
                branches = js[combiner]
                rest = [b for b in branches if not _is_null(b)]
                if len(branches) == 2 and len(rest) == 1:
                    return self.convert(rest[0], True)
                if len(branches) == 1:  # flatten.singleton.unions (Confluent's default)
                    return self.convert(branches[0], optional)
                raise DataError(f"JSON Schema {combiner} other than [null, T] is not supported yet")
        if "allOf" in js:
            raise DataError("JSON Schema allOf is not supported yet")
        if "enum" in js or "const" in js:
            raise DataError("JSON Schema enum and const are not supported yet")
        kind = js.get("type")
        if isinstance(kind, list):
            rest = [k for k in kind if k != "null"]
            if len(rest) != 1:
                raise DataError(f"JSON Schema type {kind!r} is not supported (one type, optionally with null)")
            optional = optional or len(rest) < len(kind)
            kind = rest[0]
        if kind is None and ("properties" in js or "additionalProperties" in js):
            kind = "object"
        if kind is None and "items" in js:
            kind = "array"
        connect_type = js.get(CONNECT_TYPE)
        t: SchemaType
        fields: tuple[Field, ...] = ()
        key = value = None
        if kind == "integer" or (kind == "number" and connect_type in ("int8", "int16", "int32", "int64")):
            t = _FROM_CONNECT_TYPE.get(connect_type, SchemaType.INT64)
        elif kind == "number":
            t = _FROM_CONNECT_TYPE.get(connect_type, SchemaType.FLOAT64)
            if connect_type == "bytes":  # a decimal.format=NUMERIC Decimal
                t = SchemaType.BYTES
        elif kind == "string":
            t = SchemaType.BYTES if connect_type == "bytes" else SchemaType.STRING
        elif kind == "boolean":
            t = SchemaType.BOOLEAN
        elif kind == "array":
            items = js.get("items")
            if not isinstance(items, dict):
                raise DataError("Array schema did not specify the items type")
            if connect_type == "map" and isinstance(items.get("properties"), dict):
                t = SchemaType.MAP
                props = items["properties"]
                if KEY_FIELD not in props or VALUE_FIELD not in props:
                    raise DataError("map entry schema without key and value properties")
                key = self.convert(props[KEY_FIELD], False)
                value = self.convert(props[VALUE_FIELD], False)
            else:
                t = SchemaType.ARRAY
                value = self.convert(items, False)
        elif kind == "object":
            extra = js.get("additionalProperties")
            if connect_type == "map" or (not js.get("properties") and isinstance(extra, dict)):
                t = SchemaType.MAP
                key = Schema(SchemaType.STRING)
                value = self.convert(extra if isinstance(extra, dict) else {}, False)
            else:
                t = SchemaType.STRUCT
                fields = self._fields(js)
        else:
            raise DataError(f"unsupported JSON Schema type {kind!r}")
        params = js.get(CONNECT_PARAMETERS)
        params = {str(k): str(v) for k, v in params.items()} if isinstance(params, dict) and params else None
        version = js.get(CONNECT_VERSION)
        name = js.get("title")
        schema = Schema(
            t,
            optional,
            str(name) if name is not None else None,
            int(version) if isinstance(version, int) else None,
            js.get("description"),
            fields=fields,
            key_schema=key,
            value_schema=value,
            parameters=params,
        )
        if "default" in js and js["default"] is not None:
            schema = _with(schema, default=value_from_json(schema, js["default"]))
        return schema

    def _fields(self, js: dict) -> tuple[Field, ...]:
        props = js.get("properties") or {}
        required = set(js.get("required") or ())
        ordered = []
        for position, (name, sub) in enumerate(props.items()):
            index = sub.get(CONNECT_INDEX) if isinstance(sub, dict) else None
            ordered.append((index if isinstance(index, int) else position, position, name, sub))
        ordered.sort(key=lambda e: (e[0], e[1]))
        result = []
        for _, _, name, sub in ordered:
            fs = self.convert(sub, False)
            if self.optional_for_nonrequired and name not in required and not fs.optional:
                fs = _with(fs, optional=True)
            result.append(Field(name, fs))
        return tuple(result)

    def _ref(self, js: dict, optional: bool) -> Schema:
        ref = js["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise DataError(f"JSON Schema $ref {ref!r} is not supported (only local references)")
        if ref in self.resolving:
            raise DataError(f"recursive JSON Schema $ref {ref!r} is not supported")
        target: Any = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise DataError(f"JSON Schema $ref {ref!r} does not resolve")
            target = target[part]
        self.resolving.append(ref)
        try:
            return self.convert(target, optional)
        finally:
            self.resolving.pop()


def _is_null(js: Any) -> bool:
    return isinstance(js, dict) and js.get("type") == "null" and len(js) == 1


def _with(schema: Schema, **changes: Any) -> Schema:
    fields = {name: getattr(schema, name) for name in Schema.__dataclass_fields__}
    fields.update(changes)
    return Schema(**fields)


# -- JSON → Connect values ----------------------------------------------------------------------


def value_from_json(schema: Schema, value: Any) -> Any:
    """The Connect value (see :mod:`conveyor.converters.logical`) of a decoded JSON value of
    ``schema``; a missing or ``null`` value is the schema's default, or ``None``.

    Raises:
        DataError: a JSON value that does not fit the schema (bad base64, a string for an
            integer...).
    """
    if value is None:
        return schema.default
    t = schema.type
    name = schema.name
    if name == lg.DECIMAL and t is SchemaType.BYTES:
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            return decimal.Decimal(str(value)) if isinstance(value, float) else decimal.Decimal(value)
        return lg.decimal_to_logical(schema, _b64(value, "Decimal"))
    if name in (lg.DATE, lg.TIME, lg.TIMESTAMP) and t in (SchemaType.INT32, SchemaType.INT64):
        if not isinstance(value, int) or isinstance(value, bool):
            raise DataError(f"Invalid type for {name.rpartition('.')[2]}, underlying representation should be integer")
        if name == lg.DATE:
            return lg.date_to_logical(value)
        return lg.time_to_logical(value) if name == lg.TIME else lg.timestamp_to_logical(value)
    if t in _INTEGERS:
        if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
            raise DataError(f"Invalid JSON value {value!r} for {t.value}")
        return int(value)
    if t in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
            raise DataError(f"Invalid JSON value {value!r} for {t.value}")
        return float(value)
    if t is SchemaType.BYTES:
        return _b64(value, "bytes")
    if t is SchemaType.STRUCT:
        if not isinstance(value, dict):
            raise DataError(f"Structs should be encoded as JSON objects, but found {type(value).__name__}")
        return {f.name: value_from_json(f.schema, value.get(f.name)) for f in schema.fields}
    if t is SchemaType.ARRAY:
        if not isinstance(value, list):
            raise DataError(f"Arrays should be encoded as JSON arrays, but found {type(value).__name__}")
        return [value_from_json(schema.value_schema, v) for v in value]  # type: ignore[arg-type]
    if t is SchemaType.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        if is_string_keyed(schema):
            if not isinstance(value, dict):
                raise DataError("Maps with string fields should be encoded as JSON objects")
            return {k: value_from_json(vs, v) for k, v in value.items()}  # type: ignore[arg-type]
        if not isinstance(value, list):
            raise DataError("Maps with non-string fields should be encoded as JSON array of objects")
        out = {}
        for entry in value:
            if not isinstance(entry, dict) or len(entry) != 2:
                raise DataError(f"Found invalid map entry {entry!r}")
            k = value_from_json(ks, entry.get(KEY_FIELD))  # type: ignore[arg-type]
            out[hashable_key(k)] = value_from_json(vs, entry.get(VALUE_FIELD))  # type: ignore[arg-type]
        return out
    return value


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise DataError(f"Invalid JSON value for {what}: expected a base64 string, found {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise DataError(f"Invalid base64 for {what} field") from None
