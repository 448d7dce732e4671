"""What ``PUT /config`` may change on a running driver, and what only a new driver may.

A running driver takes ``spec.config``, ``tasksMax`` and ``state`` live. It refuses, with 409,
a change that could move credentials (issue 13, "PUT /config cannot move credentials"; issue 28,
"Live config takes nothing that reaches credentials"):

* ``spec.kafka`` (bootstrap servers, TLS, SASL: the Kafka password goes where these say),
  ``spec.configFrom`` (which Secrets are merged into the config), ``spec.spark`` and
  ``spec.shutdown`` (not live either): only a driver started from the manifest takes them;
* a ``spec.config`` key that decides where or how a Kafka client connects
  (:func:`is_connection_key`: ``bootstrap.servers``, ``security.protocol``, ``sasl.*``,
  ``ssl.*``, bare or under ``consumer.override.`` / ``producer.override.`` /
  ``admin.override.``): the clients start from the Kafka password of ``spec.kafka``, and a
  ``consumer.override.bootstrap.servers`` would send it to another broker;
* any ``spec.config`` change of a connector that holds credentials: ``spec.kafka.authentication``
  or ``spec.kafka.tls``, ``configFrom``, or a ``${secret:...}``, ``${configmap:...}`` or
  ``${env:...}`` reference (a new ``connection.url`` must never receive the password another
  key resolves).

The refusal says the driver must be rolled. On Kubernetes the operator does that when the
Connector changes (a 409 from ``PUT /config`` makes it roll the Deployment), so the new driver
reads the new manifest with the Secrets mounted for it; only whoever may edit the Connector can
do that.

References are resolved from the *written* spec each time (``${env:...}`` from the driver's
environment, ``configFrom`` and ``${secret:...}`` / ``${configmap:...}`` from the mounted
files), and the driver keeps the written spec beside the resolved one
(:attr:`Driver.written_spec <conveyor.runtime.driver.driver.Driver.written_spec>`): a resolved value
never becomes part of a written config.
"""

from __future__ import annotations

import os
import re
from http import HTTPStatus
from typing import Any

from conveyor.control.errors import OperationError
from conveyor.manifest import ConnectorSpec, substitute_env, with_mounted_config
from conveyor.runtime.herder.protocol import Herder
from conveyor.runtime.rest.connect_documents import connect_string

_REFERENCE = re.compile(r"\$\{(secret|configmap|env):")
#: The spec fields only a new driver takes (the manifest's names).
_ROLLING_FIELDS = {"kafka": "spec.kafka", "config_from": "spec.configFrom", "spark": "spec.spark",
                   "shutdown": "spec.shutdown"}
#: Prefixes under which a connector's config reaches a Kafka client (Kafka Connect's connector
#: client config overrides, KIP-458); the runtime applies ``consumer.override.`` and
#: ``producer.override.`` (the DLQ producer's too), and accepts ``admin.override.``.
CLIENT_PREFIXES = ("consumer.override.", "producer.override.", "admin.override.")
#: librdkafka / Kafka client properties that say where a client connects, or how it
#: authenticates and encrypts (``metadata.broker.list`` is librdkafka's alias of
#: ``bootstrap.servers``; ``enable.ssl.certificate.verification`` turns broker certificate
#: checks off; ``https.*`` is the TLS of librdkafka's OIDC token requests).
_CONNECTION_PROPERTIES = frozenset({"bootstrap.servers", "metadata.broker.list", "security.protocol",
                                    "enable.ssl.certificate.verification"})
_CONNECTION_PROPERTY_PREFIXES = ("sasl.", "ssl.", "https.")
_ROLL = "only a new driver takes it: roll the driver (the operator does when the Connector changes)"


def is_connection_key(key: str) -> bool:
    """Whether config ``key`` sets a Kafka client property that decides where or how a client
    connects (``bootstrap.servers``, ``consumer.override.sasl.mechanism``,
    ``producer.override.ssl.ca.location``...)."""
    for prefix in CLIENT_PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix):]
            break
    return key in _CONNECTION_PROPERTIES or key.startswith(_CONNECTION_PROPERTY_PREFIXES)


def mentions_reference(value: Any) -> bool:
    """Whether a config value (as written) holds a ``${secret:...}``, ``${configmap:...}`` or
    ``${env:...}`` reference."""
    return isinstance(value, str) and _REFERENCE.search(value) is not None


def uses_credentials(spec: ConnectorSpec) -> bool:
    """Whether ``spec`` (as written, references unresolved) holds credentials: Kafka TLS or
    SASL (``spec.kafka.tls`` / ``authentication``), or config values from Secrets, ConfigMaps
    or the environment (``configFrom``, ``${secret:...}``, ``${configmap:...}``, ``${env:...}``)."""
    if spec.kafka.authentication is not None or spec.kafka.tls is not None or spec.config_from:
        return True
    return any(mentions_reference(v) for v in spec.config.values())


def changed_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The keys added, removed or changed from ``old`` to ``new``, sorted; values compare as
    Kafka Connect holds them (:func:`connect_string`: ``["a", "b"]`` is ``"a,b"``)."""
    return sorted(k for k in old.keys() | new.keys()
                  if k not in old or k not in new or connect_string(old[k]) != connect_string(new[k]))


def live_change_refusal(running: ConnectorSpec, written: ConnectorSpec, resolved: ConnectorSpec) -> str | None:
    """Why the driver running ``running`` must not take ``written`` live, or ``None``. Names
    fields and keys, never a value.

    Args:
        running: the driver's spec, references resolved.
        written: the new spec as sent (references unresolved).
        resolved: the same, references resolved (:func:`resolve_written_spec`).
    """
    for field, name in _ROLLING_FIELDS.items():
        if getattr(resolved, field) != getattr(running, field):
            return f"{name} cannot change on a running driver: {_ROLL}"
    changed = changed_keys(running.config, resolved.config)
    if not changed:
        return None
    if connection := [k for k in changed if is_connection_key(k)]:
        keys = ", ".join(f"spec.config.{k}" for k in connection)
        return (f"{keys} cannot change on a running driver: Kafka client connection settings (bootstrap.servers, "
                f"security.protocol, sasl.*, ssl.*, bare or under *.override.) decide where the Kafka credentials "
                f"go; {_ROLL}")
    if uses_credentials(written) or uses_credentials(running):
        return ("spec.config of a connector that holds credentials (spec.kafka.authentication, spec.kafka.tls, "
                f"configFrom, ${{secret:...}}, ${{configmap:...}}, ${{env:...}}) cannot change on a running driver: {_ROLL}")
    return None


def resolve_written_spec(written: ConnectorSpec, source: str = "PUT /config") -> ConnectorSpec:
    """``written`` with its references resolved as the driver resolved its manifest:
    ``${env:NAME}`` from this process's environment, then ``configFrom``,
    ``${secret:...}`` and ``${configmap:...}`` from the mounted files.

    Raises:
        ManifestError: a variable is not set, or a reference names a source that is not mounted.
    """
    data = substitute_env(written.model_dump(by_alias=True), os.environ, source=source, path="spec")
    return with_mounted_config(ConnectorSpec.model_validate(data), source=source)


def apply_written_spec(driver: Herder, written: ConnectorSpec, source: str = "PUT /config") -> dict[str, Any]:
    """Give the running ``driver`` the new ``written`` spec (``PUT /config``, Kafka Connect's
    ``PUT`` / ``PATCH /connectors/<name>/config``): references resolved, then
    :meth:`Herder.reconfigure`, which keeps ``written`` as the driver's written spec.

    Raises:
        OperationError: 409 when :func:`live_change_refusal` refuses it.
        ManifestError: a variable is not set, or a reference names a source that is not mounted.
    """
    spec = resolve_written_spec(written, source=source)
    if refusal := live_change_refusal(driver.manifest.spec, written, spec):
        raise OperationError(HTTPStatus.CONFLICT, refusal)
    return driver.reconfigure(spec, written=written)
