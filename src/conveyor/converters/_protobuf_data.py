"""Connect schemas and values ↔ protobuf descriptors and messages, as Confluent's
``io.confluent.connect.protobuf.ProtobufData`` (its defaults: no wrappers, no ``optional``
for nullables, short message names when reading).

Pure (no Schema Registry): used by the Schema Registry ``ProtobufConverter``
(:mod:`conveyor.schema_registry.protobuf_converter`). Descriptors are built with
``google.protobuf.descriptor_pb2`` and message classes with ``message_factory``.

Connect → protobuf (:func:`to_file_proto`):

* the root must be a ``struct``: a proto3 message named after the Connect schema name's last
  part (``ConnectDefault1`` when unnamed), its package the name's namespace;
* ``int8``/``int16``/``int32`` → ``int32`` (``int8``/``int16`` carry Confluent's
  ``(confluent.field_meta).params`` ``connect.type`` hint), ``int64`` → ``int64``, ``float`` →
  ``float``, ``double`` → ``double``, ``boolean`` → ``bool``, ``string`` → ``string``,
  ``bytes`` → ``bytes``;
* a nested ``struct`` → a message nested in the message where it is first met (a map's
  struct values: in the map's message), named after its schema name's last part
  (``ConnectDefault2``, ... when unnamed; ``Message`` appended when that equals the field name);
  met again it is referenced, and two different structs with one name are a ``DataError``;
* ``array`` → ``repeated`` (arrays of arrays or maps are refused, as Confluent does);
* ``map`` → ``repeated <Field>Entry {key = 1; value = 2}``; a protobuf ``map<k, v>``
  (``map_entry`` option) when the key is an integer, boolean or string;
* a ``string`` with Confluent's ``io.confluent.connect.protobuf.Enum`` parameters → an ``enum``;
* field numbers: the ``io.confluent.connect.protobuf.Tag`` parameter, else 1, 2, ...;
* logical types: Decimal → ``confluent.type.Decimal`` (``scale``/``precision`` params), Date →
  ``google.type.Date``, Time → ``google.type.TimeOfDay``, Timestamp →
  ``google.protobuf.Timestamp``;
* optional fields are plain proto3 fields (Confluent's default ``wrapper.for.nullables=false``,
  ``optional.for.nullables=false``): ``None`` leaves the field unset, so an optional primitive
  reads back as its zero value, an optional message as ``None``.

Protobuf → Connect (:func:`to_connect_schema`), any proto3 or proto2 message: a ``struct``
named by the message's short name; every field is optional and carries its number in the
``io.confluent.connect.protobuf.Tag`` parameter (as Confluent); 32-bit signed integers →
``int32`` (``int8``/``int16`` with the hint), other integers → ``int64``; ``enum`` → optional
``string`` named after the enum, with ``io.confluent.connect.protobuf.Enum`` parameters (value:
the symbol's name); ``repeated`` → optional ``array`` of optional elements; map entries → optional
``map``; nested messages → optional ``struct``; the four logical types above.

As in Kafka Connect, a Connect schema written and read back is therefore not the same schema
(optional fields, ``Tag`` parameters, short names); the values are, but for ``None`` in optional
primitive fields.

Not supported: ``oneof`` (Confluent's ``io.confluent.connect.protobuf.Union`` structs; proto3
``optional`` fields, whose oneofs are synthetic, are read) and recursive messages are a
``DataError``; the ``google.protobuf`` wrapper types read as structs with one ``value`` field,
not as nullable primitives; Confluent's ``enhanced.protobuf.schema.support``,
``scrub.invalid.names``, ``int.for.enums``, ``wrapper.for.nullables``,
``optional.for.nullables``, ``generate.struct.for.nulls`` are not implemented (their defaults
are what this module does).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.type import date_pb2, timeofday_pb2

from conveyor.api.errors import DataError
from conveyor.api.schema import Field, Schema, SchemaType
from conveyor.converters import logical
from conveyor.converters._protobuf_meta import (
    DECIMAL_FILE,
    META_FILE,
    field_meta_params,
    meta_options,
    well_known_files,
)
from conveyor.converters.logical import DATE, DECIMAL, SCALE_FIELD, TIME, TIMESTAMP

NAMESPACE = "io.confluent.connect.protobuf"
DEFAULT_NAME = "ConnectDefault"
ENUM = f"{NAMESPACE}.Enum"
ENUM_PREFIX = f"{ENUM}."
TAG = f"{NAMESPACE}.Tag"
CONNECT_TYPE = "connect.type"
PRECISION_PARAM = "connect.decimal.precision"
DECIMAL_TYPE = "confluent.type.Decimal"
DATE_TYPE = "google.type.Date"
TIME_TYPE = "google.type.TimeOfDay"
TIMESTAMP_TYPE = "google.protobuf.Timestamp"

_F = descriptor_pb2.FieldDescriptorProto
_PRIMITIVE_TO_PROTO = {
    SchemaType.INT8: _F.TYPE_INT32,
    SchemaType.INT16: _F.TYPE_INT32,
    SchemaType.INT32: _F.TYPE_INT32,
    SchemaType.INT64: _F.TYPE_INT64,
    SchemaType.FLOAT32: _F.TYPE_FLOAT,
    SchemaType.FLOAT64: _F.TYPE_DOUBLE,
    SchemaType.BOOLEAN: _F.TYPE_BOOL,
    SchemaType.STRING: _F.TYPE_STRING,
    SchemaType.BYTES: _F.TYPE_BYTES,
}
_MAP_KEY_TYPES = frozenset({SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64,
                            SchemaType.BOOLEAN, SchemaType.STRING})
_LOGICAL_TO_PROTO = {
    DATE: (SchemaType.INT32, DATE_TYPE, date_pb2.DESCRIPTOR.name),
    TIME: (SchemaType.INT32, TIME_TYPE, timeofday_pb2.DESCRIPTOR.name),
    TIMESTAMP: (SchemaType.INT64, TIMESTAMP_TYPE, timestamp_pb2.DESCRIPTOR.name),
    DECIMAL: (SchemaType.BYTES, DECIMAL_TYPE, DECIMAL_FILE),
}
_FD = FieldDescriptor
_PROTO_TO_PRIMITIVE = {
    _FD.TYPE_INT32: SchemaType.INT32, _FD.TYPE_SINT32: SchemaType.INT32, _FD.TYPE_SFIXED32: SchemaType.INT32,
    _FD.TYPE_UINT32: SchemaType.INT64, _FD.TYPE_FIXED32: SchemaType.INT64, _FD.TYPE_INT64: SchemaType.INT64,
    _FD.TYPE_UINT64: SchemaType.INT64, _FD.TYPE_SINT64: SchemaType.INT64, _FD.TYPE_FIXED64: SchemaType.INT64,
    _FD.TYPE_SFIXED64: SchemaType.INT64, _FD.TYPE_FLOAT: SchemaType.FLOAT32, _FD.TYPE_DOUBLE: SchemaType.FLOAT64,
    _FD.TYPE_BOOL: SchemaType.BOOLEAN, _FD.TYPE_STRING: SchemaType.STRING, _FD.TYPE_BYTES: SchemaType.BYTES,
}


_WELL_KNOWN = well_known_files()


def new_pool() -> descriptor_pool.DescriptorPool:
    """A descriptor pool holding the files Confluent's schemas import without references: the
    ``google/protobuf/*.proto`` well-known types, ``google/type/*.proto`` (``date``,
    ``timeofday``, ``money``, ...), ``confluent/type/decimal.proto`` and ``confluent/meta.proto``."""
    pool = descriptor_pool.DescriptorPool()
    for serialized in _WELL_KNOWN:
        pool.AddSerializedFile(serialized)
    return pool


# -- Connect → protobuf -------------------------------------------------------------------------


def _split(full: str) -> tuple[str, str]:
    namespace, _, name = full.rpartition(".")
    return namespace, name


def to_file_proto(schema: Schema) -> tuple[descriptor_pb2.FileDescriptorProto, str]:
    """The proto3 file describing a Connect ``struct`` schema, and its root message's full name.

    The file is named after the message (``shop/Order.proto`` for ``shop.Order``), so the same
    Connect schema always gives the same registered schema.

    Raises:
        DataError: the root is not a ``struct``, an array holds an array or a map, or the schema
            is malformed.
    """
    if schema.type is not SchemaType.STRUCT:
        raise DataError(f"Unsupported root schema of type {schema.type.value}: ProtobufConverter needs a struct")
    namespace, name = _split(schema.name or f"{DEFAULT_NAME}1")
    full = f"{namespace}.{name}" if namespace else name
    fdp = descriptor_pb2.FileDescriptorProto(name=full.replace(".", "/") + ".proto", syntax="proto3")
    if namespace:
        fdp.package = namespace
    builder = _ToProto()
    builder.defined[schema.name or f"{DEFAULT_NAME}1"] = (f".{full}", schema)
    builder.message(fdp.message_type.add(), f".{full}", name, schema)
    fdp.dependency.extend(sorted(builder.dependencies))
    return fdp, full


class _ToProto:
    """Builds messages; every type reference is fully qualified (``.pkg.Outer.Inner``), so a
    struct defined once (nested where first met) can be used from anywhere in the file."""

    def __init__(self) -> None:
        self.dependencies: set[str] = set()
        self.defined: dict[str, tuple[str, Schema]] = {}  # Connect struct name -> (full proto name, schema)
        self.anonymous = 1

    def _unqualified(self, name: str | None) -> str:
        if not name:
            self.anonymous += 1
            return f"{DEFAULT_NAME}{self.anonymous}"
        return _split(name)[1]

    def message(self, msg: descriptor_pb2.DescriptorProto, scope: str, name: str, schema: Schema) -> None:
        msg.name = name
        index = 1
        for f in schema.fields:
            tag_text = (f.schema.parameters or {}).get(TAG)
            if tag_text is not None:
                try:
                    number = int(tag_text)
                except ValueError:
                    raise DataError(f"field {f.name!r}: {TAG} parameter {tag_text!r} is not an integer") from None
            else:
                number, index = index, index + 1
            self.field(msg, msg, scope, f.name, number, f.schema)

    def field(self, msg: descriptor_pb2.DescriptorProto, holder: descriptor_pb2.DescriptorProto, scope: str,
              name: str, number: int, schema: Schema) -> None:
        """Add field ``name`` to ``msg``; the types it needs are nested in ``holder`` (full name
        ``scope``): ``msg`` itself, except for map entries, which may not nest types."""
        fd = msg.field.add(name=name, number=number, label=_F.LABEL_OPTIONAL, json_name=_camel(name, False))
        if schema.type is SchemaType.ARRAY:
            fd.label = _F.LABEL_REPEATED
            if schema.value_schema is None:
                raise DataError("ARRAY schema without an element schema")
            schema = schema.value_schema
            if schema.type in (SchemaType.ARRAY, SchemaType.MAP):
                raise DataError(f"Array cannot be nested: field {name!r} is an array of {schema.type.value}s")
        params: dict[str, str] = {}
        logical_type = _LOGICAL_TO_PROTO.get(schema.name or "")
        if logical_type is not None and logical_type[0] is schema.type:
            fd.type, fd.type_name = _F.TYPE_MESSAGE, f".{logical_type[1]}"
            self.dependencies.add(logical_type[2])
            if schema.name == DECIMAL:
                sp = schema.parameters or {}
                if PRECISION_PARAM in sp:
                    params["precision"] = sp[PRECISION_PARAM]
                if SCALE_FIELD in sp:
                    params["scale"] = sp[SCALE_FIELD]
        elif schema.type is SchemaType.STRUCT:
            known = self.defined.get(schema.name) if schema.name else None
            if known is not None:
                full = known[0]
                if _as_required(known[1]) != _as_required(schema):
                    raise DataError(f"two different struct schemas are both named {schema.name!r}")
            else:
                type_name = self._unqualified(schema.name)
                if type_name == name:
                    type_name += "Message"
                full = f"{scope}.{type_name}"
                self.defined[schema.name or full] = (full, schema)
                self.message(holder.nested_type.add(), full, type_name, schema)
            fd.type, fd.type_name = _F.TYPE_MESSAGE, full
        elif schema.type is SchemaType.MAP:
            if schema.key_schema is None or schema.value_schema is None:
                raise DataError("MAP schema without key and value schemas")
            entry_name = _camel(name, True) + "Entry"
            fd.label, fd.type, fd.type_name = _F.LABEL_REPEATED, _F.TYPE_MESSAGE, f"{scope}.{entry_name}"
            entry = holder.nested_type.add(name=entry_name)
            if schema.key_schema.type in _MAP_KEY_TYPES and schema.key_schema.name is None and \
                    schema.value_schema.type is not SchemaType.ARRAY and schema.value_schema.type is not SchemaType.MAP:
                entry.options.map_entry = True
            self.field(entry, holder, scope, "key", 1, schema.key_schema)
            self.field(entry, holder, scope, "value", 2, schema.value_schema)
        elif schema.type is SchemaType.STRING and ENUM in (schema.parameters or {}):
            enum_name = (schema.parameters or {})[ENUM]
            fd.type, fd.type_name = _F.TYPE_ENUM, f"{scope}.{enum_name}"
            if all(e.name != enum_name for e in holder.enum_type):
                enum = holder.enum_type.add(name=enum_name)
                for key, value in (schema.parameters or {}).items():
                    if key.startswith(ENUM_PREFIX):
                        enum.value.add(name=key[len(ENUM_PREFIX):], number=int(value))
        else:
            fd.type = _PRIMITIVE_TO_PROTO[schema.type]
            if schema.type in (SchemaType.INT8, SchemaType.INT16):
                params[CONNECT_TYPE] = schema.type.value
        if params:
            self.dependencies.add(META_FILE)
            fd.options.MergeFromString(meta_options(params))


def _as_required(schema: Schema) -> Schema:
    return dataclasses.replace(schema, optional=False, default=None, parameters=None)


def _camel(name: str, upper_first: bool) -> str:
    """protoc's camel-casing of a field name (``line_items`` → ``LineItems`` / ``lineItems``)."""
    parts = name.split("_")
    text = parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])
    return text[:1].upper() + text[1:] if upper_first else text


def message_class(pool: descriptor_pool.DescriptorPool, fdp: descriptor_pb2.FileDescriptorProto, full_name: str) -> Any:
    """Add ``fdp`` to ``pool`` and return the message class of ``full_name``.

    Raises:
        DataError: the pool refuses the file (a bad name, a clashing definition...).
    """
    try:
        pool.Add(fdp)
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
    except (TypeError, KeyError, ValueError) as exc:
        raise DataError(f"cannot build the protobuf message {full_name!r}: {exc}") from None


# -- Connect values → messages ------------------------------------------------------------------


def fill_message(msg: Any, schema: Schema, value: Any) -> Any:
    """Set the fields of ``msg`` (a message of the class built for ``schema``) from a Connect
    struct value (``dict``); returns ``msg``.

    Raises:
        DataError: the value does not fit the schema.
    """
    if not isinstance(value, dict):
        raise DataError(f"Invalid type for STRUCT: expected dict but was {type(value).__name__}")
    fields = msg.DESCRIPTOR.fields_by_name
    for f in schema.fields:
        v = value.get(f.name)
        if v is None:
            if not f.schema.optional and f.schema.default is None:
                raise DataError(f"Invalid value: null used for required field: \"{f.name}\", schema type: "
                                f"{f.schema.type.name}")
            v = f.schema.default
            if v is None:
                continue
        fd = fields[f.name]
        try:
            _set(msg, fd, f.schema, v)
        except DataError:
            raise
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise DataError(f"Invalid value for field {f.name!r} ({f.schema.type.value}): {exc}") from None
    return msg


def _set(msg: Any, fd: FieldDescriptor, schema: Schema, value: Any) -> None:
    if schema.type is SchemaType.MAP:
        entry_fields = fd.message_type.fields_by_name
        key_schema, value_schema = schema.key_schema, schema.value_schema
        assert key_schema is not None and value_schema is not None
        container = getattr(msg, fd.name)
        for k, v in value.items():
            if fd.message_type.GetOptions().map_entry:
                pk = _scalar(entry_fields["key"], key_schema, k)
                vfd = entry_fields["value"]
                if vfd.type == _FD.TYPE_MESSAGE:
                    if v is not None:
                        _fill_sub(container[pk], vfd, value_schema, v)
                elif v is not None:
                    container[pk] = _scalar(vfd, value_schema, v)
            else:
                entry = container.add()
                if k is not None:
                    _set(entry, entry_fields["key"], key_schema, k)
                if v is not None:
                    _set(entry, entry_fields["value"], value_schema, v)
        return
    if schema.type is SchemaType.ARRAY:
        element = schema.value_schema
        assert element is not None
        container = getattr(msg, fd.name)
        for item in value:
            if item is None:
                raise DataError(f"protobuf cannot hold a null element in repeated field {fd.name!r}")
            if fd.type == _FD.TYPE_MESSAGE:
                _fill_sub(container.add(), fd, element, item)
            else:
                container.append(_scalar(fd, element, item))
        return
    if fd.type == _FD.TYPE_MESSAGE:
        _fill_sub(getattr(msg, fd.name), fd, schema, value)
        return
    setattr(msg, fd.name, _scalar(fd, schema, value))


def _fill_sub(sub: Any, fd: FieldDescriptor, schema: Schema, value: Any) -> None:
    name = fd.message_type.full_name
    if name == TIMESTAMP_TYPE:
        millis = logical.timestamp_from_logical(value)
        sub.seconds, ms = divmod(millis, 1000)
        sub.nanos = ms * 1_000_000
    elif name == DATE_TYPE:
        day = logical.date_to_logical(logical.date_from_logical(value))
        sub.year, sub.month, sub.day = day.year, day.month, day.day
    elif name == TIME_TYPE:
        t = logical.time_to_logical(logical.time_from_logical(value))
        sub.hours, sub.minutes, sub.seconds, sub.nanos = t.hour, t.minute, t.second, t.microsecond * 1000
    elif name == DECIMAL_TYPE:
        rescaled = logical.rescale(schema, value)
        unscaled = logical.decimal_unscaled(schema, rescaled)
        bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
        sub.value = unscaled.to_bytes(bits // 8 + 1, "big", signed=True)
        sub.precision = 1 if unscaled == 0 else len(rescaled.as_tuple().digits)
        sub.scale = logical.decimal_scale(schema)
    else:
        fill_message(sub, schema, value)
    sub.SetInParent()


def _scalar(fd: FieldDescriptor, schema: Schema, value: Any) -> Any:
    if fd.type == _FD.TYPE_ENUM:
        symbol = fd.enum_type.values_by_name.get(value) if isinstance(value, str) else None
        if symbol is None:
            raise DataError(f"{value!r} is not a symbol of enum {fd.enum_type.name}")
        return symbol.number
    if isinstance(value, bool) and schema.type is not SchemaType.BOOLEAN:
        raise DataError(f"Invalid type for {schema.type.name}: bool")
    return value


# -- protobuf → Connect -------------------------------------------------------------------------


def is_map_entry(desc: Descriptor) -> bool:
    """Confluent's test: a message named ``*Entry`` with exactly the fields ``key`` and ``value``."""
    names = [f.name for f in desc.fields]
    return desc.name.endswith("Entry") and names == ["key", "value"]


def to_connect_schema(pool: descriptor_pool.DescriptorPool, desc: Descriptor, version: int | None = None) -> Schema:
    """The Connect ``struct`` schema of a message descriptor, as Confluent's ``toConnectSchema``.

    Raises:
        DataError: the message has a ``oneof`` or is recursive.
    """
    return _struct(pool, desc, version, ())


def _struct(pool: descriptor_pool.DescriptorPool, desc: Descriptor, version: int | None,
            seen: tuple[str, ...], optional: bool = False) -> Schema:
    if desc.full_name in seen:
        raise DataError(f"recursive protobuf message {desc.full_name} is not supported")
    seen = (*seen, desc.full_name)
    for oneof in desc.oneofs:
        if not all(_synthetic(f) for f in oneof.fields):
            raise DataError(f"protobuf oneof {desc.full_name}.{oneof.name} is not supported yet")
    fields = tuple(Field(fd.name, _field_schema(pool, fd, seen)) for fd in desc.fields)
    return Schema(SchemaType.STRUCT, optional=optional, name=desc.name, version=version, fields=fields)


def _synthetic(fd: FieldDescriptor) -> bool:
    """Whether ``fd``'s oneof is the synthetic one of a proto3 ``optional`` field."""
    oneof = fd.containing_oneof
    return oneof is not None and len(oneof.fields) == 1 and oneof.name == f"_{fd.name}"


def _field_schema(pool: descriptor_pool.DescriptorPool, fd: FieldDescriptor, seen: tuple[str, ...]) -> Schema:
    tag = {TAG: str(fd.number)}
    repeated = fd.is_repeated
    if fd.type == _FD.TYPE_MESSAGE and repeated and is_map_entry(fd.message_type):
        key_fd, value_fd = fd.message_type.fields
        name = fd.message_type.name[: -len("Entry")]
        return Schema(SchemaType.MAP, optional=True, name=name[:1].lower() + name[1:],
                      key_schema=_field_schema(pool, key_fd, seen), value_schema=_field_schema(pool, value_fd, seen),
                      parameters=tag)
    element = _element_schema(pool, fd, seen)
    if repeated:
        return Schema(SchemaType.ARRAY, optional=True, value_schema=element, parameters=tag)
    params = {**(element.parameters or {}), **tag}
    return Schema(element.type, optional=True, name=element.name, version=element.version,
                  fields=element.fields, parameters=params)


def _element_schema(pool: descriptor_pool.DescriptorPool, fd: FieldDescriptor, seen: tuple[str, ...]) -> Schema:
    if fd.type == _FD.TYPE_ENUM:
        enum = fd.enum_type
        params = {ENUM: enum.name, **{ENUM_PREFIX + v.name: str(v.number) for v in enum.values}}
        return Schema(SchemaType.STRING, optional=True, name=enum.name, parameters=params)
    if fd.type == _FD.TYPE_MESSAGE:
        full = fd.message_type.full_name
        if full == DECIMAL_TYPE:
            meta = field_meta_params(pool, fd)
            params = {SCALE_FIELD: meta.get("scale", "0")}
            if "precision" in meta:
                params[PRECISION_PARAM] = meta["precision"]
            return Schema(SchemaType.BYTES, optional=True, name=DECIMAL, version=1, parameters=params)
        if full == DATE_TYPE:
            return logical.date_schema(optional=True)
        if full == TIME_TYPE:
            return logical.time_schema(optional=True)
        if full == TIMESTAMP_TYPE:
            return logical.timestamp_schema(optional=True)
        return _struct(pool, fd.message_type, None, seen, optional=True)
    if fd.type in (_FD.TYPE_INT32, _FD.TYPE_SINT32, _FD.TYPE_SFIXED32):
        hint = field_meta_params(pool, fd).get(CONNECT_TYPE)
        if hint in ("int8", "int16"):
            return Schema(SchemaType(hint), optional=True)
    if fd.type == _FD.TYPE_GROUP:
        raise DataError(f"protobuf group field {fd.full_name} is not supported")
    return Schema(_PROTO_TO_PRIMITIVE[fd.type], optional=True)


def to_connect_value(schema: Schema, msg: Any) -> dict[str, Any]:
    """The Connect struct value (``dict``) of a parsed message whose descriptor gave ``schema``:
    unset message fields are ``None``, unset scalars their zero value (protobuf has no null),
    enums their symbol name, the logical types their Python values."""
    out: dict[str, Any] = {}
    fields = msg.DESCRIPTOR.fields_by_name
    for f in schema.fields:
        fd = fields[f.name]
        out[f.name] = _get(msg, fd, f.schema)
    return out


def _get(msg: Any, fd: FieldDescriptor, schema: Schema) -> Any:
    raw = getattr(msg, fd.name)
    if schema.type is SchemaType.MAP:
        key_fd, value_fd = fd.message_type.fields
        assert schema.key_schema is not None and schema.value_schema is not None
        if fd.message_type.GetOptions().map_entry:
            return {_value(key_fd, schema.key_schema, k): _value(value_fd, schema.value_schema, v)
                    for k, v in raw.items()}
        return {_get(e, key_fd, schema.key_schema): _get(e, value_fd, schema.value_schema) for e in raw}
    if fd.is_repeated:
        assert schema.value_schema is not None
        return [_value(fd, schema.value_schema, item) for item in raw]
    if fd.type == _FD.TYPE_MESSAGE and not msg.HasField(fd.name):
        return None
    return _value(fd, schema, raw)


def _value(fd: FieldDescriptor, schema: Schema, raw: Any) -> Any:
    if fd.type == _FD.TYPE_ENUM:
        symbol = fd.enum_type.values_by_number.get(raw)
        return symbol.name if symbol is not None else str(raw)
    if fd.type != _FD.TYPE_MESSAGE:
        return raw
    if schema.name == TIMESTAMP:
        return logical.timestamp_to_logical(raw.seconds * 1000 + raw.nanos // 1_000_000)
    if schema.name == DATE:
        return _dt.date(raw.year, raw.month, raw.day)
    if schema.name == TIME:
        return _dt.time(raw.hours, raw.minutes, raw.seconds, raw.nanos // 1_000_000 * 1000)
    if schema.name == DECIMAL:
        unscaled = int.from_bytes(raw.value, "big", signed=True)
        return logical.make_decimal(unscaled, raw.scale)
    return to_connect_value(schema, raw)

