"""``StringConverter``: text in the configured character set.

Kafka Connect: ``org.apache.kafka.connect.storage.StringConverter`` (alias ``string``).

Configuration (prefix ``key.converter.`` / ``value.converter.``):

``converter.encoding`` (string, default ``UTF-8``)
    The character set, by its Java or Python name (``UTF-8``, ``UTF8``, ``ISO-8859-1``,
    ``US-ASCII``, ``UTF-16``, ``windows-1252``...). An unknown name is a configuration
    error (Kafka Connect only fails on the first record).

Behaviour, as Kafka Connect's ``StringSerializer``/``StringDeserializer``:

* ``to_connect_data`` decodes with ``Schema.OPTIONAL_STRING_SCHEMA``; malformed bytes
  become U+FFFD (as Java's ``new String(bytes, charset)``), so decoding never fails.
  A null (tombstone) gives ``(None, None)``, per Conveyor's converter contract.
* ``from_connect_data`` writes ``value.toString()``: strings as they are, booleans as
  ``true``/``false``, other values through ``str()``; ``bytes`` pass through unchanged.
  Unmappable characters become ``?``.
* ``UTF-16`` is Java's: big-endian with a byte-order mark when writing, big-endian
  unless a mark says otherwise when reading.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from typing import Any

from conveyor.api.converters import Converter
from conveyor.api.records import Header
from conveyor.api.schema import NULL, Schema, SchemaAndValue, SchemaType
from conveyor.converters._config import get_string, invalid

OPTIONAL_STRING_SCHEMA = Schema(SchemaType.STRING, optional=True)
ENCODING_CONFIG = "converter.encoding"
ENCODING_DEFAULT = "UTF-8"
_JAVA_UTF16 = "java-utf-16"


def _codec_name(key: str, encoding: str) -> str:
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        raise invalid(key, encoding, "unsupported character set") from None
    return _JAVA_UTF16 if name == "utf-16" else name


_new_tuple = tuple.__new__  # SchemaAndValue without its Python-level __new__: half the cost, once per record


class StringConverter(Converter):
    """Strings ↔ bytes in one character set."""

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def configure(self, config: Mapping[str, Any], is_key: bool) -> None:
        self.encoding = _codec_name(ENCODING_CONFIG, get_string(config, ENCODING_CONFIG, ENCODING_DEFAULT))

    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        if data is None:
            return NULL
        if self.encoding == _JAVA_UTF16:
            raw = bytes(data)
            codec = "utf-16" if raw[:2] in (codecs.BOM_UTF16_BE, codecs.BOM_UTF16_LE) else "utf-16-be"
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, raw.decode(codec, "replace"))
        return _new_tuple(SchemaAndValue, (OPTIONAL_STRING_SCHEMA, str(data, self.encoding, "replace")))

    def from_connect_data(
        self, topic: str, headers: Sequence[Header], schema: Schema | None, value: Any
    ) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str):
            text = value
        else:
            text = str(value)
        if self.encoding == _JAVA_UTF16:
            return codecs.BOM_UTF16_BE + text.encode("utf-16-be", "replace")
        return text.encode(self.encoding, "replace")
