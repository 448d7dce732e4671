"""Header converters, configured with Kafka Connect's ``header.converter`` key.

=================================================================  ==========  =================================
``header.converter``                                               alias       header values a task sees
=================================================================  ==========  =================================
(not set)                                                                      raw ``bytes`` / ``None``, no schema
``org.apache.kafka.connect.converters.ByteArrayConverter``         ``bytes``   the same: raw bytes pass through
``org.apache.kafka.connect.storage.SimpleHeaderConverter``         ``simple``  typed by Kafka Connect's
                                                                               ``Values.parseString`` (``"42"`` →
                                                                               ``int8`` 42, ``"[1,2]"`` → array)
any key/value converter (``StringConverter``, ``JsonConverter``,               what that converter reads
``LongConverter``...; Kafka Connect's implement ``HeaderConverter``)
a dotted Python path to a :class:`~conveyor.api.HeaderConverter`
or a :class:`~conveyor.api.Converter`
=================================================================  ==========  =================================

Kafka Connect's worker default is ``SimpleHeaderConverter``; Conveyor's is raw bytes,
which costs nothing per record. The keys under ``header.converter.`` configure it (e.g.
``header.converter.schemas.enable`` for ``JsonConverter``).

Writing (sources): a header without a schema whose value is ``bytes`` or ``None`` is
written as it is; any other header goes through the header converter. Without one, a
``str`` value is written as its UTF-8 text and anything else is a
:class:`~conveyor.api.DataError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from conveyor.api.converters import Converter, HeaderConverter
from conveyor.api.errors import ConfigError, DataError
from conveyor.api.records import Header
from conveyor.api.schema import Schema, SchemaAndValue
from conveyor.converters._config import prefixed_error, sub_config
from conveyor.converters._loading import PluginNotFound, load_class
from conveyor.converters.bytearray_converter import ByteArrayConverter
from conveyor.converters.simple_header_converter import SimpleHeaderConverter

HEADER_CONVERTER_CONFIG = "header.converter"

#: Kafka Connect class names and aliases of the header converters that are not key/value converters.
HEADER_CONVERTERS: dict[str, type] = {
    "org.apache.kafka.connect.storage.SimpleHeaderConverter": SimpleHeaderConverter,
    "simple": SimpleHeaderConverter,
}

RawHeaders = Sequence[tuple[str, bytes | None]]


class ConverterHeaderConverter(HeaderConverter):
    """A key/value :class:`~conveyor.api.Converter` serving headers, as Kafka Connect's
    ``StringConverter``, ``JsonConverter`` and number converters do: their
    ``toConnectHeader`` is ``toConnectData`` and ``fromConnectHeader`` is ``fromConnectData``.
    """

    def __init__(self, converter: Converter) -> None:
        self.converter = converter

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.converter.to_connect_data(topic, (), value)

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.converter.from_connect_data(topic, (), schema, value)

    def __repr__(self) -> str:
        return f"ConverterHeaderConverter({type(self.converter).__name__})"


def load_header_converter(config: Mapping[str, Any]) -> HeaderConverter | None:
    """The connector's ``header.converter``, configured, or ``None`` for raw bytes.

    Args:
        config: the connector configuration (``spec.config``).

    Returns:
        ``None`` when the key is unset, blank or names ``ByteArrayConverter`` (headers stay
        raw bytes); otherwise a new converter configured with the keys under
        ``header.converter.`` (prefix removed; a key/value converter gets ``is_key=False``).

    Raises:
        ConfigError: keyed ``header.converter`` for an unknown class or one that is neither
            a header converter nor a converter, or keyed by the full key of an invalid
            setting (``header.converter.schemas.enable``).
    """
    from conveyor.converters import CONVERTERS  # the package imports this module

    name = config.get(HEADER_CONVERTER_CONFIG)
    if name is None or (isinstance(name, str) and not name.strip()):
        return None
    try:
        cls = load_class(name, {**CONVERTERS, **HEADER_CONVERTERS}, object, "header converter")
    except PluginNotFound as exc:
        raise ConfigError({HEADER_CONVERTER_CONFIG: str(exc)}) from None
    if not (issubclass(cls, HeaderConverter) or issubclass(cls, Converter)):
        raise ConfigError({HEADER_CONVERTER_CONFIG: f"'{name}' is not a header converter: it must subclass "
                                                    "conveyor.api.HeaderConverter or conveyor.api.Converter"})
    if issubclass(cls, ByteArrayConverter):
        return None
    own = sub_config(config, HEADER_CONVERTER_CONFIG + ".")
    try:
        if issubclass(cls, HeaderConverter):
            header_converter = cls()
            header_converter.configure(own)
            return header_converter
        converter = cls()
        converter.configure(own, False)
    except ConfigError as exc:
        raise prefixed_error(HEADER_CONVERTER_CONFIG + ".", exc) from None
    except Exception as exc:
        raise ConfigError({HEADER_CONVERTER_CONFIG: f"{type(exc).__name__}: {exc}"}) from exc
    return ConverterHeaderConverter(converter)


def to_connect_headers(converter: HeaderConverter, topic: str, raw: RawHeaders | None) -> tuple[Header, ...]:
    """A consumed record's headers, read by ``converter``, in order.

    Raises:
        Exception: whatever the converter raises (a :class:`~conveyor.api.DataError` for
            bytes it cannot read); the caller's ``errors.tolerance`` decides.
    """
    if not raw:
        return ()
    headers = []
    for key, data in raw:
        schema, value = converter.to_connect_header(topic, key, data)
        headers.append(Header(key, value, schema))
    return tuple(headers)


def to_kafka_headers(converter: HeaderConverter | None, topic: str,
                     headers: Sequence[Header]) -> list[tuple[str, bytes | str | None]]:
    """A record's headers as the producer takes them: raw headers as they are, others
    through ``converter``.

    Raises:
        DataError: a header needs a converter and there is none (its value is not
            ``bytes``, ``str`` or ``None``, or it has a schema).
        Exception: whatever the converter raises; the caller's ``errors.tolerance`` decides.
    """
    written: list[tuple[str, bytes | str | None]] = []
    for header in headers:
        value = header.value
        if header.schema is None and (value is None or isinstance(value, bytes)):
            written.append((header.key, value))
        elif converter is not None:
            written.append((header.key, converter.from_connect_header(topic, header.key, header.schema, value)))
        elif header.schema is None and isinstance(value, (str, bytearray, memoryview)):
            written.append((header.key, value if isinstance(value, str) else bytes(value)))
        else:
            raise DataError(f"header '{header.key}' holds {type(value).__name__}"
                            f"{'' if header.schema is None else ' with a schema'}: without a header.converter, "
                            "header values must be bytes, str or None")
    return written
