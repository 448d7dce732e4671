"""Keeping secret values out of messages: errors, logs, status, events.

Two rules, both applied by :func:`redact_text` and :func:`redact_value`:

* **By key.** A config value is secret by its key (Kafka Connect's ``PASSWORD`` config type
  covers the same ground: ``connection.password``, ``sasl.jaas.config``, ``*.secret``,
  ``*.token``, the Schema Registry's ``basic.auth.user.info``, the private key in
  ``ssl.keystore.key`` / librdkafka's ``ssl.key.pem``, ``azure.account.key``...), and a URL or a
  libpq connection string may carry a password whatever its
  key (``postgresql://user:password@host/db``, ``host=h password=p``). In free text (log
  lines, tracebacks) a secret key's value is hidden where it is written as ``key=value`` or
  as an item of a Python or JSON mapping (``'sasl.password': '...'``, ``"pw": "..."``), and
  a PEM private key block is hidden wherever it is.

  Not secret, on purpose: paths (``ssl.key.location``, ``ssl.keystore.location``) and
  certificates (``ssl.truststore.certificates``, ``ssl.keystore.certificate.chain``,
  ``ssl.certificate.pem``, ``ssl.ca.pem``): Kafka types the last two ``PASSWORD`` only to keep
  them out of its logs, but a certificate is public, and hiding it would hide which one a
  client used.
* **By provenance.** A value that came from a reference -- ``${env:NAME}``,
  ``${secret:<name>:<key>}``, ``${configmap:<name>:<key>}``, a key merged from ``configFrom``,
  a Kafka password file -- is shown as that reference wherever it would appear, whatever its
  key: ``postgresql://${env:PG_USER}@db/orders``. The resolver calls :func:`remember_resolved`
  for each; the runtime hands the pairs to the executors (:func:`resolved_values`), so a task's
  logs and errors follow the same rule. Values shorter than :data:`MIN_SEARCHED_LENGTH`
  characters are still replaced where a config value is shown whole, but not searched for in
  free text, where they would match ordinary words and numbers.

:class:`RedactSecrets` applies both rules to log records.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

HIDDEN = "[hidden]"
MIN_SEARCHED_LENGTH = 6

#: Parts of a key that make its value secret. ``keystore.key``: Kafka's ``ssl.keystore.key``
#: (a PEM private key); ``key.pem``: librdkafka's ``ssl.key.pem`` (the same); ``ssl_key``:
#: librdkafka's API-only private key; ``account.key``: Azure Storage account keys
#: (``azure.account.key``, ``azblob.account.key``); ``passphrase``: a private key's passphrase.
_SECRET_KEY_PARTS = ("password", "passwd", "secret", "token", "jaas", "credential", "apikey", "api.key",
                     "private.key", "access.key", "auth.key", "user.info", "keystore.key", "key.pem", "ssl_key",
                     "account.key", "passphrase")
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/@:\s'\"]*:)[^@/\s'\"]*(?P<at>@)")
_DSN_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s'\"]+)", re.IGNORECASE)
_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END (?P=kind)PRIVATE KEY-----|$)", re.DOTALL)
#: ``key=value``, and ``'key': 'value'`` / ``"key": "value"`` (mapping items, Python or JSON).
_ASSIGNMENT = re.compile(r"""(?P<head>(?P<key>[A-Za-z_][\w.-]*)\s*=\s*)(?P<value>'[^']*'|"[^"]*"|[^\s'"]+)""")
_MAPPING_ITEM = re.compile(r"""(?P<head>(?P<q>['"])(?P<key>[^'"\s]+)(?P=q)\s*:\s*)"""
                           r"""(?P<value>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")

_lock = threading.Lock()
_resolved: dict[str, str] = {}  # value -> the reference it came from
_searched: tuple[tuple[str, str], ...] = ()  # (value, reference), longest value first


def remember_resolved(value: str, reference: str) -> None:
    """``value`` was read from ``reference`` (``"${env:PG_PASSWORD}"``): from now on this
    process shows the reference instead of the value. Empty values are ignored."""
    global _searched
    values = {v for v in (value, value.strip()) if v}  # a mounted file's value may end in a newline
    if all(_resolved.get(v) == reference for v in values):
        return
    with _lock:
        for v in values:
            _resolved.setdefault(v, reference)
        _searched = tuple(sorted(((v, r) for v, r in _resolved.items() if len(v) >= MIN_SEARCHED_LENGTH),
                                 key=lambda pair: -len(pair[0])))


def remember_all(pairs: Iterable[tuple[str, str]]) -> None:
    """:func:`remember_resolved` for each ``(value, reference)`` (what :func:`resolved_values` gave)."""
    for value, reference in pairs:
        remember_resolved(value, reference)


def resolved_values() -> list[tuple[str, str]]:
    """Every ``(value, reference)`` this process resolved, to hand to another process."""
    with _lock:
        return list(_resolved.items())


def is_secret_key(key: str) -> bool:
    """Whether a config key names a secret (``connection.password``, ``archive.s3.secret``,
    ``sasl.jaas.config``, ``consumer.override.sasl.password``...)."""
    lowered = key.lower()
    return any(part in lowered for part in _SECRET_KEY_PARTS)


def redact_text(text: str) -> str:
    """``text`` with resolved values replaced by their references, and hidden: PEM private key
    blocks, the passwords of URLs (``scheme://user:[hidden]@host``) and of libpq connection
    strings (``password=[hidden]``), and the values of secret keys written as ``key=value`` or
    as mapping items (``'sasl.password': '[hidden]'``)."""
    for value, reference in _searched:
        if value in text:
            text = text.replace(value, reference)
    text = _PEM_PRIVATE_KEY.sub(HIDDEN, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}{HIDDEN}{m.group('at')}", text)
    text = _DSN_PASSWORD.sub(lambda m: f"{m.group('head')}{HIDDEN}", text)
    text = _MAPPING_ITEM.sub(_hide_secret_item, text)
    return _ASSIGNMENT.sub(_hide_secret_item, text)


def _hide_secret_item(match: re.Match[str]) -> str:
    if not is_secret_key(match.group("key")):
        return match.group(0)
    value = match.group("value")
    quote = value[0] if value[0] in "'\"" else ""
    return f"{match.group('head')}{quote}{HIDDEN}{quote}"


def redact_value(key: str, value: Any) -> str:
    """How a config value may be shown: :data:`HIDDEN` for a secret key, the reference for a
    value resolved from one, else its ``repr`` with the rules of :func:`redact_text`."""
    if is_secret_key(key):
        return HIDDEN
    if isinstance(value, str) and value in _resolved:
        return _resolved[value]
    return redact_text(repr(value))


def redact_data(data: Any) -> Any:
    """``data`` (JSON-like: dicts, lists, strings...) with :func:`redact_text` applied to
    every string, keys included, and every value of a secret key hidden."""
    if isinstance(data, str):
        return redact_text(data)
    if isinstance(data, dict):
        return {redact_text(k) if isinstance(k, str) else k:
                (HIDDEN if isinstance(k, str) and is_secret_key(k) and isinstance(v, str) else redact_data(v))
                for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v) for v in data]
    return data


class RedactSecrets(logging.Filter):
    """A handler filter that applies :func:`redact_text` to each record's message and
    traceback (attach it to handlers: a logger's filters miss records of its children)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True
