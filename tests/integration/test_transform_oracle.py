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
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conveyor.api import Header, SinkRecord
from conveyor.converters.json_converter import JsonConverter
from conveyor.testing import ComponentUnavailable, _support
from conveyor.testing.connect import connect_libs
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


@pytest.fixture(scope="module")
def connect_answers() -> list[dict[str, Any]]:
    """Kafka Connect's answer for each case of :data:`CASES`, in order."""
    try:
        libs = connect_libs()
        java = _support.find_java_home(17, component="kafka-connect") / "bin" / "java"
    except ComponentUnavailable as e:
        pytest.fail(f"Kafka Connect 4.1.1's jars or Java 17+ are needed for this oracle and are unavailable: {e}")
    jars = sorted(str(p) for p in libs.glob("*.jar"))
    if not any("connect-transforms-" in j for j in jars):
        pytest.fail(f"no connect-transforms jar in {libs}; delete the directory to have it resolved again")
    requests = [json.dumps(case) for case in CASES.values()]
    run = subprocess.run([str(java), "-Duser.timezone=UTC", "-cp", ":".join(jars), str(ORACLE)],
                         input="\n".join(requests) + "\n", capture_output=True, encoding="utf-8", timeout=300,
                         check=False)
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    if run.returncode != 0 or len(answers) != len(requests):
        pytest.fail(f"TransformOracle.java exited {run.returncode} with {len(answers)} of {len(requests)} answers:\n"
                    f"{run.stderr[-4000:]}")
    return answers


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
