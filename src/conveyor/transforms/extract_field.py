"""``ExtractField``: replace the key/value by one of its fields.

Kafka Connect: ``org.apache.kafka.connect.transforms.ExtractField$Key`` /
``org.apache.kafka.connect.transforms.ExtractField$Value`` (aliases ``ExtractField$Key`` /
``ExtractField$Value``).

Configuration:

``field`` (string, required)              the field to extract (a path with ``V2``).
``field.syntax.version`` (``V1``/``V2``, default ``V1``)
                                          KIP-821 nested paths, see :mod:`._field_path`.
``replace.null.with.default`` (boolean, default true)
                                          a null field with a schema default extracts as the default.

Null keys/values pass through as null. Schemaless data must be a map (a missing field
gives null); with a schema the value must be a struct, the new schema is the field's,
and a field missing from the schema fails with ``Unknown field: <field>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.errors import DataError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters._config import get_bool, get_string
from conveyor.transforms._base import (
    KeyOrValueTransformation,
    key_and_value_variants,
    require_map_or_null,
    require_struct_or_null,
)
from conveyor.transforms._batches import RecordForm, TypedBatchForm, no_defaults, with_column
from conveyor.transforms._field_path import SingleFieldPath, syntax_version

PURPOSE = "field extraction"


class ExtractField(TypedBatchForm, KeyOrValueTransformation):
    """Extract one field; use :class:`ExtractFieldKey` or :class:`ExtractFieldValue`.
    Batch form: typed columns, the field's child column along a path of structs
    (:mod:`._batches`)."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.field = get_string(config, "field")
        self.path = SingleFieldPath(self.field, syntax_version(config), "field")
        self.replace_null_with_default = get_bool(config, "replace.null.with.default", True)

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            source = require_map_or_null(value, PURPOSE)
            return self.new_record(record, None, None if source is None else self.path.value_from_map(source))
        struct = require_struct_or_null(value, PURPOSE)
        field = self.path.field_from(schema)
        if field is None:
            raise DataError(f"Unknown field: {self.field}")
        extracted = (
            None if struct is None else self.path.value_from_struct(struct, schema, self.replace_null_with_default)
        )
        return self.new_record(record, field.schema, extracted)

    def _columnar(self, rows: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
        column, current = rows.column(self.side), schema
        for step in self.path.steps:
            field = current.field(step) if current.type is SchemaType.STRUCT else None
            if field is None:
                raise RecordForm(f"Unknown field: {self.field}")
            no_defaults((field,), self.replace_null_with_default)
            column = pc.struct_field(column, [current.fields.index(field)])
            current = field.schema
        return with_column(rows, self.side, current, column)


ExtractFieldKey, ExtractFieldValue = key_and_value_variants(ExtractField)
