"""The bytes the source batch path writes for a ``SourceBatch``'s columns are the bytes the
record path's converters write for the same records (``StringConverter`` for ``string``,
``JsonConverter`` with and without ``schemas.enable`` for ``arrow.json``), and
``SourceBatch.records`` gives the records ``poll`` would."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from conveyor.api.batches import JSON_TYPE, SourceBatch, json_text
from conveyor.converters.json_converter import JsonConverter
from conveyor.converters.string_converter import StringConverter
from conveyor.runtime.task.runner import TaskFailed
from conveyor.runtime.task.source.batches import _message_bytes

VALUES = [{"op": "c", "after": {"id": 1, "item": "é \"q\" \n", "price": 0.1, "big": 123456789012345678901234567890},
           "tags": [1, 2.5, None, True]}, None, "text", 7, [], {}, -0.0, 1e16]


def _json_column(values: list) -> pa.Array:
    texts = [None if v is None else json_text(v) for v in values]
    return pa.ExtensionArray.from_storage(JSON_TYPE, pa.array(texts, pa.binary()).view(pa.string()))


@pytest.mark.parametrize("schemas", [False, True])
def test_json_cells_are_written_as_json_converter_writes_their_values(schemas):
    converter = JsonConverter()
    converter.configure({"schemas.enable": str(schemas).lower()}, is_key=False)
    written = _message_bytes(_json_column(VALUES), converter, "values")
    assert written == [converter.from_connect_data("t", (), None, v) for v in VALUES]
    assert written[1] is None


def test_string_cells_are_written_as_string_converter_writes_them():
    converter = StringConverter()
    converter.configure({}, is_key=False)
    strings = ["a", None, "é 日本", ""]
    assert _message_bytes(pa.array(strings, pa.string()), converter, "values") == \
        [converter.from_connect_data("t", (), None, s) for s in strings]


def test_a_column_its_converter_does_not_write_as_it_is_fails_the_task_naming_both():
    json_converter = JsonConverter()
    json_converter.configure({}, is_key=False)
    with pytest.raises(TaskFailed, match="string values, which JsonConverter"):
        _message_bytes(pa.array(["a"], pa.string()), json_converter, "values")
    strings = StringConverter()
    strings.configure({}, is_key=True)
    with pytest.raises(TaskFailed, match="keys, which StringConverter"):
        _message_bytes(_json_column([{"id": 1}]), strings, "keys")


def test_source_batch_records_are_what_poll_would_return():
    batch = SourceBatch(topic="t", values=_json_column([{"a": 1}, None]), keys=_json_column([{"id": 1}, 2]),
                        timestamps=pa.array([1_700_000_000_000, None], pa.int64()),
                        source_partition={"table": "x"}, source_offset={"id": 9})
    first, second = batch.records()
    assert (first.key, first.value, first.timestamp, first.key_schema, first.value_schema) == \
        ({"id": 1}, {"a": 1}, 1_700_000_000_000, None, None)
    assert (second.key, second.value, second.timestamp) == (2, None, None)
    assert json.loads(json_text(first.value)) == {"a": 1}
    assert first.source_offset == second.source_offset == {"id": 9}
