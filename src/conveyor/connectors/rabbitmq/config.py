"""Configuration of the RabbitMQ sink.

``rabbitmq.url`` (required)
    ``amqp://user:password@host:port/vhost`` (``amqps://`` for TLS; the vhost ``/`` is spelled
    ``%2F``). pika's query options work (``?heartbeat=30&connection_attempts=3``). The password
    is never logged or put in errors.
``rabbitmq.queue.name.format`` (default ``${topic}``)
    the queue records of a topic go to; ``${topic}`` is replaced by the record's topic (after
    routing transformations) as is. A format without ``${topic}`` sends every topic to one
    queue. Names must be 1-255 UTF-8 bytes and must not start with ``amq.`` (reserved).
``rabbitmq.exchange`` (default ``""``)
    ``""``: publish through the default exchange with the queue name as routing key.
    Otherwise the name of an existing exchange (checked at start, never declared or deleted by
    the connector): each queue is bound to it with the queue name as binding key, and records
    are published to it with the queue name as routing key.
``rabbitmq.queue.arguments`` (JSON object or mapping, default ``{}``)
    ``x-arguments`` of the declared queues, e.g. ``{"x-queue-type": "quorum"}`` or
    ``{"x-max-length": 100000, "x-overflow": "reject-publish"}``. Queues are always durable.
``rabbitmq.delivery.mode`` (``persistent`` | ``transient``, or ``2`` | ``1``; default ``persistent``)
    AMQP delivery mode of published messages.
``rabbitmq.confirm.timeout.ms`` (int >= 1, default 30000)
    how long a closing ``pre_commit`` waits for outstanding publisher confirms, and how long
    ``put`` waits for confirms when ``rabbitmq.max.in.flight`` messages are unconfirmed.
``rabbitmq.max.in.flight`` (int >= 1, default 10000)
    unconfirmed (or nacked, awaiting resend) messages the task holds before ``put`` waits.
``rabbitmq.connection.timeout.ms`` (int >= 1, default 10000)
    TCP + AMQP handshake timeout per connection attempt (unless the URL sets ``stack_timeout``).
``rabbitmq.retry.backoff.ms`` (int >= 0, default 3000)
    the delay of the :class:`~conveyor.api.RetriableError` raised when the broker is unreachable
    or too slow, and the pause before a nacked message is published again.
``behavior.on.null.values`` (``ignore`` | ``fail``, default ``ignore``)
    what a record with a ``None`` value (a tombstone) does: skipped (its offset still
    advances), or :class:`~conveyor.api.DataError`.
``topics``
    the runtime's subscription (comma list); these topics' queues are declared at start and
    deleted when the connector is deleted. With ``topics.regex`` only the queues that running
    tasks declared can be deleted.
``name``
    the connector name (set by the runtime); shown as the AMQP connection name.

Invalid values raise :class:`~conveyor.api.ConfigError` naming the key and the expected
type or value (through :func:`conveyor.api.parse_config`), e.g.
``rabbitmq.max.in.flight: Input should be a valid integer, unable to parse string as an integer (got 'many')``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import unquote, urlsplit

import pika
from pydantic import BeforeValidator, Field, SecretStr, field_validator

from conveyor.api import ConnectorConfig, parse_config

TOPIC_PLACEHOLDER = "${topic}"
MAX_QUEUE_NAME_BYTES = 255


class DeliveryMode(str, enum.Enum):
    """AMQP delivery mode: persistent messages are written to disk by the broker."""

    PERSISTENT = "persistent"
    TRANSIENT = "transient"

    @property
    def amqp(self) -> int:
        return 2 if self is DeliveryMode.PERSISTENT else 1


class NullValues(str, enum.Enum):
    """What a record with a ``None`` value does."""

    IGNORE = "ignore"
    FAIL = "fail"


def _comma_list(value: Any) -> Any:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _delivery_mode(value: Any) -> Any:
    value = _lower(value)
    return {"2": "persistent", 2: "persistent", "1": "transient", 1: "transient"}.get(value, value)


def _json_object(value: Any) -> Any:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON ({exc.msg} at position {exc.pos})") from None
    return value


CommaList = Annotated[tuple[str, ...], BeforeValidator(_comma_list)]


def queue_for_topic(queue_name_format: str, topic: str) -> str:
    """The queue that records of ``topic`` go to (see ``rabbitmq.queue.name.format``)."""
    return queue_name_format.replace(TOPIC_PLACEHOLDER, topic)


def queue_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a queue the connector declares, or ``None``."""
    if not name:
        return "the queue name is empty"
    if len(name.encode("utf-8")) > MAX_QUEUE_NAME_BYTES:
        return f"queue name {name[:40]!r}... is longer than {MAX_QUEUE_NAME_BYTES} bytes"
    if name.startswith("amq."):
        return f"queue name {name!r} starts with 'amq.', which RabbitMQ reserves"
    return None


class RabbitMQSinkConfig(ConnectorConfig):
    """Validated configuration; build it with :func:`load_config`."""

    name: str | None = Field(None, description="connector name (set by the runtime)")
    topics: CommaList = Field((), description="the topics the connector consumes (runtime key)")
    url: SecretStr = Field(alias="rabbitmq.url", description="amqp:// or amqps:// URL")
    queue_name_format: str = Field(TOPIC_PLACEHOLDER, alias="rabbitmq.queue.name.format")
    exchange: str = Field("", alias="rabbitmq.exchange")
    queue_arguments: Annotated[dict[str, Any], BeforeValidator(_json_object)] = Field(
        default_factory=dict, alias="rabbitmq.queue.arguments"
    )
    delivery_mode: Annotated[DeliveryMode, BeforeValidator(_delivery_mode)] = Field(
        DeliveryMode.PERSISTENT, alias="rabbitmq.delivery.mode"
    )
    confirm_timeout_ms: int = Field(30_000, alias="rabbitmq.confirm.timeout.ms", ge=1)
    max_in_flight: int = Field(10_000, alias="rabbitmq.max.in.flight", ge=1)
    connection_timeout_ms: int = Field(10_000, alias="rabbitmq.connection.timeout.ms", ge=1)
    retry_backoff_ms: int = Field(3000, alias="rabbitmq.retry.backoff.ms", ge=0)
    null_values: Annotated[NullValues, BeforeValidator(_lower)] = Field(
        NullValues.IGNORE, alias="behavior.on.null.values"
    )

    @field_validator("queue_name_format")
    @classmethod
    def _check_format(cls, value: str) -> str:
        problem = queue_name_problem(queue_for_topic(value, "t"))
        if problem:
            raise ValueError(problem)
        return value

    def queue_for(self, topic: str) -> str:
        return queue_for_topic(self.queue_name_format, topic)

    def configured_queues(self) -> list[str]:
        """The queues of the configured ``topics``, in order, without duplicates."""
        return list(dict.fromkeys(self.queue_for(topic) for topic in self.topics))

    def problems(self) -> dict[str, str]:
        """What does not fit across keys (see :meth:`ConnectorConfig.problems`)."""
        errors: dict[str, str] = {}
        problem = _check_url(self.url.get_secret_value())
        if problem:
            errors["rabbitmq.url"] = problem
        for topic in self.topics:
            problem = queue_name_problem(self.queue_for(topic))
            if problem:
                errors["rabbitmq.queue.name.format"] = f"for topic {topic!r}: {problem}"
                break
        bad_keys = [key for key in self.queue_arguments if not key]
        if bad_keys:
            errors["rabbitmq.queue.arguments"] = "argument names must be non-empty strings"
        else:
            try:
                _check_table(self.queue_arguments)
            except ValueError as exc:
                errors["rabbitmq.queue.arguments"] = str(exc)
        if self.exchange.startswith("amq.") and self.exchange not in _BUILTIN_EXCHANGES:
            errors["rabbitmq.exchange"] = f"exchange names starting with 'amq.' are reserved (got {self.exchange!r})"
        return errors


def describe_url(url: str) -> str:
    """``host:port (vhost '/', user 'guest')`` of an AMQP URL; never the password."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        port = parts.port or (5671 if parts.scheme == "amqps" else 5672)
        user = unquote(parts.username) if parts.username else "guest"
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
    except ValueError:
        return "(unparsable URL)"
    return f"{host}:{port} (vhost {vhost!r}, user {user!r})"


def scrub(url: str, message: str) -> str:
    """``message`` with the URL's password (plain and URL-encoded) replaced by ``***``."""
    try:
        raw = urlsplit(url).password
    except ValueError:
        raw = None
    for secret in {raw, unquote(raw) if raw else None}:
        if secret:
            message = message.replace(secret, "***")
    return message


def _check_url(url: str) -> str | None:
    """Why ``url`` is not a usable AMQP URL, or ``None``. Never echoes the URL."""
    if not url.strip():
        return "an AMQP URL (string) is required, e.g. amqp://user:password@host:5672/%2F"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        return f"not a valid amqp:// URL: {scrub(url, str(exc))}"
    if parts.scheme not in ("amqp", "amqps"):
        return (
            f"must start with amqp:// or amqps:// (got scheme {parts.scheme!r})"
            if parts.scheme
            else ("must be an amqp:// or amqps:// URL")
        )
    if not parts.hostname:
        return "the URL names no host (amqp://user:password@HOST:5672/%2F)"
    try:
        pika.URLParameters(url)
    except Exception as exc:  # noqa: BLE001 - pika raises ValueError/TypeError/KeyError for bad options
        return f"pika rejects the URL: {scrub(url, str(exc))}"
    return None


def load_config(config: Mapping[str, Any]) -> RabbitMQSinkConfig:
    """Parse and cross-check a configuration mapping (the connector's or a task's).

    Raises:
        ConfigError: naming each invalid key with the expected type or value.
    """
    return parse_config(RabbitMQSinkConfig, config)


_BUILTIN_EXCHANGES = {"amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"}


def _check_table(table: Mapping[str, Any]) -> None:
    """Raise ValueError if ``table`` holds values an AMQP field table cannot carry."""
    for key, value in table.items():
        if isinstance(value, Mapping):
            _check_table(value)
        elif isinstance(value, list):
            for item in value:
                _check_table({key: item})
        elif not isinstance(value, (str, int, bool)) and value is not None:
            raise ValueError(
                f"argument {key!r}: {type(value).__name__} values are not supported "
                "(use strings, integers, booleans, lists or objects)"
            )
