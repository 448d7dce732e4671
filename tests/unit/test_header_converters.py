"""``header.converter``: which converter a configuration names, and header conversion both ways."""

from __future__ import annotations

import pytest

from conveyor.api import ConfigError, DataError, Header, Schema, SchemaType
from conveyor.converters.header_converters import (
    ConverterHeaderConverter,
    load_header_converter,
    to_connect_headers,
    to_kafka_headers,
)
from conveyor.converters.simple_header_converter import SimpleHeaderConverter

INT32 = Schema(SchemaType.INT32)


@pytest.mark.parametrize("config", [{}, {"header.converter": " "},
                                    {"header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"},
                                    {"header.converter": "bytes"}])
def test_unset_or_byte_array_leaves_headers_raw(config: dict) -> None:
    assert load_header_converter(config) is None


@pytest.mark.parametrize("name", ["org.apache.kafka.connect.storage.SimpleHeaderConverter", "simple"])
def test_connects_default_header_converter_by_class_name_or_alias(name: str) -> None:
    assert isinstance(load_header_converter({"header.converter": name}), SimpleHeaderConverter)


def test_a_key_value_converter_serves_headers_with_its_own_keys() -> None:
    converter = load_header_converter({"header.converter": "org.apache.kafka.connect.json.JsonConverter",
                                       "header.converter.schemas.enable": "false"})
    assert isinstance(converter, ConverterHeaderConverter)
    assert to_connect_headers(converter, "t", [("h", b'{"a": [1, 2]}'), ("n", None)]) == (
        Header("h", {"a": [1, 2]}, None), Header("n", None, None))
    assert to_kafka_headers(converter, "t", [Header("h", {"a": 1})]) == [("h", b'{"a":1}')]


@pytest.mark.parametrize(("config", "key", "message"), [
    ({"header.converter": "org.apache.kafka.connect.storage.NoSuchConverter"}, "header.converter",
     "is not available in Conveyor"),
    ({"header.converter": "nope"}, "header.converter", "unknown header converter 'nope'"),
    ({"header.converter": "conveyor.api:Header"}, "header.converter", "is not a header converter"),
    ({"header.converter": "json", "header.converter.schemas.enable": "maybe"}, "header.converter.schemas.enable", ""),
])
def test_a_bad_header_converter_names_the_key(config: dict, key: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_header_converter(config)
    assert list(caught.value.errors) == [key]
    assert message in caught.value.errors[key]


def test_reading_stops_at_the_first_header_the_converter_cannot_read() -> None:
    converter = load_header_converter({"header.converter": "json", "header.converter.schemas.enable": "false"})
    with pytest.raises(DataError):
        to_connect_headers(converter, "t", [("ok", b"1"), ("bad", b"{oops")])


def test_raw_headers_are_written_as_they_are_and_typed_ones_through_the_converter() -> None:
    converter = load_header_converter({"header.converter": "string"})
    headers = [Header("raw", b"\x00\xff"), Header("null", None), Header("n", 7, INT32), Header("s", "text")]
    assert to_kafka_headers(converter, "t", headers) == [
        ("raw", b"\x00\xff"), ("null", None), ("n", b"7"), ("s", b"text")]


def test_without_a_converter_text_is_written_and_other_values_are_a_data_error() -> None:
    assert to_kafka_headers(None, "t", [Header("s", "é"), Header("b", bytearray(b"x"))]) == [("s", "é"), ("b", b"x")]
    with pytest.raises(DataError, match="header 'n' holds int with a schema: without a header.converter"):
        to_kafka_headers(None, "t", [Header("n", 7, INT32)])
    with pytest.raises(DataError, match="header 'n' holds float: without a header.converter"):
        to_kafka_headers(None, "t", [Header("n", 1.5)])
