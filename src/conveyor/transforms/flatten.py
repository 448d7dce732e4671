"""``Flatten``: flatten nested structs/maps into top-level fields joined by a delimiter.

Kafka Connect: ``org.apache.kafka.connect.transforms.Flatten$Key`` /
``org.apache.kafka.connect.transforms.Flatten$Value`` (aliases ``Flatten$Key`` /
``Flatten$Value``).

Configuration:

``delimiter`` (string, default ``.``)   joins the names of nested fields.
``replace.null.with.default`` (boolean, default true)
                                        a null field with a schema default is copied as the default.

Schemaless: nested maps are flattened (``{"a": {"b": 1}}`` → ``{"a.b": 1}``); arrays
and primitives are kept as they are. With a schema: nested structs are flattened, a
field becomes optional when it or any struct above it is optional, and arrays/maps
are kept. Null keys/values pass through; a null nested struct contributes no values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.errors import DataError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters._config import get_bool, get_string
from conveyor.transforms._base import (
    KeyOrValueTransformation,
    SchemaCache,
    build_fields,
    copy_schema_basics,
    key_and_value_variants,
    require_map,
    require_struct,
    type_name,
)
from conveyor.transforms._batches import TypedBatchForm, no_defaults, no_nulls, struct_of, with_column
from conveyor.transforms.cast import infer_type

PURPOSE = "flattening"


class Flatten(TypedBatchForm, KeyOrValueTransformation):
    """Flatten nested data; use :class:`FlattenKey` or :class:`FlattenValue`. Batch form:
    typed columns, the leaves of nested structs as the children of one (:mod:`._batches`)."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.delimiter = get_string(config, "delimiter", ".")
        self.replace_null_with_default = get_bool(config, "replace.null.with.default", True)
        self._schemas = SchemaCache()

    def _name(self, prefix: str, name: str) -> str:
        return name if not prefix else prefix + self.delimiter + name

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            flat: dict[str, Any] = {}
            self._flatten_map(require_map(value, PURPOSE), "", flat)
            return self.new_record(record, None, flat)
        struct = require_struct(value, PURPOSE)
        updated_schema = self._schemas.get(schema, self._updated_schema)
        flat = {}
        self._flatten_struct(struct, schema, "", flat)
        return self.new_record(record, updated_schema, flat)

    def _columnar(self, rows: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
        column = rows.column(self.side)
        no_nulls(column)
        updated_schema = self._schemas.get(schema, self._updated_schema)
        no_defaults(updated_schema.fields, self.replace_null_with_default)
        leaves: list[pa.Array] = []
        self._leaves(column, schema, leaves)
        return with_column(rows, self.side, updated_schema, struct_of(updated_schema, leaves, None))

    def _leaves(self, column: pa.Array, schema: Schema, out: list[pa.Array]) -> None:
        for i, field in enumerate(schema.fields):
            child = pc.struct_field(column, [i])  # null wherever a struct above it is
            if field.schema.type is SchemaType.STRUCT:
                self._leaves(child, field.schema, out)
            else:
                out.append(child)

    def _flatten_map(self, source: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for key, value in source.items():
            name = self._name(prefix, key)
            if value is None:
                out[name] = None
                continue
            inferred = infer_type(value)
            if inferred is None:
                raise DataError(
                    f"Flatten transformation was passed a value of type {type_name(value)} which is not supported by "
                    "Connect's data API"
                )
            if inferred is SchemaType.MAP:
                self._flatten_map(require_map(value, PURPOSE), name, out)
            else:
                out[name] = value

    def _flatten_struct(
        self, struct: Mapping[str, Any] | None, schema: Schema, prefix: str, out: dict[str, Any]
    ) -> None:
        if struct is None:
            return
        with_default = self.replace_null_with_default
        for field in schema.fields:
            name = self._name(prefix, field.name)
            value = struct.get(field.name)
            if field.schema.type is SchemaType.STRUCT:
                self._flatten_struct(
                    require_struct(value, PURPOSE) if value is not None else None, field.schema, name, out
                )
            else:
                out[name] = field.schema.default if value is None and with_default else value

    def _updated_schema(self, schema: Schema) -> Schema:
        pairs: list[tuple[str, Schema]] = []
        self._flatten_schema(schema, "", False, None, pairs)
        return copy_schema_basics(schema, SchemaType.STRUCT, build_fields(pairs))

    def _flatten_schema(
        self,
        schema: Schema,
        prefix: str,
        optional: bool,
        parent_default: Mapping[str, Any] | None,
        out: list[tuple[str, Schema]],
    ) -> None:
        for field in schema.fields:
            name = self._name(prefix, field.name)
            field_optional = optional or field.schema.optional
            default = field.schema.default
            if default is None and parent_default is not None:
                default = parent_default.get(field.name)
            if field.schema.type is SchemaType.STRUCT:
                self._flatten_schema(field.schema, name, field_optional, default, out)
            else:
                out.append((name, _convert_field_schema(field.schema, field_optional, default)))


def _convert_field_schema(schema: Schema, optional: bool, default: Any) -> Schema:
    """``copySchemaBasics(orig)`` plus optionality and the (parent's) default."""
    basic = copy_schema_basics(schema, schema.type)
    return dataclasses.replace(
        basic,
        optional=optional,
        default=default,
        key_schema=schema.key_schema,
        value_schema=schema.value_schema,
    )


FlattenKey, FlattenValue = key_and_value_variants(Flatten)

__all__ = ["Flatten", "FlattenKey", "FlattenValue"]
