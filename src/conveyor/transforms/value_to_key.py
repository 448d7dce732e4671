"""``ValueToKey``: replace the key with a struct/map of fields copied from the value.

Kafka Connect: ``org.apache.kafka.connect.transforms.ValueToKey`` (alias ``ValueToKey``).

Configuration:

``fields`` (list, required, non-empty)   value fields to copy into the new key.
``replace.null.with.default`` (boolean, default true)
                                         a null field with a schema default is copied as the default.

Schemaless values must be maps; the key becomes ``{field: value.get(field)}`` with no
schema. With a schema, the value must be a struct, the key schema is a struct of the
named fields' schemas, and a missing field fails with ``Field does not exist: <name>``.
As in Kafka Connect, a null (tombstone) value fails (``found: null``): pair it with the
``RecordIsTombstone`` predicate and ``negate=true`` to let tombstones through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.batches import KEY, VALUE
from conveyor.api.errors import ConfigError, DataError
from conveyor.api.schema import Schema, SchemaType
from conveyor.api.transforms import Transformation
from conveyor.converters._config import get_bool, get_list
from conveyor.transforms._base import (
    CachesSchemas,
    SchemaCache,
    build_fields,
    require_map,
    require_struct,
    require_struct_schema,
)
from conveyor.transforms._batches import no_defaults, no_nulls, struct_of, typed_batch_form, typed_only, with_column

PURPOSE = "copying fields from value to key"


class ValueToKey(CachesSchemas, Transformation):  # type: ignore[type-arg]
    """``org.apache.kafka.connect.transforms.ValueToKey``. Batch form: typed values, the key
    a struct of the value's children (:mod:`._batches`)."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.ValueToKey"

    def configure(self, config: Mapping[str, Any]) -> None:
        self.fields = get_list(config, "fields")
        if not self.fields:
            raise ConfigError({"fields": "Invalid value [] for configuration fields: Empty list"})
        self.replace_null_with_default = get_bool(config, "replace.null.with.default", True)
        self._schemas = SchemaCache()

    def apply(self, record: Any) -> Any:
        schema = record.value_schema
        if schema is None:
            value = require_map(record.value, PURPOSE)
            key = {name: value.get(name) for name in self.fields}
            return record.new_record(key_schema=None, key=key)
        struct = require_struct(record.value, PURPOSE)
        key_schema = self._schemas.get(schema, self._key_schema)
        with_default = self.replace_null_with_default
        key = {}
        for field in key_schema.fields:
            v = struct.get(field.name)
            key[field.name] = field.schema.default if v is None and with_default else v
        return record.new_record(key_schema=key_schema, key=key)

    def batch_types(self, key_type: pa.DataType | None,
                    value_type: pa.DataType | None) -> tuple[pa.DataType | None, pa.DataType | None]:
        """Typed values only; the keys become typed."""
        typed_only(VALUE, value_type, self)
        return None, value_type

    def apply_batch(self, batch: pa.RecordBatch, where: pa.BooleanArray | None) -> list[pa.RecordBatch]:
        """The batch form (:func:`~conveyor.transforms._batches.typed_batch_form`)."""
        return typed_batch_form(batch, where, VALUE, self._columnar, self.apply)

    def _columnar(self, rows: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
        column = rows.column(VALUE)
        no_nulls(column)  # a null value fails: the record form says so, row by row
        key_schema = self._schemas.get(schema, self._key_schema)
        no_defaults(key_schema.fields, self.replace_null_with_default)
        children = [pc.struct_field(column, [schema.fields.index(schema.field(f.name))]) for f in key_schema.fields]
        return with_column(rows, KEY, key_schema, struct_of(key_schema, children, None))

    def _key_schema(self, schema: Schema) -> Schema:
        require_struct_schema(schema, PURPOSE)
        pairs = []
        for name in self.fields:
            field = schema.field(name)
            if field is None:
                raise DataError(f"Field does not exist: {name}")
            pairs.append((name, field.schema))
        return Schema(SchemaType.STRUCT, fields=build_fields(pairs))

