"""``JsonSchemaConverter``: JSON in Confluent's wire format, JSON Schemas in a Schema Registry.

Kafka Connect: ``io.confluent.connect.json.JsonSchemaConverter`` (alias ``jsonschema``).

Bytes are Confluent's framing (magic byte 0, 4-byte big-endian schema id, UTF-8 JSON), written
by ``confluent_kafka.schema_registry.json_schema.JSONSerializer`` (which validates each value
against the schema) and read by its ``JSONDeserializer`` (which validates against the writer's
schema). Connect schemas map to JSON Schema as Confluent's ``JsonSchemaData`` does
(:mod:`conveyor.converters._json_schema_data`), so records read the same in Kafka Connect.

Configuration: the shared Schema Registry keys (:mod:`conveyor.schema_registry._base`), and
Confluent's ``JsonSchemaDataConfig`` keys:

``decimal.format`` (``BASE64`` default, ``NUMERIC``; case-insensitive)
    How Decimal values are written: base64 of the unscaled bytes, or a JSON number. Both are
    read whatever the setting.
``object.additional.properties`` (boolean, default ``true``)
    ``false`` writes structs as ``"additionalProperties": false`` objects.
``use.optional.for.nonrequired`` (boolean, default ``false``)
    Read properties missing from an object's ``required`` list as optional fields.

Registered schemas carry ``"$schema": "http://json-schema.org/draft-07/schema#"``, which
Confluent's converter does not write: registries that sniff the content type (Apicurio) refuse a
JSON Schema without it unless it has ``properties``, and it pins confluent_kafka's validation to
draft-07 (the Java serializer's default) instead of the newest draft. So a subject written by
both Confluent's converter and Conveyor's holds two (compatible) versions of the same schema.

The subject name strategies' record name is the JSON Schema's ``title`` (the Connect schema
name); ``RecordNameStrategy`` / ``TopicRecordNameStrategy`` need a named schema (``DataError``).

``None`` is a tombstone both ways. Confluent writes ``null`` with an optional schema as a framed
JSON ``null`` (registering the schema); Conveyor writes a tombstone, and reads a framed ``null``
as ``(schema, None)``. A value without a Connect schema is a ``DataError``: Confluent's converter
derives no JSON Schema for it and its serializer fails too.

Not yet supported: Confluent's unions (``io.confluent.connect.json.OneOf`` structs, or
``connect.union`` with ``generalized.sum.type.support``), enums (``io.confluent.connect.json.Enum``
parameters; JSON ``enum``/``const``), ``allOf``, empty schemas (``ConnectVariant``),
``preserve.additional.properties``, ``ignore.modern.dialects``, schema references, remote and
recursive ``$ref``; the registry version as the read schema's version (Confluent's fallback when
the schema has no ``connect.version``; Conveyor's AvroConverter does not do it either).

Neither the basic-auth secret nor the URLs appear in error messages.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka.schema_registry import topic_subject_name_strategy
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

from conveyor.api.errors import DataError
from conveyor.api.records import Header
from conveyor.api.schema import NULL, Schema, SchemaAndValue
from conveyor.converters import _json_schema_data as jsd
from conveyor.converters._config import get_bool, get_string, invalid
from conveyor.schema_registry._base import SchemaRegistryConverter, no_subject

DECIMAL_FORMAT_CONFIG = "decimal.format"
ADDITIONAL_PROPERTIES_CONFIG = "object.additional.properties"
OPTIONAL_FOR_NONREQUIRED_CONFIG = "use.optional.for.nonrequired"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def _json_loads(data: bytes | str) -> Any:
    return json.loads(data, parse_float=decimal.Decimal)  # exact NUMERIC decimals


class JsonSchemaConverter(SchemaRegistryConverter[JSONSerializer]):
    """Confluent's ``JsonSchemaConverter`` through ``confluent_kafka.schema_registry``."""

    FORMAT = "JSON Schema"

    def __init__(self) -> None:
        super().__init__()
        self._deserializer: JSONDeserializer | None = None
        self._readers: dict[int, Schema] = {}  # schema id -> Connect schema
        self._numeric_decimals = False
        self._additional_properties = True
        self._optional_for_nonrequired = False

    def _configure_format(self, config: Mapping[str, Any]) -> None:
        fmt = str(get_string(config, DECIMAL_FORMAT_CONFIG, "BASE64")).upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise invalid(DECIMAL_FORMAT_CONFIG, fmt, "String must be one of (case insensitive): BASE64, NUMERIC")
        self._numeric_decimals = fmt == "NUMERIC"
        self._additional_properties = get_bool(config, ADDITIONAL_PROPERTIES_CONFIG, True)
        self._optional_for_nonrequired = get_bool(config, OPTIONAL_FOR_NONREQUIRED_CONFIG, False)
        self._deserializer = JSONDeserializer(
            None,
            schema_registry_client=self._client,
            conf={"subject.name.strategy": no_subject},
            json_decode=_json_loads,
        )

    # -- writing ----------------------------------------------------------------------------

    def from_connect_data(
        self, topic: str, headers: Sequence[Header], schema: Schema | None, value: Any
    ) -> bytes | None:
        """Confluent-framed JSON of ``value`` (Connect form, see :mod:`conveyor.converters.logical`)
        with the JSON Schema of ``schema`` registered (or looked up) under the subject.

        Raises:
            DataError: no schema, a value that does not fit the schema (wrong Python type, or
                the JSON fails validation), registry failures (``Failed to serialize ...``).
        """
        if value is None:
            return None
        if schema is None:
            raise DataError(
                f"JsonSchemaConverter cannot write a {type(value).__name__} value without a Connect schema "
                "(Confluent's converter derives no JSON Schema for it either)"
            )
        serializer = self._writer(schema)
        datum = jsd.value_to_json(schema, value, self._numeric_decimals)
        if datum is None:
            return None
        try:
            return serializer(datum, self._ctx(topic))
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - registry errors, SerializationError from validation...
            raise self._failure("serialize", topic, exc) from None

    def _new_writer(self, schema: Schema) -> JSONSerializer:
        client = self._require_client()
        if self._serializer_conf["subject.name.strategy"] is not topic_subject_name_strategy and not schema.name:
            raise DataError(
                "the record subject name strategies need a named Connect schema (the JSON Schema title)"
            )
        js = {"$schema": DRAFT_07}
        js.update(
            jsd.to_json_schema(
                schema, numeric_decimals=self._numeric_decimals, additional_properties=self._additional_properties
            )
        )
        try:
            return JSONSerializer(
                json.dumps(js),
                client,
                conf=dict(self._serializer_conf),
                json_encode=jsd.dumps if self._numeric_decimals else None,
            )
        except Exception as exc:  # noqa: BLE001 - invalid schema text and friends
            raise DataError(
                f"cannot use the JSON Schema derived from the Connect schema: {type(exc).__name__}: {exc}"
            ) from None

    # -- reading ----------------------------------------------------------------------------

    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        """The Connect schema (from the writer's JSON Schema, fetched by id) and value.

        Raises:
            DataError: not Confluent framing (``Unknown magic byte!``), a schema that is not
                JSON Schema or has no Connect mapping, a value failing the writer's schema,
                registry failures (``Failed to deserialize ...``).
        """
        if data is None:
            return NULL
        if self._deserializer is None:
            raise DataError("JsonSchemaConverter used before configure()")
        if len(data) < 5 or data[0] != 0:
            raise DataError(f"Failed to deserialize JSON Schema data from topic {topic}: Unknown magic byte!")
        schema_id = int.from_bytes(data[1:5], "big")
        try:
            schema = self._readers.get(schema_id)
            if schema is None:
                schema = self._new_reader(schema_id)
            datum = self._deserializer(data, self._ctx(topic))
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - registry errors, truncated payloads, validation...
            raise self._failure("deserialize", topic, exc) from None
        return SchemaAndValue(schema, jsd.value_from_json(schema, datum))

    def _new_reader(self, schema_id: int) -> Schema:
        registered = self._require_client().get_schema(schema_id)
        if registered.schema_type != "JSON":
            raise DataError(f"schema {schema_id} is a {registered.schema_type or 'AVRO'} schema, not JSON Schema")
        if registered.references:
            raise DataError(f"schema {schema_id} has schema references, which JsonSchemaConverter does not support yet")
        schema = jsd.to_connect_schema(
            json.loads(registered.schema_str), optional_for_nonrequired=self._optional_for_nonrequired
        )
        if len(self._readers) >= self._cache_size:
            self._readers.clear()
        self._readers[schema_id] = schema
        return schema
