"""Java's text of Connect values, as ``file-sink`` writes them (Kafka Connect's
``FileStreamSinkTask`` prints ``String.valueOf(record.value())``).

The expected lines of :data:`PRINTED` are what Apache Kafka Connect 4.1.1's own
``FileStreamSinkTask`` wrote for these JSON values read by its ``JsonConverter``
(``schemas.enable`` false / true), on JDK 25 with ``user.timezone=UTC``. On JDK 17 four of the
doubles print with more digits (JDK-4511638, fixed in JDK 19: ``1e23`` → ``9.999999999999999E22``,
``1e-323``, ``2e23``, ``8.41e21``, ``2.82879384806159e17``); Conveyor follows JDK 19+. Left out:
``-0.0``, which Kafka Connect's JsonConverter reads through BigDecimal as ``0.0`` (a converter
matter), and byte arrays, which Java prints by identity.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from conveyor.api import Schema, SchemaType
from conveyor.connectors.file.java_text import java_string, string_hash
from conveyor.converters import JsonConverter
from conveyor.java_text.numbers import double_to_string, float_to_string

# (schemas.enable, JSON value, the line Kafka Connect's FileStreamSinkTask printed)
PRINTED = [
    (False, '"hello"',
     'hello'),
    (False, '42',
     '42'),
    (False, '-7',
     '-7'),
    (False, '9223372036854775807',
     '9223372036854775807'),
    (False, '9223372036854775808',
     '-9223372036854775808'),
    (False, '123456789012345678901234567890',
     '-4362896299872285998'),
    (False, '1.0',
     '1.0'),
    (False, '0.1',
     '0.1'),
    (False, '1e7',
     '1.0E7'),
    (False, '9999999.0',
     '9999999.0'),
    (False, '1e-3',
     '0.001'),
    (False, '1e-4',
     '1.0E-4'),
    (False, '123456.789',
     '123456.789'),
    (False, '1e23',
     '1.0E23'),
    (False, '2e-3',
     '0.002'),
    (False, '5e-324',
     '4.9E-324'),
    (False, '1e-323',
     '9.9E-324'),
    (False, '2.2250738585072014e-308',
     '2.2250738585072014E-308'),
    (False, '1.7976931348623157e308',
     '1.7976931348623157E308'),
    (False, '1e400',
     'Infinity'),
    (False, '0.0',
     '0.0'),
    (False, '100.0',
     '100.0'),
    (False, '3.0e10',
     '3.0E10'),
    (False, '0.30000000000000004',
     '0.30000000000000004'),
    (False, '2e23',
     '2.0E23'),
    (False, '8.41e21',
     '8.41E21'),
    (False, '2.82879384806159e17',
     '2.82879384806159E17'),
    (False, '1.0E-5',
     '1.0E-5'),
    (False, 'true',
     'true'),
    (False, 'null',
     'null'),
    (False, '[1,"a",null,2.5,[],{}]',
     '[1, a, null, 2.5, [], {}]'),
    (False, '{"b":1,"a":2}',
     '{a=2, b=1}'),
    (False, '{"id":1,"name":"n1"}',
     '{name=n1, id=1}'),
    (False, '{"name":"x","id":5,"email":"e","age":3,"zip":"z","city":"c","country":"ch","phone":"p","street":"s","number":7,"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}',
     '{zip=z, country=ch, a=1, b=2, c=3, d=4, city=c, e=5, f=6, number=7, phone=p, street=s, name=x, id=5, email=e, age=3}'),
    (False, '{"a":{"c":[1,{"z":1,"y":2}]},"é":"ü","日本":1,"😀":2}',
     '{a={c=[1, {y=2, z=1}]}, 😀=2, é=ü, 日本=1}'),
    (False, '{"Aa":1,"BB":2,"AaAa":3,"BBBB":4,"AaBB":5,"BBAa":6}',
     '{Aa=1, BB=2, AaAa=3, BBBB=4, AaBB=5, BBAa=6}'),
    (False, '{"AaAaAaAa":1,"AaAaAaBB":2,"AaAaBBAa":3,"AaAaBBBB":4,"AaBBAaAa":5,"AaBBAaBB":6,"AaBBBBAa":7,"AaBBBBBB":8,"BBAaAaAa":9,"BBAaAaBB":10,"x":0}',
     '{AaAaAaAa=1, AaAaAaBB=2, AaAaBBAa=3, AaAaBBBB=4, AaBBAaAa=5, AaBBAaBB=6, AaBBBBAa=7, AaBBBBBB=8, BBAaAaAa=9, BBAaAaBB=10, x=0}'),
    (False, '{"AaAaAaAa":1,"AaAaAaBB":2,"AaAaBBAa":3,"AaAaBBBB":4,"AaBBAaAa":5,"AaBBAaBB":6,"AaBBBBAa":7,"AaBBBBBB":8,"BBAaAaAa":9,"x":0}',
     '{AaAaAaAa=1, AaAaAaBB=2, AaAaBBAa=3, AaAaBBBB=4, AaBBAaAa=5, AaBBAaBB=6, AaBBBBAa=7, AaBBBBBB=8, BBAaAaAa=9, x=0}'),
    (False, '"line with \\u0000 nul"',
     'line with \x00 nul'),
    (False, '"lone \\ud800 surrogate"',
     'lone ? surrogate'),
    (True, '{"schema":{"type":"struct","fields":[{"field":"id","type":"int32"},{"field":"name","type":"string","optional":true},{"field":"f","type":"float"},{"field":"d","type":"double"},{"field":"m","type":"map","keys":{"type":"int32"},"values":{"type":"string"}},{"field":"l","type":"map","keys":{"type":"int64"},"values":{"type":"boolean"}},{"field":"dec","type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}},{"field":"ts","type":"int64","name":"org.apache.kafka.connect.data.Timestamp"},{"field":"date","type":"int32","name":"org.apache.kafka.connect.data.Date"},{"field":"time","type":"int32","name":"org.apache.kafka.connect.data.Time"},{"field":"arr","type":"array","items":{"type":"float"}},{"field":"inner","type":"struct","optional":true,"fields":[{"field":"x","type":"int8"}]}]},"payload":{"id":7,"name":null,"f":0.1,"d":0.1,"m":[[-1,"neg"],[17,"a"],[1,"b"],[100000,"c"]],"l":[[-1,true],[4294967296,false],[3,true]],"dec":"AeI=","ts":1767225600123,"date":20000,"time":3723004,"arr":[1.1,3.4028235e38,1.4e-45,1e7,16777216,0.001,1e-4,123.456],"inner":{"x":-3}}}',
     'Struct{id=7,f=0.1,d=0.1,m={-1=neg, 17=a, 1=b, 100000=c},l={-1=true, 4294967296=false, 3=true},dec=4.82,ts=Thu Jan 01 00:00:00 UTC 2026,date=Fri Oct 04 00:00:00 UTC 2024,time=Thu Jan 01 01:02:03 UTC 1970,arr=[1.1, 3.4028235E38, 1.4E-45, 1.0E7, 1.6777216E7, 0.001, 1.0E-4, 123.456],inner=Struct{x=-3}}'),
    (True, '{"schema":{"type":"float"},"payload":3.3}',
     '3.3'),
    (True, '{"schema":{"type":"double"},"payload":1e22}',
     '1.0E22'),
    (True, '{"schema":{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"-2"}},"payload":"AQ=="}',
     '1E+2'),
    (True, '{"schema":{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"9"}},"payload":"AQ=="}',
     '1E-9'),
    (True, '{"schema":{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp"},"payload":-62135596800000}',
     'Mon Jan 03 00:00:00 UTC 1'),
    (True, '{"schema":{"type":"string"},"payload":"plain"}',
     'plain'),
    (True, '{"schema":{"type":"map","keys":{"type":"double"},"values":{"type":"float"}},"payload":[[0.5,1.5],[-2.25,2.0],[1e10,3.0]]}',
     '{0.5=1.5, -2.25=2.0, 1.0E10=3.0}'),
    (True, '{"schema":{"type":"map","keys":{"type":"boolean"},"values":{"type":"int16"}},"payload":[[true,1],[false,2]]}',
     '{false=2, true=1}'),
]


@pytest.mark.parametrize(("schemas", "json_value", "printed"), PRINTED)
def test_values_print_as_kafka_connect_prints_them(schemas, json_value, printed):
    converter = JsonConverter()
    converter.configure({"schemas.enable": str(schemas).lower()}, False)
    schema, value = converter.to_connect_data("t", [], json_value.encode())
    assert java_string(value, schema).encode("utf-8", "replace") == printed.encode("utf-8", "replace")


@pytest.mark.parametrize(("value", "text"), [
    (1e-3, "0.001"), (9.999e-4, "9.999E-4"), (1e7, "1.0E7"), (9999999.999, "9999999.999"), (-1.5, "-1.5"),
    (-0.0, "-0.0"), (float("nan"), "NaN"), (float("-inf"), "-Infinity"), (1e21, "1.0E21"), (123e-20, "1.23E-18"),
])
def test_double_to_string(value, text):
    assert double_to_string(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (0.1, "0.1"), (1.1, "1.1"), (3.4028235e38, "3.4028235E38"), (1.4e-45, "1.4E-45"), (1e39, "Infinity"),
    (1e-50, "0.0"), (-2.5, "-2.5"), (16777217.0, "1.6777216E7"),
])
def test_float_to_string(value, text):
    assert float_to_string(value) == text


def test_other_python_values():
    assert java_string(decimal.Decimal("-0.00")) == "0.00"
    assert java_string(dt.datetime(2024, 2, 29, 23, 59, 58, 999000, tzinfo=dt.timezone.utc)) == \
        "Thu Feb 29 23:59:58 UTC 2024"
    assert java_string(dt.datetime(2024, 3, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))) == \
        "Thu Feb 29 23:00:00 UTC 2024"
    assert java_string(b"\x00\x01").startswith("[B@")
    assert java_string((1, None)) == "[1, null]"
    assert java_string({"b": None, "a": 2}, Schema.struct(("a", Schema(SchemaType.INT8)),
                                                        ("b", Schema(SchemaType.STRING, optional=True)))) \
        == "Struct{a=2}"
    assert string_hash("😀") == (0xD83D * 31 + 0xDE00)
