"""Connect schemas/values ↔ protobuf descriptors/messages as Confluent's ProtobufData maps them
(conveyor.converters._protobuf_data), and the ProtobufConverter's framing helpers."""

from __future__ import annotations

import base64
import datetime as dt
import decimal

import pytest
from google.protobuf import descriptor_pb2, message_factory

from conveyor.api import DataError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters import _protobuf_data as pd
from conveyor.converters import converter_class
from conveyor.converters.logical import date_schema, decimal_schema, time_schema, timestamp_schema

S = SchemaType
F = descriptor_pb2.FieldDescriptorProto
TAG = "io.confluent.connect.protobuf.Tag"


def _build(schema: Schema):
    fdp, full = pd.to_file_proto(schema)
    pool = pd.new_pool()
    return fdp, pool, pd.message_class(pool, fdp, full)


def _through(schema: Schema, value):
    """Connect value → message → bytes → message → (Connect schema read back, value)."""
    _, pool, cls = _build(schema)
    data = pd.fill_message(cls(), schema, value).SerializeToString()
    read_schema = pd.to_connect_schema(pool, cls.DESCRIPTOR)
    return read_schema, pd.to_connect_value(read_schema, cls.FromString(data))


def _opt(t: SchemaType, tag: int, **kw) -> Schema:
    return Schema(t, optional=True, parameters={TAG: str(tag)}, **kw)


def test_registered_under_confluents_name_and_alias():
    from conveyor.schema_registry.protobuf_converter import ProtobufConverter

    assert converter_class("io.confluent.connect.protobuf.ProtobufConverter") is ProtobufConverter
    assert converter_class("protobuf") is ProtobufConverter


@pytest.mark.parametrize(
    ("t", "proto", "back"),
    [(S.INT8, F.TYPE_INT32, S.INT8), (S.INT16, F.TYPE_INT32, S.INT16), (S.INT32, F.TYPE_INT32, S.INT32),
     (S.INT64, F.TYPE_INT64, S.INT64), (S.FLOAT32, F.TYPE_FLOAT, S.FLOAT32), (S.FLOAT64, F.TYPE_DOUBLE, S.FLOAT64),
     (S.BOOLEAN, F.TYPE_BOOL, S.BOOLEAN), (S.STRING, F.TYPE_STRING, S.STRING), (S.BYTES, F.TYPE_BYTES, S.BYTES)],
)
def test_primitives_map_as_confluent_and_read_back(t, proto, back):
    schema = Schema.struct(("f", Schema(t)), name="p.Prim")
    fdp, pool, cls = _build(schema)
    assert fdp.syntax == "proto3" and fdp.package == "p" and fdp.message_type[0].name == "Prim"
    assert fdp.message_type[0].field[0].type == proto and fdp.message_type[0].field[0].number == 1
    # int8/int16 carry Confluent's (confluent.field_meta).params connect.type hint, read back from the pool
    assert pd.field_meta_params(pool, cls.DESCRIPTOR.fields[0]) == ({"connect.type": t.value} if t in (S.INT8, S.INT16)
                                                                     else {})
    # every field reads back optional, tagged with its number, and the struct by its short name (as Confluent)
    assert pd.to_connect_schema(pool, cls.DESCRIPTOR) == Schema.struct(("f", _opt(back, 1)), name="Prim")


def test_structs_arrays_maps_and_logical_types_round_trip():
    address = Schema.struct(("street", Schema(S.STRING)), ("zip", Schema(S.INT32, optional=True)), name="shop.Address")
    schema = Schema.struct(
        ("id", Schema(S.INT64)),
        ("tags", Schema(S.ARRAY, value_schema=Schema(S.STRING))),
        ("attrs", Schema(S.MAP, key_schema=Schema(S.STRING), value_schema=Schema(S.INT32))),
        ("by_id", Schema(S.MAP, key_schema=Schema(S.INT64), value_schema=address)),
        ("weights", Schema(S.MAP, key_schema=Schema(S.FLOAT64), value_schema=Schema(S.STRING))),
        ("home", address),
        ("others", Schema(S.ARRAY, value_schema=address)),
        ("ts", timestamp_schema(optional=True)),
        ("day", date_schema()),
        ("at", time_schema()),
        ("amount", decimal_schema(2)),
        name="shop.Order",
    )
    value = {
        "id": 7, "tags": ["a", "b"], "attrs": {"x": 1}, "by_id": {3: {"street": "s", "zip": 9}},
        "weights": {0.5: "half"}, "home": {"street": "h", "zip": None}, "others": [{"street": "o", "zip": 1}],
        "ts": dt.datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=dt.timezone.utc), "day": dt.date(2024, 2, 29),
        "at": dt.time(12, 30, 1, 500000), "amount": decimal.Decimal("-1234.50"),
    }
    fdp, _, cls = _build(schema)
    order = fdp.message_type[0]
    nested = {m.name: m for m in order.nested_type}
    assert set(nested) == {"AttrsEntry", "ByIdEntry", "WeightsEntry", "Address"}
    assert nested["AttrsEntry"].options.map_entry and nested["ByIdEntry"].options.map_entry
    assert not nested["WeightsEntry"].options.map_entry  # double keys: a plain repeated entry message
    assert {f.name: f.type_name for f in order.field if f.type_name} == {
        "ts": ".google.protobuf.Timestamp", "day": ".google.type.Date", "at": ".google.type.TimeOfDay",
        "amount": ".confluent.type.Decimal", "attrs": ".shop.Order.AttrsEntry", "by_id": ".shop.Order.ByIdEntry",
        "weights": ".shop.Order.WeightsEntry", "home": ".shop.Order.Address", "others": ".shop.Order.Address"}
    assert set(fdp.dependency) >= {"google/protobuf/timestamp.proto", "google/type/date.proto",
                                   "google/type/timeofday.proto", "confluent/type/decimal.proto"}
    msg = pd.fill_message(cls(), schema, value)
    assert msg.ts.seconds == 1714979289 and msg.ts.nanos == 10_000_000 and msg.amount.scale == 2

    read_schema, read = _through(schema, value)
    assert read == {**value, "home": {"street": "h", "zip": 0}}  # protobuf has no null scalar: zip reads 0
    assert read_schema.name == "Order"
    fields = {f.name: f.schema for f in read_schema.fields}
    assert fields["ts"] == Schema(S.INT64, optional=True, name="org.apache.kafka.connect.data.Timestamp", version=1,
                                  parameters={TAG: "8"})
    assert fields["amount"].parameters == {"scale": "2", TAG: "11"}
    assert fields["tags"] == _opt(S.ARRAY, 2, value_schema=Schema(S.STRING, optional=True))
    assert fields["attrs"].type is S.MAP and fields["attrs"].key_schema == _opt(S.STRING, 1)
    assert fields["home"].type is S.STRUCT and fields["home"].name == "Address" and fields["home"].optional


def test_optional_and_required_nulls():
    inner = Schema.struct(("a", Schema(S.STRING)), optional=True, name="x.Inner")
    schema = Schema.struct(("s", Schema(S.STRING, optional=True)), ("n", Schema(S.INT32, optional=True)),
                           ("inner", inner), ("d", Schema(S.INT32, default=5)), name="x.Outer")
    assert _through(schema, {"s": None, "n": None, "inner": None, "d": None})[1] == {"s": "", "n": 0, "inner": None,
                                                                                      "d": 5}
    with pytest.raises(DataError, match="null used for required field"):
        _through(Schema.struct(("r", Schema(S.STRING)), name="x.R"), {"r": None})
    with pytest.raises(DataError, match="null element"):
        _through(Schema.struct(("l", Schema(S.ARRAY, value_schema=Schema(S.STRING, optional=True))), name="x.L"),
                 {"l": ["a", None]})


def test_enums_and_tags_round_trip():
    params = {"io.confluent.connect.protobuf.Enum": "Color", "io.confluent.connect.protobuf.Enum.RED": "0",
              "io.confluent.connect.protobuf.Enum.BLUE": "3"}
    color = Schema(S.STRING, optional=True, name="Color", parameters=params)
    schema = Schema.struct(("color", color), ("late", Schema(S.INT32, parameters={TAG: "9"})), name="x.E")
    fdp, _, _ = _build(schema)
    assert [(v.name, v.number) for v in fdp.message_type[0].enum_type[0].value] == [("RED", 0), ("BLUE", 3)]
    assert [f.number for f in fdp.message_type[0].field] == [1, 9]
    read_schema, read = _through(schema, {"color": "BLUE", "late": 4})
    assert read == {"color": "BLUE", "late": 4}
    assert read_schema.field("color").schema == Schema(S.STRING, optional=True, name="Color",
                                                       parameters={**params, TAG: "1"})
    with pytest.raises(DataError, match="not a symbol"):
        _through(schema, {"color": "GREEN", "late": 1})


def test_default_names_and_refusals():
    fdp, full = pd.to_file_proto(Schema.struct(("inner", Schema.struct(("a", Schema(S.INT32)))),
                                               ("Thing", Schema.struct(("b", Schema(S.INT32)), name="Thing"))))
    assert full == "ConnectDefault1" and fdp.package == "" and fdp.name == "ConnectDefault1.proto"
    assert [f.type_name for f in fdp.message_type[0].field] == [".ConnectDefault1.ConnectDefault2",
                                                                  ".ConnectDefault1.ThingMessage"]
    with pytest.raises(DataError, match="Unsupported root schema of type int32"):
        pd.to_file_proto(Schema(S.INT32))
    with pytest.raises(DataError, match="Array cannot be nested"):
        pd.to_file_proto(Schema.struct(("a", Schema(S.ARRAY, value_schema=Schema(S.ARRAY, value_schema=Schema(
            S.INT32))))))
    with pytest.raises(DataError, match="Invalid type for STRUCT"):
        _through(Schema.struct(("a", Schema.struct(("b", Schema(S.INT32))))), {"a": 5})


def test_confluent_decimal_file_matches_confluent_kafkas():
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2

    pool = pd.new_pool()
    ours = pool.FindMessageTypeByName("confluent.type.Decimal")
    assert [(f.name, f.number, f.type) for f in ours.fields] == [
        (f.name, f.number, f.type) for f in decimal_pb2.Decimal.DESCRIPTOR.fields]
    assert ours.file.name == decimal_pb2.DESCRIPTOR.name
    schema = Schema.struct(("d", Schema(S.BYTES, optional=True, name="org.apache.kafka.connect.data.Decimal",
                                        version=1, parameters={"scale": "3", "connect.decimal.precision": "10"})),
                           name="x.D")
    read_schema, read = _through(schema, {"d": decimal.Decimal("1.5")})
    assert read == {"d": decimal.Decimal("1.500")}
    assert read_schema.field("d").schema.parameters == {"scale": "3", "connect.decimal.precision": "10", TAG: "1"}


def _foreign_class(fdp: descriptor_pb2.FileDescriptorProto, full: str):
    pool = pd.new_pool()
    pool.Add(fdp)
    return pool, message_factory.GetMessageClass(pool.FindMessageTypeByName(full))


def test_reads_messages_of_other_producers():
    fdp = descriptor_pb2.FileDescriptorProto(name="ext.proto", package="ext", syntax="proto3")
    msg = fdp.message_type.add(name="Event")
    msg.field.add(name="u32", number=1, type=F.TYPE_UINT32, label=F.LABEL_OPTIONAL)
    msg.field.add(name="s64", number=2, type=F.TYPE_SINT64, label=F.LABEL_OPTIONAL)
    msg.field.add(name="maybe", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, proto3_optional=True,
                  oneof_index=0)
    msg.oneof_decl.add(name="_maybe")
    msg.field.add(name="kind", number=4, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL, type_name=".ext.Event.Kind")
    kind = msg.enum_type.add(name="Kind")
    kind.value.add(name="UNKNOWN", number=0)
    kind.value.add(name="CLICK", number=1)
    pool, cls = _foreign_class(fdp, "ext.Event")
    schema = pd.to_connect_schema(pool, cls.DESCRIPTOR)
    assert [(f.name, f.schema.type) for f in schema.fields] == [
        ("u32", S.INT64), ("s64", S.INT64), ("maybe", S.STRING), ("kind", S.STRING)]
    value = pd.to_connect_value(schema, cls.FromString(cls(u32=4_000_000_000, s64=-5, kind=1).SerializeToString()))
    assert value == {"u32": 4_000_000_000, "s64": -5, "maybe": "", "kind": "CLICK"}


def test_oneof_and_recursion_are_refused():
    fdp = descriptor_pb2.FileDescriptorProto(name="o.proto", package="o", syntax="proto3")
    msg = fdp.message_type.add(name="Choice")
    msg.oneof_decl.add(name="pick")
    msg.field.add(name="a", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    msg.field.add(name="b", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, oneof_index=0)
    node = fdp.message_type.add(name="Node")
    node.field.add(name="next", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".o.Node")
    pool, choice = _foreign_class(fdp, "o.Choice")
    with pytest.raises(DataError, match="oneof o.Choice.pick is not supported"):
        pd.to_connect_schema(pool, choice.DESCRIPTOR)
    with pytest.raises(DataError, match="recursive"):
        pd.to_connect_schema(pool, pool.FindMessageTypeByName("o.Node"))


def test_framing_helpers_and_text_schemas():
    from conveyor.schema_registry import protobuf_converter as pc

    assert pc._read_indexes(b"\x00rest", 0) == ((0,), 1)
    assert pc._read_indexes(b"\x04\x02\x06xx", 0) == ((1, 3), 3)  # count 2, then 1 and 3, zig-zag
    with pytest.raises(DataError, match="truncated"):
        pc._read_indexes(b"\x04\x02", 0)
    fdp = descriptor_pb2.FileDescriptorProto(name="n.proto", package="n")
    outer = fdp.message_type.add(name="A")
    outer.nested_type.add(name="B")
    fdp.message_type.add(name="C")
    assert pc._message_name(fdp, (0, 0)) == "n.A.B" and pc._message_name(fdp, (1,)) == "n.C"
    with pytest.raises(DataError, match="out of range"):
        pc._message_name(fdp, (2,))
    assert pc._file_proto("x", base64.b64encode(fdp.SerializeToString()).decode()) == fdp
    with pytest.raises(DataError, match=r"\.proto text"):
        pc._file_proto("schema 1", 'syntax = "proto3";\nmessage A { string s = 1; }')


def test_well_known_imports_resolve_and_struct_names_must_be_unique():
    pool = pd.new_pool()
    for name in ("google.protobuf.StringValue", "google.protobuf.Any", "google.protobuf.Duration",
                 "google.type.Date", "google.type.TimeOfDay", "google.type.Money", "confluent.Meta"):
        assert pool.FindMessageTypeByName(name).full_name == name
    a = Schema.struct(("x", Schema(S.INT32)), name="n.A")
    other_a = Schema.struct(("y", Schema(S.STRING)), name="n.A")
    with pytest.raises(DataError, match="two different struct schemas are both named 'n.A'"):
        pd.to_file_proto(Schema.struct(("one", a), ("two", other_a), name="n.Root"))
    # the same struct twice (optional or not) is one nested message
    fdp, _ = pd.to_file_proto(Schema.struct(("one", a), ("two", Schema.struct(("x", Schema(S.INT32)), name="n.A",
                                                                              optional=True)), name="n.Root"))
    assert [m.name for m in fdp.message_type[0].nested_type] == ["A"]
