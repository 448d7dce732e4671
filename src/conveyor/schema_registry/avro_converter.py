"""``AvroConverter``: Avro in Confluent's wire format, schemas in a Schema Registry.

Kafka Connect: ``io.confluent.connect.avro.AvroConverter`` (alias ``avro``).

Bytes are Confluent's framing (magic byte 0, 4-byte big-endian schema id, Avro binary),
written by ``confluent_kafka.schema_registry.avro.AvroSerializer`` and read by its
``AvroDeserializer``. Connect schemas map to Avro as Confluent's ``AvroData`` does
(:mod:`conveyor.converters._avro_data`), so records read the same in Kafka Connect.

Configuration (prefix ``key.converter.`` / ``value.converter.``), Confluent's keys:

``schema.registry.url`` (list, required)
    Registry URLs, comma-separated; passed to the client, which fails over between them.
``basic.auth.credentials.source`` (``URL`` default, ``USER_INFO``)
    ``URL``: credentials from the URL's user-info part; ``USER_INFO``: from
    ``basic.auth.user.info`` (``user:password``; also read as
    ``schema.registry.basic.auth.user.info``). ``SASL_INHERIT`` is not supported.
``auto.register.schemas`` (boolean, default ``true``)
    Register a new schema under its subject; ``false`` looks it up and fails
    (``DataError``) when the subject does not hold it.
``use.latest.version`` (boolean, default ``false``)
    Write with the subject's latest schema (it wins over ``auto.register.schemas``, as
    in Confluent's serializer); the value must fit that schema.
``latest.cache.ttl.sec`` (int, default ``-1``)
    How long the latest version stays cached; ``-1`` keeps it for the converter's life.
``key.subject.name.strategy`` / ``value.subject.name.strategy``
    ``io.confluent.kafka.serializers.subject.TopicNameStrategy`` (default,
    ``<topic>-key``/``<topic>-value``), ``RecordNameStrategy`` (the record's full name) or
    ``TopicRecordNameStrategy`` (``<topic>-<record full name>``); the short names work too.
``schemas.cache.config`` (int, default 1000)
    How many Connect schemas to keep serializers and parsed schemas for.

Other keys are ignored, as Kafka ignores keys it does not define. Not yet supported:
the registry's TLS keys (``schema.registry.ssl.*``), ``connect.meta.data=false``,
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

from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from conveyor.api.converters import Converter
from conveyor.api.errors import ConfigError, DataError
from conveyor.api.records import Header
from conveyor.api.schema import NULL, Schema, SchemaAndValue, SchemaType
from conveyor.converters import _avro_data
from conveyor.converters._config import get_bool, get_choice, get_int, get_list, get_string, invalid

URL_CONFIG = "schema.registry.url"
CREDENTIALS_SOURCE_CONFIG = "basic.auth.credentials.source"
USER_INFO_CONFIG = "basic.auth.user.info"
LEGACY_USER_INFO_CONFIG = "schema.registry.basic.auth.user.info"
AUTO_REGISTER_CONFIG = "auto.register.schemas"
USE_LATEST_CONFIG = "use.latest.version"
LATEST_TTL_CONFIG = "latest.cache.ttl.sec"
CACHE_SIZE_CONFIG = "schemas.cache.config"

_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
STRATEGIES = {
    "TopicNameStrategy": topic_subject_name_strategy,
    "RecordNameStrategy": record_subject_name_strategy,
    "TopicRecordNameStrategy": topic_record_subject_name_strategy,
}

_INFERRED: dict[type, Schema] = {
    str: Schema(SchemaType.STRING),
    bool: Schema(SchemaType.BOOLEAN),
    int: Schema(SchemaType.INT64),
    float: Schema(SchemaType.FLOAT64),
    bytes: Schema(SchemaType.BYTES),
}


def _no_subject(ctx: Any, record_name: Any) -> None:
    """The deserializer's subject strategy: none, so reading needs only the writer schema by id."""
    return None


class _Writer:
    """What writing values of one Connect schema needs: its serializer and value reshaping."""

    __slots__ = ("schema", "serializer", "reshape")

    def __init__(self, schema: Schema, serializer: AvroSerializer, reshape: bool) -> None:
        self.schema = schema
        self.serializer = serializer
        self.reshape = reshape


class AvroConverter(Converter):
    """Confluent's ``AvroConverter`` through ``confluent_kafka.schema_registry``."""

    def __init__(self) -> None:
        self._client: SchemaRegistryClient | None = None
        self._secret: str | None = None
        self._is_key = False
        self._serializer_conf: dict[str, Any] = {}
        self._deserializer: AvroDeserializer | None = None
        self._cache_size = 1000
        self._writers: dict[int, _Writer] = {}  # id(Connect schema) -> writer (the schema is kept alive in it)
        self._writers_by_value: dict[Schema, _Writer] = {}
        self._readers: dict[int, tuple[Schema, bool]] = {}  # schema id -> (Connect schema, reshape)

    # -- configuration ----------------------------------------------------------------------

    def configure(self, config: Mapping[str, Any], is_key: bool) -> None:
        self._is_key = is_key
        urls = [u for u in get_list(config, URL_CONFIG) if u]
        if not urls:
            raise invalid(URL_CONFIG, "", "at least one Schema Registry URL is needed")
        source = get_choice(config, CREDENTIALS_SOURCE_CONFIG, ("URL", "USER_INFO", "SASL_INHERIT"), "URL")
        client_conf: dict[str, Any] = {"url": ",".join(urls)}
        if source == "SASL_INHERIT":
            raise ConfigError({CREDENTIALS_SOURCE_CONFIG: "SASL_INHERIT is not supported by Conveyor's AvroConverter"})
        if source == "USER_INFO":
            user_info = get_string(config, USER_INFO_CONFIG, None) or get_string(config, LEGACY_USER_INFO_CONFIG, None)
            if not user_info or ":" not in user_info:
                raise ConfigError(
                    {USER_INFO_CONFIG: "must be <user>:<password> when basic.auth.credentials.source is USER_INFO"}
                )
            client_conf["basic.auth.user.info"] = user_info
            self._secret = user_info.partition(":")[2] or None
        auto_register = get_bool(config, AUTO_REGISTER_CONFIG, True)
        use_latest = get_bool(config, USE_LATEST_CONFIG, False)
        side = "key" if is_key else "value"
        strategy_key = f"{side}.subject.name.strategy"
        strategy_name = get_string(config, strategy_key, "TopicNameStrategy")
        short = strategy_name.removeprefix(_STRATEGY_PACKAGE)
        if short not in STRATEGIES:
            known = ", ".join(_STRATEGY_PACKAGE + s for s in STRATEGIES)
            raise invalid(strategy_key, strategy_name, f"unsupported subject name strategy; known: {known}")
        self._cache_size = get_int(config, CACHE_SIZE_CONFIG, 1000, minimum=1)
        latest_ttl = get_int(config, LATEST_TTL_CONFIG, -1, minimum=-1)
        if latest_ttl >= 0:
            client_conf["cache.latest.ttl.sec"] = latest_ttl
        try:
            self._client = SchemaRegistryClient(client_conf)
        except (ValueError, TypeError) as exc:
            raise ConfigError({URL_CONFIG: self._scrub(f"invalid Schema Registry client settings: {exc}")}) from None
        self._serializer_conf = {
            "auto.register.schemas": auto_register and not use_latest,
            "use.latest.version": use_latest,
            "subject.name.strategy": STRATEGIES[short],
        }
        self._deserializer = AvroDeserializer(self._client, conf={"subject.name.strategy": _no_subject})

    def _scrub(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "[hidden]")
        return text

    def _ctx(self, topic: str) -> SerializationContext:
        return SerializationContext(topic, MessageField.KEY if self._is_key else MessageField.VALUE)

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
            raise DataError(
                self._scrub(f"Failed to serialize Avro data from topic {topic}: {type(exc).__name__}: {exc}")
            ) from None

    def _writer(self, schema: Schema) -> _Writer:
        writer = self._writers.get(id(schema))
        if writer is not None and writer.schema is schema:
            return writer
        try:
            writer = self._writers_by_value.get(schema)
        except TypeError:  # an unhashable default
            writer = None
        if writer is None:
            writer = self._new_writer(schema)
            if len(self._writers_by_value) >= self._cache_size:
                self._writers_by_value.clear()
            try:
                self._writers_by_value[schema] = writer
            except TypeError:
                pass
        if len(self._writers) >= self._cache_size:
            self._writers.clear()
        self._writers[id(schema)] = writer
        return writer

    def _new_writer(self, schema: Schema) -> _Writer:
        if self._client is None:
            raise DataError("AvroConverter used before configure()")
        avro = _avro_data.to_avro_schema(schema)
        try:
            serializer = AvroSerializer(self._client, json.dumps(avro), conf=dict(self._serializer_conf))
        except Exception as exc:  # noqa: BLE001 - fastavro's SchemaParseException and friends
            raise DataError(
                f"cannot use the Avro schema derived from the Connect schema: {type(exc).__name__}: {exc}"
            ) from None
        return _Writer(schema, serializer, _avro_data.needs_value_reshaping(schema))

    # -- reading ----------------------------------------------------------------------------

    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        if data is None:
            return NULL
        if self._deserializer is None or self._client is None:
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
            raise DataError(
                self._scrub(f"Failed to deserialize Avro data from topic {topic}: {type(exc).__name__}: {exc}")
            ) from None
        schema, reshape = reader
        return SchemaAndValue(schema, _avro_data.value_from_avro(schema, datum) if reshape else datum)

    def _new_reader(self, schema_id: int) -> tuple[Schema, bool]:
        assert self._client is not None
        registered = self._client.get_schema(schema_id)
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
