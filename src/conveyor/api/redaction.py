"""Keeping secret values out of messages: errors, logs, status, events.

A config value is secret by its key (Kafka Connect's ``PASSWORD`` config type covers the same
ground: ``connection.password``, ``sasl.jaas.config``, ``*.secret``, ``*.token``...), and a
URL or a libpq connection string may carry a password whatever its key
(``postgresql://user:password@host/db``, ``host=h password=p``).
"""

from __future__ import annotations

import re
from typing import Any

HIDDEN = "[hidden]"

_SECRET_KEY_PARTS = ("password", "passwd", "secret", "token", "jaas", "credential", "apikey", "api.key",
                     "private.key", "access.key", "auth.key")
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/@:\s'\"]*:)[^@/\s'\"]*(?P<at>@)")
_DSN_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)('[^']*'|[^\s'\"]+)", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """Whether a config key names a secret (``connection.password``, ``archive.s3.secret``,
    ``sasl.jaas.config``, ``consumer.override.sasl.password``...)."""
    lowered = key.lower()
    return any(part in lowered for part in _SECRET_KEY_PARTS)


def redact_text(text: str) -> str:
    """``text`` with the passwords of URLs (``scheme://user:[hidden]@host``) and of libpq
    connection strings (``password=[hidden]``) hidden."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}{HIDDEN}{m.group('at')}", text)
    return _DSN_PASSWORD.sub(lambda m: f"{m.group('head')}{HIDDEN}", text)


def redact_value(key: str, value: Any) -> str:
    """How a config value may be shown: :data:`HIDDEN` for a secret key, else its ``repr``
    with any URL or connection-string password hidden."""
    return HIDDEN if is_secret_key(key) else redact_text(repr(value))
