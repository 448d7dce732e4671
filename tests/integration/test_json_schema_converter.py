"""Conveyor's JsonSchemaConverter (io.confluent.connect.json.JsonSchemaConverter) against a real
Schema Registry (the harness's Apicurio, Confluent API), checked against confluent_kafka's own
JSON Schema serde.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid

import pytest
from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from conveyor.api import DataError
from conveyor.api.errors import ConfigError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters import load_converter
from conveyor.converters.logical import date_schema, decimal_schema, time_schema, timestamp_schema
from conveyor.testing.schema_registry import framed_schema_id

pytestmark = pytest.mark.integration

S = SchemaType
USER = Schema.struct(
    ("id", Schema(S.INT64)),
    ("name", Schema(S.STRING, optional=True)),
    ("level", Schema(S.INT8)),
    name="conveyor.test.User",
)


def _topic() -> str:
    return f"jsonschema-{uuid.uuid4().hex[:12]}"


def _converter(registry, side: str = "value", **settings):
    return registry.converter("io.confluent.connect.json.JsonSchemaConverter", side, **settings)


def test_conveyor_writes_what_confluent_kafka_reads(schema_registry):
    topic = _topic()
    conv = _converter(schema_registry)
    value = {"id": 7, "name": "Ada", "level": -3}
    data = conv.from_connect_data(topic, [], USER, value)

    client = schema_registry.client()
    latest = client.get_latest_version(f"{topic}-value")
    assert framed_schema_id(data) == latest.schema_id
    assert latest.schema.schema_type == "JSON"
    registered = json.loads(latest.schema.schema_str)
    assert registered["title"] == "conveyor.test.User" and registered["type"] == "object"
    assert registered["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert json.loads(data[5:]) == value  # plain UTF-8 JSON after the 5-byte header
    read = JSONDeserializer(None, schema_registry_client=client)(data, SerializationContext(topic, MessageField.VALUE))
    assert read == value
    # and back through Conveyor: the same Connect schema and value
    assert conv.to_connect_data(topic, [], data) == (USER, value)
    # the same schema again: same id, one version
    again = conv.from_connect_data(topic, [], USER, {"id": 8, "name": None, "level": 1})
    assert framed_schema_id(again) == latest.schema_id and len(client.get_versions(f"{topic}-value")) == 1
    assert json.loads(again[5:]) == {"id": 8, "name": None, "level": 1}


def test_confluent_kafka_writes_what_conveyor_reads(schema_registry):
    topic = _topic()
    js = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "shop.Order",
        "type": "object",
        "required": ["id", "customer", "lines", "attrs"],
        "properties": {
            "id": {"type": "integer"},
            "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
            "customer": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "vip": {"type": "boolean"}},
            },
            "lines": {"type": "array", "items": {"type": "number"}},
            "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
    }
    ser = JSONSerializer(json.dumps(js), schema_registry.client())
    value = {"id": 1, "note": None, "customer": {"name": "Ada", "vip": True}, "lines": [1.5, 2], "attrs": {"x": 1}}
    data = ser(value, SerializationContext(topic, MessageField.VALUE))

    schema, read = _converter(schema_registry).to_connect_data(topic, [], data)
    assert schema == Schema.struct(
        ("id", Schema(S.INT64)),
        ("note", Schema(S.STRING, optional=True)),
        ("customer", Schema.struct(("name", Schema(S.STRING)), ("vip", Schema(S.BOOLEAN)))),
        ("lines", Schema(S.ARRAY, value_schema=Schema(S.FLOAT64))),
        ("attrs", Schema(S.MAP, key_schema=Schema(S.STRING), value_schema=Schema(S.INT64))),
        name="shop.Order",
    )
    assert read == {**value, "lines": [1.5, 2.0]}
    assert isinstance(read["lines"][1], float)
    # non-required properties as optional fields, on request
    relaxed, _ = _converter(schema_registry, use_optional_for_nonrequired="true").to_connect_data(topic, [], data)
    assert relaxed.field("note").schema.optional and not relaxed.field("id").schema.optional


def test_logical_types_and_keys_round_trip(schema_registry):
    topic = _topic()
    schema = Schema.struct(
        ("amount", decimal_schema(2)),
        ("day", date_schema()),
        ("at", time_schema()),
        ("ts", timestamp_schema(optional=True)),
        ("counts", Schema(S.MAP, key_schema=Schema(S.INT32), value_schema=Schema(S.STRING))),
        ("blob", Schema(S.BYTES)),
    )
    value = {
        "amount": decimal.Decimal("1234.50"), "day": dt.date(2024, 2, 29), "at": dt.time(12, 30, 1, 500000),
        "ts": dt.datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=dt.timezone.utc), "counts": {1: "one"},
        "blob": b"\x00\x01",
    }
    conv = _converter(schema_registry, side="key")
    data = conv.from_connect_data(topic, [], schema, value)
    assert schema_registry.client().get_latest_version(f"{topic}-key").schema_id == framed_schema_id(data)
    assert conv.to_connect_data(topic, [], data) == (schema, value)
    read = JSONDeserializer(None, schema_registry_client=schema_registry.client())(
        data, SerializationContext(topic, MessageField.KEY))
    assert read["amount"] == base64.b64encode((123450).to_bytes(3, "big", signed=True)).decode()  # unscaled
    assert read["day"] == 19782 and read["counts"] == [{"key": 1, "value": "one"}] and read["blob"] == "AAE="
    # decimal.format=NUMERIC writes a JSON number with all its digits; either format reads back
    numeric = _converter(schema_registry, side="key", decimal_format="NUMERIC")
    other = _topic()
    data = numeric.from_connect_data(other, [], schema, value)
    assert b'"amount":1234.50' in data
    assert conv.to_connect_data(other, [], data) == (schema, value)


def test_record_name_strategies(schema_registry):
    topic = _topic()
    record = f"conveyor.test.R{uuid.uuid4().hex[:8]}"
    schema = Schema.struct(("id", Schema(S.INT64)), name=record)
    conv = _converter(
        schema_registry,
        value_subject_name_strategy="io.confluent.kafka.serializers.subject.RecordNameStrategy",
    )
    data = conv.from_connect_data(topic, [], schema, {"id": 5})
    client = schema_registry.client()
    assert client.get_latest_version(record).schema_id == framed_schema_id(data)
    assert f"{topic}-value" not in client.get_subjects()
    conv2 = _converter(schema_registry, value_subject_name_strategy="TopicRecordNameStrategy")
    conv2.from_connect_data(topic, [], schema, {"id": 6})
    assert f"{topic}-{record}" in client.get_subjects()
    with pytest.raises(DataError, match="named Connect schema"):
        conv2.from_connect_data(topic, [], Schema.struct(("id", Schema(S.INT64))), {"id": 1})


def test_auto_register_false_and_use_latest_version(schema_registry):
    topic = _topic()
    conv = _converter(schema_registry, auto_register_schemas="false")
    with pytest.raises(DataError, match="Failed to serialize JSON Schema data from topic"):
        conv.from_connect_data(topic, [], USER, {"id": 1, "name": None, "level": 0})
    _converter(schema_registry).from_connect_data(topic, [], USER, {"id": 1, "name": None, "level": 0})
    data = conv.from_connect_data(topic, [], USER, {"id": 2, "name": "x", "level": 1})
    assert conv.to_connect_data(topic, [], data).value == {"id": 2, "name": "x", "level": 1}
    # use.latest.version: the subject's latest schema is used, nothing new registered
    other = _topic()
    latest = {"type": "object", "title": "conveyor.test.User",
              "properties": {"id": {"type": "integer"}, "name": {"type": ["string", "null"]},
                             "level": {"type": "integer"}, "extra": {"type": "string"}}}
    client = schema_registry.client()
    schema_id = client.register_schema(f"{other}-value", RegistrySchema(json.dumps(latest), "JSON"))
    data = _converter(schema_registry, use_latest_version="true").from_connect_data(
        other, [], USER, {"id": 3, "name": "y", "level": 2})
    assert framed_schema_id(data) == schema_id and len(client.get_versions(f"{other}-value")) == 1
    schema, value = conv.to_connect_data(other, [], data)
    assert value == {"id": 3, "name": "y", "level": 2, "extra": None}
    assert schema.field("level").schema == Schema(S.INT64)


def test_tombstones_bad_bytes_and_invalid_values(schema_registry):
    topic = _topic()
    conv = _converter(schema_registry)
    assert conv.from_connect_data(topic, [], USER, None) is None
    assert conv.from_connect_data(topic, [], None, None) is None
    assert conv.to_connect_data(topic, [], None) == (None, None)
    with pytest.raises(DataError, match="magic byte"):
        conv.to_connect_data(topic, [], b"\x01\x00\x00\x00\x01{}")
    with pytest.raises(DataError, match="without a Connect schema"):
        conv.from_connect_data(topic, [], None, {"id": 1})
    # a value the JSON Schema rejects: confluent_kafka's validation, as a DataError
    with pytest.raises(DataError, match="Failed to serialize JSON Schema data"):
        conv.from_connect_data(topic, [], USER, {"id": "seven", "name": None, "level": 0})
    # bytes whose JSON fails the writer's schema are refused on reading too
    good = conv.from_connect_data(topic, [], USER, {"id": 1, "name": None, "level": 0})
    with pytest.raises(DataError, match="Failed to deserialize JSON Schema data"):
        conv.to_connect_data(topic, [], good[:5] + b'{"id": "x"}')
    # a framed JSON null (what Confluent writes for an optional schema's null) reads as null
    opt = Schema(S.STRING, optional=True)
    js_id = schema_registry.client().register_schema(
        f"{_topic()}-value", RegistrySchema(json.dumps({"$schema": "http://json-schema.org/draft-07/schema#",
                                   "oneOf": [{"type": "null"}, {"type": "string"}]}), "JSON"))
    assert conv.to_connect_data(topic, [], b"\x00" + js_id.to_bytes(4, "big") + b"null") == (opt, None)


def test_primitive_keys_and_values(schema_registry):
    topic = _topic()
    key_conv = _converter(schema_registry, side="key")
    data = key_conv.from_connect_data(topic, [], Schema(S.STRING), "k-1")
    assert data[5:] == b'"k-1"'
    assert key_conv.to_connect_data(topic, [], data) == (Schema(S.STRING), "k-1")
    conv = _converter(schema_registry)
    for schema, value in [(Schema(S.STRING, optional=True), "v"), (Schema(S.INT32), 5), (Schema(S.FLOAT64), 0.5),
                          (Schema(S.BOOLEAN), True), (Schema(S.ARRAY, value_schema=Schema(S.INT16)), [1, 2])]:
        t = _topic()  # one subject per schema: the registry enforces BACKWARD compatibility
        assert conv.to_connect_data(t, [], conv.from_connect_data(t, [], schema, value)) == (schema, value)


def test_config_errors_and_no_secret_in_messages(schema_registry):
    with pytest.raises(ConfigError) as info:
        load_converter({"value.converter": "jsonschema"}, "value", "json")
    assert "value.converter.schema.registry.url" in str(info.value.errors)
    with pytest.raises(ConfigError) as info:
        _converter(schema_registry, decimal_format="HEX")
    assert "value.converter.decimal.format" in info.value.errors
    conv = load_converter({
        "value.converter": "jsonschema",
        "value.converter.schema.registry.url": "http://127.0.0.1:9",  # nothing listens
        "value.converter.basic.auth.credentials.source": "USER_INFO",
        "value.converter.basic.auth.user.info": "bob:s3cr3t-pw",
    }, "value", "json")
    with pytest.raises(DataError) as err:
        conv.from_connect_data(_topic(), [], USER, {"id": 1, "name": None, "level": 0})
    assert "s3cr3t-pw" not in str(err.value)
    with pytest.raises(DataError) as err:
        conv.to_connect_data(_topic(), [], b"\x00\x00\x00\x00\x07{}")
    assert "s3cr3t-pw" not in str(err.value)
