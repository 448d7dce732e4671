"""``SimpleHeaderConverter``: header values as text, their schemas inferred when read.

Kafka Connect: ``org.apache.kafka.connect.storage.SimpleHeaderConverter`` (the worker's
default ``header.converter``). No configuration.

* ``to_connect_header`` decodes the bytes as UTF-8 (malformed bytes become U+FFFD, as Java's
  ``new String(bytes, UTF_8)``) and parses the text with
  :func:`~conveyor.converters.connect_values.parse_string` (Connect's ``Values.parseString``):
  ``42`` is ``INT8`` 42, ``true`` a ``BOOLEAN``, ``2024-01-31`` a Date, ``[1,2]`` an array of
  ``INT8``, anything unparsable a ``STRING``. ``None`` gives ``(None, None)``, and so does the
  text ``null``. Where the parse fails (it does not for text that merely does not parse) Connect
  logs a warning and keeps the bytes (``BYTES`` schema); so does Conveyor, which also fails
  there for the few values Python cannot hold
  (:class:`~conveyor.converters.connect_values.Unrepresentable`) and for nesting deeper than
  Python's recursion limit (Java's stack allows more).
* ``from_connect_header`` writes
  :func:`~conveyor.converters.connect_values.convert_to_string` (Connect's
  ``Values.convertToString``) in UTF-8; ``None`` gives ``None``.

Dates are parsed and printed in UTC: Connect uses the worker JVM's default time zone, so the
two agree for a worker run with ``user.timezone=UTC`` (as Connect's images are).
"""

from __future__ import annotations

import codecs
import logging
from typing import Any

from conveyor.api.converters import HeaderConverter
from conveyor.api.errors import DataError
from conveyor.api.schema import NULL, Schema, SchemaAndValue, SchemaType
from conveyor.converters.connect_values import Unrepresentable, convert_to_string, parse_string

_log = logging.getLogger(__name__)
BYTES_SCHEMA = Schema(SchemaType.BYTES)


def _java_utf8_replace(error: UnicodeError) -> tuple[str, int]:
    """One U+FFFD per malformed sequence, as Java's ``new String(bytes, UTF_8)``: Python's own
    ``replace``, except that Java reads a surrogate encoded in three bytes (``ED A0 80``), or the
    first two bytes of one, as a single malformed sequence."""
    assert isinstance(error, UnicodeDecodeError)
    data, start = error.object, error.start
    if data[start] == 0xED and start + 1 < len(data) and 0xA0 <= data[start + 1] <= 0xBF:
        whole = start + 2 < len(data) and data[start + 2] & 0xC0 == 0x80
        return "\ufffd", start + (3 if whole else 2)
    return "\ufffd", error.end


codecs.register_error("conveyor.java-utf8", _java_utf8_replace)


class SimpleHeaderConverter(HeaderConverter):
    """Header values ↔ their text, with Kafka Connect's type inference."""

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return NULL
        try:
            return parse_string(bytes(value).decode("utf-8", "conveyor.java-utf8"))
        except DataError as e:  # Connect: a NoSuchElementException (its 4.1.1 parser raises none either)
            raise DataError(f"Failed to deserialize value for header '{header_key}' on topic '{topic}'") from e
        except Exception as e:  # noqa: BLE001 - as Connect's catch (Throwable t)
            _log.warning("Failed to deserialize value for header '%s' on topic '%s', so using byte array: %s",
                         header_key, topic, e, exc_info=not isinstance(e, Unrepresentable))
            return SchemaAndValue(BYTES_SCHEMA, value)

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        text = convert_to_string(schema, value)
        return None if text is None else text.encode("utf-8", "replace")
