"""Fixed-width number and boolean converters, as Kafka's primitive serializers.

==============================================================  =======  ===============  ============
Kafka Connect class                                             alias    schema           bytes
==============================================================  =======  ===============  ============
``org.apache.kafka.connect.converters.ShortConverter``          short    optional int16   2, big-endian
``org.apache.kafka.connect.converters.IntegerConverter``        integer  optional int32   4, big-endian
``org.apache.kafka.connect.converters.LongConverter``           long     optional int64   8, big-endian
``org.apache.kafka.connect.converters.FloatConverter``          float    optional float   4, IEEE 754
``org.apache.kafka.connect.converters.DoubleConverter``         double   optional double  8, IEEE 754
``org.apache.kafka.connect.converters.BooleanConverter``        boolean  optional bool    1, 0x00/0x01
==============================================================  =======  ===============  ============

No configuration. Errors follow ``NumberConverter``: ``Failed to deserialize integer:
Size of data received by IntegerDeserializer is not 4`` and ``Failed to serialize to
integer (was str)``. A null (tombstone) gives ``(None, None)``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, ClassVar

from conveyor.api.converters import Converter
from conveyor.api.errors import DataError
from conveyor.api.records import Header
from conveyor.api.schema import NULL, Schema, SchemaAndValue, SchemaType


class _NumberConverter(Converter):
    gives_schemas = True
    type_name: ClassVar[str]
    deserializer: ClassVar[str]
    schema: ClassVar[Schema]
    codec: ClassVar[struct.Struct]

    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        if data is None:
            return NULL
        if len(data) != self.codec.size:
            raise DataError(
                f"Failed to deserialize {self.type_name}: Size of data received by {self.deserializer} "
                f"is not {self.codec.size}"
            )
        return SchemaAndValue(self.schema, self.codec.unpack(data)[0])

    def _check(self, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise DataError(f"Failed to serialize to {self.type_name} (was {type(value).__name__})")

    def from_connect_data(
        self, topic: str, headers: Sequence[Header], schema: Schema | None, value: Any
    ) -> bytes | None:
        if value is None:
            return None
        try:
            return self.codec.pack(self._check(value))
        except struct.error as exc:
            raise DataError(f"Failed to serialize to {self.type_name}: {value} is out of range ({exc})") from None


class ShortConverter(_NumberConverter):
    """``org.apache.kafka.connect.converters.ShortConverter``."""

    type_name = "short"
    deserializer = "ShortDeserializer"
    schema = Schema(SchemaType.INT16, optional=True)
    codec = struct.Struct(">h")


class IntegerConverter(_NumberConverter):
    """``org.apache.kafka.connect.converters.IntegerConverter``."""

    type_name = "integer"
    deserializer = "IntegerDeserializer"
    schema = Schema(SchemaType.INT32, optional=True)
    codec = struct.Struct(">i")


class LongConverter(_NumberConverter):
    """``org.apache.kafka.connect.converters.LongConverter``."""

    type_name = "long"
    deserializer = "LongDeserializer"
    schema = Schema(SchemaType.INT64, optional=True)
    codec = struct.Struct(">q")


class _FloatingConverter(_NumberConverter):
    def _check(self, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise DataError(f"Failed to serialize to {self.type_name} (was {type(value).__name__})")


class FloatConverter(_FloatingConverter):
    """``org.apache.kafka.connect.converters.FloatConverter``."""

    type_name = "float"
    deserializer = "FloatDeserializer"
    schema = Schema(SchemaType.FLOAT32, optional=True)
    codec = struct.Struct(">f")


class DoubleConverter(_FloatingConverter):
    """``org.apache.kafka.connect.converters.DoubleConverter``."""

    type_name = "double"
    deserializer = "DoubleDeserializer"
    schema = Schema(SchemaType.FLOAT64, optional=True)
    codec = struct.Struct(">d")


class BooleanConverter(Converter):
    """``org.apache.kafka.connect.converters.BooleanConverter``: one byte, 0x01 or 0x00."""

    schema = Schema(SchemaType.BOOLEAN, optional=True)
    gives_schemas = True

    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        if data is None:
            return NULL
        if len(data) != 1:
            raise DataError("Failed to deserialize boolean: Size of data received by BooleanDeserializer is not 1")
        if data[0] == 1:
            return SchemaAndValue(self.schema, True)
        if data[0] == 0:
            return SchemaAndValue(self.schema, False)
        raise DataError(f"Failed to deserialize boolean: Unexpected byte received by BooleanDeserializer: {data[0]}")

    def from_connect_data(
        self, topic: str, headers: Sequence[Header], schema: Schema | None, value: Any
    ) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            raise DataError(f"Failed to serialize to boolean (was {type(value).__name__})")
        return b"\x01" if value else b"\x00"
