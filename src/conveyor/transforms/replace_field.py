"""``ReplaceField``: keep, drop and rename fields.

Kafka Connect: ``org.apache.kafka.connect.transforms.ReplaceField$Key`` /
``org.apache.kafka.connect.transforms.ReplaceField$Value`` (aliases ``ReplaceField$Key`` /
``ReplaceField$Value``).

Configuration:

``exclude`` (list, default empty)    fields to drop; wins over ``include``.
``include`` (list, default empty)    if set, only these fields are kept.
``renames`` (list, default empty)    ``old:new`` pairs, e.g. ``foo:bar,abc:xyz``.
``replace.null.with.default`` (boolean, default true)
                                     a null field with a schema default is copied as the default.
``blacklist`` / ``whitelist``        deprecated names of ``exclude`` / ``include`` (Kafka
                                     Connect < 4.0); the new name wins when both are set.

A null (tombstone) key/value passes through. Schemaless data must be a map; with a
schema the value must be a struct and the schema is updated (renamed/dropped fields).
Renaming onto an existing field name fails with ``Cannot create field because of field
name duplication <name>`` when there is a schema (schemaless: the later one wins).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.schema import Schema, SchemaType
from conveyor.converters._config import get_bool, get_list, invalid
from conveyor.transforms._base import (
    KeyOrValueTransformation,
    SchemaCache,
    build_fields,
    copy_schema_basics,
    key_and_value_variants,
    require_map,
    require_struct,
    require_struct_schema,
    struct_get,
)
from conveyor.transforms._batches import TypedBatchForm, no_defaults, struct_of, with_column

log = logging.getLogger(__name__)

PURPOSE = "field replacement"
_DEPRECATED = (("include", "whitelist"), ("exclude", "blacklist"))


def java_split(text: str, sep: str) -> list[str]:
    """``String.split(sep)`` for a literal ``sep``: trailing empty strings dropped."""
    parts = text.split(sep)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_rename_mappings(mappings: list[str]) -> dict[str, str]:
    """``old:new`` pairs → ``{old: new}``; anything else is a configuration error."""
    result = {}
    for mapping in mappings:
        parts = java_split(mapping, ":")
        if len(parts) != 2:
            raise invalid("renames", "[" + ", ".join(mappings) + "]", f"Invalid rename mapping: {mapping}")
        result[parts[0]] = parts[1]
    return result


def translate_deprecated(config: Mapping[str, Any]) -> dict[str, Any]:
    """``ConfigUtils.translateDeprecatedConfigs`` for ``whitelist``/``blacklist``."""
    translated = dict(config)
    for target, alias in _DEPRECATED:
        if alias not in translated:
            continue
        old = translated.pop(alias)
        if target in translated:
            log.warning("'%s' and its deprecated alias '%s' are both set; using '%s'", target, alias, target)
        else:
            log.warning("'%s' is deprecated; use '%s'", alias, target)
            translated[target] = old
    return translated


class ReplaceField(TypedBatchForm, KeyOrValueTransformation):
    """Filter or rename fields; use :class:`ReplaceFieldKey` or :class:`ReplaceFieldValue`.
    Batch form: typed columns, the struct's children kept and renamed (:mod:`._batches`)."""

    def configure(self, config: Mapping[str, Any]) -> None:
        config = translate_deprecated(config)
        self.exclude = frozenset(get_list(config, "exclude", []))
        self.include = frozenset(get_list(config, "include", []))
        self.renames = parse_rename_mappings(get_list(config, "renames", []))
        self.reverse_renames = {new: old for old, new in self.renames.items()}
        self.replace_null_with_default = get_bool(config, "replace.null.with.default", True)
        self._schemas = SchemaCache()

    def keeps(self, name: str) -> bool:
        """Kafka Connect's ``filter(fieldName)``."""
        return name not in self.exclude and (not self.include or name in self.include)

    def renamed(self, name: str) -> str:
        return self.renames.get(name, name)

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            source = require_map(value, PURPOSE)
            renames, keeps = self.renames, self.keeps
            updated = {renames.get(k, k): v for k, v in source.items() if keeps(k)}
            return self.new_record(record, None, updated)
        struct = require_struct(value, PURPOSE)
        updated_schema, sources = self._schemas.get(schema, self._updated_schema)
        with_default = self.replace_null_with_default
        updated = {new: struct_get(struct, old_field, with_default) for new, old_field in sources}
        return self.new_record(record, updated_schema, updated)

    def _columnar(self, rows: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
        updated_schema, sources = self._schemas.get(schema, self._updated_schema)
        no_defaults((f for _, f in sources), self.replace_null_with_default)
        column = rows.column(self.side)
        children = [pc.struct_field(column, [schema.fields.index(f)]) for _, f in sources]
        return with_column(rows, self.side, updated_schema, struct_of(updated_schema, children, column.is_null()))

    def _updated_schema(self, schema: Schema) -> tuple[Schema, list[tuple[str, Any]]]:
        kept = [f for f in require_struct_schema(schema, PURPOSE).fields if self.keeps(f.name)]
        fields = build_fields([(self.renamed(f.name), f.schema) for f in kept])
        sources = [(self.renamed(f.name), f) for f in kept]
        return copy_schema_basics(schema, SchemaType.STRUCT, fields), sources


ReplaceFieldKey, ReplaceFieldValue = key_and_value_variants(ReplaceField)
