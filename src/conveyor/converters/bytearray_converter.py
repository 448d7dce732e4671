"""``ByteArrayConverter``: raw bytes, untouched.

Kafka Connect: ``org.apache.kafka.connect.converters.ByteArrayConverter`` (alias
``bytes``). No configuration.

* ``to_connect_data`` returns the bytes with ``Schema.OPTIONAL_BYTES_SCHEMA``
  (``(None, None)`` for a tombstone, per Conveyor's converter contract).
* ``from_connect_data`` accepts ``bytes`` (``bytearray``/``memoryview`` are copied to
  ``bytes``) and a ``None`` or ``BYTES`` schema; anything else raises
  :class:`~conveyor.api.DataError` with Kafka Connect's messages
  (``Invalid schema type for ByteArrayConverter: STRING``, ``ByteArrayConverter is not
  compatible with objects of type int``).

It sits on the per-record hot path: a runtime may skip calling it altogether when
:attr:`ByteArrayConverter.passthrough` is true and use the raw bytes (its schema is
then ``OPTIONAL_BYTES_SCHEMA`` or ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from conveyor.api.converters import Converter
from conveyor.api.errors import DataError
from conveyor.api.records import Header
from conveyor.api.schema import NULL, Schema, SchemaAndValue, SchemaType

OPTIONAL_BYTES_SCHEMA = Schema(SchemaType.BYTES, optional=True)


class ByteArrayConverter(Converter):
    """Bytes in, bytes out."""

    #: The converter returns its input unchanged: callers may bypass it.
    passthrough: ClassVar[bool] = True

    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        if data is None:
            return NULL
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, data)

    def from_connect_data(
        self, topic: str, headers: Sequence[Header], schema: Schema | None, value: Any
    ) -> bytes | None:
        if schema is not None and schema.type is not SchemaType.BYTES:
            raise DataError(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        if value is None or type(value) is bytes:
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise DataError(f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}")
