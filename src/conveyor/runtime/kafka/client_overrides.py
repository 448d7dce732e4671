"""``consumer.override.*``, ``producer.override.*`` and ``admin.override.*`` checked as librdkafka
checks them, before any task makes its client.

Kafka Connect's Java clients log an unknown property ("supplied but isn't a known config") and go
on; librdkafka refuses to make a client with one, so a typo (``fetch.max.wait.ms`` for librdkafka's
``fetch.wait.max.ms``) or a Java-only property (``buffer.memory``) would fail every task on its
executor. Each key is set alone on a client configuration, followed by a property that does not
exist: librdkafka refuses the key itself, or (the key being fine) the sentinel, and no client is
ever made. Checks that need several keys together (``session.timeout.ms`` with
``group.protocol=consumer``) stay librdkafka's, when the task's client is made.

Called on the driver's main thread while it validates the configuration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from conveyor.runtime.config.keys import REFUSED_KEYS
from conveyor.runtime.config.validation import PreflightError, config_field

CLIENTS: dict[str, Any] = {"consumer.override.": Consumer, "producer.override.": Producer,
                           "admin.override.": AdminClient}
READ_BY_THE_RUNTIME = frozenset({"consumer.override.max.poll.records"})
"""Override keys the runtime reads itself (Java-only in librdkafka's terms)."""

JAVA_NAMES = {
    "fetch.max.wait.ms": "librdkafka's name is fetch.wait.max.ms",
    "buffer.memory": "librdkafka bounds its queue with queue.buffering.max.kbytes (KiB) and "
                     "queue.buffering.max.messages",
    "max.block.ms": "librdkafka's produce never blocks: a full queue is waited out by the runtime",
    "sasl.jaas.config": "give the credentials in spec.kafka.sasl (a Secret), which sets sasl.username and "
                        "sasl.password",
    "ssl.truststore.location": "give PEM files: ssl.ca.location, or spec.kafka.tls",
    "ssl.keystore.location": "give PEM files: ssl.certificate.location and ssl.key.location, or spec.kafka.tls",
    "partitioner.class": "librdkafka's partitioner takes a name (murmur2_random, consistent_random...)",
    "interceptor.classes": "librdkafka loads no Java classes",
}
"""Java client properties Connect users paste, with what to use instead."""

_SENTINEL = "conveyor.override.check"
_QUOTED_VALUE = re.compile(r'Invalid value ".*?" for', re.DOTALL)  # the value may be a resolved secret


def client_override_errors(config: Mapping[str, Any]) -> dict[str, str]:
    """``{key: message}`` for each override key librdkafka refuses (an unknown property or a
    value it cannot take), with the librdkafka name or setting to use for a Java property."""
    errors: dict[str, str] = {}
    for key, value in config.items():
        prefix = next((p for p in CLIENTS if key.startswith(p)), None)
        if prefix is None or key in READ_BY_THE_RUNTIME or key in REFUSED_KEYS:
            continue
        refusal = _refusal(CLIENTS[prefix], key[len(prefix):], value)
        if refusal is not None:
            hint = JAVA_NAMES.get(key[len(prefix):])
            errors[key] = f"librdkafka refuses it: {refusal}" + (f" ({hint})" if hint else "")
    return errors


def check_client_overrides(config: Mapping[str, Any], name: str) -> None:
    """Raises:
        PreflightError: ``connector <name>: invalid configuration`` and a line
            ``spec.config.<key>: <message>`` for each key :func:`client_override_errors` gives."""
    errors = client_override_errors(config)
    if errors:
        detail = "\n".join(f"  {config_field(key)}: {message}" for key, message in errors.items())
        raise PreflightError(f"connector {name}: invalid configuration\n{detail}", errors)


def _refusal(client: Any, prop: str, value: Any) -> str | None:
    if isinstance(value, bool):
        value = "true" if value else "false"
    try:
        client({**({"group.id": _SENTINEL} if client is Consumer else {}), prop: value, _SENTINEL: "1"})
    except KafkaException as exc:
        message = exc.args[0].str()
        return None if _SENTINEL in message else _QUOTED_VALUE.sub("Invalid value for", message)
    except (TypeError, ValueError):
        return f"a {type(value).__name__} is not a client property value (give a string or a number)"
    raise AssertionError("librdkafka took a property that does not exist")  # pragma: no cover
