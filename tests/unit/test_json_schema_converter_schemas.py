"""Connect schemas ↔ JSON Schemas as Confluent's JsonSchemaData maps them
(conveyor.converters._json_schema_data)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json

import jsonschema
import pytest

from conveyor.api import ConfigError, DataError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters import _json_schema_data as jsd
from conveyor.converters import converter_class
from conveyor.converters.logical import DECIMAL, date_schema, decimal_schema, time_schema, timestamp_schema

S = SchemaType


def _round_trip(schema: Schema, **kw) -> Schema:
    js = json.loads(json.dumps(jsd.to_json_schema(schema, **kw)))
    jsonschema.Draft7Validator.check_schema(js)
    return jsd.to_connect_schema(js)


def _value_round_trip(schema: Schema, value, numeric: bool = False):
    js = jsd.to_json_schema(schema, numeric_decimals=numeric)
    datum = jsd.value_to_json(schema, value, numeric)
    text = jsd.dumps(datum) if numeric else json.dumps(datum)
    decoded = json.loads(text, parse_float=decimal.Decimal)
    jsonschema.Draft7Validator(js).validate(decoded)
    return jsd.value_from_json(schema, decoded)


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (S.INT8, {"type": "integer", "connect.type": "int8"}),
        (S.INT16, {"type": "integer", "connect.type": "int16"}),
        (S.INT32, {"type": "integer", "connect.type": "int32"}),
        (S.INT64, {"type": "integer", "connect.type": "int64"}),
        (S.FLOAT32, {"type": "number", "connect.type": "float32"}),
        (S.FLOAT64, {"type": "number", "connect.type": "float64"}),
        (S.BOOLEAN, {"type": "boolean"}),
        (S.STRING, {"type": "string"}),
        (S.BYTES, {"type": "string", "connect.type": "bytes"}),
    ],
)
def test_primitives_map_as_confluent_and_back(t, expected):
    assert jsd.to_json_schema(Schema(t)) == expected
    assert _round_trip(Schema(t)) == Schema(t)
    assert jsd.to_json_schema(Schema(t, optional=True)) == {"oneOf": [{"type": "null"}, expected]}
    assert _round_trip(Schema(t, optional=True)) == Schema(t, optional=True)


def test_struct_layout_matches_confluent():
    schema = Schema.struct(
        ("id", Schema(S.INT64)),
        ("name", Schema(S.STRING, optional=True)),
        name="conveyor.test.User",
    )
    assert jsd.to_json_schema(schema) == {
        "type": "object",
        "title": "conveyor.test.User",
        "properties": {
            "id": {"type": "integer", "connect.type": "int64", "connect.index": 0},
            "name": {"oneOf": [{"type": "null"}, {"type": "string"}], "connect.index": 1},
        },
    }
    closed = jsd.to_json_schema(schema, additional_properties=False)
    assert closed["additionalProperties"] is False
    assert _round_trip(schema) == schema


def test_nested_structures_round_trip():
    inner = Schema.struct(("x", Schema(S.FLOAT32)), optional=True, name="Inner")
    schema = Schema(
        S.STRUCT,
        name="Outer",
        version=3,
        doc="outer doc",
        fields=Schema.struct(
            ("inner", inner),
            ("tags", Schema(S.ARRAY, value_schema=Schema(S.STRING, optional=True))),
            ("attrs", Schema(S.MAP, key_schema=Schema(S.STRING), value_schema=Schema(S.INT32))),
            ("by_id", Schema(S.MAP, key_schema=Schema(S.INT32), value_schema=inner)),
            ("blob", Schema(S.BYTES, optional=True, parameters={"k": "v"})),
        ).fields,
    )
    js = jsd.to_json_schema(schema)
    assert js["properties"]["attrs"] == {
        "type": "object",
        "additionalProperties": {"type": "integer", "connect.type": "int32"},
        "connect.type": "map",
        "connect.index": 2,
    }
    by_id = js["properties"]["by_id"]
    assert by_id["type"] == "array" and by_id["connect.type"] == "map"
    assert by_id["items"]["properties"]["key"]["connect.index"] == 0
    assert js["connect.version"] == 3 and js["description"] == "outer doc"
    assert _round_trip(schema) == schema
    value = {
        "inner": {"x": 1.5},
        "tags": ["a", None],
        "attrs": {"k": 1},
        "by_id": {7: {"x": 2.0}, 8: None},
        "blob": b"\x00\xff",
    }
    assert _value_round_trip(schema, value) == value
    assert jsd.value_to_json(schema, value)["blob"] == base64.b64encode(b"\x00\xff").decode()


def test_logical_types_round_trip_and_encode_as_confluent():
    schema = Schema.struct(
        ("amount", decimal_schema(2)),
        ("day", date_schema()),
        ("at", time_schema()),
        ("ts", timestamp_schema(optional=True)),
    )
    js = jsd.to_json_schema(schema)
    assert js["properties"]["amount"] == {
        "type": "string",
        "connect.type": "bytes",
        "title": DECIMAL,
        "connect.version": 1,
        "connect.parameters": {"scale": "2"},
        "connect.index": 0,
    }
    assert js["properties"]["day"]["title"] == "org.apache.kafka.connect.data.Date"
    assert _round_trip(schema) == schema
    value = {
        "amount": decimal.Decimal("-1234.50"),
        "day": dt.date(2024, 2, 29),
        "at": dt.time(12, 30, 1, 500000),
        "ts": dt.datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=dt.timezone.utc),
    }
    datum = jsd.value_to_json(schema, value)
    assert datum["day"] == 19782 and datum["at"] == 45001500 and datum["ts"] == 1714979289010
    assert base64.b64decode(datum["amount"]) == (-123450).to_bytes(3, "big", signed=True)
    assert _value_round_trip(schema, value) == value
    # decimal.format=NUMERIC: a JSON number with every digit
    assert jsd.to_json_schema(decimal_schema(2), numeric_decimals=True)["type"] == "number"
    assert jsd.dumps(jsd.value_to_json(schema, value, True)).startswith('{"amount":-1234.50,')
    assert _value_round_trip(schema, value, numeric=True) == value


def test_null_values_defaults_and_required_fields():
    schema = Schema.struct(
        ("req", Schema(S.STRING)),
        ("opt", Schema(S.STRING, optional=True)),
        ("dflt", Schema(S.INT32, default=5)),
    )
    assert jsd.to_json_schema(schema)["properties"]["dflt"]["default"] == 5
    assert _round_trip(schema) == schema
    # as Confluent: a required field's null is left out, an optional one is a JSON null
    assert jsd.value_to_json(schema, {"req": None, "opt": None, "dflt": None}) == {"opt": None, "dflt": 5}
    assert jsd.value_from_json(schema, {}) == {"req": None, "opt": None, "dflt": 5}


def test_plain_json_schemas_from_other_producers():
    js = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": {"type": "integer"},
            "price": {"type": "number"},
            "note": {"type": ["string", "null"]},
            "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
            "attrs": {"type": "object", "additionalProperties": {"type": "string"}},
            "paid": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        },
        "definitions": {"Line": {"type": "object", "properties": {"sku": {"type": "string"}}}},
    }
    line = Schema.struct(("sku", Schema(S.STRING)))
    expected = Schema.struct(
        ("id", Schema(S.INT64)),
        ("price", Schema(S.FLOAT64)),
        ("note", Schema(S.STRING, optional=True)),
        ("lines", Schema(S.ARRAY, value_schema=line)),
        ("attrs", Schema(S.MAP, key_schema=Schema(S.STRING), value_schema=Schema(S.STRING))),
        ("paid", Schema(S.BOOLEAN, optional=True)),
        name="Order",
    )
    assert jsd.to_connect_schema(js) == expected
    relaxed = jsd.to_connect_schema(js, optional_for_nonrequired=True)
    assert not relaxed.field("id").schema.optional and relaxed.field("price").schema.optional
    value = {"id": 1, "price": 2, "lines": [{"sku": "a"}], "attrs": {"k": "v"}}
    assert jsd.value_from_json(expected, value) == {
        "id": 1, "price": 2.0, "note": None, "lines": [{"sku": "a"}], "attrs": {"k": "v"}, "paid": None,
    }


@pytest.mark.parametrize(
    "js",
    [
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        {"allOf": [{"type": "string"}]},
        {"type": "string", "enum": ["a", "b"]},
        {},
        {"$ref": "#/definitions/Missing"},
        {"$ref": "other.json"},
        {"type": "object", "properties": {"me": {"$ref": "#"}}},
        {"type": "array"},
    ],
)
def test_unsupported_json_schemas_raise_data_error(js):
    with pytest.raises(DataError):
        jsd.to_connect_schema(js)


def test_bad_values_raise_data_error():
    with pytest.raises(DataError, match="bytes"):
        jsd.value_to_json(Schema(S.BYTES), "text")
    with pytest.raises(DataError, match="base64"):
        jsd.value_from_json(Schema(S.BYTES), "not base64!")
    with pytest.raises(DataError, match="STRUCT"):
        jsd.value_to_json(Schema.struct(("a", Schema(S.INT32))), [1])
    with pytest.raises(DataError, match="Date"):
        jsd.value_from_json(date_schema(), "2024-01-01")


def test_registered_under_confluent_name_and_alias():
    cls = converter_class("io.confluent.connect.json.JsonSchemaConverter")
    assert cls is converter_class("jsonschema")
    assert cls.__name__ == "JsonSchemaConverter" and cls.__module__ == "conveyor.schema_registry.json_schema_converter"


def test_configure_checks_format_keys():
    conv = converter_class("jsonschema")()
    with pytest.raises(ConfigError, match="decimal.format"):
        conv.configure({"schema.registry.url": "http://localhost:1", "decimal.format": "HEX"}, False)
    conv.configure({"schema.registry.url": "http://localhost:1", "decimal.format": "numeric"}, False)
    with pytest.raises(DataError, match="without a Connect schema"):
        conv.from_connect_data("t", [], None, {"a": 1})
    assert conv.from_connect_data("t", [], Schema(S.STRING, optional=True), None) is None
    assert conv.to_connect_data("t", [], None) == (None, None)
    with pytest.raises(DataError, match="magic byte"):
        conv.to_connect_data("t", [], b"{}")
