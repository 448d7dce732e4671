"""What Confluent's three Schema Registry converters share: configuration, the registry client,
subject name strategies, serializer caching by Connect schema, error messages without secrets.

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
    in Confluent's serializers); the value must fit that schema.
``latest.cache.ttl.sec`` (int, default ``-1``)
    How long the latest version stays cached; ``-1`` keeps it for the converter's life.
``key.subject.name.strategy`` / ``value.subject.name.strategy``
    ``io.confluent.kafka.serializers.subject.TopicNameStrategy`` (default,
    ``<topic>-key``/``<topic>-value``), ``RecordNameStrategy`` (the record's full name) or
    ``TopicRecordNameStrategy`` (``<topic>-<record full name>``); the short names work too.
``schemas.cache.config`` (int, default 1000)
    How many Connect schemas to keep serializers and parsed schemas for.
``http.connect.timeout.ms`` / ``http.read.timeout.ms`` (int, default 60000 each)
    How long a registry call may take to connect, and to receive each part of the answer
    (also read with Confluent's client prefix, ``schema.registry.http.read.timeout.ms``, which
    wins). A registry that stops answering fails the call after that (the client retries
    transport errors a few times first), never hangs the task.

Other keys are ignored, as Kafka ignores keys it does not define. Not supported: the
registry's TLS keys (``schema.registry.ssl.*``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.serialization import MessageField, SerializationContext

from conveyor.api.converters import Converter
from conveyor.api.errors import ConfigError, DataError
from conveyor.api.schema import Schema
from conveyor.converters._config import get_bool, get_choice, get_int, get_list, get_string, invalid

URL_CONFIG = "schema.registry.url"
CREDENTIALS_SOURCE_CONFIG = "basic.auth.credentials.source"
USER_INFO_CONFIG = "basic.auth.user.info"
LEGACY_USER_INFO_CONFIG = "schema.registry.basic.auth.user.info"
AUTO_REGISTER_CONFIG = "auto.register.schemas"
USE_LATEST_CONFIG = "use.latest.version"
LATEST_TTL_CONFIG = "latest.cache.ttl.sec"
CACHE_SIZE_CONFIG = "schemas.cache.config"
CONNECT_TIMEOUT_CONFIG = "http.connect.timeout.ms"
READ_TIMEOUT_CONFIG = "http.read.timeout.ms"
CLIENT_NAMESPACE = "schema.registry."
"""Confluent's prefix of the registry client's own keys (``SchemaRegistryClientConfig.CLIENT_NAMESPACE``)."""
DEFAULT_TIMEOUT_MS = 60_000
"""Confluent's ``HTTP_CONNECT_TIMEOUT_MS_DEFAULT`` and ``HTTP_READ_TIMEOUT_MS_DEFAULT``."""

_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
STRATEGIES = {
    "TopicNameStrategy": topic_subject_name_strategy,
    "RecordNameStrategy": record_subject_name_strategy,
    "TopicRecordNameStrategy": topic_record_subject_name_strategy,
}


def no_subject(ctx: Any, record_name: Any) -> None:
    """A deserializer's subject strategy: none, so reading needs only the writer schema by id."""
    return None


def http_timeouts(config: Mapping[str, Any]) -> tuple[float, float, float, float]:
    """The registry client's HTTP timeouts in seconds, as httpx takes them (connect, read,
    write, pool), from :data:`CONNECT_TIMEOUT_CONFIG` and :data:`READ_TIMEOUT_CONFIG`
    (milliseconds; the :data:`CLIENT_NAMESPACE` form wins).

    Raises:
        ConfigError: naming the key, for a value that is not a positive integer.
    """
    def seconds(key: str) -> float:
        prefixed = CLIENT_NAMESPACE + key
        return get_int(config, prefixed if prefixed in config else key, DEFAULT_TIMEOUT_MS, minimum=1) / 1000

    connect, read = seconds(CONNECT_TIMEOUT_CONFIG), seconds(READ_TIMEOUT_CONFIG)
    return connect, read, read, connect


W = TypeVar("W")


class SchemaRegistryConverter(Converter, Generic[W], abc.ABC):
    """Base of the Schema Registry converters.

    Subclasses set :attr:`FORMAT` (``"Avro"``, ``"Protobuf"``, ``"JSON Schema"``; used in
    messages), implement :meth:`_new_writer` (a Connect schema → whatever writes its values,
    typically holding a confluent_kafka serializer) and may extend :meth:`_configure_format`
    for their own keys. ``self._client`` and ``self._serializer_conf`` (the keys every
    confluent_kafka serializer takes) are set by :meth:`configure`.
    """

    FORMAT = "?"
    gives_schemas = True

    def __init__(self) -> None:
        self._client: SchemaRegistryClient | None = None
        self._secret: str | None = None
        self._is_key = False
        self._serializer_conf: dict[str, Any] = {}
        self._cache_size = 1000
        self._writers: dict[int, tuple[Schema, W]] = {}  # id(Connect schema) -> (schema kept alive, writer)
        self._writers_by_value: dict[Schema, W] = {}

    # -- configuration ----------------------------------------------------------------------

    def configure(self, config: Mapping[str, Any], is_key: bool) -> None:
        """Read the shared keys (module docstring), build the registry client, then
        :meth:`_configure_format`.

        Raises:
            ConfigError: naming the key, for a missing URL, bad credentials settings, an
                unknown subject name strategy or a non-integer cache size.
        """
        self._is_key = is_key
        urls = [u for u in get_list(config, URL_CONFIG) if u]
        if not urls:
            raise invalid(URL_CONFIG, "", "at least one Schema Registry URL is needed")
        source = get_choice(config, CREDENTIALS_SOURCE_CONFIG, ("URL", "USER_INFO", "SASL_INHERIT"), "URL")
        client_conf: dict[str, Any] = {"url": ",".join(urls)}
        if source == "SASL_INHERIT":
            raise ConfigError({CREDENTIALS_SOURCE_CONFIG: f"SASL_INHERIT is not supported by Conveyor's {self.FORMAT} converter"})
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
        client_conf["timeout"] = http_timeouts(config)
        latest_ttl = get_int(config, LATEST_TTL_CONFIG, -1, minimum=-1)
        if latest_ttl >= 0:
            client_conf["cache.latest.ttl.sec"] = latest_ttl
        try:
            self._client = self._new_client(client_conf)
        except (ValueError, TypeError) as exc:
            raise ConfigError({URL_CONFIG: self._scrub(f"invalid Schema Registry client settings: {exc}")}) from None
        self._serializer_conf = {
            "auto.register.schemas": auto_register and not use_latest,
            "use.latest.version": use_latest,
            "subject.name.strategy": STRATEGIES[short],
        }
        self._configure_format(config)

    def _new_client(self, client_conf: dict[str, Any]) -> SchemaRegistryClient:
        return SchemaRegistryClient(client_conf)

    def _configure_format(self, config: Mapping[str, Any]) -> None:
        """Format-specific keys and the deserializer; called at the end of :meth:`configure`."""

    # -- helpers for subclasses -------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        """``text`` with the basic-auth secret replaced by ``[hidden]``."""
        if self._secret:
            text = text.replace(self._secret, "[hidden]")
        return text

    def _ctx(self, topic: str) -> SerializationContext:
        return SerializationContext(topic, MessageField.KEY if self._is_key else MessageField.VALUE)

    def _require_client(self) -> SchemaRegistryClient:
        if self._client is None:
            raise DataError(f"{self.FORMAT} converter used before configure()")
        return self._client

    def _failure(self, doing: str, topic: str, exc: BaseException) -> DataError:
        """Confluent's ``Failed to serialize <format> data from topic <t>`` text, secrets scrubbed.

        ``doing`` is ``"serialize"`` or ``"deserialize"``.
        """
        return DataError(self._scrub(f"Failed to {doing} {self.FORMAT} data from topic {topic}: {type(exc).__name__}: {exc}"))

    def _writer(self, schema: Schema) -> W:
        """The cached writer for ``schema``: by identity first (the common case of one schema
        object per run of records), then by value; built with :meth:`_new_writer` on a miss.
        Each cache is cleared when it reaches ``schemas.cache.config`` entries."""
        cached = self._writers.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
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
        self._writers[id(schema)] = (schema, writer)
        return writer

    @abc.abstractmethod
    def _new_writer(self, schema: Schema) -> W:
        """What writes values of ``schema``; raises ``DataError`` when the schema cannot be mapped."""
