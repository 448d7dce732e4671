"""Conveyor's ProtobufConverter (io.confluent.connect.protobuf.ProtobufConverter) against a real
Schema Registry (the harness's Apicurio, Confluent API), checked against confluent_kafka's own
Protobuf serde.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import uuid

import pytest
from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.confluent import meta_pb2
from confluent_kafka.schema_registry.confluent.type import decimal_pb2
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from google.type import date_pb2, timeofday_pb2

from conveyor.api import DataError
from conveyor.api.errors import ConfigError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters import load_converter
from conveyor.converters.logical import date_schema, decimal_schema, time_schema, timestamp_schema
from conveyor.testing.schema_registry import framed_schema_id

pytestmark = pytest.mark.integration

S = SchemaType
F = descriptor_pb2.FieldDescriptorProto
TAG = "io.confluent.connect.protobuf.Tag"
USER = Schema.struct(
    ("id", Schema(S.INT64)),
    ("name", Schema(S.STRING, optional=True)),
    ("level", Schema(S.INT8)),
    ("tags", Schema(S.ARRAY, value_schema=Schema(S.STRING))),
    ("scores", Schema(S.MAP, key_schema=Schema(S.STRING), value_schema=Schema(S.INT32))),
    ("address", Schema.struct(("city", Schema(S.STRING)), optional=True, name="conveyor.test.Address")),
    name="conveyor.test.User",
)
USER_VALUE = {"id": 7, "name": "Ada", "level": -3, "tags": ["a", "b"], "scores": {"x": 1},
              "address": {"city": "London"}}


class _NoSerializedFormat(SchemaRegistryClient):
    """Work-around for Apicurio 3.3.3's ``?format=serialized`` (upstream #7066), as in
    test_schema_registry_harness.py: ask for the schema as stored (the base64 descriptor)."""

    def get_schema(self, schema_id, subject_name=None, fmt=None, reference_format=None):
        return super().get_schema(schema_id, subject_name, None if fmt == "serialized" else fmt, reference_format)


def _topic() -> str:
    return f"proto-{uuid.uuid4().hex[:12]}"


def _converter(registry, side: str = "value", **settings):
    return registry.converter("io.confluent.connect.protobuf.ProtobufConverter", side, **settings)


def _class_from_registered(schema_str: str, full_name: str):
    """The message class of a registered (base64 descriptor) schema, built with confluent_kafka's
    own copies of the well-known files, independently of Conveyor's."""
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema_str))
    pool = descriptor_pool.DescriptorPool()
    for module in (descriptor_pb2, timestamp_pb2, date_pb2, timeofday_pb2, decimal_pb2, meta_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def test_conveyor_writes_what_confluent_kafka_reads(schema_registry):
    topic = _topic()
    conv = _converter(schema_registry)
    data = conv.from_connect_data(topic, [], USER, USER_VALUE)

    client = schema_registry.client()
    latest = client.get_latest_version(f"{topic}-value")
    assert framed_schema_id(data) == latest.schema_id and latest.schema.schema_type == "PROTOBUF"
    assert data[5] == 0  # message-index path: the first top-level message
    user = _class_from_registered(latest.schema.schema_str, "conveyor.test.User")
    # the int8 hint is Confluent's (confluent.field_meta).params, readable with confluent_kafka's meta.proto
    level = user.DESCRIPTOR.fields_by_name["level"]
    assert level.GetOptions().Extensions[meta_pb2.field_meta].params["connect.type"] == "int8"

    ctx = SerializationContext(topic, MessageField.VALUE)
    work_around = _NoSerializedFormat({"url": schema_registry.url})
    for deserializer in (ProtobufDeserializer(user, {"use.deprecated.format": False}),
                         ProtobufDeserializer(user, {"use.deprecated.format": False},
                                              schema_registry_client=work_around)):
        got = deserializer(data, ctx)
        assert (got.id, got.name, got.level, list(got.tags), dict(got.scores), got.address.city) == (
            7, "Ada", -3, ["a", "b"], {"x": 1}, "London")

    # and back through Conveyor (the writer schema fetched by id): Confluent's reading of it
    schema, value = conv.to_connect_data(topic, [], data)
    assert value == USER_VALUE
    assert schema.name == "User" and [f.name for f in schema.fields] == [f.name for f in USER.fields]
    assert schema.field("level").schema == Schema(S.INT8, optional=True, parameters={TAG: "3"})
    assert schema.field("address").schema.name == "Address"
    # the same Connect schema registers the same schema: no new version from a second converter
    _converter(schema_registry).from_connect_data(topic, [], USER, {**USER_VALUE, "id": 8})
    assert client.get_versions(f"{topic}-value") == [latest.version]
    # tombstones both ways
    assert conv.from_connect_data(topic, [], USER, None) is None
    assert conv.to_connect_data(topic, [], None) == (None, None)


def _order_class():
    """``shop.Order`` with a nested message, a repeated message, a map and an enum, built at runtime."""
    fdp = descriptor_pb2.FileDescriptorProto(name=f"order_{uuid.uuid4().hex[:8]}.proto", package="shop",
                                             syntax="proto3")
    msg = fdp.message_type.add(name="Order")
    line = msg.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=F.TYPE_UINT32, label=F.LABEL_OPTIONAL)
    entry = msg.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    status = msg.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="SHIPPED", number=2)
    msg.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    msg.field.add(name="first", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".shop.Order.Line")
    msg.field.add(name="lines", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".shop.Order.Line")
    msg.field.add(name="attrs", number=4, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                  type_name=".shop.Order.AttrsEntry")
    msg.field.add(name="status", number=5, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL, type_name=".shop.Order.Status")
    msg.field.add(name="notes", number=6, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    msg.field.add(name="at", number=7, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                  type_name=".google.protobuf.Timestamp")
    fdp.dependency.append("google/protobuf/timestamp.proto")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_confluent_kafka_writes_what_conveyor_reads(schema_registry):
    topic = _topic()
    order = _order_class()
    msg = order(id=1, status=2, notes=["n1"], attrs={"x": 5})
    msg.first.sku, msg.first.qty = "a", 1
    msg.lines.add(sku="b", qty=2)
    msg.lines.add(sku="c", qty=3)
    msg.at.FromMilliseconds(1_700_000_000_123)
    data = ProtobufSerializer(order, schema_registry.client(), {"use.deprecated.format": False})(
        msg, SerializationContext(topic, MessageField.VALUE))

    schema, value = _converter(schema_registry).to_connect_data(topic, [], data)
    assert value == {
        "id": 1, "first": {"sku": "a", "qty": 1}, "lines": [{"sku": "b", "qty": 2}, {"sku": "c", "qty": 3}],
        "attrs": {"x": 5}, "status": "SHIPPED", "notes": ["n1"],
        "at": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.timezone.utc),
    }
    line = Schema(S.STRUCT, optional=True, name="Line", fields=(
        Schema.struct(("sku", Schema(S.STRING, optional=True, parameters={TAG: "1"})),
                      ("qty", Schema(S.INT64, optional=True, parameters={TAG: "2"}))).fields))
    assert schema == Schema.struct(
        ("id", Schema(S.INT64, optional=True, parameters={TAG: "1"})),
        ("first", Schema(S.STRUCT, optional=True, name="Line", fields=line.fields, parameters={TAG: "2"})),
        ("lines", Schema(S.ARRAY, optional=True, value_schema=line, parameters={TAG: "3"})),
        ("attrs", Schema(S.MAP, optional=True, name="attrs",
                         key_schema=Schema(S.STRING, optional=True, parameters={TAG: "1"}),
                         value_schema=Schema(S.INT64, optional=True, parameters={TAG: "2"}), parameters={TAG: "4"})),
        ("status", Schema(S.STRING, optional=True, name="Status", parameters={
            "io.confluent.connect.protobuf.Enum": "Status", "io.confluent.connect.protobuf.Enum.NEW": "0",
            "io.confluent.connect.protobuf.Enum.SHIPPED": "2", TAG: "5"})),
        ("notes", Schema(S.ARRAY, optional=True, value_schema=Schema(S.STRING, optional=True), parameters={TAG: "6"})),
        ("at", Schema(S.INT64, optional=True, name="org.apache.kafka.connect.data.Timestamp", version=1,
                      parameters={TAG: "7"})),
        name="Order",
    )
    # a nested message addressed by its message-index path (Order.Line = [0, 0])
    line_class = message_factory.GetMessageClass(order.DESCRIPTOR.nested_types_by_name["Line"])
    nested = ProtobufSerializer(line_class, schema_registry.client(), {"use.deprecated.format": False})(
        line_class(sku="z", qty=9), SerializationContext(_topic(), MessageField.VALUE))
    assert nested[5:7] == b"\x04\x00"  # two indexes, then 0 and 0 (zig-zag)
    schema, value = _converter(schema_registry).to_connect_data(topic, [], nested)
    assert (schema.name, value) == ("Line", {"sku": "z", "qty": 9})


def test_logical_types_key_side_and_use_latest_version(schema_registry):
    topic = _topic()
    schema = Schema.struct(
        ("amount", decimal_schema(2)), ("day", date_schema()), ("at", time_schema()),
        ("ts", timestamp_schema(optional=True)), name="conveyor.test.Logical")
    value = {"amount": decimal.Decimal("-1234.50"), "day": dt.date(2024, 2, 29), "at": dt.time(12, 30, 1, 500000),
             "ts": dt.datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=dt.timezone.utc)}
    conv = _converter(schema_registry, side="key")
    data = conv.from_connect_data(topic, [], schema, value)
    client = schema_registry.client()
    latest = client.get_latest_version(f"{topic}-key")
    assert latest.schema_id == framed_schema_id(data)
    read_schema, read = conv.to_connect_data(topic, [], data)
    assert read == value
    assert [f.schema.name for f in read_schema.fields] == [f.schema.name for f in schema.fields]
    # confluent_kafka reads the same instants and decimals
    cls = _class_from_registered(latest.schema.schema_str, "conveyor.test.Logical")
    got = ProtobufDeserializer(cls, {"use.deprecated.format": False})(data, SerializationContext(
        topic, MessageField.KEY))
    assert got.ts.ToMilliseconds() == 1714979289010 and (got.day.year, got.day.month, got.day.day) == (2024, 2, 29)
    assert int.from_bytes(got.amount.value, "big", signed=True) == -123450 and got.amount.scale == 2
    # use.latest.version writes with the subject's latest schema (fetched with the format fallback)
    latest_conv = _converter(schema_registry, side="key", use_latest_version="true")
    assert framed_schema_id(latest_conv.from_connect_data(topic, [], schema, value)) == latest.schema_id
    assert client.get_versions(f"{topic}-key") == [latest.version]


def test_subject_strategies_and_auto_register_false(schema_registry):
    topic = _topic()
    record = f"conveyor.test.R{uuid.uuid4().hex[:8]}"
    schema = Schema.struct(("id", Schema(S.INT64)), name=record)
    conv = _converter(schema_registry,
                      value_subject_name_strategy="io.confluent.kafka.serializers.subject.RecordNameStrategy")
    data = conv.from_connect_data(topic, [], schema, {"id": 5})
    client = schema_registry.client()
    assert client.get_latest_version(record).schema_id == framed_schema_id(data)
    assert f"{topic}-value" not in client.get_subjects()
    _converter(schema_registry, value_subject_name_strategy="TopicRecordNameStrategy").from_connect_data(
        topic, [], schema, {"id": 6})
    assert f"{topic}-{record}" in client.get_subjects()

    other = _topic()
    refusing = _converter(schema_registry, auto_register_schemas="false")
    with pytest.raises(DataError, match=f"Failed to serialize Protobuf data from topic {other}"):
        refusing.from_connect_data(other, [], schema, {"id": 1})
    _converter(schema_registry).from_connect_data(other, [], schema, {"id": 1})  # registered by another
    fresh = _converter(schema_registry, auto_register_schemas="false")
    assert fresh.to_connect_data(other, [], fresh.from_connect_data(other, [], schema, {"id": 2})).value == {"id": 2}


def test_refusals_bad_framing_and_no_secret_in_messages(schema_registry):
    conv = _converter(schema_registry)
    topic = _topic()
    with pytest.raises(DataError, match="Unknown magic byte"):
        conv.to_connect_data(topic, [], b"\x01\x00\x00\x00\x01\x00xx")
    with pytest.raises(DataError, match="without a Connect schema"):
        conv.from_connect_data(topic, [], None, {"a": 1})
    with pytest.raises(DataError, match="Unsupported root schema"):
        conv.from_connect_data(topic, [], Schema(S.STRING), "x")
    with pytest.raises(DataError, match="Failed to deserialize Protobuf data"):
        conv.to_connect_data(topic, [], b"\x00\x7f\xff\xff\xf0\x00xx")  # no such schema id
    # an Avro schema id is refused clearly
    avro_id = schema_registry.client().register_schema(f"{topic}-value", RegistrySchema(
        '{"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]}', "AVRO"))
    with pytest.raises(DataError, match="not Protobuf"):
        conv.to_connect_data(topic, [], b"\x00" + avro_id.to_bytes(4, "big") + b"\x00")
    with pytest.raises(ConfigError) as info:
        load_converter({"value.converter": "protobuf"}, "value", "json")
    assert "value.converter.schema.registry.url" in str(info.value.errors)

    secret = load_converter({
        "value.converter": "protobuf",
        "value.converter.schema.registry.url": "http://127.0.0.1:9",  # nothing listens
        "value.converter.basic.auth.credentials.source": "USER_INFO",
        "value.converter.basic.auth.user.info": "bob:s3cr3t-pw",
    }, "value", "json")
    with pytest.raises(DataError) as err:
        secret.from_connect_data(_topic(), [], USER, USER_VALUE)
    assert "s3cr3t-pw" not in str(err.value) and "Failed to serialize" in str(err.value)
    with pytest.raises(DataError) as err:
        secret.to_connect_data(_topic(), [], b"\x00\x00\x00\x00\x01\x00xx")
    assert "s3cr3t-pw" not in str(err.value) and "Failed to deserialize" in str(err.value)
    # whatever a failure's text holds, the password is scrubbed from it
    assert "s3cr3t-pw" not in str(secret._failure("serialize", "t", ValueError("auth bob:s3cr3t-pw refused")))
    in_url = load_converter({"value.converter": "protobuf",
                             "value.converter.schema.registry.url": "http://bob:url-s3cr3t@127.0.0.1:9"},
                            "value", "json")
    with pytest.raises(DataError) as err:
        in_url.to_connect_data(_topic(), [], b"\x00\x00\x00\x00\x01\x00xx")
    assert "url-s3cr3t" not in str(err.value) and "127.0.0.1" not in str(err.value)


def test_schema_references_are_resolved(schema_registry):
    """A message importing another (non-well-known) file: confluent_kafka registers the import
    under its own subject and refers to it; Conveyor fetches it by subject and version."""
    suffix = uuid.uuid4().hex[:8]
    common = descriptor_pb2.FileDescriptorProto(name=f"common_{suffix}.proto", package=f"common{suffix}",
                                                syntax="proto3")
    money = common.message_type.add(name="Money")
    money.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    money.field.add(name="currency", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    main = descriptor_pb2.FileDescriptorProto(name=f"invoice_{suffix}.proto", package="billing", syntax="proto3",
                                              dependency=[common.name])
    invoice = main.message_type.add(name="Invoice")
    invoice.field.add(name="total", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                      type_name=f".common{suffix}.Money")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(common)
    pool.Add(main)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("billing.Invoice"))
    topic = _topic()
    msg = cls()
    msg.total.cents, msg.total.currency = 1250, "EUR"
    data = ProtobufSerializer(cls, schema_registry.client(), {"use.deprecated.format": False})(
        msg, SerializationContext(topic, MessageField.VALUE))
    registered = schema_registry.client().get_latest_version(f"{topic}-value")
    assert [r.name for r in registered.schema.references] == [common.name]

    schema, value = _converter(schema_registry).to_connect_data(topic, [], data)
    assert value == {"total": {"cents": 1250, "currency": "EUR"}}
    assert schema.field("total").schema.name == "Money"
