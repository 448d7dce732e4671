"""Single message transformations and predicates, against Kafka Connect's behaviour."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any, ClassVar

import pytest

from conveyor.api import ConfigError, DataError, Field, Header, Schema, SchemaType, SinkRecord, SourceRecord
from conveyor.converters import logical
from conveyor.java_text.date_format import JavaDateFormat
from conveyor.java_text.regex import JavaReplacement, compile_java_regex, translate
from conveyor.java_text.values import double_to_string, float_to_string, narrow
from conveyor.transforms import (
    CastKey,
    CastValue,
    DropHeaders,
    ExtractFieldKey,
    ExtractFieldValue,
    Filter,
    FlattenKey,
    FlattenValue,
    HasHeaderKey,
    HoistFieldKey,
    HoistFieldValue,
    InsertField,
    InsertFieldKey,
    InsertFieldValue,
    InsertHeader,
    MaskFieldKey,
    MaskFieldValue,
    RecordIsTombstone,
    RegexRouter,
    ReplaceFieldKey,
    ReplaceFieldValue,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
    TimestampRouter,
    TopicNameMatches,
    ValueToKey,
)

T = SchemaType
TS = 1_700_000_000_123  # 2023-11-14T22:13:20.123Z


def sink(
    value: Any = None,
    *,
    key: Any = None,
    value_schema: Schema | None = None,
    key_schema: Schema | None = None,
    topic: str = "orders",
    timestamp: int | None = TS,
    headers: tuple[Header, ...] = (),
) -> SinkRecord:
    return SinkRecord(
        topic, 3, key, value, 42, timestamp=timestamp, headers=headers, key_schema=key_schema, value_schema=value_schema
    )


def source(
    value: Any = None,
    *,
    key: Any = None,
    value_schema: Schema | None = None,
    partition: int | None = None,
    timestamp: int | None = TS,
) -> SourceRecord:
    return SourceRecord(
        {"table": "t"},
        {"id": 1},
        "orders",
        value,
        key=key,
        kafka_partition=partition,
        value_schema=value_schema,
        timestamp=timestamp,
    )


def make(cls: type, **config: Any) -> Any:
    obj = cls()
    obj.configure(config)
    return obj


PERSON = Schema.struct(("id", Schema(T.INT64)), ("name", Schema(T.STRING, optional=True)), name="com.ex.Person")


# --- InsertField ------------------------------------------------------------------------------


class TestInsertField:
    CONFIG: ClassVar[dict[str, str]] = {
        "topic.field": "topic_field!",
        "partition.field": "partition_field",
        "offset.field": "offset_field!",
        "timestamp.field": "timestamp_field?",
        "static.field": "instance_id",
        "static.value": "my-instance-id",
    }

    def test_schemaless(self) -> None:
        xform = make(InsertFieldValue, **self.CONFIG)
        out = xform.apply(sink({"magic": 42}))
        assert out.value == {
            "magic": 42,
            "topic_field": "orders",
            "partition_field": 3,
            "offset_field": 42,
            "timestamp_field": TS,
            "instance_id": "my-instance-id",
        }
        assert out.value_schema is None
        assert out.kafka_offset == 42 and out.original_topic == "orders"

    def test_with_schema_updates_schema(self) -> None:
        xform = make(InsertFieldValue, **self.CONFIG)
        schema = Schema(T.STRUCT, name="name", version=1, doc="doc", fields=(Field("magic", Schema(T.INT64)),))
        out = xform.apply(sink({"magic": 42}, value_schema=schema))
        s = out.value_schema
        assert (s.name, s.version, s.doc) == ("name", 1, "doc")
        assert [(f.name, f.schema) for f in s.fields] == [
            ("magic", Schema(T.INT64)),
            ("topic_field", Schema(T.STRING)),
            ("partition_field", Schema(T.INT32, optional=True)),
            ("offset_field", Schema(T.INT64)),
            ("timestamp_field", logical.timestamp_schema(optional=True)),
            ("instance_id", Schema(T.STRING, optional=True)),
        ]
        assert out.value["timestamp_field"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.timezone.utc)
        assert out.value["offset_field"] == 42
        assert xform.apply(sink({"magic": 1}, value_schema=schema)).value_schema is s  # cached

    def test_key_variant(self) -> None:
        out = make(InsertFieldKey, **{"topic.field": "t"}).apply(sink("v", key={"k": 1}))
        assert out.key == {"k": 1, "t": "orders"} and out.value == "v"
        assert InsertField.Key is InsertFieldKey and InsertField.Value is InsertFieldValue

    def test_tombstone_passes_through(self) -> None:
        record = sink(None)
        assert make(InsertFieldValue, **{"topic.field": "t"}).apply(record) is record
        keyless = sink({"a": 1}, key=None)
        assert make(InsertFieldKey, **{"topic.field": "t"}).apply(keyless) is keyless

    def test_wrong_types(self) -> None:
        xform = make(InsertFieldValue, **{"topic.field": "t"})
        with pytest.raises(
            DataError, match=r"Only Map objects supported in absence of schema for \[field insertion\], found: str"
        ):
            xform.apply(sink("text"))
        with pytest.raises(DataError, match=r"Only Struct objects supported for \[field insertion\], found: int"):
            xform.apply(sink(5, value_schema=Schema(T.INT64)))

    def test_source_record(self) -> None:
        xform = make(InsertFieldValue, **{"topic.field": "t", "partition.field": "p", "timestamp.field": "ts"})
        out = xform.apply(source({"a": 1}))
        assert out.value == {"a": 1, "t": "orders", "ts": TS}  # unknown partition left out
        assert out.source_offset == {"id": 1}
        with pytest.raises(DataError, match=r"Only SinkRecord supported for \[field insertion\], found: SourceRecord"):
            make(InsertFieldValue, **{"offset.field": "o"}).apply(source({"a": 1}))

    def test_null_timestamp_not_inserted_schemaless(self) -> None:
        assert make(InsertFieldValue, **{"timestamp.field": "ts"}).apply(sink({}, timestamp=None)).value == {}

    def test_replace_null_with_default(self) -> None:
        schema = Schema.struct(("a", Schema(T.INT32, optional=True, default=7)))
        assert (
            make(InsertFieldValue, **{"topic.field": "t"}).apply(sink({"a": None}, value_schema=schema)).value["a"] == 7
        )
        xform = make(InsertFieldValue, **{"topic.field": "t", "replace.null.with.default": "false"})
        assert xform.apply(sink({"a": None}, value_schema=schema)).value["a"] is None

    def test_config_errors(self) -> None:
        with pytest.raises(ConfigError, match="No field insertion configured"):
            make(InsertFieldValue)
        with pytest.raises(ConfigError) as err:
            make(InsertFieldValue, **{"static.field": "s"})
        assert err.value.errors == {"static.value": "No value specified for static field: s"}

    def test_duplicate_field_with_schema(self) -> None:
        with pytest.raises(DataError, match="field name duplication id"):
            make(InsertFieldValue, **{"topic.field": "id"}).apply(sink({"id": 1, "name": None}, value_schema=PERSON))


# --- ReplaceField -----------------------------------------------------------------------------


class TestReplaceField:
    def test_schemaless(self) -> None:
        xform = make(ReplaceFieldValue, exclude="dont", renames="abc:xyz,foo:bar")
        out = xform.apply(sink({"dont": "whatever", "abc": 42, "foo": True, "etc": "etc"}))
        assert out.value == {"xyz": 42, "bar": True, "etc": "etc"}

    def test_include_and_exclude(self) -> None:
        xform = make(ReplaceFieldValue, include=["abc", "foo"], exclude="foo")
        assert xform.apply(sink({"abc": 1, "foo": 2, "etc": 3})).value == {"abc": 1}

    def test_with_schema(self) -> None:
        schema = Schema(
            T.STRUCT,
            name="n",
            fields=(
                Field("dont", Schema(T.STRING)),
                Field("abc", Schema(T.INT32)),
                Field("foo", Schema(T.BOOLEAN)),
                Field("etc", Schema(T.STRING, optional=True, default="dflt")),
            ),
        )
        xform = make(ReplaceFieldValue, exclude="dont", renames="abc:xyz,foo:bar")
        out = xform.apply(sink({"dont": "x", "abc": 42, "foo": True, "etc": None}, value_schema=schema))
        assert [f.name for f in out.value_schema.fields] == ["xyz", "bar", "etc"]
        assert out.value_schema.name == "n"
        assert out.value == {"xyz": 42, "bar": True, "etc": "dflt"}
        keep_null = make(ReplaceFieldValue, renames="abc:xyz", **{"replace.null.with.default": False})
        assert keep_null.apply(sink({"abc": 1, "etc": None}, value_schema=schema)).value["etc"] is None

    def test_deprecated_whitelist_blacklist(self) -> None:
        assert make(ReplaceFieldValue, whitelist="a,b", blacklist="b").apply(sink({"a": 1, "b": 2, "c": 3})).value == {
            "a": 1
        }
        # the new name wins over the deprecated one
        assert make(ReplaceFieldValue, include="c", whitelist="a").apply(sink({"a": 1, "c": 3})).value == {"c": 3}

    def test_key_variant_and_tombstone(self) -> None:
        out = make(ReplaceFieldKey, exclude="x").apply(sink("v", key={"x": 1, "y": 2}))
        assert out.key == {"y": 2}
        tomb = sink(None)
        assert make(ReplaceFieldValue, exclude="x").apply(tomb) is tomb

    @pytest.mark.parametrize("renames", ["abc", "a:b:c", "a:b,", "a::b"])
    def test_invalid_renames(self, renames: str) -> None:
        with pytest.raises(ConfigError) as err:
            make(ReplaceFieldValue, renames=renames)
        assert "Invalid rename mapping" in err.value.errors["renames"]

    def test_rename_collision_with_schema(self) -> None:
        with pytest.raises(DataError, match="field name duplication name"):
            make(ReplaceFieldValue, renames="id:name").apply(sink({"id": 1, "name": "x"}, value_schema=PERSON))

    def test_wrong_type(self) -> None:
        with pytest.raises(DataError, match=r"\[field replacement\], found: list"):
            make(ReplaceFieldValue, exclude="a").apply(sink([1]))


# --- ValueToKey -----------------------------------------------------------------------------


class TestValueToKey:
    def test_schemaless(self) -> None:
        out = make(ValueToKey, fields="a,b").apply(sink({"a": 1, "b": 2, "c": 3}, key="old"))
        assert out.key == {"a": 1, "b": 2} and out.key_schema is None
        assert out.value == {"a": 1, "b": 2, "c": 3}

    def test_with_schema(self) -> None:
        schema = Schema.struct(("a", Schema(T.INT32)), ("b", Schema(T.INT32)), ("c", Schema(T.INT32)))
        out = make(ValueToKey, fields=["a", "b"]).apply(sink({"a": 1, "b": 2, "c": 3}, value_schema=schema))
        assert out.key_schema == Schema.struct(("a", Schema(T.INT32)), ("b", Schema(T.INT32)))
        assert out.key == {"a": 1, "b": 2}
        assert out.value_schema is schema

    def test_missing_field_with_schema(self) -> None:
        with pytest.raises(DataError, match="Field does not exist: zz"):
            make(ValueToKey, fields="zz").apply(sink({"id": 1}, value_schema=PERSON))

    def test_tombstone_fails_like_kafka_connect(self) -> None:
        with pytest.raises(DataError, match=r"\[copying fields from value to key\], found: null"):
            make(ValueToKey, fields="a").apply(sink(None))

    def test_source_record(self) -> None:
        assert make(ValueToKey, fields="a").apply(source({"a": 9})).key == {"a": 9}

    def test_config(self) -> None:
        with pytest.raises(ConfigError, match='Missing required configuration "fields"'):
            make(ValueToKey)
        with pytest.raises(ConfigError, match="Empty list"):
            make(ValueToKey, fields="")


# --- ExtractField -----------------------------------------------------------------------------


class TestExtractField:
    def test_schemaless(self) -> None:
        xform = make(ExtractFieldKey, field="magic")
        out = xform.apply(sink(None, key={"magic": 42}))
        assert out.key == 42 and out.key_schema is None
        assert xform.apply(sink(None, key={"other": 1})).key is None

    def test_with_schema(self) -> None:
        out = make(ExtractFieldValue, field="name").apply(sink({"id": 1, "name": "ann"}, value_schema=PERSON))
        assert out.value == "ann" and out.value_schema == Schema(T.STRING, optional=True)

    def test_nulls_pass_through(self) -> None:
        assert make(ExtractFieldValue, field="x").apply(sink(None)).value is None
        out = make(ExtractFieldValue, field="name").apply(sink(None, value_schema=PERSON))
        assert out.value is None and out.value_schema == Schema(T.STRING, optional=True)

    def test_unknown_field_with_schema(self) -> None:
        with pytest.raises(DataError, match="Unknown field: nope"):
            make(ExtractFieldValue, field="nope").apply(sink({"id": 1}, value_schema=PERSON))

    def test_wrong_type(self) -> None:
        with pytest.raises(
            DataError, match=r"Only Map objects supported in absence of schema for \[field extraction\], found: int"
        ):
            make(ExtractFieldValue, field="a").apply(sink(5))

    def test_v1_keeps_dots(self) -> None:
        assert make(ExtractFieldValue, field="a.b").apply(sink({"a.b": 1, "a": {"b": 2}})).value == 1

    def test_v2_nested_paths(self) -> None:
        xform = make(ExtractFieldValue, field="a.b", **{"field.syntax.version": "v2"})
        assert xform.apply(sink({"a": {"b": 2}})).value == 2
        assert xform.apply(sink({"a": None})).value is None
        dotted = make(ExtractFieldValue, field="`a.b`.c", **{"field.syntax.version": "V2"})
        assert dotted.apply(sink({"a.b": {"c": 3}})).value == 3
        inner = Schema.struct(("b", Schema(T.INT32, optional=True, default=5)), optional=True)
        schema = Schema.struct(("a", inner))
        out = xform.apply(sink({"a": {"b": None}}, value_schema=schema))
        assert out.value == 5 and out.value_schema == inner.field("b").schema  # type: ignore[union-attr]

    def test_v2_config_errors(self) -> None:
        with pytest.raises(ConfigError, match="Incomplete backtick pair"):
            make(ExtractFieldValue, field="`a.b", **{"field.syntax.version": "V2"})
        with pytest.raises(ConfigError) as err:
            make(ExtractFieldValue, field="a", **{"field.syntax.version": "V3"})
        assert "field.syntax.version" in err.value.errors


# --- HoistField -------------------------------------------------------------------------------


class TestHoistField:
    def test_schemaless(self) -> None:
        assert make(HoistFieldKey, field="magic").apply(sink(None, key=42)).key == {"magic": 42}

    def test_with_schema(self) -> None:
        out = make(HoistFieldValue, field="magic").apply(sink(42, value_schema=Schema(T.INT32)))
        assert out.value == {"magic": 42}
        assert out.value_schema == Schema.struct(("magic", Schema(T.INT32)))

    def test_null_is_hoisted(self) -> None:
        assert make(HoistFieldValue, field="f").apply(sink(None)).value == {"f": None}

    def test_requires_field(self) -> None:
        with pytest.raises(ConfigError, match='Missing required configuration "field"'):
            make(HoistFieldValue)


# --- Cast -------------------------------------------------------------------------------------


class TestCast:
    def test_schemaless_fields(self) -> None:
        xform = make(CastValue, spec="a:int8,b:float32,c:boolean,d:string,e:int64,f:float64")
        out = xform.apply(sink({"a": 300, "b": 1.1, "c": "TRUE", "d": 1e10, "e": "-12", "f": True, "g": "x"}))
        assert out.value == {
            "a": 44,
            "b": pytest.approx(1.1, rel=1e-7),
            "c": True,
            "d": "1.0E10",
            "e": -12,
            "f": 1.0,
            "g": "x",
        }
        assert out.value["b"] != 1.1  # rounded to a 32-bit float

    def test_whole_value(self) -> None:
        assert make(CastValue, spec="int32").apply(sink("42")).value == 42
        out = make(CastKey, spec="string").apply(sink("v", key=12, key_schema=Schema(T.INT64, optional=True)))
        assert out.key == "12" and out.key_schema == Schema(T.STRING, optional=True)

    def test_with_schema(self) -> None:
        schema = Schema.struct(
            ("int8", Schema(T.INT8)),
            ("int16", Schema(T.INT16, optional=True, default=5)),
            ("float", Schema(T.FLOAT32)),
            ("bytes", Schema(T.BYTES)),
            ("ts", logical.timestamp_schema()),
            ("untouched", Schema(T.STRING)),
            name="s",
        )
        xform = make(CastValue, spec="int8:boolean,int16:string,float:int32,bytes:string,ts:int64")
        value = {
            "int8": 8,
            "int16": None,
            "float": 12.9,
            "bytes": b"\x01\x02",
            "ts": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc),
            "untouched": "u",
        }
        out = xform.apply(sink(value, value_schema=schema))
        assert out.value == {"int8": True, "int16": "5", "float": 12, "bytes": "AQI=", "ts": 1000, "untouched": "u"}
        fields = {f.name: f.schema for f in out.value_schema.fields}
        assert fields["int8"] == Schema(T.BOOLEAN)
        assert fields["int16"] == Schema(T.STRING, optional=True, default="5")
        assert fields["ts"] == Schema(T.INT64)
        assert fields["untouched"] == Schema(T.STRING)
        assert out.value_schema.name == "s"

    def test_logical_to_string(self) -> None:
        schema = Schema.struct(
            ("d", logical.date_schema()), ("t", logical.time_schema()), ("ts", logical.timestamp_schema())
        )
        value = {"d": dt.date(2020, 2, 3), "t": dt.time(4, 5, 6, 7000), "ts": dt.datetime(2020, 2, 3, 4, 5, 6, 7000)}
        out = make(CastValue, spec="d:string,t:string,ts:string").apply(sink(value, value_schema=schema))
        assert out.value == {"d": "2020-02-03", "t": "04:05:06.007", "ts": "2020-02-03T04:05:06.007Z"}

    def test_decimal(self) -> None:
        schema = Schema.struct(("d", logical.decimal_schema(2)))
        out = make(CastValue, spec="d:float64").apply(sink({"d": Decimal("1.25")}, value_schema=schema))
        assert out.value == {"d": 1.25}

    def test_tombstone_passes(self) -> None:
        tomb = sink(None)
        assert make(CastValue, spec="int8").apply(tomb) is tomb

    @pytest.mark.parametrize(
        ("spec", "value", "message"),
        [
            ("int8", "abc", r"Value \(abc\) was out of range for requested data type"),
            ("int8", "300", r"Value \(300\) was out of range"),
            ("int32", b"\x01", "Unexpected type in Cast transformation: bytes"),
            ("int32", [1], "does not support casting from ARRAY"),
            ("int32", Decimal(1), "which is not supported by Connect's data API"),
        ],
    )
    def test_value_errors(self, spec: str, value: Any, message: str) -> None:
        with pytest.raises(DataError, match=message):
            make(CastValue, spec=spec).apply(sink(value))

    @pytest.mark.parametrize(
        ("spec", "message"),
        [
            ("", "Must specify at least one field to cast."),
            ("a:int8,b:nope", "Invalid type found in casting spec: nope"),
            ("a:array", "does not support casting to ARRAY"),
            ("int8,a:int16", "may only specify a single cast"),
            ("a:b:c", "Invalid cast mapping"),
        ],
    )
    def test_config_errors(self, spec: str, message: str) -> None:
        with pytest.raises(ConfigError) as err:
            make(CastValue, spec=spec)
        assert message in err.value.errors["spec"]

    def test_java_narrowing(self) -> None:
        assert narrow(128, 8) == -128
        assert narrow(3.9e10, 32) == 2**31 - 1
        assert narrow(3.9e10, 8) == -1  # (byte)(int) 3.9e10
        assert narrow(-1.9, 64) == -1
        assert narrow(math.nan, 16) == 0
        assert narrow(Decimal("257.9"), 8) == 1

    @pytest.mark.parametrize(
        ("value", "text"),
        [
            (1.0, "1.0"),
            (1e7, "1.0E7"),
            (9999999.0, "9999999.0"),
            (0.001, "0.001"),
            (1e-4, "1.0E-4"),
            (123.456, "123.456"),
            (-2.5e-10, "-2.5E-10"),
            (1e100, "1.0E100"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (math.inf, "Infinity"),
            (math.nan, "NaN"),
            (100.0, "100.0"),
        ],
    )
    def test_double_to_string(self, value: float, text: str) -> None:
        assert double_to_string(value) == text

    def test_float_to_string(self) -> None:
        assert float_to_string(1.100000023841858) == "1.1"
        assert float_to_string(3.4e38) == "3.4E38"


# --- RegexRouter ------------------------------------------------------------------------------


class TestRegexRouter:
    @pytest.mark.parametrize(
        ("regex", "replacement", "topic", "expected"),
        [
            ("foo", "bar", "foo", "bar"),
            ("foo", "bar", "foo-suffix", "foo-suffix"),  # must match the whole topic
            ("(.*)-raw", "$1", "orders-raw", "orders"),
            ("(.*)-(\\d\\d)", "$2-$1", "orders-12", "12-orders"),
            ("(?<name>[a-z]+)\\.(.*)", "${name}_$2", "db.table", "db_table"),
            ("(.*)", "\\$1-$1", "t", "$1-t"),
            ("(a)(b)?", "[$2]", "a", "[]"),
            ("(a)", "$12", "a", "a2"),  # $1 then literal 2: group 12 does not exist
            ("\\Q.*\\E(.*)", "x$1", ".*y", "xy"),
        ],
    )
    def test_routes(self, regex: str, replacement: str, topic: str, expected: str) -> None:
        xform = make(RegexRouter, regex=regex, replacement=replacement)
        record = sink({"a": 1}, topic=topic)
        out = xform.apply(record)
        assert out.topic == expected
        assert out.original_topic == topic
        assert xform.apply(record).topic == expected  # cached route
        if expected == topic:
            assert out is record

    def test_source_record(self) -> None:
        out = make(RegexRouter, regex="(.*)s", replacement="$1").apply(source({"a": 1}))
        assert out.topic == "order" and out.source_partition == {"table": "t"}

    @pytest.mark.parametrize(
        ("config", "key"),
        [
            ({"regex": "(", "replacement": "x"}, "regex"),
            ({"regex": "(a)", "replacement": "$2"}, "replacement"),
            ({"regex": "(a)", "replacement": "$x"}, "replacement"),
            ({"regex": "(a)", "replacement": "x\\"}, "replacement"),
            ({"regex": "(a)", "replacement": "${nope}"}, "replacement"),
            ({"regex": "a"}, "replacement"),
            ({"replacement": "a"}, "regex"),
        ],
    )
    def test_config_errors(self, config: dict[str, str], key: str) -> None:
        with pytest.raises(ConfigError) as err:
            make(RegexRouter, **config)
        assert key in err.value.errors

    def test_java_regex_translation(self) -> None:
        assert translate("(?<year>\\d{4})\\k<year>") == "(?P<year>\\d{4})(?P=year)"
        assert translate("(?<=a)b(?<!c)") == "(?<=a)b(?<!c)"
        assert translate("[(?<x>)]") == "[(?<x>)]"
        assert compile_java_regex("a\\z").fullmatch("a")
        assert (
            JavaReplacement("$0!", compile_java_regex("a+")).expand(compile_java_regex("a+").fullmatch("aa")) == "aa!"
        )  # type: ignore[arg-type]


# --- TimestampRouter -------------------------------------------------------------------------


class TestTimestampRouter:
    def test_defaults(self) -> None:
        out = make(TimestampRouter).apply(sink({"a": 1}, timestamp=1483425001864))
        assert out.topic == "orders-20170103"

    def test_custom_formats(self) -> None:
        xform = make(
            TimestampRouter, **{"topic.format": "${timestamp}.${topic}", "timestamp.format": "yyyy-MM-dd'T'HH"}
        )
        assert xform.apply(sink(1, timestamp=1483425001864)).topic == "2017-01-03T06.orders"

    def test_missing_timestamp(self) -> None:
        with pytest.raises(DataError, match="Timestamp missing on record"):
            make(TimestampRouter).apply(sink(1, timestamp=None))

    def test_bad_pattern(self) -> None:
        with pytest.raises(ConfigError) as err:
            make(TimestampRouter, **{"timestamp.format": "yyyyMMdd q"})
        assert "Illegal pattern character 'q'" in err.value.errors["timestamp.format"]

    @pytest.mark.parametrize(
        ("pattern", "expected"),
        [
            ("yyyyMMdd", "20231114"),
            ("yy-M-d", "23-11-14"),
            ("yyyy.MM.dd HH:mm:ss.SSS", "2023.11.14 22:13:20.123"),
            ("MMM MMMM", "Nov November"),
            ("EEE EEEE u", "Tue Tuesday 2"),
            ("D w W F", "318 46 3 2"),
            ("hh a KK kk", "10 PM 10 22"),
            ("'week' ww ''yy''", "week 46 '23'"),
            ("G z Z X", "AD UTC +0000 Z"),
            ("Y-'W'ww", "2023-W46"),
        ],
    )
    def test_java_date_format(self, pattern: str, expected: str) -> None:
        assert JavaDateFormat(pattern).format(TS) == expected

    def test_week_year_rolls_over(self) -> None:
        # 2022-12-31 is a Saturday; 2023-12-31 a Sunday, in week 1 of 2024 (US rules)
        assert JavaDateFormat("YYYY ww").format(1703980800000) == "2024 01"
        assert JavaDateFormat("YYYY ww").format(1672444800000) == "2022 53"

    def test_slot_cache_does_not_mix_hours(self) -> None:
        fmt = JavaDateFormat("yyyyMMddHH")
        assert fmt.format(0) == "1970010100"
        assert fmt.format(3_600_000) == "1970010101"
        assert fmt.format(-1) == "1969123123"


# --- Filter and predicates ---------------------------------------------------------------------


def test_filter_drops_everything() -> None:
    assert make(Filter).apply(sink({"a": 1})) is None
    assert make(Filter).apply(source(None)) is None


class TestPredicates:
    def test_topic_name_matches_full_match(self) -> None:
        pred = make(TopicNameMatches, pattern="orders.*")
        assert pred.test(sink(topic="orders-eu"))
        assert not pred.test(sink(topic="my-orders"))
        assert pred.test(source())
        assert not make(TopicNameMatches, pattern="order").test(sink(topic="orders"))

    def test_topic_name_matches_config(self) -> None:
        with pytest.raises(ConfigError) as err:
            make(TopicNameMatches, pattern="[")
        assert "entry must be a Java-compatible regular expression" in err.value.errors["pattern"]
        with pytest.raises(ConfigError, match='Missing required configuration "pattern"'):
            make(TopicNameMatches)
        with pytest.raises(ConfigError, match="non-empty"):
            make(TopicNameMatches, pattern="")

    def test_has_header_key(self) -> None:
        pred = make(HasHeaderKey, name="trace")
        assert pred.test(sink(headers=(Header("a", b"1"), Header("trace", None))))
        assert not pred.test(sink(headers=(Header("a", b"1"),)))
        assert not pred.test(sink())
        with pytest.raises(ConfigError, match="non-empty"):
            make(HasHeaderKey, name="  ")

    def test_record_is_tombstone(self) -> None:
        pred = make(RecordIsTombstone)
        assert pred.test(sink(None, key="k"))
        assert not pred.test(sink({"a": 1}))
        assert pred.test(source(None))


# --- SetSchemaMetadata, Flatten, MaskField, headers -----------------------------------------


class TestSetSchemaMetadata:
    def test_sets_name_and_version(self) -> None:
        schema = Schema(T.STRUCT, optional=True, doc="d", fields=(Field("a", Schema(T.INT32)),))
        out = make(SetSchemaMetadataValue, **{"schema.name": "foo", "schema.version": "42"}).apply(
            sink({"a": 1}, value_schema=schema)
        )
        assert out.value_schema == Schema(
            T.STRUCT, optional=True, doc="d", name="foo", version=42, fields=schema.fields
        )
        assert out.value == {"a": 1}

    def test_key_keeps_other_metadata(self) -> None:
        key_schema = Schema(T.INT64, name="old", version=3)
        out = make(SetSchemaMetadataKey, **{"schema.name": "new"}).apply(sink(None, key=1, key_schema=key_schema))
        assert (out.key_schema.name, out.key_schema.version, out.key) == ("new", 3, 1)

    def test_errors(self) -> None:
        with pytest.raises(ConfigError, match="Neither schema name nor version configured"):
            make(SetSchemaMetadataValue)
        with pytest.raises(DataError, match=r"Schema required for \[updating schema metadata\]"):
            make(SetSchemaMetadataValue, **{"schema.name": "x"}).apply(sink({"a": 1}))


class TestFlatten:
    def test_schemaless(self) -> None:
        value = {"A": {"B": {"int8": 8, "list": [1], "null": None}, "s": "x"}, "top": True}
        out = make(FlattenValue).apply(sink(value))
        assert out.value == {"A.B.int8": 8, "A.B.list": [1], "A.B.null": None, "A.s": "x", "top": True}
        assert make(FlattenKey, delimiter="_").apply(sink(None, key={"a": {"b": 1}})).key == {"a_b": 1}

    def test_with_schema(self) -> None:
        inner = Schema.struct(
            ("x", Schema(T.INT32)), ("y", Schema(T.STRING, optional=True, default="d")), optional=True
        )
        schema = Schema.struct(
            ("id", Schema(T.INT64)), ("in", inner), ("tags", Schema(T.ARRAY, value_schema=Schema(T.STRING))), name="n"
        )
        out = make(FlattenValue).apply(sink({"id": 1, "in": {"x": 2, "y": None}, "tags": ["t"]}, value_schema=schema))
        assert out.value == {"id": 1, "in.x": 2, "in.y": "d", "tags": ["t"]}
        fields = {f.name: f.schema for f in out.value_schema.fields}
        assert fields["in.x"] == Schema(T.INT32, optional=True)  # optional because its parent is
        assert fields["in.y"] == Schema(T.STRING, optional=True, default="d")
        assert fields["tags"] == Schema(T.ARRAY, value_schema=Schema(T.STRING))
        assert out.value_schema.name == "n"
        null_inner = make(FlattenValue).apply(sink({"id": 1, "in": None, "tags": []}, value_schema=schema))
        assert null_inner.value == {"id": 1, "tags": []}

    def test_tombstone_and_errors(self) -> None:
        tomb = sink(None)
        assert make(FlattenValue).apply(tomb) is tomb
        with pytest.raises(DataError, match="not supported by Connect's data API"):
            make(FlattenValue).apply(sink({"a": object()}))
        with pytest.raises(DataError, match=r"found: str"):
            make(FlattenValue).apply(sink("x"))


class TestMaskField:
    def test_schemaless_empty_values(self) -> None:
        value = {
            "i": 5,
            "f": 1.5,
            "b": True,
            "s": "secret",
            "d": Decimal("1.5"),
            "l": [1],
            "m": {"a": 1},
            "ts": dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc),
            "n": None,
            "keep": "k",
        }
        out = make(MaskFieldValue, fields="i,f,b,s,d,l,m,ts,n,missing").apply(sink(value))
        assert out.value == {
            "i": 0,
            "f": 0.0,
            "b": False,
            "s": "",
            "d": Decimal(0),
            "l": [],
            "m": {},
            "ts": logical.EPOCH,
            "n": None,
            "missing": None,
            "keep": "k",
        }

    def test_replacement(self) -> None:
        out = make(MaskFieldValue, fields="s,i,f", replacement="123").apply(sink({"s": "x", "i": 5, "f": 2.5}))
        assert out.value == {"s": "123", "i": 123, "f": 123.0}
        with pytest.raises(DataError, match="Unable to convert abc"):
            make(MaskFieldValue, fields="i", replacement="abc").apply(sink({"i": 5}))
        with pytest.raises(DataError, match="Cannot mask value of type bool with custom replacement"):
            make(MaskFieldValue, fields="b", replacement="x").apply(sink({"b": True}))

    def test_with_schema(self) -> None:
        out = make(MaskFieldKey, fields="name").apply(sink(None, key={"id": 1, "name": "ann"}, key_schema=PERSON))
        assert out.key == {"id": 1, "name": ""} and out.key_schema is PERSON
        with pytest.raises(DataError, match="Unable to convert 300"):  # Byte.parseByte("300") fails
            schema = Schema.struct(("b", Schema(T.INT8)))
            make(MaskFieldValue, fields="b", replacement="300").apply(sink({"b": 1}, value_schema=schema))

    def test_config(self) -> None:
        with pytest.raises(ConfigError, match="Empty list"):
            make(MaskFieldValue, fields="")
        with pytest.raises(ConfigError, match="non-empty"):
            make(MaskFieldValue, fields="a", replacement="")


class TestHeaders:
    def test_drop_headers(self) -> None:
        record = sink({"a": 1}, headers=(Header("a", b"1"), Header("b", b"2"), Header("a", None)))
        out = make(DropHeaders, headers="a,c").apply(record)
        assert out.headers == (Header("b", b"2"),)
        kept = sink({}, headers=(Header("b", b"2"),))
        assert make(DropHeaders, headers="a").apply(kept) is kept
        with pytest.raises(ConfigError, match="Empty list"):
            make(DropHeaders, headers=[])

    def test_insert_header(self) -> None:
        out = make(InsertHeader, header="source", **{"value.literal": "kafka ✓"}).apply(
            sink({}, headers=(Header("a", None),))
        )
        assert out.headers == (Header("a", None), Header("source", "kafka ✓".encode()))
        with pytest.raises(ConfigError, match='"value.literal"'):
            make(InsertHeader, header="h")
