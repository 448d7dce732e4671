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
