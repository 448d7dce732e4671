"""``SetSchemaMetadata``: set the name and/or version of the key/value schema.

Kafka Connect: ``org.apache.kafka.connect.transforms.SetSchemaMetadata$Key`` /
``org.apache.kafka.connect.transforms.SetSchemaMetadata$Value`` (aliases
``SetSchemaMetadata$Key`` / ``SetSchemaMetadata$Value``).

Configuration:

``schema.name`` (string)     the new schema name.
``schema.version`` (int)     the new schema version.

At least one must be set (``Neither schema name nor version configured``). Schemaless
data fails with ``Schema required for [updating schema metadata]``. The rest of the
schema (type, optionality, default, doc, parameters, fields) is kept; the value is
unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from conveyor.api.errors import ConfigError
from conveyor.api.schema import Schema
from conveyor.converters._config import get_int, get_string
from conveyor.transforms._base import KeyOrValueTransformation, SchemaCache, key_and_value_variants, require_schema

PURPOSE = "updating schema metadata"


class SetSchemaMetadata(KeyOrValueTransformation):
    """Rename/re-version a schema; use :class:`SetSchemaMetadataKey` or ``...Value``."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.schema_name = get_string(config, "schema.name", None)
        self.schema_version = get_int(config, "schema.version", None)
        if self.schema_name is None and self.schema_version is None:
            raise ConfigError({"schema.name": "Neither schema name nor version configured"})
        self._schemas = SchemaCache()

    def apply(self, record: Any) -> Any:
        schema = require_schema(self.operating_schema(record), PURPOSE)
        return self.new_record(record, self._schemas.get(schema, self._updated), self.operating_value(record))

    def _updated(self, schema: Schema) -> Schema:
        return dataclasses.replace(
            schema,
            name=self.schema_name if self.schema_name is not None else schema.name,
            version=self.schema_version if self.schema_version is not None else schema.version,
        )


SetSchemaMetadataKey, SetSchemaMetadataValue = key_and_value_variants(SetSchemaMetadata)
