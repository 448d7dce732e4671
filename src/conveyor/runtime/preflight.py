"""Checks the driver makes before it starts anything: configuration and reachability.

Everything here raises :class:`PreflightError` with a message that names what is wrong
(``spec.config.batch.size: Input should be a valid integer``), so ``conveyor run``
refuses to start instead of leaving half-started tasks behind.
"""

from __future__ import annotations

from typing import Any

from conveyor.api import ConfigError, Connector, SinkConnector, SourceConnector
from conveyor.runtime.plugins import PluginError, load_connector_class


class PreflightError(RuntimeError):
    """The connector cannot start; nothing was started."""


def connector_class(name: str) -> tuple[type[Connector], str]:
    """The connector class named by ``spec.class`` and its type (``"sink"``/``"source"``).

    Raises:
        PreflightError: unknown name or wrong kind of class.
    """
    try:
        cls = load_connector_class(name)
    except PluginError as exc:
        raise PreflightError(str(exc)) from None
    if issubclass(cls, SinkConnector):
        return cls, "sink"
    if issubclass(cls, SourceConnector):
        raise PreflightError(f"{name}: source connectors are not supported by this runtime yet")
    raise PreflightError(f"{name} is neither a sink nor a source connector")  # pragma: no cover


def validate_config(connector: Connector, connector_type: str, config: dict[str, Any], name: str) -> None:
    """The connector's own validation plus the runtime's keys, converters and transforms.

    Raises:
        PreflightError: listing every invalid key as ``spec.config.<key>: <message>``.
    """
    errors: dict[str, str] = {}
    try:
        connector.validate(config)
    except ConfigError as exc:
        errors.update(exc.errors)
    if connector_type == "sink":
        from conveyor.runtime.settings import parse_sink_settings

        try:
            settings = parse_sink_settings(config)
        except ConfigError as exc:
            errors.update(exc.errors)
        else:
            errors.update(_pipeline_errors(config, settings.key_converter, settings.value_converter))
    if errors:
        detail = "\n".join(f"  spec.config.{key}: {msg}" for key, msg in errors.items())
        raise PreflightError(f"connector {name}: invalid configuration\n{detail}")


def _pipeline_errors(config: dict[str, Any], key_default: str, value_default: str) -> dict[str, str]:
    """Configuration errors of the converters and transformations, found on the driver
    so that a typo fails the start instead of every task."""
    from conveyor.converters import load_converter
    from conveyor.transforms.chain import TransformationChain

    errors: dict[str, str] = {}
    for side, default in (("key", key_default), ("value", value_default)):
        try:
            load_converter(config, side, default)  # type: ignore[arg-type]
        except ConfigError as exc:
            errors.update(exc.errors)
    try:
        TransformationChain.from_config(config).close()
    except ConfigError as exc:
        errors.update(exc.errors)
    return errors


def check_kafka(bootstrap_servers: str, timeout_s: float = 10.0) -> None:
    """Raises PreflightError when no broker answers within ``timeout_s`` seconds."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "socket.connection.setup.timeout.ms": 5000})
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise PreflightError(f"cannot reach Kafka at {bootstrap_servers}: {exc.args[0].str()}") from None


def prepare_sink_topics(bootstrap_servers: str, config: dict[str, Any]) -> None:
    """Create the dead-letter queue topic when one is configured (as Kafka Connect does)."""
    from confluent_kafka.admin import AdminClient

    from conveyor.runtime.dead_letter_queue import ensure_topic
    from conveyor.runtime.settings import parse_sink_settings

    settings = parse_sink_settings(config)
    if settings.dlq_topic:
        ensure_topic(AdminClient({"bootstrap.servers": bootstrap_servers}), settings.dlq_topic,
                     settings.dlq_replication_factor)
