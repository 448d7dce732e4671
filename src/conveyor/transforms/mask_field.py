"""``MaskField``: replace field values with an empty value or a replacement.

Kafka Connect: ``org.apache.kafka.connect.transforms.MaskField$Key`` /
``org.apache.kafka.connect.transforms.MaskField$Value`` (aliases ``MaskField$Key`` /
``MaskField$Value``).

Configuration:

``fields`` (list, required, non-empty)   the fields to mask.
``replacement`` (string, optional, non-empty)
    the masking value, converted to the field's type (numbers parsed as Java does;
    ``Unable to convert x (class java.lang.String) to number``). Booleans, dates and
    containers cannot take a replacement.
``replace.null.with.default`` (boolean, default true)
    unmasked null fields with a schema default are copied as the default.

Without a replacement a value becomes its type's empty value: ``false``, ``0``, ``0.0``,
``""``, ``Decimal(0)``, the epoch for dates/times, ``[]``, ``{}``; null stays null.
Schemaless data must be a map (a masked field that is absent is added as null, as in
Kafka Connect); with a schema the value must be a struct. Null keys/values pass through.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.errors import ConfigError, DataError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters import logical
from conveyor.converters._config import get_bool, get_list, get_string
from conveyor.java_text import values as jv
from conveyor.transforms._base import KeyOrValueTransformation, key_and_value_variants, require_map, require_struct
from conveyor.transforms._batches import TypedBatchForm, no_defaults, struct_of, with_column

PURPOSE = "mask fields"
_BITS = {SchemaType.INT8: 8, SchemaType.INT16: 16, SchemaType.INT32: 32, SchemaType.INT64: 64}


def empty_value(value: Any) -> Any:
    """``MaskField.maskWithNullValue``."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if isinstance(value, str):
        return ""
    if isinstance(value, _decimal.Decimal):
        return _decimal.Decimal(0)
    if isinstance(value, _dt.datetime):
        return logical.EPOCH
    if isinstance(value, _dt.date):
        return logical.EPOCH_DATE
    if isinstance(value, _dt.time):
        return _dt.time(0)
    if isinstance(value, (list, tuple)):
        return []
    if isinstance(value, dict):
        return {}
    raise DataError(f"Cannot mask value of type: {type(value).__name__}")


def replacement_value(value: Any, replacement: str, schema: Schema | None) -> Any:
    """``MaskField.maskWithCustomReplacement``."""
    try:
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            bits = _BITS.get(schema.type, 64) if schema is not None else 64
            return jv.parse_integer(replacement, bits)
        elif isinstance(value, float):
            number = jv.parse_floating(replacement)
            return jv.to_float32(number) if schema is not None and schema.type is SchemaType.FLOAT32 else number
        elif isinstance(value, str):
            return replacement
        elif isinstance(value, _decimal.Decimal):
            return _decimal.Decimal(replacement)
    except (ValueError, ArithmeticError):
        raise DataError(f"Unable to convert {replacement} (class java.lang.String) to number") from None
    raise DataError(f"Cannot mask value of type {type(value).__name__} with custom replacement.")


class MaskField(TypedBatchForm, KeyOrValueTransformation):
    """Mask fields; use :class:`MaskFieldKey` or :class:`MaskFieldValue`. Batch form: typed
    columns, each masked child's non-null cells replaced by its type's one masked value
    (:mod:`._batches`)."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.fields = get_list(config, "fields")
        if not self.fields:
            raise ConfigError({"fields": "Invalid value [] for configuration fields: Empty list"})
        self.replacement = get_string(config, "replacement", None)
        if self.replacement == "":
            raise ConfigError({"replacement": "Invalid value for configuration replacement: String must be non-empty"})
        self.replace_null_with_default = get_bool(config, "replace.null.with.default", True)
        self._masked = frozenset(self.fields)

    def _mask(self, value: Any, schema: Schema | None) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            return empty_value(value)
        return replacement_value(value, self.replacement, schema)

    def _columnar(self, rows: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
        column = rows.column(self.side)
        no_defaults(schema.fields, self.replace_null_with_default)
        children = []
        for i, field in enumerate(schema.fields):
            child = pc.struct_field(column, [i])
            if field.name in self._masked and child.null_count < len(child):
                first = child.filter(pc.is_valid(child))[0].as_py()
                if field.schema.type is SchemaType.STRUCT:
                    raise DataError(f"Cannot mask value of type: Struct (field {field.name})")
                masked = pa.scalar(self._mask(first, field.schema), child.type)  # one value per type
                child = pc.if_else(pc.is_valid(child), masked, pa.scalar(None, child.type))
            children.append(child)
        return with_column(rows, self.side, schema, struct_of(schema, children, column.is_null()))

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            source = require_map(value, PURPOSE)
            updated = dict(source)
            for name in self.fields:
                updated[name] = self._mask(source.get(name), None)
            return self.new_record(record, None, updated)
        struct = require_struct(value, PURPOSE)
        result = {}
        with_default = self.replace_null_with_default
        for field in schema.fields:
            original = struct.get(field.name)
            if field.name in self._masked:
                if field.schema.type is SchemaType.STRUCT and original is not None:
                    raise DataError(f"Cannot mask value of type: Struct (field {field.name})")
                result[field.name] = self._mask(original, field.schema)
            else:
                result[field.name] = field.schema.default if original is None and with_default else original
        return self.new_record(record, schema, result)


MaskFieldKey, MaskFieldValue = key_and_value_variants(MaskField)
