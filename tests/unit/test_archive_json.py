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
