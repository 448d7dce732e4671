"""Conveyor's ``SimpleHeaderConverter`` against Apache Kafka Connect 4.1.1's own, input by input.

Every text of :data:`CORPUS` goes through Kafka Connect's ``SimpleHeaderConverter`` (its real
jars, one JVM for the whole corpus: ``java/HeaderOracle.java``) and through Conveyor's; the
schema, the value (Java's class kept: ``Float`` vs ``Double``, ``Date``'s instant, ``BigDecimal``'s
scale) and the bytes ``fromConnectHeader`` writes back must be the same. Every value of
:data:`TYPED` goes through both ``Values.convertToString``.

The JVM runs with ``user.timezone=UTC`` (Connect parses and prints dates in the JVM's zone;
Conveyor in UTC). Conveyor prints doubles and floats as JDK 19+ does (JDK-4511638), like its
other converters, and the JVM here may be JDK 17, whose ``Double.toString`` prints some
doubles with more digits, so the corpus has none of those; nor exponents just beyond an int
(``1e2147483648``), which JDK 17's ``BigDecimal`` refuses and later ones take. Every answer
here is the same on JDK 17 and 25. Left out because Python cannot hold what Connect returns (Conveyor keeps the
bytes instead; ``tests/unit/test_simple_header_converter.py`` pins them): instants outside
Python's years 1-9999 (``0001-01-01`` is Julian there), a ``24:00:00.000Z`` Time, map keys
Python merges (``{1:"a",true:"b"}``), lists as map keys; and arrays nested in an array whose
last one has ``FLOAT32`` elements after one with doubles (Connect keeps the last schema).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from conveyor.api.schema import Schema
from conveyor.converters import logical
from conveyor.converters.connect_values import Float32, convert_to_string
from conveyor.converters.simple_header_converter import SimpleHeaderConverter
from conveyor.testing import ComponentUnavailable
from conveyor.testing.connect import OracleFailed, run_oracle

pytestmark = pytest.mark.integration

ORACLE = Path(__file__).parent / "java" / "HeaderOracle.java"

CORPUS: list[str | bytes] = [
    # integers, narrowed
    "0", "1", "127", "128", "-128", "-129", "32767", "32768", "-32769", "2147483647", "2147483648",
    "-2147483649", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
    "-9223372036854775809", "10000000000000000000", "123456789012345678901234567890",
    "+1", "-0", "-0.0", "0.000", "007", "1.", "1.0", "1e3", "1E3", "1e+5", "1.50e2", "1e19", "١٢٣",
    # floats and decimals
    "1.5", "-1.5", "0.1", "3.14159", "1e-5", "1e20", "3.4028235E38", "3.4028236E38",
    "1.7976931348623157E308", "1.8E308", "1e400", "-1e400", "1e-50", "-1e-50", "1e-400", "+1.5",
    "0.30000000000000004", "1e2147483647", "1e-2147483647",
    # not numbers
    ".5", "1e", "1_000", "0x10", "NaN", "Infinity", "-Infinity", "12 apples", "4 2", "--1",
    # only the first token of a top-level number counts
    "1,2", "1]", "42}", "1:30", "  42  ",
    # booleans and null
    "true", "false", "TRUE", "True", "FALSE", " true ", "true,false", "truex", "null", "NULL", " null ",
    # empty and blank
    "", " ", "\t", "\n", "\u0000",
    # dates, times, timestamps (lenient, Julian before 1582-10-15)
    "2024-01-31", "2024-02-29", "2023-02-29", "2024-13-45", "2024-00-00", "1582-10-10", "1000-01-01",
    "1969-12-31", "1970-01-01", "1970-01-02", "2024-1-1", "2024-01-1x", "20240131", "2024-01-31x",
    "9999-12-31", "2024-1-NaN", "2024-1-1E1", " 2024-1-31",
    "12:34:56.789Z", "00:00:00.000Z", "23:59:59.999Z", "12:60:00.000Z", "12:34:56.789", "12:34:56Z",
    "12\\:34\\:56.789Z", "-1:00:00.000Z",
    "2024-01-31T12:34:56.789Z", "2024-01-31T00:00:00.000Z", "2024-01-31 12:34:56.789Z",
    "2024-01-31T12:34:56.789+01:00", "1970-01-01T00:00:00.001Z", "2024-02-30T25:61:61.999Z",
    # arrays
    "[]", "[1,2,3]", "[1, 2, 3]", "[1,300,70000]", "[1,2.5]", "[1.5,1e39]", "[1,9223372036854775807,1.5]",
    '[1,"a"]', '["a","b"]', '[ "a" , "b" ]', "[1,null]", "[null]", "[null,null]", "[[1,2],[3]]",
    '[[1],["a"]]', "[1,[2]]", "[true,false]", "[true,1]", "[true,FALSE]", "[0.1,\"a\"]",
    "[2024-01-31,1]", "[1,2024-01-31]", "[2024-01-31,12:34:56.789Z]",
    "[12:34:56.789Z,2024-01-31T12:34:56.789Z]", '["2024-01-31"]', '["12:34:56.789Z"]',
    "[9223372036854775808,1]", "[1e400,1e500]", "[100000000,12:00:00.000Z]", "[70000,2024-01-31]",
    "[2024-01-31,70000]", "[1,,2]", "[1,2,]", "[1 2]", "[1,2", "[", "]", '["unterminated]', "[abc]",
    '["a,b","c:d"]', '["a\\"b"]', '["back\\\\slash"]', '[" "]', '["  x  "]', "[[[[[[[[1]]]]]]]]",
    "[0001-01-01", '[{1:"a",true:"b"}', '[1,"2024-01-31"]', '[\\"a\\"]', '["a"b"]',
    '[{"k":[1,{"x":null}]}]', '[{"k":1},{"k":"v"}]',
    
    # maps
    "{}", '{"a":1}', '{"a":1,"b":2}', '{"a":1,"b":"x"}', "{a:1}", "{1:2,3:4}", '{1:"a",300:"b"}',
    '{"a":[1,2],"b":{"c":true}}', '{"a":1,"a":2}', '{"a":null}', '{"a":1,"b":null}', '{"a"}',
    '{"a":1', "{null:1}", '{"k":2024-01-31T12:34:56.789Z}', '{"t":12:34:56.789Z}', '{"a":1,}',
    '{"x":1.5,"y":2}', "{[1]:2", '{"a":1 "b":2}', '{"a"::1}', '{,}', '{"k":[1,2],"k2":[3]}',
    # strings
    "hello", "hello world", "héllo wörld", "日本語", "emoji 😀", "a\\nb", '"quoted"', "'single'",
    "a:b", "a,b", "{not json", "C:\\path\\to", "x=1;y=2", "2024-01-0😀",
    # bytes that are not UTF-8
    b"\xff\xfe", b"abc\x80def", b"\xed\xa0\x80", b"\xed\xa0\xbd\xed\xb8\x80", b"\xed\xa0", b"\xed\xa0A",
    b"\xf0\x9f\x98", b"\xf0\x9fA", b"\xf0\x9f\x98A", b"\xc0\xaf", b"\xe0\x80\x80", b"\xe0\x80", b"\xf4\x90\x80\x80",
    b"\xf5\x80", b"\xe2\x82", b"1\xff", b"[1,\xff]",
]

F32 = struct.Struct(">f")
F64 = struct.Struct(">d")


def _f32(value: float) -> list[Any]:
    return ["f32", format(int.from_bytes(F32.pack(value), "big"), "x")]


def _f64(value: float) -> list[Any]:
    return ["f64", format(int.from_bytes(F64.pack(value), "big"), "x")]


DAY = 86_400_000

#: Values for Values.convertToString, as HeaderOracle.java's specs.
TYPED: list[list[Any]] = [
    ["i8", -128], ["i16", 300], ["i32", -70000], ["i64", "-9223372036854775808"],
    _f32(0.1), _f32(1.0e10), _f32(-0.0), _f32(3.4028234663852886e38), _f32(1.4e-45), _f32(float("nan")),
    _f64(0.1), _f64(1e7), _f64(1e-3), _f64(1e-4), _f64(123456.789), _f64(float("inf")), _f64(float("-inf")),
    _f64(-0.0), _f64(5e-324), _f64(1.7976931348623157e308),
    ["bool", True], ["bool", False], ["str", ""], ["str", 'plain "q" \\ x'], ["bytes", "AAEC/w=="],
    ["dec", "12345", 2], ["dec", "1", -3], ["dec", "-5", 10], ["dec", "0", 3],
    ["date", 19753 * DAY], ["date", -DAY], ["date", 0], ["date", -365243 * DAY], ["date", -141428 * DAY],
    ["time", 45296789], ["time", 0], ["ts", 1706704496789], ["ts", -1], ["ts", 19753 * DAY], ["ts", 5],
    ["list", []], ["list", [["i8", 1], ["str", 'x"y\\'], ["null"], ["bytes", "AA=="], _f32(1.5), ["date", 0]]],
    ["map", []], ["map", [[["str", "a"], ["i32", 1]], [["i8", 1], ["list", [["bool", True]]]]]],
    ["map", [[["ts", 1706704496789], ["map", [[["str", "k:v"], ["null"]]]]]]],
]


def _canonical_schema(schema: Schema | None) -> Any:
    if schema is None:
        return None
    out: dict[str, Any] = {"type": schema.type.name, "optional": schema.optional, "name": schema.name,
                           "version": schema.version, "parameters": schema.parameters}
    if schema.type.name == "MAP":
        out["key"] = _canonical_schema(schema.key_schema)
    if schema.type.name in ("MAP", "ARRAY"):
        out["value"] = _canonical_schema(schema.value_schema)
    return out


def _millis(value: dt.date | dt.time) -> int:
    if isinstance(value, dt.datetime):
        return (value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(milliseconds=1)
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days * DAY
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def _canonical(value: Any) -> Any:
    """HeaderOracle.java's canonical form of a value, from Conveyor's."""
    if value is None:
        return None
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, Float32):
        return {"f32": format(int.from_bytes(F32.pack(value), "big"), "x")}
    if isinstance(value, float):
        return {"f64": format(int.from_bytes(F64.pack(value), "big"), "x")}
    if isinstance(value, decimal.Decimal):
        sign, digits, exponent = value.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0")
        return {"dec": str(-unscaled if sign else unscaled), "scale": -exponent}
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, (dt.date, dt.time)):
        return {"date": _millis(value)}
    if isinstance(value, list):
        return {"list": [_canonical(v) for v in value]}
    if isinstance(value, dict):
        return {"map": [[_canonical(k), _canonical(v)] for k, v in value.items()]}
    return {"unknown": f"{type(value).__name__}: {value!r}"}


def _build(spec: list[Any]) -> Any:
    """The Conveyor value of one of HeaderOracle.java's value specs."""
    kind, arg = spec[0], (spec[1] if len(spec) > 1 else None)
    if kind == "null":
        return None
    if kind in ("i8", "i16", "i32", "i64"):
        return int(arg)
    if kind == "f32":
        return Float32(F32.unpack(int(arg, 16).to_bytes(4, "big"))[0])
    if kind == "f64":
        return F64.unpack(int(arg, 16).to_bytes(8, "big"))[0]
    if kind in ("bool", "str"):
        return arg
    if kind == "bytes":
        return base64.b64decode(arg)
    if kind == "dec":
        return logical.make_decimal(int(arg), spec[2])
    if kind == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=arg // DAY)
    if kind == "time":
        return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=arg)).time()
    if kind == "ts":
        return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=arg)
    if kind == "list":
        return [_build(item) for item in arg]
    if kind == "map":
        return {_build(k): _build(v) for k, v in arg}
    raise AssertionError(f"unknown spec {spec}")


def _conveyor_parse(raw: bytes) -> dict[str, Any]:
    converter = SimpleHeaderConverter()
    converter.configure({})
    try:
        schema, value = converter.to_connect_header("topic", "key", raw)
    except Exception as e:  # noqa: BLE001 - compared with Connect's exception
        return {"error": f"{type(e).__name__}: {e}"}
    answer: dict[str, Any] = {"schema": _canonical_schema(schema), "value": _canonical(value)}
    try:
        written = converter.from_connect_header("topic", "key", schema, value)
        answer["bytes"] = None if written is None else base64.b64encode(written).decode()
    except Exception as e:  # noqa: BLE001
        answer["fromError"] = f"{type(e).__name__}: {e}"
    return answer


def _raw(item: str | bytes) -> bytes:
    return item if isinstance(item, bytes) else item.encode("utf-8")


@pytest.fixture(scope="module")
def connect_answers() -> dict[str, list[dict[str, Any]]]:
    """Kafka Connect's answers for :data:`CORPUS` (``parse``) and :data:`TYPED` (``text``)."""
    requests = [f"P {base64.b64encode(_raw(item)).decode()}" for item in CORPUS]
    requests += [f"S {json.dumps(spec)}" for spec in TYPED]
    try:
        answers = run_oracle(ORACLE, requests, "connect-api-")
    except (ComponentUnavailable, OracleFailed) as e:
        pytest.fail(f"Kafka Connect 4.1.1's header oracle could not answer: {e}")
    return {"parse": answers[:len(CORPUS)], "text": answers[len(CORPUS):]}


def _id(item: str | bytes) -> str:
    return repr(item)[:40]


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=[_id(i) for i in CORPUS])
def test_parse_and_write_back_as_connect(connect_answers: dict[str, list[dict[str, Any]]], index: int) -> None:
    assert _conveyor_parse(_raw(CORPUS[index])) == connect_answers["parse"][index]


@pytest.mark.parametrize("index", range(len(TYPED)), ids=[json.dumps(s)[:40] for s in TYPED])
def test_convert_to_string_as_connect(connect_answers: dict[str, list[dict[str, Any]]], index: int) -> None:
    try:
        answer: dict[str, Any] = {"text": convert_to_string(None, _build(TYPED[index]))}
    except Exception as e:  # noqa: BLE001
        answer = {"error": f"{type(e).__name__}: {e}"}
    assert answer == connect_answers["text"][index]


def test_corpus_is_large_and_distinct() -> None:
    assert len(CORPUS) >= 80 and len(set(CORPUS)) == len(CORPUS)
