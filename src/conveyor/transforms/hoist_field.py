"""``HoistField``: wrap the key/value in a single-field struct or map.

Kafka Connect: ``org.apache.kafka.connect.transforms.HoistField$Key`` /
``org.apache.kafka.connect.transforms.HoistField$Value`` (aliases ``HoistField$Key`` /
``HoistField$Value``).

Configuration:

``field`` (string, required)   the name of the single field of the new struct or map.

Schemaless: ``v`` → ``{field: v}``. With a schema ``S``: the schema becomes
``struct{field: S}`` and the value ``{field: v}``. Nulls are wrapped too, as in Kafka
Connect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from conveyor.api.schema import Field, Schema, SchemaType
from conveyor.converters._config import get_string
from conveyor.transforms._base import KeyOrValueTransformation, SchemaCache, key_and_value_variants
from conveyor.transforms._batches import TypedBatchForm, struct_of, with_column


class HoistField(TypedBatchForm, KeyOrValueTransformation):
    """Wrap data in one field; use :class:`HoistFieldKey` or :class:`HoistFieldValue`.
    Batch form: typed columns, the column as the one child of a struct (:mod:`._batches`)."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.field = get_string(config, "field")
        self._schemas = SchemaCache()

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            return self.new_record(record, None, {self.field: value})
        updated_schema = self._schemas.get(schema, self._wrap)
        return self.new_record(record, updated_schema, {self.field: value})

    def _columnar(self, rows: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
        updated_schema = self._schemas.get(schema, self._wrap)
        return with_column(rows, self.side, updated_schema, struct_of(updated_schema, [rows.column(self.side)], None))

    def _wrap(self, schema: Schema) -> Schema:
        return Schema(SchemaType.STRUCT, fields=(Field(self.field, schema),))


HoistFieldKey, HoistFieldValue = key_and_value_variants(HoistField)
