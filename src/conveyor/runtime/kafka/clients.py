"""The base properties every Kafka client of the runtime starts from.

A connector's Kafka connection is more than ``bootstrap.servers``: with
``spec.kafka.tls`` / ``spec.kafka.authentication`` it carries ``security.protocol``,
``ssl.*.location`` and ``sasl.*`` (see :meth:`conveyor.manifest.KafkaSpec.client_properties`).
The driver computes those *base properties* once and every consumer, producer and admin
client — on the driver and in the task runners — is built from them:

    base properties  →  the runtime's own settings for that client  →  ``*.override.*``

Functions of the runtime that open clients take ``kafka: KafkaProperties``: the base
properties as a mapping of librdkafka keys to string values. A bare ``"host:port"``
string is accepted too and means ``{"bootstrap.servers": "host:port"}`` (no TLS, no SASL).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conveyor.api.redaction import HIDDEN, is_secret_key
from conveyor.manifest import ConnectorSpec, ManifestError
from conveyor.runtime.config.validation import PreflightError

KafkaProperties = Mapping[str, str] | str
"""Base librdkafka properties (``bootstrap.servers`` and security), or a bare bootstrap string."""

def base_properties(kafka: KafkaProperties) -> dict[str, str]:
    """A fresh ``dict`` of the base properties.

    Raises:
        ValueError: ``bootstrap.servers`` is missing or empty.
    """
    props = {"bootstrap.servers": kafka} if isinstance(kafka, str) else dict(kafka)
    if not props.get("bootstrap.servers"):
        raise ValueError("Kafka client properties need bootstrap.servers")
    return props


def client_config(kafka: KafkaProperties, settings: Mapping[str, Any] | None = None,
                  overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The configuration of one client: the base properties, then the runtime's
    ``settings`` for that client (``group.id``, ``transactional.id``, ...), then the user's
    ``overrides`` (``consumer.override.*`` / ``producer.override.*`` with the prefix removed).
    Later layers win."""
    config: dict[str, Any] = base_properties(kafka)
    config.update(settings or {})
    config.update(overrides or {})
    return config


def bootstrap_servers(kafka: KafkaProperties) -> str:
    """``bootstrap.servers`` of ``kafka``."""
    return base_properties(kafka)["bootstrap.servers"]


def describe(kafka: KafkaProperties) -> str:
    """``host:port`` plus the security in use, for messages; never a secret, e.g.
    ``"kafka:9093 (SASL_SSL, SCRAM-SHA-512 as 'conveyor')"``."""
    props = base_properties(kafka)
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return props["bootstrap.servers"]
    detail = protocol
    if "SASL" in protocol:
        detail += f", {props.get('sasl.mechanism', 'GSSAPI')}"
        if props.get("sasl.username"):
            detail += f" as {props['sasl.username']!r}"
    return f"{props['bootstrap.servers']} ({detail})"


def redacted(kafka: KafkaProperties) -> dict[str, str]:
    """The base properties with the values of secret keys (:func:`is_secret_key`: ``sasl.password``,
    ``ssl.key.password``, ``ssl.keystore.key``...) replaced by ``"[hidden]"``."""
    return {k: (HIDDEN if is_secret_key(k) else v) for k, v in base_properties(kafka).items()}


def kafka_properties(spec: ConnectorSpec) -> dict[str, str]:
    """The base Kafka client properties of a connector: ``spec.kafka.client_properties()``
    (TLS and SASL from the Secrets mounted under ``$CONVEYOR_MOUNT_DIR``).

    Raises:
        PreflightError: a Secret key it needs is not mounted (names the field).
    """
    try:
        return spec.kafka.client_properties()
    except ManifestError as exc:
        raise PreflightError(str(exc)) from None
