"""Connect schemas ↔ Avro schemas as Confluent's AvroData maps them (conveyor.converters._avro_data)."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json

import fastavro
import pytest

from conveyor.api import DataError
from conveyor.api.schema import Field, Schema, SchemaType
from conveyor.converters import _avro_data as ad
from conveyor.converters import converter_class
from conveyor.converters.logical import date_schema, decimal_schema, time_schema, timestamp_schema

S = SchemaType


def _round_trip(schema: Schema) -> Schema:
    avro = ad.to_avro_schema(schema)
    fastavro.parse_schema(json.loads(json.dumps(avro)))  # valid Avro
    return ad.to_connect_schema(json.loads(json.dumps(avro)))


def _datum_round_trip(schema: Schema, value):
    avro = fastavro.parse_schema(ad.to_avro_schema(schema))
    buf = io.BytesIO()
    datum = ad.value_to_avro(schema, value) if ad.needs_value_reshaping(schema) else value
    fastavro.schemaless_writer(buf, avro, datum)
    buf.seek(0)
    back = fastavro.schemaless_reader(buf, avro, None)
    return ad.value_from_avro(schema, back) if ad.needs_value_reshaping(schema) else back


@pytest.mark.parametrize(
    ("t", "avro"),
    [(S.INT32, "int"), (S.INT64, "long"), (S.FLOAT32, "float"), (S.FLOAT64, "double"), (S.BOOLEAN, "boolean"),
     (S.STRING, "string"), (S.BYTES, "bytes")],
)
def test_primitives_map_to_plain_avro_types_and_back(t, avro):
    assert ad.to_avro_schema(Schema(t)) == avro
    assert ad.to_connect_schema(avro) == Schema(t)
    assert ad.to_avro_schema(Schema(t, optional=True)) == ["null", avro]
    assert _round_trip(Schema(t, optional=True)) == Schema(t, optional=True)


@pytest.mark.parametrize("t", [S.INT8, S.INT16])
def test_int8_int16_travel_as_int_with_connect_type(t):
    assert ad.to_avro_schema(Schema(t)) == {"type": "int", "connect.type": t.value}
    assert _round_trip(Schema(t)) == Schema(t)
    assert ad.to_connect_schema("int") == Schema(S.INT32)


def test_logical_types_as_confluent_writes_them():
    assert ad.to_avro_schema(decimal_schema(2)) == {
        "type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 2,
        "connect.version": 1, "connect.parameters": {"scale": "2"},
        "connect.name": "org.apache.kafka.connect.data.Decimal",
    }
    assert ad.to_avro_schema(date_schema())["logicalType"] == "date"
    assert ad.to_avro_schema(time_schema()) == {
        "type": "int", "logicalType": "time-millis", "connect.version": 1,
        "connect.name": "org.apache.kafka.connect.data.Time",
    }
    assert ad.to_avro_schema(timestamp_schema())["logicalType"] == "timestamp-millis"
    for schema in (decimal_schema(2), date_schema(), time_schema(), timestamp_schema(),
                   timestamp_schema(optional=True)):
        assert _round_trip(schema) == schema


def test_decimal_precision_parameter_and_plain_avro_logical_types():
    precise = Schema(S.BYTES, name="org.apache.kafka.connect.data.Decimal",
                     version=1, parameters={"scale": "3", "connect.decimal.precision": "10"})
    assert ad.to_avro_schema(precise)["precision"] == 10
    assert _round_trip(precise) == precise
    # plain Avro written by a non-Connect producer
    back = ad.to_connect_schema({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2})
    assert back == Schema(S.BYTES, name="org.apache.kafka.connect.data.Decimal", version=1,
                          parameters={"scale": "2", "connect.decimal.precision": "9"})
    assert ad.to_connect_schema({"type": "long", "logicalType": "timestamp-millis"}) == timestamp_schema()
    assert ad.to_connect_schema({"type": "int", "logicalType": "date"}) == date_schema()


def test_struct_becomes_a_record_with_optional_fields_as_null_unions():
    schema = Schema(S.STRUCT, name="com.example.User", version=2, doc="a user", fields=(
        Field("id", Schema(S.INT64)),
        Field("name", Schema(S.STRING, optional=True)),
        Field("age", Schema(S.INT16)),
    ))
    avro = ad.to_avro_schema(schema)
    assert avro["type"] == "record" and avro["name"] == "User" and avro["namespace"] == "com.example"
    assert avro["doc"] == "a user" and avro["connect.version"] == 2 and avro["connect.name"] == "com.example.User"
    assert avro["fields"][0] == {"name": "id", "type": "long"}
    assert avro["fields"][1] == {"name": "name", "type": ["null", "string"], "default": None}
    assert avro["fields"][2] == {"name": "age", "type": {"type": "int", "connect.type": "int16"}}
    assert _round_trip(schema) == schema


def test_anonymous_structs_are_connect_default_and_read_back_unnamed():
    inner = Schema.struct(("x", Schema(S.INT32)))
    outer = Schema.struct(("a", inner), ("b", Schema.struct(("y", Schema(S.STRING)), optional=True)))
    avro = ad.to_avro_schema(outer)
    assert (avro["namespace"], avro["name"]) == ("io.confluent.connect.avro", "ConnectDefault")
    assert avro["fields"][0]["type"]["name"] == "ConnectDefault2"
    assert _round_trip(outer) == outer


def test_the_same_named_struct_twice_is_a_reference():
    point = Schema.struct(("x", Schema(S.INT32)), name="geo.Point")
    line = Schema.struct(("a", point), ("b", point), name="geo.Line")
    avro = ad.to_avro_schema(line)
    assert avro["fields"][1]["type"] == "geo.Point"
    assert _round_trip(line) == line
    other = Schema.struct(("a", point), ("b", Schema.struct(("z", Schema(S.INT32)), name="geo.Point")))
    with pytest.raises(DataError, match="geo.Point"):
        ad.to_avro_schema(other)


def test_nested_struct_array_and_maps():
    schema = Schema.struct(
        ("tags", Schema(S.ARRAY, value_schema=Schema(S.STRING))),
        ("attrs", Schema(S.MAP, optional=True, key_schema=Schema(S.STRING), value_schema=Schema(S.INT64))),
        ("counts", Schema(S.MAP, key_schema=Schema(S.INT32), value_schema=Schema(S.STRING))),
        ("when", date_schema(optional=True)),
        name="x.Doc",
    )
    avro = ad.to_avro_schema(schema)
    assert avro["fields"][0]["type"] == {"type": "array", "items": "string"}
    assert avro["fields"][1]["type"] == ["null", {"type": "map", "values": "long"}]
    counts = avro["fields"][2]["type"]
    assert counts["type"] == "array" and counts["items"]["name"] == "MapEntry"
    assert counts["items"]["namespace"] == "io.confluent.connect.avro"
    assert _round_trip(schema) == schema
    value = {"tags": ["a"], "attrs": {"k": 1}, "counts": {1: "one", 2: "two"}, "when": dt.date(2024, 2, 29)}
    assert _datum_round_trip(schema, value) == value


def test_values_of_logical_types_round_trip_through_fastavro():
    schema = Schema.struct(
        ("d", decimal_schema(2)), ("day", date_schema()), ("t", time_schema()), ("ts", timestamp_schema()),
        ("small", Schema(S.INT8)),
    )
    value = {
        "d": decimal.Decimal("-12.34"), "day": dt.date(1969, 12, 31), "t": dt.time(23, 59, 59, 999000),
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.timezone.utc), "small": -7,
    }
    assert _datum_round_trip(schema, value) == value


def test_defaults_docs_and_field_defaults():
    schema = Schema.struct(
        ("n", Schema(S.INT32, default=5, doc="a number")),
        ("s", Schema(S.STRING, optional=True, default="x")),
    )
    avro = ad.to_avro_schema(schema)
    assert avro["fields"][0] == {
        "name": "n", "type": {"type": "int", "connect.doc": "a number"}, "doc": "a number", "default": 5,
    }
    assert avro["fields"][1] == {"name": "s", "type": ["string", "null"], "default": "x"}
    fastavro.parse_schema(avro)
    back = ad.to_connect_schema(avro)
    assert back.field("n").schema == Schema(S.INT32, default=5, doc="a number")
    assert back.field("s").schema == Schema(S.STRING, optional=True, default="x")


def test_plain_avro_enum_fixed_and_unsupported_unions():
    assert ad.to_connect_schema({"type": "enum", "name": "Color", "symbols": ["RED"]}).type is S.STRING
    assert ad.to_connect_schema({"type": "fixed", "name": "Id", "size": 4}).type is S.BYTES
    assert ad.to_connect_schema(["string", "null"]) == Schema(S.STRING, optional=True)
    with pytest.raises(DataError, match="unions"):
        ad.to_connect_schema(["null", "string", "long"])
    record = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(DataError, match="recursive"):
        ad.to_connect_schema(record)


def test_malformed_connect_schemas_are_data_errors():
    with pytest.raises(DataError):
        ad.to_avro_schema(Schema(S.ARRAY))
    with pytest.raises(DataError):
        ad.to_avro_schema(Schema(S.MAP, value_schema=Schema(S.STRING)))


def test_avro_converter_is_registered_under_its_confluent_name_and_alias():
    cls = converter_class("io.confluent.connect.avro.AvroConverter")
    assert cls.__name__ == "AvroConverter" and cls.__module__ == "conveyor.schema_registry.avro_converter"
    assert converter_class("avro") is cls
