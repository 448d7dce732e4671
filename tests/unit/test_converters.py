"""Converters: String, ByteArray, number, JSON (Kafka Connect's wire format) and loading."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import subprocess
import sys
from decimal import Decimal

import pytest

from conveyor.api import ConfigError, Converter, DataError, Field, Header, Schema, SchemaAndValue, SchemaType
from conveyor.converters import (
    CONVERTERS,
    BooleanConverter,
    ByteArrayConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    JsonConverter,
    LongConverter,
    ShortConverter,
    StringConverter,
    converter_class,
    load_converter,
    logical,
)
from conveyor.converters import json_converter as jc

T = SchemaType
NO_HEADERS: tuple[Header, ...] = ()


def json_converter(**config: object) -> JsonConverter:
    conv = JsonConverter()
    conv.configure(config, False)
    return conv


def to_connect(conv: Converter, data: bytes | None) -> SchemaAndValue:
    return conv.to_connect_data("topic", NO_HEADERS, data)


def from_connect(conv: Converter, schema: Schema | None, value: object) -> bytes | None:
    return conv.from_connect_data("topic", NO_HEADERS, schema, value)


# --- StringConverter ---------------------------------------------------------------


class TestStringConverter:
    def test_round_trip_utf8_default(self) -> None:
        conv = StringConverter()
        conv.configure({}, False)
        data = from_connect(conv, None, "héllo ✓")
        assert data == "héllo ✓".encode()
        sv = to_connect(conv, data)
        assert sv.value == "héllo ✓"
        assert sv.schema == Schema(T.STRING, optional=True)

    def test_tombstone_and_null(self) -> None:
        conv = StringConverter()
        assert to_connect(conv, None) == SchemaAndValue(None, None)
        assert from_connect(conv, None, None) is None

    def test_malformed_bytes_are_replaced_not_raised(self) -> None:
        conv = StringConverter()
        assert to_connect(conv, b"ok\xff").value == "ok\ufffd"

    @pytest.mark.parametrize("encoding", ["ISO-8859-1", "latin1", "UTF8", "US-ASCII", "windows-1252"])
    def test_encodings(self, encoding: str) -> None:
        conv = StringConverter()
        conv.configure({"converter.encoding": encoding}, True)
        assert to_connect(conv, from_connect(conv, None, "abc")).value == "abc"

    def test_latin1_bytes(self) -> None:
        conv = StringConverter()
        conv.configure({"converter.encoding": "ISO-8859-1"}, False)
        assert from_connect(conv, None, "é") == b"\xe9"
        assert from_connect(conv, None, "✓") == b"?"  # unmappable → '?', as Java
        assert to_connect(conv, b"\xe9").value == "é"

    def test_java_utf16_is_big_endian_with_bom(self) -> None:
        conv = StringConverter()
        conv.configure({"converter.encoding": "UTF-16"}, False)
        assert from_connect(conv, None, "A") == b"\xfe\xff\x00A"
        assert to_connect(conv, b"\x00A").value == "A"
        assert to_connect(conv, b"\xff\xfeA\x00").value == "A"

    def test_unknown_encoding_is_a_config_error(self) -> None:
        with pytest.raises(ConfigError) as err:
            StringConverter().configure({"converter.encoding": "klingon"}, False)
        assert "converter.encoding" in err.value.errors

    def test_non_strings_use_java_to_string(self) -> None:
        conv = StringConverter()
        assert from_connect(conv, None, 42) == b"42"
        assert from_connect(conv, None, True) == b"true"
        assert from_connect(conv, None, b"raw") == b"raw"

    def test_memoryview_input(self) -> None:
        assert to_connect(StringConverter(), memoryview(b"abc")).value == "abc"  # type: ignore[arg-type]


# --- ByteArrayConverter --------------------------------------------------------------


class TestByteArrayConverter:
    def test_passthrough(self) -> None:
        conv = ByteArrayConverter()
        data = b"\x00\x01binary"
        sv = to_connect(conv, data)
        assert sv.value is data
        assert sv.schema == Schema(T.BYTES, optional=True)
        assert from_connect(conv, None, data) is data
        assert from_connect(conv, Schema(T.BYTES), data) is data
        assert ByteArrayConverter.passthrough is True

    def test_bytearray_and_memoryview_are_copied_to_bytes(self) -> None:
        conv = ByteArrayConverter()
        assert from_connect(conv, None, bytearray(b"ab")) == b"ab"
        assert type(from_connect(conv, None, memoryview(b"ab"))) is bytes

    def test_tombstone(self) -> None:
        conv = ByteArrayConverter()
        assert to_connect(conv, None) == SchemaAndValue(None, None)
        assert from_connect(conv, None, None) is None

    def test_wrong_schema(self) -> None:
        with pytest.raises(DataError, match="Invalid schema type for ByteArrayConverter: STRING"):
            from_connect(ByteArrayConverter(), Schema(T.STRING), b"x")

    def test_wrong_value_type(self) -> None:
        with pytest.raises(DataError, match="ByteArrayConverter is not compatible with objects of type str"):
            from_connect(ByteArrayConverter(), None, "text")


# --- Number converters ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "value", "data", "schema_type"),
    [
        (ShortConverter, -2, b"\xff\xfe", T.INT16),
        (IntegerConverter, 258, b"\x00\x00\x01\x02", T.INT32),
        (LongConverter, 1, b"\x00" * 7 + b"\x01", T.INT64),
        (FloatConverter, 1.5, b"\x3f\xc0\x00\x00", T.FLOAT32),
        (DoubleConverter, -2.0, b"\xc0" + b"\x00" * 7, T.FLOAT64),
        (BooleanConverter, True, b"\x01", T.BOOLEAN),
        (BooleanConverter, False, b"\x00", T.BOOLEAN),
    ],
)
def test_number_converters_round_trip(cls: type[Converter], value: object, data: bytes, schema_type: T) -> None:
    conv = cls()
    assert from_connect(conv, None, value) == data
    sv = to_connect(conv, data)
    assert sv.value == value
    assert sv.schema == Schema(schema_type, optional=True)
    assert to_connect(conv, None) == SchemaAndValue(None, None)
    assert from_connect(conv, None, None) is None


def test_number_converter_errors() -> None:
    with pytest.raises(
        DataError, match="Failed to deserialize integer: Size of data received by IntegerDeserializer is not 4"
    ):
        to_connect(IntegerConverter(), b"\x00")
    with pytest.raises(DataError, match=r"Failed to serialize to integer \(was str\)"):
        from_connect(IntegerConverter(), None, "1")
    with pytest.raises(DataError, match="out of range"):
        from_connect(ShortConverter(), None, 70000)
    with pytest.raises(DataError, match="Unexpected byte received by BooleanDeserializer: 2"):
        to_connect(BooleanConverter(), b"\x02")
    with pytest.raises(DataError, match=r"Failed to serialize to boolean \(was int\)"):
        from_connect(BooleanConverter(), None, 1)


# --- JsonConverter: reading Kafka Connect's format --------------------------------------

DECIMAL_SCHEMA_JSON = (
    '{"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "parameters": {"scale": "2"}}'
)

CONNECT_FIXTURES = [
    ('{"schema": {"type": "boolean"}, "payload": true}', Schema(T.BOOLEAN), True),
    ('{"schema": {"type": "int8"}, "payload": 12}', Schema(T.INT8), 12),
    ('{"schema": {"type": "int16"}, "payload": 12}', Schema(T.INT16), 12),
    ('{"schema": {"type": "int32"}, "payload": 12}', Schema(T.INT32), 12),
    ('{"schema": {"type": "int64"}, "payload": 4398046511104}', Schema(T.INT64), 4398046511104),
    ('{"schema": {"type": "float"}, "payload": 12.34}', Schema(T.FLOAT32), 12.34),
    ('{"schema": {"type": "double"}, "payload": 12.34}', Schema(T.FLOAT64), 12.34),
    ('{"schema": {"type": "double"}, "payload": 12}', Schema(T.FLOAT64), 12.0),
    ('{"schema": {"type": "bytes"}, "payload": "dGVzdC1zdHJpbmc="}', Schema(T.BYTES), b"test-string"),
    ('{"schema": {"type": "string"}, "payload": "foo-bar-baz"}', Schema(T.STRING), "foo-bar-baz"),
    (
        '{"schema": {"type": "array", "items": {"type": "int32"}}, "payload": [1, 2, 3]}',
        Schema(T.ARRAY, value_schema=Schema(T.INT32)),
        [1, 2, 3],
    ),
    (
        (
            '{"schema": {"type": "map", "keys": {"type": "string"}, "values": {"type": "int32"}}, '
            '"payload": {"key1": 12, "key2": 15}}'
        ),
        Schema(T.MAP, key_schema=Schema(T.STRING), value_schema=Schema(T.INT32)),
        {"key1": 12, "key2": 15},
    ),
    (
        (
            '{"schema": {"type": "map", "keys": {"type": "int32"}, "values": {"type": "int32"}}, '
            '"payload": [[1, 12], [2, 15]]}'
        ),
        Schema(T.MAP, key_schema=Schema(T.INT32), value_schema=Schema(T.INT32)),
        {1: 12, 2: 15},
    ),
    (
        (
            '{"schema": {"type": "struct", "fields": [{"field": "field1", "type": "boolean"}, '
            '{"field": "field2", "type": "string"}]}, "payload": {"field1": true, "field2": "string"}}'
        ),
        Schema.struct(("field1", Schema(T.BOOLEAN)), ("field2", Schema(T.STRING))),
        {"field1": True, "field2": "string"},
    ),
    (
        '{"schema": ' + DECIMAL_SCHEMA_JSON + ', "payload": "AJw="}',
        logical.decimal_schema(2),
        Decimal("1.56"),
    ),
    ('{"schema": ' + DECIMAL_SCHEMA_JSON + ', "payload": 1.56}', logical.decimal_schema(2), Decimal("1.56")),
    (
        '{"schema": {"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1}, "payload": 10000}',
        logical.date_schema(),
        dt.date(1997, 5, 19),
    ),
    (
        (
            '{"schema": {"type": "int32", "name": "org.apache.kafka.connect.data.Time", "version": 1}, '
            '"payload": 14400000}'
        ),
        logical.time_schema(),
        dt.time(4, 0),
    ),
    (
        (
            '{"schema": {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}, '
            '"payload": 4000000000}'
        ),
        logical.timestamp_schema(),
        dt.datetime(1970, 2, 16, 7, 6, 40, tzinfo=dt.timezone.utc),
    ),
    ('{"schema": null, "payload": {"a": [1, 2.5]}}', None, {"a": [1, 2.5]}),
    ('{"schema": null, "payload": null}', None, None),
    ('{"schema": {"type": "int32", "optional": true}, "payload": null}', Schema(T.INT32, optional=True), None),
]


@pytest.mark.parametrize(("text", "schema", "value"), CONNECT_FIXTURES)
def test_json_reads_kafka_connect_envelopes(text: str, schema: Schema | None, value: object) -> None:
    sv = to_connect(json_converter(), text.encode())
    assert sv.schema == schema
    assert sv.value == value
    assert type(sv.value) is type(value)


@pytest.mark.parametrize(("text", "schema", "value"), [f for f in CONNECT_FIXTURES if f[2] is not None])
def test_json_round_trips_kafka_connect_envelopes(text: str, schema: Schema | None, value: object) -> None:
    conv = json_converter()
    written = from_connect(conv, schema, value)
    assert written is not None
    sv = to_connect(conv, written)
    assert (sv.schema, sv.value) == (schema, value)
    # the envelope is the Connect one, schema and payload only
    parsed = json.loads(written)
    assert set(parsed) == {"schema", "payload"}


def test_json_writes_connect_schema_format_exactly() -> None:
    conv = json_converter()
    assert (
        from_connect(conv, Schema(T.BOOLEAN), True) == b'{"schema":{"type":"boolean","optional":false},"payload":true}'
    )
    schema = Schema(
        T.STRUCT,
        name="com.example.Order",
        version=2,
        doc="an order",
        parameters={"k": "v"},
        fields=(
            Field("id", Schema(T.INT64)),
            Field("tags", Schema(T.ARRAY, optional=True, value_schema=Schema(T.STRING))),
            Field("attrs", Schema(T.MAP, key_schema=Schema(T.STRING), value_schema=Schema(T.INT32))),
            Field("qty", Schema(T.INT32, optional=True, default=1)),
        ),
    )
    written = from_connect(conv, schema, {"id": 7, "tags": ["a"], "attrs": {"x": 1}, "qty": None})
    assert written == (
        b'{"schema":{"type":"struct","fields":['
        b'{"type":"int64","optional":false,"field":"id"},'
        b'{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"},'
        b'{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int32","optional":false},'
        b'"optional":false,"field":"attrs"},'
        b'{"type":"int32","optional":true,"default":1,"field":"qty"}],'
        b'"optional":false,"name":"com.example.Order","version":2,"doc":"an order","parameters":{"k":"v"}},'
        b'"payload":{"id":7,"tags":["a"],"attrs":{"x":1},"qty":1}}'
    )
    sv = to_connect(conv, written)
    assert sv.schema == schema
    assert sv.value == {"id": 7, "tags": ["a"], "attrs": {"x": 1}, "qty": 1}


def test_json_debezium_style_envelope() -> None:
    text = json.dumps(
        {
            "schema": {
                "type": "struct",
                "name": "dbserver1.inventory.customers.Envelope",
                "optional": False,
                "fields": [
                    {
                        "type": "struct",
                        "name": "dbserver1.inventory.customers.Value",
                        "optional": True,
                        "field": "after",
                        "fields": [
                            {"type": "int32", "optional": False, "field": "id"},
                            {"type": "string", "optional": False, "field": "email"},
                            {
                                "type": "int64",
                                "optional": True,
                                "name": "io.debezium.time.MicroTimestamp",
                                "version": 1,
                                "field": "created",
                            },
                        ],
                    },
                    {"type": "string", "optional": False, "field": "op"},
                    {"type": "int64", "optional": True, "field": "ts_ms"},
                ],
            },
            "payload": {"after": {"id": 1004, "email": "a@b.c", "created": 1}, "op": "c", "ts_ms": 1559033904863},
        }
    ).encode()
    conv = json_converter()
    sv = to_connect(conv, text)
    assert sv.schema is not None and sv.schema.name == "dbserver1.inventory.customers.Envelope"
    after = sv.schema.field("after")
    assert after is not None and after.schema.field("created").schema.name == "io.debezium.time.MicroTimestamp"  # type: ignore[union-attr]
    assert sv.value == {"after": {"id": 1004, "email": "a@b.c", "created": 1}, "op": "c", "ts_ms": 1559033904863}
    assert to_connect(conv, text).schema is sv.schema  # parsed schemas are cached
    assert json.loads(from_connect(conv, sv.schema, sv.value)) == json.loads(text)  # type: ignore[arg-type]


def test_json_missing_struct_field_uses_default_or_null() -> None:
    conv = json_converter()
    text = (
        b'{"schema": {"type": "struct", "fields": [{"field": "a", "type": "int32", "optional": true},'
        b' {"field": "b", "type": "string", "default": "dflt"}]}, "payload": {}}'
    )
    assert to_connect(conv, text).value == {"a": None, "b": "dflt"}


def test_json_replace_null_with_default_false() -> None:
    text = b'{"schema": {"type": "int32", "optional": true, "default": 42}, "payload": null}'
    assert to_connect(json_converter(), text).value == 42
    assert to_connect(json_converter(**{"replace.null.with.default": "false"}), text).value is None


def test_json_schema_default_is_converted() -> None:
    text = b'{"schema": {"type": "bytes", "optional": true, "default": "AQI="}, "payload": null}'
    sv = to_connect(json_converter(), text)
    assert sv.schema == Schema(T.BYTES, optional=True, default=b"\x01\x02")
    assert sv.value == b"\x01\x02"


def test_json_numeric_decimal_keeps_every_digit() -> None:
    schema_json = '{"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "parameters": {"scale": "20"}}'
    text = ('{"schema": ' + schema_json + ', "payload": 1234567890.12345678901234567890}').encode()
    assert to_connect(json_converter(), text).value == Decimal("1234567890.12345678901234567890")


def test_json_decimal_format_numeric_and_base64() -> None:
    schema = logical.decimal_schema(2)
    numeric = json_converter(**{"decimal.format": "numeric"})
    written = from_connect(numeric, schema, Decimal("1.56"))
    assert written is not None and written.endswith(b'"payload":1.56}')
    assert to_connect(numeric, written).value == Decimal("1.56")
    base = json_converter()
    assert from_connect(base, schema, Decimal("-1.28")).endswith(b'"payload":"gA=="}')  # type: ignore[union-attr]
    # a value that rescales without loss is accepted; one that does not is an error
    assert to_connect(base, from_connect(base, schema, Decimal("1.5"))).value == Decimal("1.50")
    with pytest.raises(DataError, match="mismatching scale"):
        from_connect(base, schema, Decimal("1.567"))


def test_json_decimal_default_in_numeric_schema() -> None:
    schema = Schema(
        T.BYTES, optional=True, name=logical.DECIMAL, version=1, parameters={"scale": "1"}, default=Decimal("2.5")
    )
    written = from_connect(json_converter(**{"decimal.format": "NUMERIC"}), schema, None)
    assert written is not None
    parsed = json.loads(written)
    assert parsed["schema"]["default"] == 2.5
    assert parsed["payload"] == 2.5


def test_json_logical_values_written_as_integers() -> None:
    conv = json_converter(**{"schemas.enable": False})
    assert from_connect(conv, logical.date_schema(), dt.date(1997, 5, 19)) == b"10000"
    assert from_connect(conv, logical.time_schema(), dt.time(4, 0)) == b"14400000"
    ts = dt.datetime(1970, 2, 16, 7, 6, 40, tzinfo=dt.timezone.utc)
    assert from_connect(conv, logical.timestamp_schema(), ts) == b"4000000000"
    assert from_connect(conv, logical.timestamp_schema(), 5) == b"5"  # already encoded
    with pytest.raises(DataError, match="Date type should not have any time fields"):
        from_connect(conv, logical.date_schema(), dt.datetime(2020, 1, 1, 1, tzinfo=dt.timezone.utc))


def test_json_float32_written_like_java_float() -> None:
    conv = json_converter(**{"schemas.enable": False})
    single = 1.100000023841858  # 1.1f seen as a double
    assert from_connect(conv, Schema(T.FLOAT32), single) == b"1.1"
    assert from_connect(conv, Schema(T.FLOAT64), single) == b"1.100000023841858"


def test_json_non_finite_doubles_as_jackson_strings() -> None:
    conv = json_converter(**{"schemas.enable": False})
    assert from_connect(conv, None, [math.nan, math.inf, -math.inf]) == b'["NaN","Infinity","-Infinity"]'


def test_json_schemaless_round_trip() -> None:
    conv = json_converter(**{"schemas.enable": "false"})
    value = {"id": 1, "name": "ü", "nested": {"list": [1, 2.5, None, True]}, "empty": {}}
    written = from_connect(conv, None, value)
    assert written == b'{"id":1,"name":"\xc3\xbc","nested":{"list":[1,2.5,null,true]},"empty":{}}'
    assert to_connect(conv, written) == SchemaAndValue(None, value)


def test_json_schemaless_bytes_and_non_string_keys() -> None:
    conv = json_converter(**{"schemas.enable": False})
    assert from_connect(conv, None, b"\x01\x02") == b'"AQI="'
    assert json.loads(from_connect(conv, None, {1: "a", 2: "b"})) == [[1, "a"], [2, "b"]]  # type: ignore[arg-type]
    with pytest.raises(DataError, match="does not have corresponding schema type"):
        from_connect(conv, None, object())


def test_json_schemaless_value_with_schemas_enabled_gets_null_schema() -> None:
    conv = json_converter()
    assert from_connect(conv, None, {"a": 1}) == b'{"schema":null,"payload":{"a":1}}'
    assert from_connect(conv, None, None) is None
    assert from_connect(conv, Schema(T.STRING, optional=True), None) == (
        b'{"schema":{"type":"string","optional":true},"payload":null}'
    )
    assert from_connect(json_converter(**{"schemas.enable": False}), Schema(T.STRING, optional=True), None) == b"null"


def test_json_map_with_non_string_keys_written_as_pairs() -> None:
    schema = Schema(T.MAP, key_schema=Schema(T.INT32), value_schema=Schema(T.STRING))
    written = from_connect(json_converter(), schema, {1: "a"})
    assert written is not None and written.endswith(b'"payload":[[1,"a"]]}')


# --- JsonConverter: errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 1}',
        b'{"schema": null}',
        b'{"schema": null, "payload": 1, "extra": 2}',
        b"[1, 2]",
        b"42",
        b"",
    ],
)
def test_json_envelope_required_when_schemas_enabled(text: bytes) -> None:
    with pytest.raises(DataError) as err:
        to_connect(json_converter(), text)
    assert 'requires "schema" and "payload" fields and may not contain additional fields' in str(err.value)
    assert "schemas.enable=false" in str(err.value)


@pytest.mark.parametrize("text", [b"{not json", b'{"a": 1', b"NaN", b"[Infinity]", b"\xff\xfe\x00"])
def test_json_invalid_bytes(text: bytes) -> None:
    for conv in (json_converter(), json_converter(**{"schemas.enable": False})):
        with pytest.raises(DataError, match="Converting byte\\[\\] to Kafka Connect data failed due to serialization"):
            to_connect(conv, text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"schema": {"typ": "int32"}, "payload": 1}', "Schema must contain 'type' field"),
        (b'{"schema": {"type": "int128"}, "payload": 1}', "Unknown schema type: int128"),
        (b'{"schema": {"type": "array"}, "payload": []}', "Array schema did not specify the element type"),
        (
            b'{"schema": {"type": "map", "values": {"type": "int8"}}, "payload": {}}',
            "Map schema did not specify the key",
        ),
        (b'{"schema": {"type": "struct"}, "payload": {}}', '"fields" argument is not an array'),
        (b'{"schema": {"type": "struct", "fields": [{"type": "int8"}]}, "payload": {}}', "field name not specified"),
        (b'{"schema": {"type": "int32", "parameters": {"a": 1}}, "payload": 1}', "parameters must have string values"),
        (b'{"schema": {"type": "int32"}, "payload": null}', "Invalid null value for required INT32 field"),
        (b'{"schema": {"type": "int8"}, "payload": 300}', "out of range"),
        (b'{"schema": {"type": "string"}, "payload": 3}', "expected a string but found NUMBER"),
        (b'{"schema": {"type": "bytes"}, "payload": "!!"}', "Invalid bytes field"),
        (
            b'{"schema": {"type": "struct", "fields": []}, "payload": [1]}',
            "Structs should be encoded as JSON objects, but found ARRAY",
        ),
        (
            b'{"schema": {"type": "map", "keys": {"type": "string"}, "values": {"type": "int8"}}, "payload": []}',
            "Maps with string fields should be encoded as JSON objects, but found ARRAY",
        ),
        (
            b'{"schema": {"type": "map", "keys": {"type": "int8"}, "values": {"type": "int8"}}, "payload": [[1]]}',
            "Found invalid map entry, expected length 2",
        ),
        (
            b'{"schema": {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"}, "payload": "x"}',
            "Invalid type for Timestamp, underlying representation should be integral but was STRING",
        ),
        (
            b'{"schema": {"type": "int32", "name": "org.apache.kafka.connect.data.Time"}, "payload": 86400001}',
            "Time values must use number of milliseconds",
        ),
        (
            b'{"schema": {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal"}, "payload": "AA=="}',
            "scale parameter not found",
        ),
    ],
)
def test_json_schema_and_payload_errors(text: bytes, message: str) -> None:
    with pytest.raises(DataError, match=None) as err:
        to_connect(json_converter(), text)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        (Schema(T.INT32), None, "Conversion error: null value for field that is required and has no default value"),
        (Schema(T.INT32), "1", "Invalid type for INT32: str"),
        (Schema(T.BOOLEAN), 1, "Invalid type for BOOLEAN: int"),
        (Schema(T.BYTES), "x", "Invalid type for bytes type: str"),
        (Schema.struct(("a", Schema(T.INT8))), [1], "Invalid type for STRUCT: list"),
        (Schema.struct(("a", Schema(T.INT8))), {"a": 1000}, "out of range"),
        (logical.timestamp_schema(), "2020-01-01", "Invalid type for Timestamp"),
    ],
)
def test_json_write_errors(schema: Schema, value: object, message: str) -> None:
    with pytest.raises(DataError) as err:
        from_connect(json_converter(), schema, value)
    assert message in str(err.value)


def test_json_empty_message_without_schemas_is_null() -> None:
    conv = json_converter(**{"schemas.enable": False})
    assert to_connect(conv, b"") == SchemaAndValue(None, None)
    assert to_connect(conv, b"  \n") == SchemaAndValue(None, None)
    assert to_connect(conv, None) == SchemaAndValue(None, None)


# --- JsonConverter: orjson and the stdlib agree ---------------------------------------------

PARSE_CORPUS = [
    b'{"a": 1, "b": [1.5, -0.0, 1e2, 1E-3], "c": null, "d": true, "e": "\\u00e9\\n"}',
    b"123456789012345678901234567890",
    b"[18446744073709551616, -9223372036854775809, 9223372036854775807]",
    b'{"a": {"b": [1, 123456789012345678901234567890]}, "c": 2.5}',
    b'[1.5, [2.5, {"x": -1e19, "y": 9.3e18}]]',
    b"[" * 200 + b"18446744073709551616" + b"]" * 200,
    b"0.1234567890123456789012",
    b"1e400",
    b'"\\ud800"',
    b'\xef\xbb\xbf{"bom": 1}',
    '{"utf16": 1}'.encode("utf-16"),
    b'{"a": 1, "a": 2}',
    b"-0",
    b"[1,2",
    b"NaN",
    b"",
    b'{"x": "\xff"}',
]


def _outcome(conv: JsonConverter, data: bytes) -> object:
    try:
        sv = to_connect(conv, data)
    except DataError as exc:
        return ("error", str(exc))
    return ("ok", repr(sv.value))


@pytest.mark.parametrize("data", PARSE_CORPUS)
def test_json_results_do_not_depend_on_orjson(data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    conv = json_converter(**{"schemas.enable": False})
    with_orjson = _outcome(conv, data)
    monkeypatch.setattr(jc, "_orjson", None)
    assert _outcome(conv, data) == with_orjson


def test_json_big_integers_stay_integers() -> None:
    conv = json_converter(**{"schemas.enable": False})
    assert to_connect(conv, b"[123456789012345678901234567890]").value == [123456789012345678901234567890]


def test_json_writes_identically_without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    conv = json_converter()
    schema = Schema.struct(("id", Schema(T.INT64)), ("name", Schema(T.STRING)), ("b", Schema(T.BYTES)))
    value = {"id": 2**62, "name": 'ü"\\', "b": b"\x00"}
    with_orjson = from_connect(conv, schema, value)
    monkeypatch.setattr(jc, "_orjson", None)
    assert from_connect(json_converter(), schema, value) == with_orjson
    assert from_connect(json_converter(), None, [2**70]) == b'{"schema":null,"payload":[1180591620717411303424]}'


# --- JsonConverter: configuration -------------------------------------------------------------


def test_json_config_errors_name_the_key() -> None:
    for key, value in [
        ("schemas.enable", "yes please"),
        ("schemas.cache.size", "many"),
        ("decimal.format", "HEX"),
        ("replace.null.with.default", 3),
    ]:
        with pytest.raises(ConfigError) as err:
            JsonConverter().configure({key: value}, False)
        assert list(err.value.errors) == [key]


def test_json_schema_cache_bounded() -> None:
    conv = json_converter(**{"schemas.cache.size": "2"})
    for i in range(5):
        to_connect(conv, f'{{"schema": {{"type": "int32", "doc": "{i}"}}, "payload": 1}}'.encode())
        from_connect(conv, Schema(T.INT32, doc=str(i)), 1)
    assert len(conv._read_cache.data) == 2
    assert len(conv._write_cache.data) == 2


# --- load_converter ---------------------------------------------------------------------------


class CustomConverter(ByteArrayConverter):
    """A user converter, loaded by dotted path."""

    def configure(self, config, is_key):  # type: ignore[no-untyped-def]
        self.config = dict(config)
        self.is_key = is_key


class BrokenConverter(ByteArrayConverter):
    def configure(self, config, is_key):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("org.apache.kafka.connect.storage.StringConverter", StringConverter),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", ByteArrayConverter),
        ("org.apache.kafka.connect.json.JsonConverter", JsonConverter),
        ("org.apache.kafka.connect.converters.LongConverter", LongConverter),
        ("string", StringConverter),
        ("bytes", ByteArrayConverter),
        ("json", JsonConverter),
        (" json ", JsonConverter),
        (f"{__name__}.CustomConverter", CustomConverter),
        (f"{__name__}:CustomConverter", CustomConverter),
        (CustomConverter, CustomConverter),
    ],
)
def test_load_converter_by_name(name: object, cls: type) -> None:
    conv = load_converter({"value.converter": name}, "value", "string")
    assert type(conv) is cls
    assert converter_class(name) is cls


def test_load_converter_default_and_prefixed_keys() -> None:
    config = {
        "key.converter.schemas.enable": "false",
        "value.converter": f"{__name__}.CustomConverter",
        "value.converter.a.b": 1,
        "value.converterx": "not mine",
    }
    key = load_converter(config, "key", "org.apache.kafka.connect.json.JsonConverter")
    assert isinstance(key, JsonConverter) and key.schemas_enabled is False and key.is_key is True
    value = load_converter(config, "value", "json")
    assert isinstance(value, CustomConverter)
    assert value.config == {"a.b": 1}
    assert value.is_key is False


@pytest.mark.parametrize("flag", [False, "false", "FALSE", " false "])
def test_load_converter_accepts_strings_and_bools(flag: object) -> None:
    conv = load_converter({"value.converter": "json", "value.converter.schemas.enable": flag}, "value", "json")
    assert isinstance(conv, JsonConverter) and conv.schemas_enabled is False


def test_load_converter_unknown_class() -> None:
    with pytest.raises(ConfigError) as err:
        load_converter({"value.converter": "x"}, "value", "json")
    message = err.value.errors["value.converter"]
    assert message.startswith("unknown converter 'x'; known: ")
    assert "json" in message and "string" in message and "bytes" in message


def test_load_converter_unsupported_kafka_class_and_bad_paths() -> None:
    with pytest.raises(ConfigError, match="is not available in Conveyor"):
        load_converter({"key.converter": "org.apache.kafka.connect.converters.Nope"}, "key", "json")
    with pytest.raises(ConfigError, match="is not a converter"):
        load_converter({"key.converter": "json.JSONDecoder"}, "key", "json")
    with pytest.raises(ConfigError, match="unknown converter"):
        load_converter({"key.converter": "no_such_module.Thing"}, "key", "json")
    with pytest.raises(ConfigError) as err:
        load_converter({"key.converter": f"{__name__}.BrokenConverter"}, "key", "json")
    assert err.value.errors == {"key.converter": "RuntimeError: boom"}


def test_load_converter_config_error_is_prefixed() -> None:
    with pytest.raises(ConfigError) as err:
        load_converter({"value.converter": "json", "value.converter.schemas.enable": "nope"}, "value", "json")
    assert err.value.errors == {
        "value.converter.schemas.enable": "Invalid value nope for configuration value.converter.schemas.enable: "
        "Expected value to be either true or false"
    }


def test_registry_lists_kafka_names_and_aliases() -> None:
    assert CONVERTERS["org.apache.kafka.connect.json.JsonConverter"] is JsonConverter
    assert CONVERTERS["string"] is StringConverter


def test_packages_import_no_spark_kafka_or_runtime() -> None:
    code = (
        "import sys, conveyor.converters, conveyor.transforms;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'confluent_kafka', 'kubernetes', 'kopf')"
        " or m.startswith('conveyor.runtime')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=None, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_logical_decimal_bytes_match_java_biginteger() -> None:
    schema = logical.decimal_schema(0)
    for unscaled, expected in [(0, b"\x00"), (127, b"\x7f"), (128, b"\x00\x80"), (-128, b"\x80"), (-129, b"\xff\x7f")]:
        assert logical.decimal_from_logical(schema, Decimal(unscaled)) == expected
        assert logical.decimal_to_logical(schema, expected) == Decimal(unscaled)
    big = Decimal("123456789012345678901234567890.12")
    schema2 = logical.decimal_schema(2)
    assert logical.decimal_to_logical(schema2, logical.decimal_from_logical(schema2, big)) == big
    assert base64.b64encode(logical.decimal_from_logical(schema2, Decimal("1.56"))) == b"AJw="
