"""``HeaderFrom`` (KIP-145): move or copy fields of the key/value into headers.

Kafka Connect: ``org.apache.kafka.connect.transforms.HeaderFrom$Key`` /
``org.apache.kafka.connect.transforms.HeaderFrom$Value`` (aliases ``HeaderFrom$Key`` /
``HeaderFrom$Value``).

Configuration:

``fields`` (list, required, non-empty)    the fields whose values become headers.
``headers`` (list, required, non-empty)   the header names, in the order of ``fields``
                                          (as many).
``operation`` (``move`` or ``copy``, required)
                                          ``move`` takes the fields out of the key/value.

As Connect's class does: each header is appended (existing headers of the name stay), with the
field's schema (``None`` when schemaless; a schemaless field that is absent gives a null
header; a struct field's null reads as its default, as ``Struct.get``). With a schema the key/value must be a struct that has every field (a missing one
fails the record); without one, a map. A null key/value (a tombstone) fails the record with
Connect's message (``Only Map objects supported in absence of schema for [header move], found:
null``), to be filtered before it or tolerated. Records only (no batch form). Checked case by
case against Connect's own class: ``tests/integration/test_transform_oracle.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conveyor.api.errors import ConfigError, DataError
from conveyor.api.records import Header
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters._config import get_list, get_string, invalid
from conveyor.transforms._base import (
    KeyOrValueTransformation,
    SchemaCache,
    copy_schema_basics,
    key_and_value_variants,
    require_map,
    require_struct,
    struct_get,
)

_OPERATIONS = ("move", "copy")


class HeaderFrom(KeyOrValueTransformation):
    """Fields into headers; use :class:`HeaderFromKey` or :class:`HeaderFromValue`."""

    def configure(self, config: Mapping[str, Any]) -> None:
        fields, headers = get_list(config, "fields"), get_list(config, "headers")
        for key, names in (("fields", fields), ("headers", headers)):
            if not names:
                raise ConfigError({key: f"Invalid value [] for configuration {key}: Empty list"})
        if len(fields) != len(headers):
            raise ConfigError({"headers": "'fields' config must have the same number of elements as 'headers' "
                                          "config."})
        operation = get_string(config, "operation")
        if operation not in _OPERATIONS:
            raise invalid("operation", operation, 'String must be one of: move, copy')
        self.fields, self.headers, self.operation = list(fields), list(headers), operation
        self._purpose = f"header {operation}"
        self._schemas = SchemaCache()

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        added: list[Header] = []
        if schema is None:
            mapping = require_map(value, self._purpose)
            updated: Any = dict(mapping)
            for field, header in zip(self.fields, self.headers, strict=True):
                if self.operation == "move":
                    updated.pop(field, None)
                added.append(Header(header, mapping.get(field), None))
        else:
            struct = require_struct(value, self._purpose)
            by_name = {f.name: f for f in schema.fields or ()}
            for field, header in zip(self.fields, self.headers, strict=True):
                if field not in by_name:
                    raise DataError(f"{field} is not a valid field name")  # Connect: a NullPointerException
                added.append(Header(header, struct_get(struct, by_name[field]), by_name[field].schema))
            if self.operation == "move":
                schema = self._schemas.get(schema, self._moved)
                updated = {f.name: struct_get(struct, f) for f in schema.fields or ()}
            else:
                updated = struct
        moved = self.new_record(record, schema, updated)
        return moved.new_record(headers=(*(record.headers or ()), *added))

    def _moved(self, schema: Schema) -> Schema:
        return copy_schema_basics(schema, SchemaType.STRUCT,
                                  tuple(f for f in schema.fields or () if f.name not in self.fields))


HeaderFromKey, HeaderFromValue = key_and_value_variants(HeaderFrom)
