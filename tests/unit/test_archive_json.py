"""archive-sink's ``jsonl`` encoding: orjson's fast path writes the stdlib's text."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math

import pytest

from conveyor.api import DataError
from conveyor.connectors.archive.formats import json_bytes, json_text

SAME_TEXT = [
    {"a": 1, "b": "é€😀", "c": [1.5, None, True], "d": {"e": "x\ny\"z"}},
    {"bytes": b"\x00\xff", "dec": decimal.Decimal("12.340"), "when": dt.datetime(2026, 11, 26, 5, 1, 2, 345678),
     "aware": dt.datetime(2026, 11, 26, tzinfo=dt.timezone.utc), "day": dt.date(2026, 11, 26),
     "time": dt.time(5, 1, 2, 5), "tuple": (1, 2), "set": {3}},
    {"big": 2**70, "negbig": -(2**64)},
    {1: "non-string key"},
    "plain",
    [],
    -0.0,
    1e300,
]


@pytest.mark.parametrize("value", SAME_TEXT, ids=range(len(SAME_TEXT)))
def test_the_fast_path_writes_the_stdlib_text(value: object) -> None:
    assert json_bytes(value) == json_text(value).encode("utf-8")
    json.loads(json_bytes(value))


@pytest.mark.parametrize("special", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_become_null_so_every_line_is_json(special: float) -> None:
    line = json_bytes({"x": special, "y": [special]})
    assert line == b'{"x":null,"y":[null]}'
    assert json.loads(line) == {"x": None, "y": [None]}


@pytest.mark.parametrize("value", [{"x": object()}, {"x": "lone \ud800 surrogate"}, {"x": "\udfff", 1: 2}])
def test_what_json_cannot_hold_is_a_data_error(value: object) -> None:
    with pytest.raises(DataError, match="cannot encode as JSON"):
        json_bytes(value)


def test_a_jsonl_buffer_writes_the_first_lines_and_keeps_the_rest_in_order() -> None:
    from conveyor.api import SinkRecord
    from conveyor.connectors.archive.formats import JsonlBuffer

    buffer = JsonlBuffer(start=10, opened=0.0)
    for offset in range(10, 15):
        buffer.append(SinkRecord(topic="t", kafka_partition=0, key=None, value={"n": offset}, kafka_offset=offset),
                      offset)
    lines = lambda data: [json.loads(line)["value"]["n"] for line in data.decode().splitlines()]  # noqa: E731
    assert buffer.payload(5, "t", 0).endswith(b"\n") and lines(buffer.payload(5, "t", 0)) == [10, 11, 12, 13, 14]
    assert lines(buffer.payload(2, "t", 0)) == [10, 11]
    buffer.drop_first(2)  # the first file (two records) was written
    assert (buffer.start, buffer.count) == (12, 3)
    assert lines(buffer.payload(3, "t", 0)) == [12, 13, 14]
    buffer.append(SinkRecord(topic="t", kafka_partition=0, key=None, value={"n": 15}, kafka_offset=15), 15)
    assert lines(buffer.payload(4, "t", 0)) == [12, 13, 14, 15]
    buffer.drop_first(4)
    assert buffer.count == 0 and buffer.payload(0, "t", 0) == b""
