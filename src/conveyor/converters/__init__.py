"""Converters between Kafka's bytes and Connect data, configured with Kafka Connect's keys.

=============================================================  =========  =====================================
Kafka Connect class                                            alias      Conveyor class
=============================================================  =========  =====================================
``org.apache.kafka.connect.storage.StringConverter``           string     :class:`StringConverter`
``org.apache.kafka.connect.converters.ByteArrayConverter``     bytes      :class:`ByteArrayConverter`
``org.apache.kafka.connect.json.JsonConverter``                json       :class:`JsonConverter`
``org.apache.kafka.connect.converters.ShortConverter``         short      :class:`ShortConverter`
``org.apache.kafka.connect.converters.IntegerConverter``       integer    :class:`IntegerConverter`
``org.apache.kafka.connect.converters.LongConverter``          long       :class:`LongConverter`
``org.apache.kafka.connect.converters.FloatConverter``         float      :class:`FloatConverter`
``org.apache.kafka.connect.converters.DoubleConverter``        double     :class:`DoubleConverter`
``org.apache.kafka.connect.converters.BooleanConverter``       boolean    :class:`BooleanConverter`
``io.confluent.connect.avro.AvroConverter``                    avro       ``AvroConverter`` (below)
=============================================================  =========  =====================================

The Schema Registry converters live in :mod:`conveyor.schema_registry`
(:class:`~conveyor.schema_registry.avro_converter.AvroConverter`; they need
``confluent_kafka``, which this package does not import) and are imported on first use.

:func:`load_converter` reads ``key.converter`` / ``value.converter`` and the keys under
them; any other value is a dotted Python path to a :class:`~conveyor.api.Converter`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Literal

from conveyor.api.converters import Converter
from conveyor.api.errors import ConfigError
from conveyor.converters._config import prefixed_error, sub_config
from conveyor.converters._loading import PluginNotFound, load_class
from conveyor.converters.bytearray_converter import ByteArrayConverter
from conveyor.converters.json_converter import JsonConverter
from conveyor.converters.number_converters import (
    BooleanConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    ShortConverter,
)
from conveyor.converters.string_converter import StringConverter

#: Kafka Connect class name → Conveyor class.
KAFKA_CONNECT_CONVERTERS: dict[str, type[Converter]] = {
    "org.apache.kafka.connect.storage.StringConverter": StringConverter,
    "org.apache.kafka.connect.converters.ByteArrayConverter": ByteArrayConverter,
    "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
    "org.apache.kafka.connect.converters.ShortConverter": ShortConverter,
    "org.apache.kafka.connect.converters.IntegerConverter": IntegerConverter,
    "org.apache.kafka.connect.converters.LongConverter": LongConverter,
    "org.apache.kafka.connect.converters.FloatConverter": FloatConverter,
    "org.apache.kafka.connect.converters.DoubleConverter": DoubleConverter,
    "org.apache.kafka.connect.converters.BooleanConverter": BooleanConverter,
}

#: Conveyor alias → class.
CONVERTER_ALIASES: dict[str, type[Converter]] = {
    "string": StringConverter,
    "bytes": ByteArrayConverter,
    "json": JsonConverter,
    "short": ShortConverter,
    "integer": IntegerConverter,
    "long": LongConverter,
    "float": FloatConverter,
    "double": DoubleConverter,
    "boolean": BooleanConverter,
}

CONVERTERS: dict[str, type[Converter]] = {**KAFKA_CONNECT_CONVERTERS, **CONVERTER_ALIASES}

#: Class name or alias → ``module:Class`` of converters imported only when configured.
LAZY_CONVERTERS: dict[str, str] = {
    "io.confluent.connect.avro.AvroConverter": "conveyor.schema_registry.avro_converter:AvroConverter",
    "avro": "conveyor.schema_registry.avro_converter:AvroConverter",
    "io.confluent.connect.protobuf.ProtobufConverter": "conveyor.schema_registry.protobuf_converter:ProtobufConverter",
    "protobuf": "conveyor.schema_registry.protobuf_converter:ProtobufConverter",
    "io.confluent.connect.json.JsonSchemaConverter": "conveyor.schema_registry.json_schema_converter:JsonSchemaConverter",
    "jsonschema": "conveyor.schema_registry.json_schema_converter:JsonSchemaConverter",
}


def converter_class(name: Any) -> type[Converter]:
    """The converter class a ``key.converter``/``value.converter`` value names.

    Raises:
        PluginNotFound: with a message listing the known names.
    """
    if isinstance(name, str) and name.strip() in LAZY_CONVERTERS:
        module_name, _, class_name = LAZY_CONVERTERS[name.strip()].partition(":")
        try:
            name = getattr(importlib.import_module(module_name), class_name)
        except ImportError as exc:
            raise PluginNotFound(f"converter '{name.strip()}' needs {exc.name or 'a missing module'}: {exc}") from exc
    return load_class(name, {**CONVERTERS, **dict.fromkeys(LAZY_CONVERTERS, Converter)}, Converter, "converter")


def load_converter(config: Mapping[str, Any], side: Literal["key", "value"], default: str) -> Converter:
    """Create and configure the converter for one side of a connector.

    Args:
        config: the connector configuration (``spec.config``).
        side: ``"key"`` or ``"value"``.
        default: the class name or alias used when ``<side>.converter`` is not set (the
            worker's default, e.g. ``org.apache.kafka.connect.json.JsonConverter``).

    Returns:
        A new converter, configured with the keys under ``<side>.converter.`` (prefix
        removed) and ``is_key = side == "key"``.

    Raises:
        ConfigError: keyed by the full configuration key: ``value.converter`` for an
            unknown class (``unknown converter 'x'; known: ...``), or e.g.
            ``value.converter.schemas.enable`` for an invalid setting.
    """
    if side not in ("key", "value"):
        raise ValueError(f"side must be 'key' or 'value', not {side!r}")
    key = f"{side}.converter"
    name = config.get(key)
    if name is None or (isinstance(name, str) and not name.strip()):
        name = default
    try:
        cls = converter_class(name)
    except PluginNotFound as exc:
        raise ConfigError({key: str(exc)}) from None
    try:
        converter = cls()
        converter.configure(sub_config(config, key + "."), side == "key")
    except ConfigError as exc:
        raise prefixed_error(key + ".", exc) from None
    except Exception as exc:
        raise ConfigError({key: f"{type(exc).__name__}: {exc}"}) from exc
    return converter


__all__ = [
    "CONVERTERS",
    "CONVERTER_ALIASES",
    "KAFKA_CONNECT_CONVERTERS",
    "LAZY_CONVERTERS",
    "BooleanConverter",
    "ByteArrayConverter",
    "DoubleConverter",
    "FloatConverter",
    "IntegerConverter",
    "JsonConverter",
    "LongConverter",
    "ShortConverter",
    "StringConverter",
    "converter_class",
    "load_converter",
]
