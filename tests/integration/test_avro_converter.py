"""Conveyor's AvroConverter (io.confluent.connect.avro.AvroConverter) against a real Schema Registry
(the harness's Apicurio, Confluent API), checked against confluent_kafka's own Avro serde.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import pytest
from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from conveyor.api import DataError
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
    return f"avro-{uuid.uuid4().hex[:12]}"


def _converter(registry, side: str = "value", **settings):
    return registry.converter("io.confluent.connect.avro.AvroConverter", side, **settings)


def test_conveyor_writes_what_confluent_kafka_reads(schema_registry):
    topic = _topic()
    conv = _converter(schema_registry)
    value = {"id": 7, "name": "Ada", "level": -3}
    data = conv.from_connect_data(topic, [], USER, value)

    client = schema_registry.client()
    latest = client.get_latest_version(f"{topic}-value")
    assert framed_schema_id(data) == latest.schema_id
    registered = json.loads(latest.schema.schema_str)
    assert registered["name"] == "User" and registered["namespace"] == "conveyor.test"
    read = AvroDeserializer(client)(data, SerializationContext(topic, MessageField.VALUE))
    assert read == value
    # and back through Conveyor: the same Connect schema and value
    assert conv.to_connect_data(topic, [], data) == (USER, value)
    assert conv.from_connect_data(topic, [], USER, None) is None
    assert conv.to_connect_data(topic, [], None) == (None, None)


def test_confluent_kafka_writes_what_conveyor_reads(schema_registry):
    topic = _topic()
    avro = {
        "type": "record", "name": "Order", "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "lines", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": "int"}},
        ],
    }
    ser = AvroSerializer(schema_registry.client(), json.dumps(avro))
    value = {"id": 1, "note": None, "lines": ["a", "b"], "attrs": {"x": 1}}
    data = ser(value, SerializationContext(topic, MessageField.VALUE))

    schema, read = _converter(schema_registry).to_connect_data(topic, [], data)
    assert read == value
    assert schema == Schema.struct(
        ("id", Schema(S.INT64)),
        ("note", Schema(S.STRING, optional=True)),
        ("lines", Schema(S.ARRAY, value_schema=Schema(S.STRING))),
        ("attrs", Schema(S.MAP, key_schema=Schema(S.STRING), value_schema=Schema(S.INT32))),
        name="shop.Order",
    )
    with pytest.raises(DataError, match="magic byte"):
        _converter(schema_registry).to_connect_data(topic, [], b"\x01\x00\x00\x00\x01xx")


def test_logical_types_and_keys_round_trip(schema_registry):
    topic = _topic()
    schema = Schema.struct(
        ("amount", decimal_schema(2)),
        ("day", date_schema()),
        ("at", time_schema()),
        ("ts", timestamp_schema(optional=True)),
        ("counts", Schema(S.MAP, key_schema=Schema(S.INT32), value_schema=Schema(S.STRING))),
    )
    value = {
        "amount": decimal.Decimal("1234.50"), "day": dt.date(2024, 2, 29), "at": dt.time(12, 30, 1, 500000),
        "ts": dt.datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=dt.timezone.utc), "counts": {1: "one"},
    }
    conv = _converter(schema_registry, side="key")
    data = conv.from_connect_data(topic, [], schema, value)
    assert schema_registry.client().get_latest_version(f"{topic}-key").schema_id == framed_schema_id(data)
    assert conv.to_connect_data(topic, [], data) == (schema, value)
    # confluent_kafka reads the logical values too
    read = AvroDeserializer(schema_registry.client())(data, SerializationContext(topic, MessageField.KEY))
    assert read["amount"] == value["amount"] and read["day"] == value["day"] and read["ts"] == value["ts"]
    # schemaless primitives are inferred; structures are refused
    other = _topic()
    assert conv.to_connect_data(other, [], conv.from_connect_data(other, [], None, "hi")) == (Schema(S.STRING), "hi")
    with pytest.raises(DataError, match="without a Connect schema"):
        conv.from_connect_data(topic, [], None, {"a": 1})


def test_auto_register_false_refuses_an_unregistered_schema(schema_registry):
    topic = _topic()
    conv = _converter(schema_registry, auto_register_schemas="false")
    with pytest.raises(DataError, match="Failed to serialize"):
        conv.from_connect_data(topic, [], USER, {"id": 1, "name": None, "level": 0})
    # once registered (by another converter), it is found
    _converter(schema_registry).from_connect_data(topic, [], USER, {"id": 1, "name": None, "level": 0})
    data = conv.from_connect_data(topic, [], USER, {"id": 2, "name": "x", "level": 1})
    assert conv.to_connect_data(topic, [], data).value == {"id": 2, "name": "x", "level": 1}


def test_use_latest_version_writes_with_the_subjects_latest_schema(schema_registry):
    topic = _topic()
    client = schema_registry.client()
    latest = {
        "type": "record", "name": "User", "namespace": "conveyor.test",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": ["null", "string"], "default": None},
            {"name": "level", "type": {"type": "int", "connect.type": "int8"}},
            {"name": "extra", "type": "string", "default": "dflt"},
        ],
    }
    schema_id = client.register_schema(f"{topic}-value", RegistrySchema(json.dumps(latest), "AVRO"))
    conv = _converter(schema_registry, use_latest_version="true")
    data = conv.from_connect_data(topic, [], USER, {"id": 3, "name": "y", "level": 2})
    assert framed_schema_id(data) == schema_id
    assert len(client.get_versions(f"{topic}-value")) == 1  # nothing new registered
    schema, value = conv.to_connect_data(topic, [], data)
    assert value == {"id": 3, "name": "y", "level": 2, "extra": "dflt"}
    assert schema.field("extra").schema == Schema(S.STRING, default="dflt")


def test_record_name_strategy_registers_under_the_record_name(schema_registry):
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


def test_config_errors_and_no_secret_in_messages(schema_registry):
    from conveyor.api.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_converter({"value.converter": "avro"}, "value", "json")
    assert "value.converter.schema.registry.url" in str(info.value.errors)
    with pytest.raises(ConfigError) as info:
        _converter(schema_registry, value_subject_name_strategy="Nope")
    assert "value.converter.value.subject.name.strategy" in info.value.errors
    with pytest.raises(ConfigError) as info:
        _converter(schema_registry, latest_cache_ttl_sec="soon")
    assert "value.converter.latest.cache.ttl.sec" in info.value.errors
    _converter(schema_registry, latest_cache_ttl_sec="30")  # accepted
    conv = load_converter({
        "value.converter": "avro",
        "value.converter.schema.registry.url": "http://127.0.0.1:9",  # nothing listens
        "value.converter.basic.auth.credentials.source": "USER_INFO",
        "value.converter.basic.auth.user.info": "bob:s3cr3t-pw",
    }, "value", "json")
    with pytest.raises(DataError) as err:
        conv.from_connect_data(_topic(), [], USER, {"id": 1, "name": None, "level": 0})
    assert "s3cr3t-pw" not in str(err.value)
