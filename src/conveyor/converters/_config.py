"""Reading plugin configuration the way Kafka's ``ConfigDef`` parses it.

Shared by converters, transformations and predicates. Values come from a manifest, so
each reader accepts both Kafka Connect's strings (``"false"``, ``"5"``, ``"a,b"``) and
the Python values YAML gives (``False``, ``5``, ``["a", "b"]``).

Rules mirrored from ``org.apache.kafka.common.config.ConfigDef#parseType``:

* ``STRING`` values are trimmed.
* ``BOOLEAN`` accepts ``true``/``false`` in any case, nothing else.
* ``LIST`` splits a string on commas with the whitespace around them removed; an
  empty string is the empty list; a trailing comma leaves an empty last element.
* A key without a default that is missing (or null) is an error:
  ``Missing required configuration "<key>" which has no default value.``

Every error is a :class:`~conveyor.api.ConfigError` keyed by the *local* key (as the
plugin sees it); callers that own a prefix re-key it with :func:`prefixed_error`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from conveyor.api.errors import ConfigError

#: Marks a key that has no default: missing means error.
REQUIRED: Any = object()

_COMMA = re.compile(r"\s*,\s*")


def missing(key: str) -> ConfigError:
    """Kafka's error for a required key that is absent."""
    return ConfigError({key: f'Missing required configuration "{key}" which has no default value.'})


def invalid(key: str, value: Any, reason: str) -> ConfigError:
    """Kafka's ``ConfigException(name, value, message)`` text."""
    return ConfigError({key: f"Invalid value {_show(value)} for configuration {key}: {reason}"})


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def as_text(value: Any) -> str:
    """A scalar as Kafka Connect would have written it in a properties file."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def get_string(config: Mapping[str, Any], key: str, default: Any = REQUIRED) -> Any:
    """A ``STRING`` key, trimmed; ``default`` (which may be ``None``) when absent."""
    value = config.get(key)
    if value is None:
        if default is REQUIRED:
            raise missing(key)
        return default
    if isinstance(value, (list, tuple, dict, set)):
        raise invalid(key, value, "Expected value to be a string, but it was a " + type(value).__name__)
    return as_text(value).strip()


def get_bool(config: Mapping[str, Any], key: str, default: Any = REQUIRED) -> Any:
    """A ``BOOLEAN`` key: ``True``/``False`` or ``"true"``/``"false"`` in any case."""
    value = config.get(key)
    if value is None:
        if default is REQUIRED:
            raise missing(key)
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "true":
            return True
        if text == "false":
            return False
    raise invalid(key, value, "Expected value to be either true or false")


def get_int(config: Mapping[str, Any], key: str, default: Any = REQUIRED, *, minimum: int | None = None) -> Any:
    """An ``INT`` key: an integer or its decimal text."""
    value = config.get(key)
    if value is None:
        if default is REQUIRED:
            raise missing(key)
        return default
    if isinstance(value, bool):
        raise invalid(key, value, "Not a number of type INT")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            raise invalid(key, value, "Not a number of type INT") from None
    else:
        raise invalid(key, value, "Expected value to be a 32-bit integer, but it was a " + type(value).__name__)
    if minimum is not None and result < minimum:
        raise invalid(key, value, f"Value must be at least {minimum}")
    return result


def get_list(config: Mapping[str, Any], key: str, default: Any = REQUIRED) -> Any:
    """A ``LIST`` key: a comma-separated string or a sequence, as a list of strings."""
    value = config.get(key)
    if value is None:
        if default is REQUIRED:
            raise missing(key)
        return default
    return parse_list(key, value)


def parse_list(key: str, value: Any) -> list[str]:
    """Kafka's ``LIST`` parsing of one value."""
    if isinstance(value, str):
        text = value.strip()
        return _COMMA.split(text) if text else []
    if isinstance(value, (list, tuple)):
        return [as_text(item).strip() for item in value]
    raise invalid(key, value, "Expected a comma separated list.")


def get_choice(config: Mapping[str, Any], key: str, choices: tuple[str, ...], default: Any = REQUIRED, *,
               case_sensitive: bool = False) -> Any:
    """A ``STRING`` key that must be one of ``choices``, compared case-insensitively
    (``ConfigDef.CaseInsensitiveValidString``) unless ``case_sensitive`` (``ValidString``);
    returns the choice as spelled in ``choices``."""
    value = get_string(config, key, default)
    if value is None:
        return None
    for choice in choices:
        if choice == value if case_sensitive else choice.lower() == str(value).lower():
            return choice
    if case_sensitive:
        raise invalid(key, value, "String must be one of: " + ", ".join(choices))
    raise invalid(key, value, "String must be one of (case insensitive): " + ", ".join(choices))


def prefixed_error(prefix: str, error: ConfigError) -> ConfigError:
    """``error`` with every key moved under ``prefix`` (``"regex"`` → ``"transforms.r.regex"``)."""
    renamed = {}
    for key, message in error.errors.items():
        full = prefix + key
        renamed[full] = message.replace(f"configuration {key}:", f"configuration {full}:").replace(
            f'configuration "{key}"', f'configuration "{full}"'
        )
    return ConfigError(renamed)


def sub_config(config: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The keys under ``prefix`` with the prefix removed (Kafka's ``originalsWithPrefix``)."""
    n = len(prefix)
    return {key[n:]: value for key, value in config.items() if key.startswith(prefix)}


class ReadTracking(Mapping[str, Any]):
    """A plugin's configuration that remembers which keys the plugin asked for, to name those
    it never read (a typo Kafka Connect only logs: "supplied but isn't a known config").

    ``get``, ``[]`` and ``in`` mark the key asked for; iterating, ``keys``, ``items`` or
    ``values`` mark every key read (a plugin that reads them all, e.g. to pass them on, has no
    unread ones)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = dict(config)
        self.asked: set[str] = set()
        self._all_read = False

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        return self._config[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.asked.add(key)
        return key in self._config

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return self._config.get(key, default)

    def __iter__(self) -> Iterator[str]:
        self._all_read = True
        return iter(self._config)

    def __len__(self) -> int:
        return len(self._config)

    def unread(self) -> dict[str, str | None]:
        """``{key: the closest key the plugin asked for, or None}`` for each key it never read."""
        if self._all_read:
            return {}
        asked = sorted(self.asked)
        return {key: next(iter(difflib.get_close_matches(key, asked, n=1, cutoff=0.75)), None)
                for key in self._config if key not in self.asked}
