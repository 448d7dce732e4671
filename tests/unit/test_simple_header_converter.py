"""``SimpleHeaderConverter`` and ``Values.parseString`` / ``convertToString``, without a JVM.

:data:`PINNED` holds what Apache Kafka Connect 4.1.1's own ``SimpleHeaderConverter`` returned
for these header texts (``tests/integration/test_simple_header_converter_oracle.py`` asks it
again, for these and many more): the schema, the value, and the text ``fromConnectHeader``
writes back.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging

import pytest

from conveyor.api import DataError, Schema, SchemaType
from conveyor.converters import logical
from conveyor.converters.connect_values import Float32, Unrepresentable, convert_to_string, parse_string
from conveyor.converters.simple_header_converter import SimpleHeaderConverter

T = SchemaType
UTC = dt.timezone.utc
INT8, INT16, INT32, INT64 = Schema(T.INT8), Schema(T.INT16), Schema(T.INT32), Schema(T.INT64)
FLOAT32, FLOAT64, STRING, BOOLEAN = Schema(T.FLOAT32), Schema(T.FLOAT64), Schema(T.STRING), Schema(T.BOOLEAN)
DATE, TIME, TIMESTAMP = logical.date_schema(), logical.time_schema(), logical.timestamp_schema()


def array(element: Schema | None) -> Schema:
    return Schema(T.ARRAY, value_schema=element)


def map_of(key: Schema | None, value: Schema | None) -> Schema:
    return Schema(T.MAP, key_schema=key, value_schema=value)


# (header text, schema, value, text written back) as Kafka Connect 4.1.1 gave them.
PINNED: list[tuple[str, Schema | None, object, str | None]] = [
    ("127", INT8, 127, "127"),
    ("128", INT16, 128, "128"),
    ("-129", INT16, -129, "-129"),
    ("32768", INT32, 32768, "32768"),
    ("2147483648", INT64, 2147483648, "2147483648"),
    ("9223372036854775808", logical.decimal_schema(0), decimal.Decimal(9223372036854775808), "9223372036854775808"),
    ("1e3", INT16, 1000, "1000"),
    ("1.0", INT8, 1, "1"),
    ("+1", INT8, 1, "1"),
    ("-0", INT8, 0, "0"),
    ("1.5", FLOAT32, 1.5, "1.5"),
    ("0.1", FLOAT32, 0.10000000149011612, "0.1"),
    ("3.4028236E38", FLOAT64, 3.4028236e38, "3.4028236E38"),
    ("1e20", FLOAT32, 1.0000000200408773e20, "1.0E20"),
    ("1e-50", FLOAT32, 0.0, "0.0"),
    ("-1e-50", FLOAT32, -0.0, "-0.0"),
    ("1e400", logical.decimal_schema(-400), decimal.Decimal("1E+400"), "1E+400"),
    ("1,2", INT8, 1, "1"),
    ("12 apples", STRING, "12 apples", "12 apples"),
    ("true", BOOLEAN, True, "true"),
    ("TRUE", STRING, "TRUE", "TRUE"),
    (" true ", BOOLEAN, True, "true"),
    ("true,false", STRING, "true,false", "true,false"),
    ("null", None, None, None),
    ("", STRING, "", ""),
    (" ", STRING, " ", " "),
    ("2024-01-31", DATE, dt.date(2024, 1, 31), "2024-01-31"),
    ("2024-13-45", DATE, dt.date(2025, 2, 14), "2025-02-14"),
    ("2024-01-1x", DATE, dt.date(2024, 1, 1), "2024-01-01"),
    ("1000-01-01", DATE, dt.date(1000, 1, 6), "00:00:00.000Z"),  # Julian; before 1970-01-02: a time
    ("1969-12-31", DATE, dt.date(1969, 12, 31), "00:00:00.000Z"),
    ("20240131", INT32, 20240131, "20240131"),
    ("12:34:56.789Z", TIME, dt.time(12, 34, 56, 789000), "12:34:56.789Z"),
    ("12:60:00.000Z", TIME, dt.time(13, 0), "13:00:00.000Z"),
    ("2024-01-31T12:34:56.789Z", TIMESTAMP, dt.datetime(2024, 1, 31, 12, 34, 56, 789000, UTC),
     "2024-01-31T12:34:56.789Z"),
    ("2024-01-31T00:00:00.000Z", TIMESTAMP, dt.datetime(2024, 1, 31, tzinfo=UTC), "2024-01-31"),
    ("[1,300,70000]", array(INT32), [1, 300, 70000], "[1,300,70000]"),
    ("[1, 2.5]", array(FLOAT32), [1.0, 2.5], "[1.0,2.5]"),
    ('[1,"a"]', array(None), [1, "a"], '[1,"a"]'),
    ("[null]", array(None), [None], "[null]"),
    ("[1,null]", STRING, "[1,null]", "[1,null]"),
    ('["a\\"b"]', array(STRING), ['a\\"b'], '["a\\\\\\"b"]'),
    ('[" "]', array(STRING), [""], '[""]'),
    ('["2024-01-31"]', array(DATE), [dt.date(2024, 1, 31)], "[2024-01-31]"),
    ("[1,2024-01-31]", array(DATE), [dt.date(1970, 1, 2), dt.date(2024, 1, 31)], "[1970-01-02,2024-01-31]"),
    ("[2024-01-31,70000]", STRING, "[2024-01-31,70000]", "[2024-01-31,70000]"),
    ("[[1],[\"a\"]]", array(array(STRING)), [[1], ["a"]], '[[1],["a"]]'),
    ("[1,2", STRING, "[1,2", "[1,2"),
    ('{"a":1,"b":2}', map_of(STRING, INT8), {"a": 1, "b": 2}, '{"a":1,"b":2}'),
    ('{"a":null}', map_of(STRING, None), {"a": None}, '{"a":null}'),
    ('{"a":1,"b":null}', STRING, '{"a":1,"b":null}', '{"a":1,"b":null}'),
    ("{a:1}", STRING, "{a:1}", "{a:1}"),
    ('{"k":2024-01-31T12:34:56.789Z}', map_of(STRING, TIMESTAMP),
     {"k": dt.datetime(2024, 1, 31, 12, 34, 56, 789000, UTC)}, '{"k":2024-01-31T12:34:56.789Z}'),
]


@pytest.fixture
def converter() -> SimpleHeaderConverter:
    c = SimpleHeaderConverter()
    c.configure({})
    return c


@pytest.mark.parametrize(("text", "schema", "value", "written"), PINNED, ids=[p[0] for p in PINNED])
def test_as_kafka_connect(converter: SimpleHeaderConverter, text: str, schema: Schema | None, value: object,
                          written: str | None) -> None:
    parsed = converter.to_connect_header("t", "k", text.encode())
    assert parsed == (schema, value)
    assert repr(parsed.value) == repr(value)  # -0.0 and 0.0, 1 and 1.0 differ here
    back = converter.from_connect_header("t", "k", parsed.schema, parsed.value)
    assert back == (None if written is None else written.encode())


def test_floats_keep_java_float_or_double() -> None:
    single = parse_string("0.1").value
    assert type(single) is Float32 and single == 0.10000000149011612
    assert type(parse_string("1e39").value) is float
    assert [type(v) for v in parse_string('[0.1,"a"]').value] == [Float32, str]
    assert convert_to_string(None, parse_string('[0.1,"a"]').value) == '[0.1,"a"]'  # Float.toString, no schema


def test_none_and_tombstones(converter: SimpleHeaderConverter) -> None:
    assert converter.to_connect_header("t", "k", None) == (None, None)
    assert converter.from_connect_header("t", "k", STRING, None) is None
    assert parse_string(None) == (None, None)
    assert convert_to_string(None, None) is None


def test_malformed_utf8_is_replaced_as_java_does(converter: SimpleHeaderConverter) -> None:
    assert converter.to_connect_header("t", "k", b"abc\x80def").value == "abc\ufffddef"
    assert converter.to_connect_header("t", "k", b"\xed\xa0\x80").value == "\ufffd"  # a surrogate: one, as Java
    assert converter.to_connect_header("t", "k", b"\xed\xa0\xbd\xed\xb8\x80").value == "\ufffd\ufffd"


@pytest.mark.parametrize("text", ["0001-01-01", "24:00:00.000Z", "9999-12-32", '{1:"a",true:"b"}', "{[1]:2}",
                                  "[0001-01-01]"])
def test_what_python_cannot_hold_keeps_the_bytes(converter: SimpleHeaderConverter, text: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(Unrepresentable):
        parse_string(text)
    with caplog.at_level(logging.WARNING):
        parsed = converter.to_connect_header("topic", "key", text.encode())
    assert parsed == (Schema(T.BYTES), text.encode())
    assert "Failed to deserialize value for header 'key' on topic 'topic', so using byte array" in caplog.text


@pytest.mark.parametrize("text", ["[0001-01-01", '[{1:"a",true:"b"}', "{[1]:2"])
def test_what_python_cannot_hold_inside_malformed_text_is_a_string(text: str) -> None:
    assert parse_string(text) == (STRING, text)  # Connect gives up on the array first


def test_deep_nesting_beyond_python_recursion_keeps_the_bytes(converter: SimpleHeaderConverter) -> None:
    raw = b"[" * 5000 + b"1" + b"]" * 5000
    assert converter.to_connect_header("t", "k", raw) == (Schema(T.BYTES), raw)


def test_a_failure_connect_reports_as_data_error(converter: SimpleHeaderConverter,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(text: str) -> None:
        raise DataError("no such element")

    monkeypatch.setattr("conveyor.converters.simple_header_converter.parse_string", fail)
    with pytest.raises(DataError, match="Failed to deserialize value for header 'k' on topic 't'"):
        converter.to_connect_header("t", "k", b"x")


@pytest.mark.parametrize(("schema", "value", "text"), [
    (FLOAT32, 1 / 3, "0.33333334"),  # a float under a FLOAT32 schema is a Java Float
    (FLOAT64, 1 / 3, "0.3333333333333333"),
    (None, 1e7, "1.0E7"),
    (None, float("nan"), "NaN"),
    (None, decimal.Decimal("-0.00"), "0.00"),
    (None, b"\x00\x01\xff", "AAH/"),
    (array(Schema(T.BYTES)), [b"\x00"], '["AA=="]'),
    (None, ("a", 1), '["a",1]'),
    (None, {"k\"": [True, None]}, '{"k\\"":[true,null]}'),
    (None, dt.date(1970, 1, 1), "00:00:00.000Z"),  # any instant before 1970-01-02 prints as a time of day
    (None, dt.date(1970, 1, 2), "1970-01-02"),
    (None, dt.time(0, 0, 0, 1000), "00:00:00.001Z"),
    (None, dt.datetime(1969, 12, 31, 23, 59, 59, 999000, UTC), "23:59:59.999Z"),
    (None, dt.datetime(2024, 1, 31, 12, 0), "2024-01-31T12:00:00.000Z"),  # naive means UTC
    (Schema.struct(("b", STRING), ("a", Schema(T.INT32, default=7))), {"a": None, "b": "x"}, '{"b":"x","a":7}'),
    (map_of(STRING, FLOAT32), {"x": 0.1}, '{"x":0.1}'),
])
def test_convert_to_string(schema: Schema | None, value: object, text: str) -> None:
    assert convert_to_string(schema, value) == text


def test_convert_to_string_refuses_other_types() -> None:
    with pytest.raises(DataError, match="Failed to serialize unexpected value type object"):
        convert_to_string(None, object())


@pytest.mark.parametrize("text", [
    "42", "-70000", "1.5", "2024-01-31", "12:34:56.789Z", "2024-01-31T12:34:56.789Z", "[1,2,3]", '["a","b"]',
    '{"a":[1,2],"b":{"c":true}}', "[2024-01-31,1970-01-02]", '{"x":1.5,"y":2}', "hello world", "9223372036854775808",
])
def test_round_trip_from_text(converter: SimpleHeaderConverter, text: str) -> None:
    schema, value = converter.to_connect_header("t", "k", text.encode())
    written = converter.from_connect_header("t", "k", schema, value)
    assert converter.to_connect_header("t", "k", written) == (schema, value)


@pytest.mark.parametrize(("schema", "value"), [
    (INT8, -5), (INT64, 1 << 40), (FLOAT64, 1e300), (BOOLEAN, False), (STRING, 'a "quoted" \\ string'),
    (DATE, dt.date(2024, 2, 29)), (TIME, dt.time(23, 59, 59, 999000)),
    (TIMESTAMP, dt.datetime(2024, 2, 29, 1, 2, 3, 4000, UTC)),
    (array(STRING), ["x,y", "a:b", "[{"]), (map_of(STRING, INT16), {"k": 300, "j": -300}),
])
def test_round_trip_from_values(converter: SimpleHeaderConverter, schema: Schema, value: object) -> None:
    written = converter.from_connect_header("t", "k", schema, value)
    assert written is not None
    parsed = converter.to_connect_header("t", "k", written)
    assert parsed.value == value
    assert parsed.schema is not None and parsed.schema.type is schema.type


def test_quoted_strings_are_written_escaped_and_read_as_written() -> None:
    """Connect escapes ``\\`` and ``"`` inside lists and maps but does not unescape them when
    reading: a string with either grows on every round trip."""
    text = convert_to_string(None, ['q"', "b\\s"])
    assert text == '["q\\"","b\\\\s"]'
    assert parse_string(text).value == ['q\\"', "b\\\\s"]
