"""Config keys that no component reads, with the known key each was probably meant to be.

Kafka Connect logs every supplied key that is not a known config ("The configuration 'x' was
supplied but isn't a known config"); here the check needs the connector's ``config_model``
(a connector without one may read any key, so nothing is reported for it). Known: the
connector model's keys, the runtime's (:mod:`conveyor.runtime.config.settings`), anything under a
known key (``archive.storage.region``, ``value.converter.schemas.enable``) and the prefixes
Kafka Connect passes through (``transforms.``, ``consumer.override.``...).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

#: Keys every connector's config may hold that are read outside any model.
RUNTIME_KEYS = frozenset({"name", "connector.class", "tasks.max", "transforms", "predicates", "header.converter"})
#: Prefixes whose keys go to a converter, a transformation or a Kafka client.
RUNTIME_PREFIXES = ("key.converter.", "value.converter.", "header.converter.", "transforms.", "predicates.",
                    "consumer.override.", "producer.override.", "admin.override.", "errors.", "topic.creation.")


#: Keys a connector's config may not hold, with the reason: the runtime would have to drop them.
REFUSED_KEYS = {
    "consumer.override.key.deserializer": "a sink task's consumer reads bytes and key.converter converts them: "
                                          "set key.converter instead",
    "consumer.override.value.deserializer": "a sink task's consumer reads bytes and value.converter converts them: "
                                            "set value.converter instead",
    "producer.override.key.serializer": "a source task's records are serialized by key.converter: set "
                                        "key.converter instead",
    "producer.override.value.serializer": "a source task's records are serialized by value.converter: set "
                                          "value.converter instead",
}
#: The runtime's own namespace: every key under it is one of its settings, so any other is a typo.
FRAMEWORK_PREFIX = "errors."


def framework_key_errors(config: Mapping[str, Any], runtime_keys: Iterable[str]) -> dict[str, str]:
    """``{key: message}`` for each key of ``config`` refused whatever the connector: the
    :data:`REFUSED_KEYS`, and keys under ``errors.`` that are none of ``runtime_keys`` (the
    runtime's settings), with the closest one (Kafka Connect ignores ``errors.tolerence=all``)."""
    known = sorted(k for k in runtime_keys if k.startswith(FRAMEWORK_PREFIX))
    out = {key: f"refused: {REFUSED_KEYS[key]}" for key in config if key in REFUSED_KEYS}
    for key in config:
        if key.startswith(FRAMEWORK_PREFIX) and key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
            out[key] = "not a known key" + (f" (did you mean {close[0]!r}?)" if close else
                                            f"; the errors.* keys are {', '.join(known)}")
    return out


def model_keys(model: type[BaseModel]) -> set[str]:
    """The config keys of a config model: its fields' aliases (or names)."""
    return {field.alias or name for name, field in model.model_fields.items()}


def unknown_keys(config: Mapping[str, Any], known: Iterable[str]) -> dict[str, str | None]:
    """``{key: the closest known key or None}`` for each key of ``config`` that nothing reads."""
    known = set(known) | RUNTIME_KEYS
    out: dict[str, str | None] = {}
    for key in config:
        if key in known or key.startswith(RUNTIME_PREFIXES) or any(key.startswith(k + ".") for k in known):
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
        out[key] = close[0] if close else None
    return out


def describe(key: str, suggestion: str | None) -> str:
    hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
    return f"spec.config.{key} is not a known key{hint}"
