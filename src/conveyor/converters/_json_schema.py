"""Kafka Connect's JSON schema format: ``JsonConverter.asConnectSchema`` / ``asJsonSchema``.

JSON schema, as Kafka Connect writes it (keys in this order)::

    {"type": "struct",
     "fields": [{"type": "int64", "optional": false, "field": "id"}, ...],
     "optional": false, "name": "...", "version": 1, "doc": "...",
     "parameters": {"k": "v"}, "default": ...}

``array`` has ``items``; ``map`` has ``keys`` and ``values``; type names are
``boolean``, ``int8``..``int64``, ``float``, ``double``, ``string``, ``bytes``,
``array``, ``map``, ``struct``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from conveyor.api.errors import DataError
from conveyor.api.schema import Field, Schema, SchemaType
from conveyor.converters import logical
from conveyor.converters._json_decode import make_decoder
from conveyor.converters._json_decode import require as _require

Encoder = Callable[[Any], Any]

_TYPE_BY_NAME = {t.value: t for t in SchemaType}


# --- JSON schema → Schema ----------------------------------------------------------


def schema_from_json(node: Any, replace_null_with_default: bool = True) -> Schema | None:
    """``asConnectSchema``: a JSON schema node → :class:`Schema` (``None`` for ``null``)."""
    if node is None:
        return None
    type_node = node.get("type") if isinstance(node, dict) else None
    if not isinstance(type_node, str):
        raise DataError("Schema must contain 'type' field")
    schema_type = _TYPE_BY_NAME.get(type_node)
    if schema_type is None:
        raise DataError(f"Unknown schema type: {type_node}")
    fields: tuple[Field, ...] = ()
    key_schema = value_schema = None
    if schema_type is SchemaType.ARRAY:
        items = node.get("items")
        if items is None:
            raise DataError("Array schema did not specify the element type")
        value_schema = schema_from_json(items, replace_null_with_default)
    elif schema_type is SchemaType.MAP:
        if "keys" not in node:
            raise DataError("Map schema did not specify the key type")
        if "values" not in node:
            raise DataError("Map schema did not specify the value type")
        key_schema = schema_from_json(node["keys"], replace_null_with_default)
        value_schema = schema_from_json(node["values"], replace_null_with_default)
    elif schema_type is SchemaType.STRUCT:
        field_nodes = node.get("fields")
        if not isinstance(field_nodes, list):
            raise DataError('Struct schema\'s "fields" argument is not an array.')
        built = []
        seen = set()
        for field_node in field_nodes:
            name = field_node.get("field") if isinstance(field_node, dict) else None
            if not isinstance(name, str):
                raise DataError("Struct schema's field name not specified properly")
            if name in seen:
                raise DataError(f"Cannot create field because of field name duplication {name}")
            seen.add(name)
            field_schema = schema_from_json(field_node, replace_null_with_default)
            assert field_schema is not None
            built.append(Field(name, field_schema))
        fields = tuple(built)

    optional = node.get("optional") is True
    name = node.get("name")
    version = node.get("version")
    doc = node.get("doc")
    params_node = node.get("parameters")
    parameters = None
    if isinstance(params_node, dict):
        parameters = {}
        for key, param in params_node.items():
            if not isinstance(param, str):
                raise DataError("Schema parameters must have string values.")
            parameters[key] = param
    schema = Schema(
        schema_type,
        optional=optional,
        name=name if isinstance(name, str) else None,
        version=version if type(version) is int else None,
        doc=doc if isinstance(doc, str) else None,
        fields=fields,
        key_schema=key_schema,
        value_schema=value_schema,
        parameters=parameters,
    )
    default_node = node.get("default")
    if default_node is not None:
        default = make_decoder(schema, replace_null_with_default)(default_node)
        schema = dataclasses.replace(schema, default=default)
    return schema


# --- Schema → JSON schema ----------------------------------------------------------


def schema_to_json(schema: Schema | None, encoder_factory: Callable[[Schema], Encoder]) -> dict[str, Any] | None:
    """``asJsonSchema``: a :class:`Schema` → its JSON form (``None`` for no schema)."""
    if schema is None:
        return None
    node: dict[str, Any] = {"type": schema.type.value}
    if schema.type is SchemaType.ARRAY:
        node["items"] = schema_to_json(_require(schema.value_schema, "array"), encoder_factory)
    elif schema.type is SchemaType.MAP:
        node["keys"] = schema_to_json(_require(schema.key_schema, "map key"), encoder_factory)
        node["values"] = schema_to_json(_require(schema.value_schema, "map value"), encoder_factory)
    elif schema.type is SchemaType.STRUCT:
        fields = []
        for f in schema.fields:
            field_node = dict(schema_to_json(f.schema, encoder_factory) or {})
            field_node["field"] = f.name
            fields.append(field_node)
        node["fields"] = fields
    node["optional"] = schema.optional
    if schema.name is not None:
        node["name"] = schema.name
    if schema.version is not None:
        node["version"] = schema.version
    if schema.doc is not None:
        node["doc"] = schema.doc
    if schema.parameters is not None:
        node["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        node["default"] = encoder_factory(schema)(schema.default)
    return node


def contains_decimal(schema: Schema | None) -> bool:
    """Whether a Decimal logical type occurs anywhere in ``schema``."""
    if schema is None:
        return False
    if schema.name == logical.DECIMAL:
        return True
    return (
        any(contains_decimal(f.schema) for f in schema.fields)
        or contains_decimal(schema.key_schema)
        or contains_decimal(schema.value_schema)
    )
