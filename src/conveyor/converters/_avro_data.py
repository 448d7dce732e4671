"""Connect schemas ↔ Avro schemas, as Confluent's ``io.confluent.connect.avro.AvroData``.

Pure (no Schema Registry): used by the Schema Registry ``AvroConverter``
(:mod:`conveyor.schema_registry.avro_converter`).

Connect → Avro (``connect.meta.data=true``, Confluent's default):

* ``int8`` / ``int16`` → ``int`` with ``"connect.type": "int8"`` / ``"int16"``; ``int32`` →
  ``int``, ``int64`` → ``long``, ``float`` → ``float``, ``double`` → ``double``, ``boolean``,
  ``string``, ``bytes``;
* ``array`` → ``array``; ``map`` with non-optional ``string`` keys → ``map``, any other map →
  ``array`` of ``record io.confluent.connect.avro.MapEntry {key; value}``;
* ``struct`` → ``record`` named after the Connect schema name, or
  ``io.confluent.connect.avro.ConnectDefault`` (``ConnectDefault2``, ... for further anonymous
  structs in one schema); a struct schema met again is referenced by name;
* optional → ``["null", T]``; an optional field gets ``"default": null``; a required field with
  a primitive Connect default gets that Avro default;
* logical types: Decimal → ``bytes``/``decimal`` (``precision`` from the
  ``connect.decimal.precision`` parameter, else 64), Date → ``int``/``date``, Time →
  ``int``/``time-millis``, Timestamp → ``long``/``timestamp-millis``;
* ``connect.name``, ``connect.version``, ``connect.doc`` and ``connect.parameters`` props carry
  what Avro has no place for; ``doc`` is also Avro's ``doc``.

Avro → Connect reads those props back, and also plain Avro: a record is a ``struct`` named by
its full name (``None`` for ConnectDefault), ``["null", T]`` (either order) is optional ``T``,
``enum`` → ``string``, ``fixed`` → ``bytes``, the logical types above (plus
``timestamp-micros``/``time-micros`` read as ``int64``/``int64`` without a logical name).
Not supported (``DataError``): unions of several non-null types (Confluent's
``io.confluent.connect.avro.Union`` struct), recursive records.

Values: fastavro writes and reads Connect's Python values directly (``dict`` for records,
``Decimal``, ``date``, ``time``, UTC ``datetime``); only maps with non-string keys need
reshaping, done by :func:`value_to_avro` / :func:`value_from_avro`.
"""

from __future__ import annotations

from typing import Any

from conveyor.api.errors import DataError
from conveyor.api.schema import Field, Schema, SchemaType
from conveyor.converters.logical import DATE, DECIMAL, SCALE_FIELD, TIME, TIMESTAMP

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_NAME = "ConnectDefault"
DEFAULT_FULL_NAME = f"{NAMESPACE}.{DEFAULT_NAME}"
MAP_ENTRY_FULL_NAME = f"{NAMESPACE}.MapEntry"
PRECISION_PARAM = "connect.decimal.precision"
DEFAULT_PRECISION = 64
CONNECT_NAME = "connect.name"
CONNECT_VERSION = "connect.version"
CONNECT_DOC = "connect.doc"
CONNECT_PARAMETERS = "connect.parameters"
CONNECT_TYPE = "connect.type"

PRIMITIVE_TO_AVRO: dict[SchemaType, str] = {
    SchemaType.INT8: "int",
    SchemaType.INT16: "int",
    SchemaType.INT32: "int",
    SchemaType.INT64: "long",
    SchemaType.FLOAT32: "float",
    SchemaType.FLOAT64: "double",
    SchemaType.BOOLEAN: "boolean",
    SchemaType.STRING: "string",
    SchemaType.BYTES: "bytes",
}
_AVRO_TO_PRIMITIVE: dict[str, SchemaType] = {
    "int": SchemaType.INT32,
    "long": SchemaType.INT64,
    "float": SchemaType.FLOAT32,
    "double": SchemaType.FLOAT64,
    "boolean": SchemaType.BOOLEAN,
    "string": SchemaType.STRING,
    "bytes": SchemaType.BYTES,
}
_LOGICAL: dict[str, tuple[SchemaType, str]] = {
    DATE: (SchemaType.INT32, "date"),
    TIME: (SchemaType.INT32, "time-millis"),
    TIMESTAMP: (SchemaType.INT64, "timestamp-millis"),
}
_LOGICAL_BACK = {(PRIMITIVE_TO_AVRO[t], logical): (t, name) for name, (t, logical) in _LOGICAL.items()}


# -- Connect → Avro -----------------------------------------------------------------------------


def is_string_keyed(schema: Schema) -> bool:
    ks = schema.key_schema
    return ks is not None and ks.type is SchemaType.STRING and not ks.optional


def to_avro_schema(schema: Schema) -> Any:
    """The Avro schema (JSON-ready: dicts, lists, strings) of a Connect schema.

    Raises:
        DataError: the Connect schema is malformed (an array without element schema...) or
            names two different structs alike.
    """
    return _ToAvro().convert(schema)


class _ToAvro:
    def __init__(self) -> None:
        self.records: dict[str, Schema] = {}  # Avro full name -> the Connect schema defining it
        self.anonymous = 0

    def convert(self, schema: Schema) -> Any:
        avro = self._required(schema)
        return ["null", avro] if schema.optional else avro

    def _required(self, schema: Schema) -> Any:
        t = schema.type
        if schema.name in _LOGICAL and _LOGICAL[schema.name][0] is t:
            avro: dict[str, Any] = {"type": PRIMITIVE_TO_AVRO[t], "logicalType": _LOGICAL[schema.name][1]}
            return self._meta(avro, schema)
        if schema.name == DECIMAL and t is SchemaType.BYTES:
            params = schema.parameters or {}
            try:
                scale = int(params.get(SCALE_FIELD, "0"))
                precision = int(params.get(PRECISION_PARAM, DEFAULT_PRECISION))
            except ValueError:
                raise DataError(f"Invalid Decimal schema parameters {params!r}") from None
            avro = {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
            return self._meta(avro, schema)
        if t.is_primitive:
            avro = {"type": PRIMITIVE_TO_AVRO[t]}
            if t in (SchemaType.INT8, SchemaType.INT16):
                avro[CONNECT_TYPE] = t.value
            return self._meta(avro, schema)
        if t is SchemaType.ARRAY:
            if schema.value_schema is None:
                raise DataError("ARRAY schema without an element schema")
            return self._meta({"type": "array", "items": self.convert(schema.value_schema)}, schema)
        if t is SchemaType.MAP:
            if schema.key_schema is None or schema.value_schema is None:
                raise DataError("MAP schema without key and value schemas")
            if is_string_keyed(schema):
                return self._meta({"type": "map", "values": self.convert(schema.value_schema)}, schema)
            entry = {
                "type": "record",
                "name": "MapEntry",
                "namespace": NAMESPACE,
                "fields": [
                    {"name": "key", "type": self.convert(schema.key_schema)},
                    {"name": "value", "type": self.convert(schema.value_schema)},
                ],
            }
            if MAP_ENTRY_FULL_NAME in self.records:
                raise DataError("maps with non-string keys nested in one schema are not supported yet")
            self.records[MAP_ENTRY_FULL_NAME] = schema
            return self._meta({"type": "array", "items": entry}, schema)
        return self._record(schema)

    def _record(self, schema: Schema) -> Any:
        if schema.name:
            full = schema.name
        else:
            self.anonymous += 1
            full = DEFAULT_FULL_NAME if self.anonymous == 1 else f"{DEFAULT_FULL_NAME}{self.anonymous}"
        known = self.records.get(full)
        if known is not None:
            if _same_struct(known, schema):
                return full  # a reference to the record already defined
            raise DataError(f"two different struct schemas are both named {full!r}")
        self.records[full] = schema
        namespace, _, name = full.rpartition(".")
        fields = []
        for f in schema.fields:
            entry: dict[str, Any] = {"name": f.name, "type": self.convert(f.schema)}
            if f.schema.doc:
                entry["doc"] = f.schema.doc
            if f.schema.optional:
                entry["default"] = f.schema.default
                if f.schema.default is not None:  # a non-null default must match the union's first branch
                    entry["type"] = [entry["type"][1], "null"]
            elif f.schema.default is not None and f.schema.type.is_primitive and f.schema.name is None:
                default = f.schema.default
                entry["default"] = default.decode("latin-1") if isinstance(default, bytes) else default
            fields.append(entry)
        avro: dict[str, Any] = {"type": "record", "name": name, "namespace": namespace, "fields": fields}
        if schema.doc:
            avro["doc"] = schema.doc
        return self._meta(avro, schema)

    @staticmethod
    def _meta(avro: dict[str, Any], schema: Schema) -> Any:
        if schema.doc and avro.get("type") != "record":
            avro[CONNECT_DOC] = schema.doc
        if schema.version is not None:
            avro[CONNECT_VERSION] = schema.version
        if schema.parameters:
            avro[CONNECT_PARAMETERS] = dict(schema.parameters)
        if schema.name:
            avro[CONNECT_NAME] = schema.name
        if len(avro) == 1:
            return avro["type"]  # a plain primitive: "string", not {"type": "string"}
        return avro


def _same_struct(a: Schema, b: Schema) -> bool:
    return a is b or a == b


# -- Avro → Connect -----------------------------------------------------------------------------


def to_connect_schema(avro: Any) -> Schema:
    """The Connect schema of an Avro schema (parsed JSON).

    Raises:
        DataError: an Avro construct Connect has no schema for (see the module doc).
    """
    return _ToConnect().convert(avro, "", optional=False)


class _ToConnect:
    def __init__(self) -> None:
        self.named: dict[str, Schema | None] = {}  # full name -> schema (None while being built)

    def convert(self, avro: Any, namespace: str, optional: bool) -> Schema:
        if isinstance(avro, list):
            branches = [b for b in avro if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
            if len(branches) == 1 and len(avro) == 2:
                return self.convert(branches[0], namespace, optional=True)
            raise DataError(f"Avro unions other than [null, T] are not supported: {avro!r}")
        if isinstance(avro, str):
            if avro in _AVRO_TO_PRIMITIVE:
                return Schema(_AVRO_TO_PRIMITIVE[avro], optional=optional)
            full = avro if "." in avro or not namespace else f"{namespace}.{avro}"
            if full not in self.named and avro in self.named:
                full = avro
            if full not in self.named:
                raise DataError(f"unknown Avro type {avro!r}")
            known = self.named[full]
            if known is None:
                raise DataError(f"recursive Avro record {full!r} is not supported")
            return _with_optional(known, optional)
        if not isinstance(avro, dict):
            raise DataError(f"invalid Avro schema {avro!r}")
        kind = avro.get("type")
        if isinstance(kind, (list, dict)):
            return self.convert(kind, namespace, optional)
        logical = avro.get("logicalType")
        version = avro.get(CONNECT_VERSION)
        params = avro.get(CONNECT_PARAMETERS)
        params = {str(k): str(v) for k, v in params.items()} if isinstance(params, dict) else None
        doc = avro.get(CONNECT_DOC)
        connect_name = avro.get(CONNECT_NAME)
        if logical == "decimal" and kind in ("bytes", "fixed"):
            params = dict(params or {})
            params[SCALE_FIELD] = str(avro.get("scale", 0))
            precision = avro.get("precision")
            if precision is not None and (int(precision) != DEFAULT_PRECISION or PRECISION_PARAM in params):
                params[PRECISION_PARAM] = str(precision)
            if kind == "fixed":
                self._name(avro, namespace)
            return Schema(SchemaType.BYTES, optional, DECIMAL, version or 1, doc, parameters=params)
        if (kind, logical) in _LOGICAL_BACK:
            t, name = _LOGICAL_BACK[(kind, logical)]
            return Schema(t, optional, name, version or 1, doc, parameters=params)
        if kind in _AVRO_TO_PRIMITIVE:
            t = _AVRO_TO_PRIMITIVE[kind]
            if kind == "int" and avro.get(CONNECT_TYPE) in ("int8", "int16"):
                t = SchemaType(avro[CONNECT_TYPE])
            return Schema(t, optional, connect_name, version, doc, parameters=params)
        if kind == "array":
            items = avro.get("items")
            entry = self._map_entry(items, namespace)
            if entry is not None:
                key, value = entry
                return Schema(SchemaType.MAP, optional, connect_name, version, doc, key_schema=key, value_schema=value)
            value = self.convert(items, namespace, optional=False)
            return Schema(SchemaType.ARRAY, optional, connect_name, version, doc, value_schema=value, parameters=params)
        if kind == "map":
            value = self.convert(avro.get("values"), namespace, optional=False)
            key = Schema(SchemaType.STRING)
            return Schema(SchemaType.MAP, optional, connect_name, version, doc, key_schema=key, value_schema=value)
        if kind == "enum":
            full = self._name(avro, namespace)
            doc = avro.get("doc")
            result = Schema(SchemaType.STRING, optional, connect_name or full, version, doc, parameters=params)
            self.named[full] = result
            return result
        if kind == "fixed":
            full = self._name(avro, namespace)
            result = Schema(SchemaType.BYTES, optional, connect_name or full, version, doc, parameters=params)
            self.named[full] = result
            return result
        if kind == "record":
            return self._record(avro, namespace, optional, connect_name, version, params)
        raise DataError(f"unsupported Avro type {kind!r}")

    def _name(self, avro: dict[str, Any], namespace: str) -> str:
        name = str(avro.get("name", ""))
        if "." in name:
            return name
        ns = avro.get("namespace", namespace) or ""
        return f"{ns}.{name}" if ns else name

    def _record(
        self, avro: dict[str, Any], namespace: str, optional: bool, connect_name: Any, version: Any, params: Any
    ) -> Schema:
        full = self._name(avro, namespace)
        own_namespace = full.rpartition(".")[0]
        self.named[full] = None
        fields = []
        for f in avro.get("fields", ()):
            fs = self.convert(f["type"], own_namespace, optional=False)
            doc = f.get("doc")
            default = f.get("default")
            if doc or (default is not None and fs.type.is_primitive and fs.name is None):
                fs = _replace(fs, doc=doc or fs.doc, default=default if fs.type.is_primitive else None)
            fields.append(Field(f["name"], fs))
        name = connect_name or full
        suffix = name[len(DEFAULT_FULL_NAME) :]
        if name.startswith(DEFAULT_FULL_NAME) and (not suffix or suffix.isdigit()):
            name = None
        result = Schema(
            SchemaType.STRUCT, False, name, version, avro.get("doc"), fields=tuple(fields), parameters=params
        )
        self.named[full] = result
        return _with_optional(result, optional)

    def _map_entry(self, items: Any, namespace: str) -> tuple[Schema, Schema] | None:
        if not isinstance(items, dict) or items.get("type") != "record":
            return None
        if self._name(items, namespace) != MAP_ENTRY_FULL_NAME:
            return None
        by_name = {f["name"]: f["type"] for f in items.get("fields", ())}
        if set(by_name) != {"key", "value"}:
            return None
        return self.convert(by_name["key"], NAMESPACE, False), self.convert(by_name["value"], NAMESPACE, False)


def _replace(schema: Schema, **changes: Any) -> Schema:
    values = {name: getattr(schema, name) for name in Schema.__dataclass_fields__}
    values.update(changes)
    if values["default"] is not None and values["type"] is SchemaType.BYTES and isinstance(values["default"], str):
        values["default"] = values["default"].encode("latin-1")
    return Schema(**values)


def _with_optional(schema: Schema, optional: bool) -> Schema:
    return schema if schema.optional == optional else _replace(schema, optional=optional)


# -- values -------------------------------------------------------------------------------------


def needs_value_reshaping(schema: Schema | None) -> bool:
    """Whether values of ``schema`` hold a map with non-string keys (an Avro array of entries)."""
    if schema is None:
        return False
    t = schema.type
    if t is SchemaType.MAP:
        return not is_string_keyed(schema) or needs_value_reshaping(schema.value_schema)
    if t is SchemaType.ARRAY:
        return needs_value_reshaping(schema.value_schema)
    if t is SchemaType.STRUCT:
        return any(needs_value_reshaping(f.schema) for f in schema.fields)
    return False


def value_to_avro(schema: Schema, value: Any) -> Any:
    """A Connect value as the Avro datum of :func:`to_avro_schema` (maps with non-string keys
    become lists of ``{"key", "value"}``)."""
    if value is None:
        return None
    t = schema.type
    if t is SchemaType.STRUCT:
        return {f.name: value_to_avro(f.schema, value.get(f.name)) for f in schema.fields}
    if t is SchemaType.ARRAY:
        return [value_to_avro(schema.value_schema, v) for v in value]  # type: ignore[arg-type]
    if t is SchemaType.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        if is_string_keyed(schema):
            return {k: value_to_avro(vs, v) for k, v in value.items()}  # type: ignore[arg-type]
        return [
            {"key": value_to_avro(ks, k), "value": value_to_avro(vs, v)}  # type: ignore[arg-type]
            for k, v in value.items()
        ]
    return value


def value_from_avro(schema: Schema, datum: Any) -> Any:
    """The inverse of :func:`value_to_avro`."""
    if datum is None:
        return None
    t = schema.type
    if t is SchemaType.STRUCT:
        return {f.name: value_from_avro(f.schema, datum.get(f.name)) for f in schema.fields}
    if t is SchemaType.ARRAY:
        return [value_from_avro(schema.value_schema, v) for v in datum]  # type: ignore[arg-type]
    if t is SchemaType.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        if isinstance(datum, dict):
            return {k: value_from_avro(vs, v) for k, v in datum.items()}  # type: ignore[arg-type]
        return {
            hashable_key(value_from_avro(ks, e["key"])): value_from_avro(vs, e["value"])  # type: ignore[arg-type]
            for e in datum
        }
    return datum


def hashable_key(key: Any) -> Any:
    """A map key as a dict key: structs (dicts) and arrays (lists) become tuples."""
    if isinstance(key, dict):
        return tuple(key.items())
    if isinstance(key, list):
        return tuple(key)
    return key
