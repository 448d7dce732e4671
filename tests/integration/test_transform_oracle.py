"""Conveyor's transformations against Apache Kafka Connect 4.1.1's own classes, case by case.

Each case of :data:`CASES` (a transformation, its configuration and a record) goes through
Kafka Connect's class (its real jars, one JVM for every case: ``java/TransformOracle.java``) and
through Conveyor's, both reading and writing keys, values and headers with ``JsonConverter``
(``schemas.enable=true``): the records they give must be the same envelopes (schema and
payload), headers in order; a case that fails must fail on both sides (a configuration refused in
Connect's words).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conveyor.api import Header, SinkRecord
from conveyor.converters.json_converter import JsonConverter
from conveyor.testing import ComponentUnavailable
from conveyor.testing.connect import OracleFailed, run_oracle
from conveyor.transforms._registry import TRANSFORMATIONS

pytestmark = pytest.mark.integration

ORACLE = Path(__file__).parent / "java" / "TransformOracle.java"
T = "org.apache.kafka.connect.transforms."


def _struct(fields: list[tuple[str, dict[str, Any]]], name: str | None = None, optional: bool = False) -> dict:
    schema: dict[str, Any] = {"type": "struct", "optional": optional,
                              "fields": [{"field": f, **s} for f, s in fields]}
    if name:
        schema["name"] = name
    return schema


ORDER = _struct([("id", {"type": "int64", "optional": False}),
                 ("customer", {"type": "string", "optional": True}),
                 ("region", {"type": "string", "optional": True, "default": "eu"}),
                 ("total", {"type": "double", "optional": False})], name="shop.Order")
ORDER_VALUE = {"id": 7, "customer": "ada", "region": None, "total": 12.5}
MAP_VALUE = {"id": 7, "customer": "ada", "nested": {"a": [1, 2]}}


def _env(schema: Any, payload: Any) -> dict[str, Any]:
    return {"schema": schema, "payload": payload}


def _case(cls: str, config: dict[str, str], value: dict | None, key: dict | None = None,
          headers: list | None = None) -> dict[str, Any]:
    return {"class": T + cls, "config": config, "key": key, "value": value, "headers": headers or []}


CASES: dict[str, dict[str, Any]] = {
    "value-move-struct": _case("HeaderFrom$Value", {"fields": "customer,region", "headers": "who,where",
                                                    "operation": "move"}, _env(ORDER, ORDER_VALUE)),
    "value-copy-struct": _case("HeaderFrom$Value", {"fields": "id", "headers": "order-id", "operation": "copy"},
                               _env(ORDER, ORDER_VALUE)),
    "value-move-schemaless": _case("HeaderFrom$Value", {"fields": "customer,nested", "headers": "who,n",
                                                        "operation": "move"}, _env(None, MAP_VALUE)),
    "value-copy-schemaless-missing-field": _case("HeaderFrom$Value", {"fields": "absent", "headers": "h",
                                                                      "operation": "copy"}, _env(None, MAP_VALUE)),
    "key-move-struct": _case("HeaderFrom$Key", {"fields": "id", "headers": "k", "operation": "move"},
                             _env(ORDER, ORDER_VALUE), key=_env(ORDER, ORDER_VALUE)),
    "appended-after-existing-headers": _case(
        "HeaderFrom$Value", {"fields": "customer", "headers": "who", "operation": "copy"}, _env(ORDER, ORDER_VALUE),
        headers=[["who", _env({"type": "string", "optional": False}, "earlier")]]),
    "same-field-twice": _case("HeaderFrom$Value", {"fields": "id,id", "headers": "a,b", "operation": "move"},
                              _env(ORDER, ORDER_VALUE)),
    "struct-missing-field-fails": _case("HeaderFrom$Value", {"fields": "absent", "headers": "h",
                                                             "operation": "copy"}, _env(ORDER, ORDER_VALUE)),
    "tombstone-fails": _case("HeaderFrom$Value", {"fields": "id", "headers": "h", "operation": "move"}, None),
    "not-a-map-fails": _case("HeaderFrom$Value", {"fields": "id", "headers": "h", "operation": "copy"},
                             _env(None, "just text")),
    "unequal-lists-refused": _case("HeaderFrom$Value", {"fields": "a,b", "headers": "h", "operation": "copy"},
                                   _env(None, MAP_VALUE)),
    "unknown-operation-refused": _case("HeaderFrom$Value", {"fields": "a", "headers": "h", "operation": "swap"},
                                       _env(None, MAP_VALUE)),
}

TS = {"type": "int64", "optional": False, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}
OPTIONAL_TS = {**TS, "optional": True}
DATE = {"type": "int32", "optional": False, "name": "org.apache.kafka.connect.data.Date", "version": 1}
TIME = {"type": "int32", "optional": False, "name": "org.apache.kafka.connect.data.Time", "version": 1}
INT64, STRING = {"type": "int64", "optional": False}, {"type": "string", "optional": False}
EVENT = _struct([("id", {"type": "int32", "optional": False}), ("at", {"type": "string", "optional": True}),
                 ("seen", {**OPTIONAL_TS, "default": 1700000000000})], name="shop.Event")
MILLIS = 1700000123456  # 2023-11-14T22:15:23.456Z


def _converter(config: dict[str, str], value: Any, key: Any = None) -> dict[str, Any]:
    return _case("TimestampConverter$Value" if key is None else "TimestampConverter$Key", config, value, key=key)


CASES |= {
    # the whole value, each kind into each kind
    "unix-to-string": _converter({"target.type": "string", "format": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"},
                                 _env(INT64, MILLIS)),
    "unix-seconds-to-timestamp": _converter({"target.type": "Timestamp", "unix.precision": "seconds"},
                                            _env(INT64, 1700000123)),
    "unix-micros-to-date": _converter({"target.type": "Date", "unix.precision": "microseconds"},
                                      _env(INT64, MILLIS * 1000 + 789)),
    "negative-nanos-to-unix-millis": _converter({"target.type": "unix", "unix.precision": "nanoseconds"},
                                                _env(INT64, -1_500_000_001)),
    "timestamp-to-unix-seconds": _converter({"target.type": "unix", "unix.precision": "seconds"}, _env(TS, MILLIS)),
    "timestamp-to-time": _converter({"target.type": "Time"}, _env(TS, MILLIS)),
    "timestamp-before-1970-to-date": _converter({"target.type": "Date"}, _env(TS, -86_400_000 * 3 - 5)),
    "date-to-string": _converter({"target.type": "string", "format": "EEEE d MMMM yyyy"}, _env(DATE, 19675)),
    "time-to-unix": _converter({"target.type": "unix"}, _env(TIME, 45_296_789)),
    "optional-null-stays-null": _converter({"target.type": "unix"}, _env(OPTIONAL_TS, None)),
    # strings parsed as SimpleDateFormat parses them
    "iso-string-to-timestamp": _converter({"target.type": "Timestamp", "format": "yyyy-MM-dd'T'HH:mm:ss.SSSX"},
                                          _env(STRING, "2023-11-14T23:15:23.456+01")),
    "rfc-1123-string-to-unix": _converter({"target.type": "unix", "format": "EEE, dd MMM yyyy HH:mm:ss Z"},
                                          _env(STRING, "Tue, 14 Nov 2023 22:15:23 -0230")),
    "abutting-fields": _converter({"target.type": "unix", "format": "yyyyMMddHHmmss"}, _env(STRING, "20231114221523")),
    "lenient-rollover": _converter({"target.type": "Timestamp", "format": "yyyy-MM-dd HH:mm"},
                                   _env(STRING, "2023-13-32 25:61")),
    "twelve-hour-clock": _converter({"target.type": "unix", "format": "MM/dd/yyyy hh:mm a"},
                                    _env(STRING, "11/14/2023 12:05 pm")),
    "gmt-offset-and-trailing-text": _converter({"target.type": "unix", "format": "yyyy-MM-dd HH:mm z"},
                                               _env(STRING, "2023-11-14 22:15 GMT+5:30 and more")),
    "julian-date": _converter({"target.type": "unix", "format": "yyyy-MM-dd"}, _env(STRING, "1500-03-01")),
    "string-not-matching-fails": _converter({"target.type": "unix", "format": "yyyy-MM-dd"},
                                            _env(STRING, "14/11/2023")),
    # a field of a struct, its default converted too
    "struct-field-to-timestamp": _converter({"target.type": "Timestamp", "field": "at", "format": "yyyy-MM-dd HH:mm"},
                                            _env(EVENT, {"id": 1, "at": "2023-11-14 22:15", "seen": None})),
    "struct-other-field-default-kept": _converter(
        {"target.type": "string", "field": "seen", "format": "yyyy-MM-dd"},
        _env(EVENT, {"id": 1, "at": None, "seen": None})),
    "struct-null-without-default": _converter(
        {"target.type": "string", "field": "seen", "format": "yyyy-MM-dd", "replace.null.with.default": "false"},
        _env(EVENT, {"id": 1, "at": None, "seen": None})),
    "key-struct-field": _converter({"target.type": "unix", "field": "seen"}, _env(ORDER, ORDER_VALUE),
                                   key=_env(EVENT, {"id": 2, "at": None, "seen": MILLIS})),
    # without a schema
    "schemaless-field": _converter({"target.type": "string", "field": "ts", "format": "yyyy-MM-dd HH:mm:ss"},
                                   _env(None, {"ts": MILLIS, "other": "x"})),
    "schemaless-whole-string": _converter({"target.type": "unix", "format": "dd.MM.yy"}, _env(None, "14.11.23")),
    "schemaless-tombstone": _converter({"target.type": "unix"}, None),
    "schemaless-double-fails": _converter({"target.type": "unix"}, _env(None, 1.5)),
    "int32-schema-fails": _converter({"target.type": "unix"}, _env({"type": "int32", "optional": False}, 7)),
    # configurations Connect refuses
    "string-without-format-refused": _converter({"target.type": "string"}, _env(INT64, MILLIS)),
    "bad-pattern-refused": _converter({"target.type": "string", "format": "yyyy-bb"}, _env(INT64, MILLIS)),
    "unknown-target-refused": _converter({"target.type": "timestamp"}, _env(INT64, MILLIS)),
    "unknown-precision-refused": _converter({"target.type": "unix", "unix.precision": "minutes"}, _env(INT64, 1)),
    "missing-target-refused": _converter({}, _env(INT64, MILLIS)),
}


@pytest.fixture(scope="module")
def connect_answers() -> list[dict[str, Any]]:
    """Kafka Connect's answer for each case of :data:`CASES`, in order."""
    try:
        return run_oracle(ORACLE, [json.dumps(case) for case in CASES.values()], "connect-transforms-")
    except (ComponentUnavailable, OracleFailed) as e:
        pytest.fail(f"Kafka Connect 4.1.1's transform oracle could not answer: {e}")


def _converter() -> JsonConverter:
    converter = JsonConverter()
    converter.configure({"schemas.enable": "true"}, is_key=False)
    return converter


def _conveyor(case: dict[str, Any]) -> dict[str, Any]:
    converter = _converter()

    def read(envelope: Any) -> tuple[Any, Any]:
        if envelope is None:
            return None, None
        data = converter.to_connect_data("topic", (), json.dumps(envelope).encode())
        return data.schema, data.value

    def write(schema: Any, value: Any) -> Any:
        data = converter.from_connect_data("topic", (), schema, value)
        return None if data is None else json.loads(data)

    try:
        transformation = TRANSFORMATIONS[case["class"]]()
        transformation.configure(case["config"])
        key_schema, key = read(case["key"])
        value_schema, value = read(case["value"])
        headers = tuple(Header(name, *reversed(read(envelope))) for name, envelope in case["headers"])
        record = SinkRecord(topic="topic", kafka_partition=0, key=key, value=value, kafka_offset=0,
                            key_schema=key_schema, value_schema=value_schema, timestamp=1700000000000,
                            headers=headers)
        result = transformation.apply(record)
    except Exception as exc:  # noqa: BLE001 - failing is an answer: both sides must fail
        return {"error": type(exc).__name__, "message": str(exc)}
    if result is None:
        return {"record": None}
    return {"key": write(result.key_schema, result.key), "value": write(result.value_schema, result.value),
            "headers": [[h.key, write(h.schema, h.value)] for h in result.headers]}


@pytest.mark.parametrize("index", range(len(CASES)), ids=list(CASES))
def test_the_same_record_as_kafka_connect(connect_answers: list[dict[str, Any]], index: int) -> None:
    connect, conveyor = connect_answers[index], _conveyor(list(CASES.values())[index])
    if "error" in connect:
        assert "error" in conveyor, f"Connect failed ({connect}), Conveyor gave {conveyor}"
        if connect["error"].endswith("ConfigException"):  # a configuration refused in Connect's words
            assert conveyor["error"] == "ConfigError" and connect["message"] in conveyor["message"], conveyor
        return
    assert conveyor == connect
