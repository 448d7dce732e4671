"""Checks the driver makes before it starts anything: configuration and reachability.

Everything here raises :class:`PreflightError` with a message that names what is wrong
(``spec.config.batch.size: Input should be a valid integer``), so ``conveyor run``
refuses to start instead of leaving half-started tasks behind.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from conveyor.api import (
    ConfigError,
    Connector,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SinkConnector,
    SourceConnector,
)
from conveyor.connect_config import tasks_max_overridden
from conveyor.runtime import config_keys
from conveyor.runtime.kafka_clients import KafkaProperties, bootstrap_servers, client_config, describe
from conveyor.runtime.log_repeats import CollapseRepeats
from conveyor.runtime.plugins import PluginError, load_connector_class
from conveyor.runtime.topic_creation import topic_groups

log = logging.getLogger(__name__)

log.addFilter(CollapseRepeats())  # librdkafka's logs come through it


class PreflightError(RuntimeError):
    """The connector cannot start; nothing was started.

    Attributes:
        errors: for an invalid configuration, ``{config key: message}``; else empty.
    """

    def __init__(self, message: str, errors: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.errors = dict(errors or {})


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
        return cls, "source"
    raise PreflightError(f"{name} is neither a sink nor a source connector")  # pragma: no cover


def config_field(key: str) -> str:
    """The manifest field of a config key: ``spec.config.<key>``, ``spec.config`` for ``""``
    (an error about the whole config)."""
    return f"spec.config.{key}" if key else "spec.config"


def validate_config(connector: Connector, connector_type: str, config: dict[str, Any], name: str,
                    tasks_max: int | None = None) -> None:
    """The connector's own validation plus the runtime's keys, converters and transforms.

    A ``tasks.max`` in ``config`` that ``tasks_max`` (``spec.tasksMax``) overrides, and keys
    that nothing reads, are logged as warnings with the closest known key, and listed
    with it under the errors when there are errors (:mod:`conveyor.runtime.config_keys`).

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
    elif connector_type == "source":
        from conveyor.runtime.settings import parse_source_settings

        try:
            source = parse_source_settings(config)
        except ConfigError as exc:
            errors.update(exc.errors)
        else:
            errors.update(_pipeline_errors(config, source.key_converter, source.value_converter))
            errors.update(_exactly_once_errors(connector, config, source))
            try:
                topic_groups(config)
            except ConfigError as exc:
                errors.update(exc.errors)
    if tasks_max is not None and (overridden := tasks_max_overridden(config, tasks_max)):
        log.warning("connector %s: %s", name, overridden)
    unknown = _unknown_keys(connector, connector_type, config)
    for key, suggestion in unknown.items():
        log.warning("connector %s: %s; it is ignored", name, config_keys.describe(key, suggestion))
    if errors:
        detail = "\n".join(f"  {config_field(key)}: {msg}" for key, msg in errors.items())
        hints = "".join(f"\n  {config_keys.describe(key, hint)}" for key, hint in unknown.items() if hint)
        raise PreflightError(f"connector {name}: invalid configuration\n{detail}{hints}", errors)


def _unknown_keys(connector: Connector, connector_type: str, config: dict[str, Any]) -> dict[str, str | None]:
    """Keys neither the connector's ``config_model`` nor the runtime reads ({} without a model)."""
    from conveyor.runtime.settings import SinkSettings, SourceSettings

    model = getattr(connector, "config_model", None)
    if model is None:
        return {}
    runtime = SinkSettings if connector_type == "sink" else SourceSettings
    return config_keys.unknown_keys(config, config_keys.model_keys(model) | config_keys.model_keys(runtime))


def _exactly_once_errors(connector: Connector, config: dict[str, Any], settings: Any) -> dict[str, str]:
    """KIP-618's connector checks: ``required`` needs the connector's SUPPORTED, and
    connector-defined transaction boundaries need the connector's support for them."""
    from conveyor.runtime.settings import ExactlyOnceSupport as Level
    from conveyor.runtime.settings import TransactionBoundary

    assert isinstance(connector, SourceConnector)
    errors: dict[str, str] = {}
    if settings.exactly_once_support is Level.REQUIRED:
        answer = connector.exactly_once_support(config)
        if answer is not ExactlyOnceSupport.SUPPORTED:
            errors["exactly.once.support"] = (
                "required, but the connector's exactly_once_support() answered "
                f"{answer.value if answer else 'None (unknown)'}"
            )
    if settings.exactly_once and settings.transaction_boundary is TransactionBoundary.CONNECTOR:
        if connector.can_define_transaction_boundaries(config) is not ConnectorTransactionBoundaries.SUPPORTED:
            errors["transaction.boundary"] = "connector, but the connector cannot define transaction boundaries"
    return errors


def check_transactions(kafka: KafkaProperties, settings: Any) -> None:
    """With exactly-once delivery: the brokers must support transactions and allow the
    producers' ``transaction.timeout.ms``.

    Raises:
        PreflightError: explaining what the broker lacks.
    """
    from confluent_kafka.admin import AdminClient

    from conveyor.runtime.offsets_topic import broker_transaction_limits

    usable, max_timeout = broker_transaction_limits(AdminClient(client_config(kafka)))
    if not usable:
        raise PreflightError(
            f"exactly.once.support={settings.exactly_once_support.value} needs transactions, but the brokers at "
            f"{bootstrap_servers(kafka)} cannot host the transaction state log (transaction.state.log.replication.factor "
            "or .min.isr exceeds the number of brokers)"
        )
    if max_timeout is not None and settings.transaction_timeout_ms > max_timeout:
        raise PreflightError(
            f"exactly.once.support={settings.exactly_once_support.value}: the producers' transaction.timeout.ms "
            f"({settings.transaction_timeout_ms}) exceeds the brokers' transaction.max.timeout.ms ({max_timeout}); "
            "lower producer.override.transaction.timeout.ms or raise the broker setting"
        )


def prepare_source_topics(kafka: KafkaProperties, settings: Any) -> None:
    """Create the offsets topic and, with exactly-once delivery, the config topic."""
    from confluent_kafka.admin import AdminClient

    from conveyor.runtime.fencing import ensure_config_topic
    from conveyor.runtime.offsets_topic import ensure_offsets_topic

    admin = AdminClient(client_config(kafka))
    ensure_offsets_topic(admin, settings.offsets_storage_topic)
    if settings.exactly_once:
        ensure_config_topic(admin, settings.config_storage_topic)


def _pipeline_errors(config: dict[str, Any], key_default: str, value_default: str) -> dict[str, str]:
    """Configuration errors of the converters and transformations, found on the driver
    so that a typo fails the start instead of every task."""
    from conveyor.converters import load_converter
    from conveyor.converters.header_converters import load_header_converter
    from conveyor.transforms.chain import TransformationChain

    errors: dict[str, str] = {}
    for side, default in (("key", key_default), ("value", value_default)):
        try:
            load_converter(config, side, default)  # type: ignore[arg-type]
        except ConfigError as exc:
            errors.update(exc.errors)
    try:
        load_header_converter(config)
    except ConfigError as exc:
        errors.update(exc.errors)
    try:
        TransformationChain.from_config(config).close()
    except ConfigError as exc:
        errors.update(exc.errors)
    return errors


_AUTH_ERRORS = ("_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED", "ILLEGAL_SASL_STATE",
                "UNSUPPORTED_SASL_MECHANISM", "CLUSTER_AUTHORIZATION_FAILED")


def check_kafka(kafka: KafkaProperties, timeout_s: float = 10.0) -> None:
    """Check that the brokers answer a metadata request with the connector's client
    properties (so TLS and SASL settings are exercised too).

    Returns as soon as a broker answers. A TLS handshake or SASL authentication failure
    (librdkafka reports those through its error callback, not the request) fails at once,
    with the broker's reason; any other failure after ``timeout_s`` seconds.

    Raises:
        PreflightError: ``cannot reach Kafka at <where>: <reason>`` or
            ``Kafka at <where> refused the connection's credentials: <reason>``; ``<where>``
            names the bootstrap servers, protocol, mechanism and user, never the password.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[KafkaError] = []
    admin = AdminClient(client_config(kafka, {"socket.connection.setup.timeout.ms": 5000,
                                              "error_cb": errors.append}), logger=log)
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        try:
            admin.list_topics(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            last = exc.args[0].str()
        admin.poll(0)  # serves error_cb
        refused = [e for e in errors if e.name() in _AUTH_ERRORS]
        if refused:
            raise PreflightError(
                f"Kafka at {describe(kafka)} refused the connection's credentials: {refused[-1].str()}"
            ) from None
        informative = [e for e in errors if e.name() != "_ALL_BROKERS_DOWN"]
        if informative:
            last = informative[-1].str()
        if time.monotonic() >= deadline:
            raise PreflightError(f"cannot reach Kafka at {describe(kafka)}: {last}") from None


def prepare_sink_topics(kafka: KafkaProperties, config: dict[str, Any]) -> None:
    """Create the dead-letter queue topic when one is configured (as Kafka Connect does)."""
    from confluent_kafka.admin import AdminClient

    from conveyor.runtime.settings import parse_sink_settings
    from conveyor.runtime.topics import ensure_topic

    settings = parse_sink_settings(config)
    if settings.dlq_topic:
        ensure_topic(AdminClient(client_config(kafka)), settings.dlq_topic,
                     replication_factor=settings.dlq_replication_factor)
