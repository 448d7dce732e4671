"""Connect schema -> Arrow type mapping of the archive's ``parquet`` format, and its value checks."""

from __future__ import annotations

import datetime as dt
import decimal
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conveyor.api import DataError, Header, Schema, SchemaType, SinkRecord
from conveyor.connectors.archive import parquet_format
from conveyor.api.arrow_types import arrow_type
from conveyor.connectors.archive.parquet_format import ParquetBuffer, ParquetLayout

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"


def _decimal(scale: int, precision: int | None = None) -> Schema:
    params = {"scale": str(scale)}
    if precision is not None:
        params["connect.decimal.precision"] = str(precision)
    return Schema(SchemaType.BYTES, name=DECIMAL, parameters=params)


@pytest.mark.parametrize(
    "schema, expected",
    [
        (Schema(SchemaType.INT8), pa.int8()),
        (Schema(SchemaType.INT16), pa.int16()),
        (Schema(SchemaType.INT32), pa.int32()),
        (Schema(SchemaType.INT64), pa.int64()),
        (Schema(SchemaType.FLOAT32), pa.float32()),
        (Schema(SchemaType.FLOAT64), pa.float64()),
        (Schema(SchemaType.BOOLEAN), pa.bool_()),
        (Schema(SchemaType.STRING), pa.string()),
        (Schema(SchemaType.BYTES), pa.binary()),
        (_decimal(2), pa.decimal128(38, 2)),
        (_decimal(3, 10), pa.decimal128(10, 3)),
        (_decimal(4, 60), pa.decimal256(60, 4)),
        (_decimal(40), pa.decimal256(40, 40)),  # precision at least the scale
        (Schema(SchemaType.INT32, name=DATE), pa.date32()),
        (Schema(SchemaType.INT32, name=TIME), pa.time32("ms")),
        (Schema(SchemaType.INT64, name=TIMESTAMP), pa.timestamp("ms", tz="UTC")),
        (Schema(SchemaType.INT64, name="some.Other"), pa.int64()),  # unknown names: the plain type
        (Schema(SchemaType.INT32, name=TIMESTAMP), pa.int32()),  # a logical name on the wrong type
        (
            Schema(SchemaType.ARRAY, value_schema=Schema(SchemaType.INT32, optional=True)),
            pa.list_(pa.field("element", pa.int32(), nullable=True)),
        ),
        (
            Schema(SchemaType.MAP, key_schema=Schema(SchemaType.STRING), value_schema=Schema(SchemaType.FLOAT64)),
            pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.float64(), nullable=False)),
        ),
        (
            Schema.struct(("a", Schema(SchemaType.INT64)), ("b c", Schema(SchemaType.STRING, optional=True))),
            pa.struct([pa.field("a", pa.int64()), pa.field("b c", pa.string())]),
        ),
    ],
)
def test_type_mapping(schema: Schema, expected: pa.DataType) -> None:
    atype, _ = arrow_type(schema)
    assert atype == expected
    if pa.types.is_struct(atype):
        assert all(atype.field(i).nullable for i in range(atype.num_fields))  # null parents have null children


@pytest.mark.parametrize(
    "schema, good, bad, message",
    [
        (Schema(SchemaType.INT8), [127, -128], [128, -129, True, 1.0, "1"], "int8"),
        (Schema(SchemaType.INT16), [32767], [32768], "int16"),
        (Schema(SchemaType.INT32), [2**31 - 1], [2**31], "int32"),
        (Schema(SchemaType.INT64), [-(2**63)], [2**63], "int64"),
        (Schema(SchemaType.FLOAT64), [1.5, 2, float("nan")], ["1.5", False], "float"),
        (Schema(SchemaType.BOOLEAN), [True, False], [1, "true"], "boolean"),
        (Schema(SchemaType.STRING), ["x", "ü"], [b"x", 1, "\udc80"], ""),
        (Schema(SchemaType.BYTES), [b"x", bytearray(b"y")], ["x"], "bytes"),
        (_decimal(2, 5), [decimal.Decimal("123.45"), decimal.Decimal("1.1"), decimal.Decimal("1.200"), 7],
         [decimal.Decimal("1234.5"), decimal.Decimal("1.234"), decimal.Decimal("NaN"), 1.5], "ecimal"),
        (Schema(SchemaType.INT32, name=DATE), [dt.date(2024, 1, 1), 19000], [dt.datetime(2024, 1, 1), "2024-01-01"], "date"),
        (Schema(SchemaType.INT32, name=TIME), [dt.time(1, 2), 3_600_000], [86_400_000, "01:02"], "time"),
        (Schema(SchemaType.INT64, name=TIMESTAMP), [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), 0], [dt.date(2024, 1, 1)], "timestamp"),
        (Schema(SchemaType.ARRAY, value_schema=Schema(SchemaType.INT32)), [[1, 2], ()], [[None], "ab", [1.5]], ""),
        (
            Schema(SchemaType.MAP, key_schema=Schema(SchemaType.STRING), value_schema=Schema(SchemaType.INT32, optional=True)),
            [{"a": 1, "b": None}],
            [{None: 1}, {1: 1}, [("a", 1)]],
            "",
        ),
        (Schema.struct(("a", Schema(SchemaType.INT64))), [{"a": 1}], [{"a": None}, {}, 5], ""),
    ],
)
def test_converters_accept_and_refuse(schema: Schema, good: list, bad: list, message: str) -> None:
    atype, conv = arrow_type(schema)
    converted = [conv(v) for v in good]
    pa.array(converted, type=atype)  # what the checks let through, pyarrow takes
    for value in bad:
        with pytest.raises(DataError, match=message or None):
            conv(value)
    with pytest.raises(DataError, match="required"):
        conv(None)
    optional_conv = arrow_type(Schema(schema.type, optional=True, name=schema.name, parameters=schema.parameters,
                                      fields=schema.fields, key_schema=schema.key_schema,
                                      value_schema=schema.value_schema))[1]
    assert optional_conv(None) is None


def test_unexpressible_schemas_are_data_errors() -> None:
    with pytest.raises(DataError, match="76 digits"):
        arrow_type(_decimal(0, 77))
    with pytest.raises(DataError, match="unusable parameters"):
        arrow_type(Schema(SchemaType.BYTES, name=DECIMAL, parameters={"scale": "two"}))
    with pytest.raises(DataError, match="negative scale"):
        arrow_type(_decimal(-2))
    with pytest.raises(DataError, match="element schema"):
        arrow_type(Schema(SchemaType.ARRAY))
    with pytest.raises(DataError, match="key and value"):
        arrow_type(Schema(SchemaType.MAP, value_schema=Schema(SchemaType.STRING)))


def test_struct_without_fields_is_a_data_error() -> None:
    with pytest.raises(DataError, match="STRUCT without fields"):
        ParquetLayout(None, Schema.struct(optional=True))


def test_layout_columns() -> None:
    layout = ParquetLayout(None, Schema.struct(("id", Schema(SchemaType.INT64))))
    assert layout.schema.names == ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]
    assert layout.schema.field("key").type == pa.string()  # schemaless: JSON text
    assert layout.schema.field("headers").type == pa.list_(
        pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
    )
    assert layout.matches(None, Schema.struct(("id", Schema(SchemaType.INT64))))
    assert not layout.matches(Schema(SchemaType.STRING), Schema.struct(("id", Schema(SchemaType.INT64))))


def _record(i: int, schema: Schema) -> SinkRecord:
    return SinkRecord(topic="t", kafka_partition=0, key=f"k{i}", value={"id": i, "s": None if i % 3 else f"s{i}"},
                      kafka_offset=i, timestamp=1000 + i, headers=(Header("h", bytes([i])),) if i % 2 else (),
                      key_schema=Schema(SchemaType.STRING), value_schema=schema)


def test_buffer_chunks_payload_and_drop_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Records converted to Arrow chunks every CHUNK_RECORDS (3 here): partial files
    (payload(count)) and drop_first(count) cut through chunks and pending records alike."""
    monkeypatch.setattr(parquet_format, "CHUNK_RECORDS", 3)
    schema = Schema.struct(("id", Schema(SchemaType.INT64)), ("s", Schema(SchemaType.STRING, optional=True)))
    layout = ParquetLayout(Schema(SchemaType.STRING), schema)
    buffer = ParquetBuffer(0, 0.0, layout, "snappy", 100)
    expected = []
    for i in range(11):
        buffer.append(_record(i, schema), i)
        expected.append({"offset": i, "key": f"k{i}", "value": {"id": i, "s": None if i % 3 else f"s{i}"},
                         "headers": [{"key": "h", "value": bytes([i])}] if i % 2 else []})

    def rows(count: int) -> list[dict]:
        table = pq.read_table(io.BytesIO(buffer.payload(count, "t", 0)))
        assert table.schema.metadata[b"conveyor.start.offset"] == str(buffer.start).encode()
        return [{k: r[k] for k in ("offset", "key", "value", "headers")} for r in table.to_pylist()]

    assert len(buffer._chunks) == 3 and buffer.count == 11  # 9 records sealed, 2 pending
    for count in range(1, 12):
        assert rows(count) == expected[:count], count
    for cut in (4, 2, 3):  # inside a chunk, inside the next, then into the pending records
        buffer.drop_first(cut)
        expected = expected[cut:]
        assert buffer.start == expected[0]["offset"]
        for count in range(1, len(expected) + 1):
            assert rows(count) == expected[:count], (cut, count)
    for i in range(11, 15):
        buffer.append(_record(i, schema), i)
    assert [r["offset"] for r in rows(buffer.count)] == [9, 10, 11, 12, 13, 14]
    buffer.drop_first(buffer.count)
    assert buffer.count == 0 and not buffer._chunks


@pytest.mark.parametrize("cells", [
    [None, None, None],
    [None, [{"key": "a", "value": b"x"}], None, [], [{"key": "b", "value": None}, {"key": "c", "value": b"y"}]],
    [[{"key": "a", "value": b"x"}], []],
    [],
], ids=["all-null", "some-null", "none-null", "empty"])
@pytest.mark.parametrize("sliced", [False, True])
def test_a_batchs_missing_headers_become_empty_lists_as_fill_null_makes_them(cells, sliced):
    from conveyor.api.batches import HEADERS_TYPE
    from conveyor.connectors.archive.parquet_batches import _empty_for_null

    column = pa.array([[{"key": "z", "value": b"-"}], *cells], HEADERS_TYPE)
    column = column.slice(1) if sliced else pa.array(cells, HEADERS_TYPE)
    filled = _empty_for_null(column)
    filled.validate(full=True)
    assert filled.null_count == 0
    assert filled.to_pylist() == [[] if c is None else c for c in cells]
