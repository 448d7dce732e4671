"""The checks of a connector's configuration the driver makes before it starts anything (the
operator's admission makes them too); the cluster's are in :mod:`conveyor.runtime.kafka.preflight`.

Everything here raises :class:`PreflightError` with a message that names what is wrong
(``spec.config.batch.size: Input should be a valid integer``), so ``conveyor run``
refuses to start instead of leaving half-started tasks behind.
"""

from __future__ import annotations

import logging
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
from conveyor.converters import load_converter
from conveyor.converters.header_converters import load_header_converter
from conveyor.runtime.config import keys as config_keys
from conveyor.runtime.config.plugin_keys import unread_plugin_keys
from conveyor.runtime.config.plugins import PluginError, load_connector_class
from conveyor.runtime.config.settings import ExactlyOnceSupport as Level
from conveyor.runtime.config.settings import (
    SinkSettings,
    SourceSettings,
    TransactionBoundary,
    parse_sink_settings,
    parse_source_settings,
)
from conveyor.runtime.config.topic_creation import topic_groups
from conveyor.transforms.chain import TransformationChain

log = logging.getLogger(__name__)


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
    with it under the errors when there are errors (:mod:`conveyor.runtime.config.keys`).
    Unknown ``errors.*`` keys and keys the runtime would drop (``consumer.override.key.deserializer``...)
    are errors (:func:`conveyor.runtime.config.keys.framework_key_errors`).

    Raises:
        PreflightError: listing every invalid key as ``spec.config.<key>: <message>``.
    """
    errors: dict[str, str] = {}
    try:
        connector.validate(config)
    except ConfigError as exc:
        errors.update(exc.errors)
    runtime: Any = None  # the runtime's settings of a sink or source, once they parse
    if connector_type == "sink":
        try:
            runtime = parse_sink_settings(config)
        except ConfigError as exc:
            errors.update(exc.errors)
        else:
            errors.update(_pipeline_errors(config, runtime.key_converter, runtime.value_converter))
    elif connector_type == "source":
        try:
            runtime = source = parse_source_settings(config)
        except ConfigError as exc:
            errors.update(exc.errors)
        else:
            errors.update(_pipeline_errors(config, source.key_converter, source.value_converter))
            errors.update(_exactly_once_errors(connector, config, source))
            try:
                topic_groups(config)
            except ConfigError as exc:
                errors.update(exc.errors)
    if connector_type in ("sink", "source"):  # the DLQ's keys on a source are ignored, as Kafka Connect does
        errors.update(config_keys.framework_key_errors(
            config, config_keys.model_keys(SinkSettings) | config_keys.model_keys(SourceSettings)))
    if tasks_max is not None and (overridden := tasks_max_overridden(config, tasks_max)):
        log.warning("connector %s: %s", name, overridden)
    unknown = _unknown_keys(connector, connector_type, config)
    if runtime is not None:
        unknown.update(unread_plugin_keys(config, runtime.key_converter, runtime.value_converter))
    for key, suggestion in unknown.items():
        log.warning("connector %s: %s; it is ignored", name, config_keys.describe(key, suggestion))
    if errors:
        detail = "\n".join(f"  {config_field(key)}: {msg}" for key, msg in errors.items())
        hints = "".join(f"\n  {config_keys.describe(key, hint)}" for key, hint in unknown.items() if hint)
        raise PreflightError(f"connector {name}: invalid configuration\n{detail}{hints}", errors)


def _unknown_keys(connector: Connector, connector_type: str, config: dict[str, Any]) -> dict[str, str | None]:
    """Keys neither the connector's ``config_model`` nor the runtime reads ({} without a model)."""

    model = getattr(connector, "config_model", None)
    if model is None:
        return {}
    runtime = SinkSettings if connector_type == "sink" else SourceSettings
    return config_keys.unknown_keys(config, config_keys.model_keys(model) | config_keys.model_keys(runtime))


def _exactly_once_errors(connector: Connector, config: dict[str, Any], settings: Any) -> dict[str, str]:
    """KIP-618's connector checks: ``required`` needs the connector's SUPPORTED, and
    connector-defined transaction boundaries need the connector's support for them."""

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


def _pipeline_errors(config: dict[str, Any], key_default: str, value_default: str) -> dict[str, str]:
    """Configuration errors of the converters and transformations, found on the driver
    so that a typo fails the start instead of every task."""

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
