"""``InsertField``: add record metadata or a static value as fields.

Kafka Connect: ``org.apache.kafka.connect.transforms.InsertField$Key`` /
``org.apache.kafka.connect.transforms.InsertField$Value`` (aliases ``InsertField$Key`` /
``InsertField$Value``).

Configuration (each ``*.field`` name may end in ``!`` for a required field in the
updated schema or ``?`` for an optional one, the default):

``topic.field`` (string)       the record's topic, as an (optional) string field.
``partition.field`` (string)   the partition, as an int32 field (skipped when unknown).
``offset.field`` (string)      the Kafka offset, int64; sink records only.
``timestamp.field`` (string)   the record timestamp: a ``Timestamp`` field (a UTC
                               ``datetime``) with a schema, epoch milliseconds without.
``static.field`` (string)      a field holding ``static.value``.
``static.value`` (string)      required with ``static.field``.
``replace.null.with.default`` (boolean, default true)
                               copy a null field that has a schema default as the default.

At least one field must be configured (``No field insertion configured``). A null
(tombstone) key/value passes through unchanged. Schemaless data must be a map
(``Only Map objects supported in absence of schema for [field insertion], found: str``);
with a schema, the value must be a struct and the schema gains the new fields
(name, version, doc and parameters kept, as ``SchemaUtil.copySchemaBasics``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.batches import OFFSET, PARTITION, TIMESTAMP, TOPIC
from conveyor.api.errors import ConfigError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters import logical
from conveyor.converters._config import get_bool, get_string
from conveyor.transforms._base import (
    KeyOrValueTransformation,
    SchemaCache,
    build_fields,
    copy_schema_basics,
    key_and_value_variants,
    require_map,
    require_sink_record,
    require_struct,
    require_struct_schema,
    struct_get,
)
from conveyor.transforms._batches import RecordForm, TypedBatchForm, no_defaults, no_nulls, struct_of, with_column

PURPOSE = "field insertion"

_STRING = Schema(SchemaType.STRING)
_OPTIONAL_STRING = Schema(SchemaType.STRING, optional=True)
_INT32 = Schema(SchemaType.INT32)
_OPTIONAL_INT32 = Schema(SchemaType.INT32, optional=True)
_INT64 = Schema(SchemaType.INT64)
_OPTIONAL_INT64 = Schema(SchemaType.INT64, optional=True)
_TIMESTAMP = logical.timestamp_schema()
_OPTIONAL_TIMESTAMP = logical.timestamp_schema(optional=True)


class InsertionSpec(NamedTuple):
    """A field name and whether the inserted field is optional."""

    name: str
    optional: bool

    @staticmethod
    def parse(spec: str | None) -> InsertionSpec | None:
        if spec is None:
            return None
        if spec.endswith("?"):
            return InsertionSpec(spec[:-1], True)
        if spec.endswith("!"):
            return InsertionSpec(spec[:-1], False)
        return InsertionSpec(spec, True)


class InsertField(TypedBatchForm, KeyOrValueTransformation):
    """Insert fields from record metadata or a static value; use :class:`InsertFieldKey`
    or :class:`InsertFieldValue`. Batch form: typed columns, the struct's children and the
    batch's ``topic``, ``partition``, ``offset`` and ``timestamp`` columns (:mod:`._batches`)."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.topic_field = InsertionSpec.parse(get_string(config, "topic.field", None))
        self.partition_field = InsertionSpec.parse(get_string(config, "partition.field", None))
        self.offset_field = InsertionSpec.parse(get_string(config, "offset.field", None))
        self.timestamp_field = InsertionSpec.parse(get_string(config, "timestamp.field", None))
        self.static_field = InsertionSpec.parse(get_string(config, "static.field", None))
        self.static_value = get_string(config, "static.value", None)
        self.replace_null_with_default = get_bool(config, "replace.null.with.default", True)
        if not any(
            (self.topic_field, self.partition_field, self.offset_field, self.timestamp_field, self.static_field)
        ):
            raise ConfigError(
                {
                    "topic.field": "No field insertion configured: set at least one of topic.field, "
                    "partition.field, offset.field, timestamp.field, static.field"
                }
            )
        if self.static_field is not None and self.static_value is None:
            raise ConfigError({"static.value": f"No value specified for static field: {self.static_field.name}"})
        self._schemas = SchemaCache()

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            return self._apply_schemaless(record, value)
        return self._apply_with_schema(record, schema, value)

    def _apply_schemaless(self, record: Any, value: Any) -> Any:
        updated = dict(require_map(value, PURPOSE))
        if self.topic_field is not None:
            updated[self.topic_field.name] = record.topic
        if self.partition_field is not None and record.kafka_partition is not None:
            updated[self.partition_field.name] = record.kafka_partition
        if self.offset_field is not None:
            updated[self.offset_field.name] = require_sink_record(record, PURPOSE).kafka_offset
        if self.timestamp_field is not None and record.timestamp is not None:
            updated[self.timestamp_field.name] = record.timestamp
        if self.static_field is not None:
            updated[self.static_field.name] = self.static_value
        return self.new_record(record, None, updated)

    def _apply_with_schema(self, record: Any, schema: Schema, value: Any) -> Any:
        struct = require_struct(value, PURPOSE)
        updated_schema = self._schemas.get(schema, self._updated_schema)
        with_default = self.replace_null_with_default
        updated = {f.name: struct_get(struct, f, with_default) for f in schema.fields}
        if self.topic_field is not None:
            updated[self.topic_field.name] = record.topic
        if self.partition_field is not None:
            updated[self.partition_field.name] = record.kafka_partition
        if self.offset_field is not None:
            updated[self.offset_field.name] = require_sink_record(record, PURPOSE).kafka_offset
        if self.timestamp_field is not None:
            ts = record.timestamp
            updated[self.timestamp_field.name] = None if ts is None else logical.timestamp_to_logical(ts)
        if self.static_field is not None:
            updated[self.static_field.name] = self.static_value
        return self.new_record(record, updated_schema, updated)

    def _columnar(self, rows: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
        column = rows.column(self.side)
        no_nulls(column)
        updated_schema = self._schemas.get(schema, self._updated_schema)
        no_defaults(schema.fields, self.replace_null_with_default)
        children = [pc.struct_field(column, [i]) for i in range(len(schema.fields))]
        for spec, name in ((self.topic_field, TOPIC), (self.partition_field, PARTITION),
                           (self.offset_field, OFFSET), (self.timestamp_field, TIMESTAMP)):
            if spec is not None:
                children.append(rows.column(name))
        if self.static_field is not None:
            children.append(pa.repeat(pa.scalar(self.static_value, pa.string()), rows.num_rows))
        if any(c.null_count for c, f in zip(children, updated_schema.fields, strict=True) if not f.schema.optional):
            raise RecordForm("a null for a required field")
        return with_column(rows, self.side, updated_schema, struct_of(updated_schema, children, None))

    def _updated_schema(self, schema: Schema) -> Schema:
        pairs = [(f.name, f.schema) for f in require_struct_schema(schema, PURPOSE).fields]
        for spec, optional_schema, required_schema in (
            (self.topic_field, _OPTIONAL_STRING, _STRING),
            (self.partition_field, _OPTIONAL_INT32, _INT32),
            (self.offset_field, _OPTIONAL_INT64, _INT64),
            (self.timestamp_field, _OPTIONAL_TIMESTAMP, _TIMESTAMP),
            (self.static_field, _OPTIONAL_STRING, _STRING),
        ):
            if spec is not None:
                pairs.append((spec.name, optional_schema if spec.optional else required_schema))
        return copy_schema_basics(schema, SchemaType.STRUCT, build_fields(pairs))


InsertFieldKey, InsertFieldValue = key_and_value_variants(InsertField)
