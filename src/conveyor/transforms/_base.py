"""Building blocks shared by the transformations.

* :class:`KeySide` / :class:`ValueSide`: which half of a record a ``$Key`` / ``$Value``
  variant works on (Kafka Connect's ``operatingSchema``/``operatingValue``/``newRecord``).
* ``require_*``: the type checks of ``org.apache.kafka.connect.transforms.util.Requirements``,
  with its messages (``Only Map objects supported in absence of schema for [field
  insertion], found: str``).
* :class:`SchemaCache`: a schema → updated schema cache (Kafka Connect keeps an
  ``LRUCache`` of 16).
* :func:`copy_schema_basics`: ``SchemaUtil.copySchemaBasics`` (name, version, doc,
  parameters; *not* optional or default).

A STRUCT value is a ``dict`` keyed by field name (:mod:`conveyor.api.schema`);
schemaless maps are ``dict`` too, so which rules apply is decided by the schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from conveyor.api.errors import DataError
from conveyor.api.records import SinkRecord
from conveyor.api.schema import Field, Schema, SchemaType
from conveyor.api.transforms import Transformation


def type_name(value: Any) -> str:
    """``null`` or the Python type name, for messages."""
    return "null" if value is None else type(value).__name__


def require_schema(schema: Schema | None, purpose: str) -> Schema:
    if schema is None:
        raise DataError(f"Schema required for [{purpose}]")
    return schema


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    if isinstance(value, (dict, Mapping)):
        return value  # type: ignore[return-value]
    raise DataError(f"Only Map objects supported in absence of schema for [{purpose}], found: {type_name(value)}")


def require_map_or_null(value: Any, purpose: str) -> dict[str, Any] | None:
    return None if value is None else require_map(value, purpose)


def require_struct(value: Any, purpose: str) -> dict[str, Any]:
    if isinstance(value, (dict, Mapping)):
        return value  # type: ignore[return-value]
    raise DataError(f"Only Struct objects supported for [{purpose}], found: {type_name(value)}")


def require_struct_or_null(value: Any, purpose: str) -> dict[str, Any] | None:
    return None if value is None else require_struct(value, purpose)


def require_struct_schema(schema: Schema, purpose: str) -> Schema:
    if schema.type is not SchemaType.STRUCT:
        raise DataError(f"Only Struct objects supported for [{purpose}], found a schema of type {schema.type.name}")
    return schema


def require_sink_record(record: Any, purpose: str) -> SinkRecord:
    if isinstance(record, SinkRecord):
        return record
    raise DataError(f"Only SinkRecord supported for [{purpose}], found: {type_name(record)}")


def struct_get(struct: Mapping[str, Any], field: Field, with_default: bool = True) -> Any:
    """``Struct.get(field)`` (the default for a null when ``with_default``) or
    ``Struct.getWithoutDefault``."""
    value = struct.get(field.name)
    if value is None and with_default:
        return field.schema.default
    return value


def copy_schema_basics(source: Schema, schema_type: SchemaType, fields: tuple[Field, ...] = ()) -> Schema:
    """A new schema of ``schema_type`` with ``source``'s name, version, doc and parameters."""
    return Schema(
        schema_type,
        name=source.name,
        version=source.version,
        doc=source.doc,
        parameters=dict(source.parameters) if source.parameters is not None else None,
        fields=fields,
    )


def build_fields(pairs: list[tuple[str, Schema]]) -> tuple[Field, ...]:
    """Struct fields, refusing a repeated name as ``SchemaBuilder.field`` does."""
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise DataError(f"Cannot create field because of field name duplication {name}")
        seen.add(name)
    return tuple(Field(name, schema) for name, schema in pairs)


class SchemaCache:
    """``schema → derived`` with the last lookup remembered by identity (converters hand
    out the same schema object for every record of a kind) and a small bounded map."""

    __slots__ = ("_last_key", "_last_value", "_map", "_size")

    def __init__(self, size: int = 16) -> None:
        self._last_key: Any = None
        self._last_value: Any = None
        self._map: dict[Any, Any] = {}
        self._size = size

    def get(self, schema: Any, build: Callable[[Any], Any]) -> Any:
        if schema is self._last_key and schema is not None:
            return self._last_value
        try:
            value = self._map.get(schema)
        except TypeError:  # a default value that cannot be hashed
            return build(schema)
        if value is None:
            value = build(schema)
            if len(self._map) >= self._size:
                del self._map[next(iter(self._map))]
            self._map[schema] = value
        self._last_key, self._last_value = schema, value
        return value

    def clear(self) -> None:
        self._last_key = self._last_value = None
        self._map.clear()


class KeySide:
    """Operate on the record key (the ``$Key`` variants)."""

    side: ClassVar[str] = "key"

    @staticmethod
    def operating_schema(record: Any) -> Schema | None:
        return record.key_schema

    @staticmethod
    def operating_value(record: Any) -> Any:
        return record.key

    @staticmethod
    def new_record(record: Any, schema: Schema | None, value: Any) -> Any:
        return record.new_record(key_schema=schema, key=value)


class ValueSide:
    """Operate on the record value (the ``$Value`` variants)."""

    side: ClassVar[str] = "value"

    @staticmethod
    def operating_schema(record: Any) -> Schema | None:
        return record.value_schema

    @staticmethod
    def operating_value(record: Any) -> Any:
        return record.value

    @staticmethod
    def new_record(record: Any, schema: Schema | None, value: Any) -> Any:
        return record.new_record(value_schema=schema, value=value)


class CachesSchemas:
    """A transformation that keeps the schemas it derives in ``_schemas`` (a :class:`SchemaCache`,
    set in ``configure``): ``close`` empties it."""

    def close(self) -> None:
        schemas = getattr(self, "_schemas", None)
        if schemas is not None:
            schemas.clear()


class KeyOrValueTransformation(CachesSchemas, Transformation):  # type: ignore[type-arg]
    """Base of transformations with ``$Key`` and ``$Value`` variants; a concrete class
    mixes in :class:`KeySide` or :class:`ValueSide` first."""

    #: Kafka Connect's class name, reported as the failing class.
    kafka_class_name: ClassVar[str | None] = None

    operating_schema: Callable[[Any], Schema | None]
    operating_value: Callable[[Any], Any]
    new_record: Callable[[Any, Schema | None, Any], Any]


KAFKA_TRANSFORMS_PACKAGE = "org.apache.kafka.connect.transforms"

T = TypeVar("T", bound=KeyOrValueTransformation)


def key_and_value_variants(base: type[T]) -> tuple[type[T], type[T]]:
    """``base``'s ``$Key`` and ``$Value`` variants, as Kafka Connect names them
    (``org.apache.kafka.connect.transforms.<Base>$Key``), also set as ``base.Key`` and
    ``base.Value``; they belong to ``base``'s module, under the names ``<Base>Key`` and
    ``<Base>Value`` that module gives them (so they pickle by reference)."""
    variants = []
    for side, mixin in (("Key", KeySide), ("Value", ValueSide)):
        name = f"{base.__name__}{side}"
        java = f"{KAFKA_TRANSFORMS_PACKAGE}.{base.__name__}${side}"
        variant = type(name, (mixin, base), {"__doc__": f"``{java}``.", "__module__": base.__module__,
                                             "__qualname__": name, "kafka_class_name": java})
        setattr(base, side, variant)
        variants.append(variant)
    return variants[0], variants[1]
