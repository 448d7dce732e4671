"""Checks of the Kafka cluster the driver makes before it starts anything: the brokers answer with
the connector's credentials, support its transactions, and have the topics it needs.

Everything here raises :class:`~conveyor.runtime.config.validation.PreflightError` with a message
that names what is wrong, so ``conveyor run`` refuses to start instead of leaving half-started
tasks behind.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from conveyor.runtime.config.settings import parse_sink_settings
from conveyor.runtime.config.validation import PreflightError
from conveyor.runtime.kafka.clients import KafkaProperties, bootstrap_servers, client_config, describe
from conveyor.runtime.kafka.fencing import ensure_config_topic
from conveyor.runtime.kafka.log_repeats import CollapseRepeats
from conveyor.runtime.kafka.offsets_topic import broker_transaction_limits, ensure_offsets_topic
from conveyor.runtime.kafka.topics import ensure_topic

log = logging.getLogger(__name__)

log.addFilter(CollapseRepeats())  # librdkafka's logs come through it


def check_transactions(kafka: KafkaProperties, settings: Any) -> None:
    """With exactly-once delivery: the brokers must support transactions and allow the
    producers' ``transaction.timeout.ms``.

    Raises:
        PreflightError: explaining what the broker lacks.
    """

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

    admin = AdminClient(client_config(kafka))
    ensure_offsets_topic(admin, settings.offsets_storage_topic)
    if settings.exactly_once:
        ensure_config_topic(admin, settings.config_storage_topic)


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

    settings = parse_sink_settings(config)
    if settings.dlq_topic:
        ensure_topic(AdminClient(client_config(kafka)), settings.dlq_topic,
                     replication_factor=settings.dlq_replication_factor)
