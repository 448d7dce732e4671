"""``AvroConverter``: Avro in Confluent's wire format, schemas in a Schema Registry.

Kafka Connect: ``io.confluent.connect.avro.AvroConverter`` (alias ``avro``).

Bytes are Confluent's framing (magic byte 0, 4-byte big-endian schema id, Avro binary),
written by ``confluent_kafka.schema_registry.avro.AvroSerializer`` and read by its
``AvroDeserializer``. Connect schemas map to Avro as Confluent's ``AvroData`` does
(:mod:`conveyor.converters._avro_data`), so records read the same in Kafka Connect.

Configuration: the shared Schema Registry keys (:mod:`conveyor.schema_registry._base`).

Not yet supported: ``connect.meta.data=false``,
``enhanced.avro.schema.support``, ``scrub.invalid.names``, Avro unions of several
non-null types, more than one non-string-keyed map in a schema.

A value without a Connect schema is written only when it is a primitive (``str`` →
``string``, ``bool`` → ``boolean``, ``int`` → ``long``, ``float`` → ``double``,
``bytes`` → ``bytes``, as Confluent infers them); anything else is a ``DataError``.
``None`` is a tombstone both ways.

Neither the basic-auth secret nor the URLs appear in error messages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

from conveyor.api.errors import DataError
from conveyor.api.records import Header
from conveyor.api.schema import NULL, Schema, SchemaAndValue, SchemaType
from conveyor.converters import _avro_data
from conveyor.schema_registry._base import SchemaRegistryConverter, no_subject

_INFERRED: dict[type, Schema] = {
    str: Schema(SchemaType.STRING),
    bool: Schema(SchemaType.BOOLEAN),
    int: Schema(SchemaType.INT64),
    float: Schema(SchemaType.FLOAT64),
    bytes: Schema(SchemaType.BYTES),
}


class _Writer:
    """What writing values of one Connect schema needs: its serializer and value reshaping."""

    __slots__ = ("serializer", "reshape")

    def __init__(self, serializer: AvroSerializer, reshape: bool) -> None:
        self.serializer = serializer
        self.reshape = reshape


class AvroConverter(SchemaRegistryConverter[_Writer]):
    """Confluent's ``AvroConverter`` through ``confluent_kafka.schema_registry``."""

    FORMAT = "Avro"

    def __init__(self) -> None:
        super().__init__()
        self._deserializer: AvroDeserializer | None = None
        self._readers: dict[int, tuple[Schema, bool]] = {}  # schema id -> (Connect schema, reshape)

    def _configure_format(self, config: Mapping[str, Any]) -> None:
        self._deserializer = AvroDeserializer(self._client, conf={"subject.name.strategy": no_subject})

    # -- writing ----------------------------------------------------------------------------

    def from_connect_data(
        self, topic: str, headers: Sequence[Header], schema: Schema | None, value: Any
    ) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            schema = _INFERRED.get(type(value))
            if schema is None:
                raise DataError(
                    f"AvroConverter cannot write a {type(value).__name__} value without a Connect schema; "
                    "only primitive values (str, bool, int, float, bytes) can be written schemaless"
                )
        writer = self._writer(schema)
        datum = _avro_data.value_to_avro(schema, value) if writer.reshape else value
        try:
            return writer.serializer(datum, self._ctx(topic))
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - registry errors, fastavro's ValueError/TypeError...
            raise self._failure("serialize", topic, exc) from None

    def _new_writer(self, schema: Schema) -> _Writer:
        client = self._require_client()
        avro = _avro_data.to_avro_schema(schema)
        try:
            serializer = AvroSerializer(client, json.dumps(avro), conf=dict(self._serializer_conf))
        except Exception as exc:  # noqa: BLE001 - fastavro's SchemaParseException and friends
            raise DataError(
                f"cannot use the Avro schema derived from the Connect schema: {type(exc).__name__}: {exc}"
            ) from None
        return _Writer(serializer, _avro_data.needs_value_reshaping(schema))

    # -- reading ----------------------------------------------------------------------------

    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        if data is None:
            return NULL
        if self._deserializer is None:
            raise DataError("AvroConverter used before configure()")
        if len(data) < 5 or data[0] != 0:
            raise DataError(f"Failed to deserialize Avro data from topic {topic}: Unknown magic byte!")
        schema_id = int.from_bytes(data[1:5], "big")
        try:
            reader = self._readers.get(schema_id)
            if reader is None:
                reader = self._new_reader(schema_id)
            datum = self._deserializer(data, self._ctx(topic))
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - registry errors, truncated payloads...
            raise self._failure("deserialize", topic, exc) from None
        schema, reshape = reader
        return SchemaAndValue(schema, _avro_data.value_from_avro(schema, datum) if reshape else datum)

    def _new_reader(self, schema_id: int) -> tuple[Schema, bool]:
        registered = self._require_client().get_schema(schema_id)
        if registered.schema_type not in (None, "AVRO"):
            raise DataError(f"schema {schema_id} is a {registered.schema_type} schema, not Avro")
        if registered.references:
            raise DataError(f"schema {schema_id} has schema references, which AvroConverter does not support yet")
        schema = _avro_data.to_connect_schema(json.loads(registered.schema_str))
        reader = (schema, _avro_data.needs_value_reshaping(schema))
        if len(self._readers) >= self._cache_size:
            self._readers.clear()
        self._readers[schema_id] = reader
        return reader
