"""The groups of topic settings a source connector's configuration gives, for the topics it
writes to (KIP-158, as Kafka Connect's ``TopicCreation``; created on first use by
:class:`conveyor.runtime.kafka.topic_creation.TopicCreator`).

Enabled for a connector when its configuration sets both
``topic.creation.default.replication.factor`` and ``topic.creation.default.partitions``
(``-1``: the broker's default). ``topic.creation.groups`` lists more groups, each with
``topic.creation.<group>.include`` / ``.exclude`` (comma-separated regexes matched against the
whole topic name), ``.replication.factor`` and ``.partitions`` (default: the default group's),
and any other topic config (``topic.creation.<group>.cleanup.policy``...). A topic goes to the
first listed group that includes and does not exclude it, else to ``default``. A topic that
exists is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conveyor.api import ConfigError

PREFIX = "topic.creation."
DEFAULT_GROUP = "default"
_GROUP_KEYS = ("include", "exclude", "replication.factor", "partitions")
_WORKER_KEYS = (f"{PREFIX}groups", f"{PREFIX}enable")


@dataclass(frozen=True)
class TopicGroup:
    name: str
    replication_factor: int
    partitions: int
    include: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()
    configs: dict[str, str] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        if self.name == DEFAULT_GROUP:
            return True
        return any(p.fullmatch(topic) for p in self.include) and not any(p.fullmatch(topic) for p in self.exclude)


def _count(config: Mapping[str, Any], key: str, default: int | None, errors: dict[str, str]) -> int:
    raw = config.get(key, default)
    try:
        value = int(str(raw))
    except ValueError:
        value = 0
    if value == 0 or value < -1:
        errors[key] = f"must be a positive number or -1 for the broker's default (got {raw!r})"
    return value


def _patterns(config: Mapping[str, Any], key: str, errors: dict[str, str]) -> tuple[re.Pattern[str], ...]:
    raw = config.get(key, "")
    parts = raw if isinstance(raw, list) else [p.strip() for p in str(raw).split(",") if p.strip()]
    out = []
    for part in parts:
        try:
            out.append(re.compile(str(part)))
        except re.error as exc:
            errors[key] = f"{part!r} is not a regular expression: {exc}"
    return tuple(out)


def topic_groups(config: Mapping[str, Any]) -> list[TopicGroup] | None:
    """The creation groups of a source connector's ``config``, the default group last;
    ``None`` when topic creation is not enabled for it.

    Raises:
        ConfigError: naming each invalid ``topic.creation.*`` key, and each key of a group that
            ``topic.creation.groups`` does not list (a typo Kafka Connect ignores).
    """
    rf_key, partitions_key = f"{PREFIX}{DEFAULT_GROUP}.replication.factor", f"{PREFIX}{DEFAULT_GROUP}.partitions"
    if rf_key not in config and partitions_key not in config:
        unread = {key: "topic creation is off without topic.creation.default.replication.factor and "
                       "topic.creation.default.partitions, so nothing reads this key"
                  for key in config if key.startswith(PREFIX) and key not in _WORKER_KEYS}
        if unread:
            raise ConfigError(unread)
        return None
    errors: dict[str, str] = {}
    for key in (rf_key, partitions_key):
        if key not in config:
            errors[key] = "topic creation needs both default.replication.factor and default.partitions"
    raw_groups = config.get(f"{PREFIX}groups", "")
    names = raw_groups if isinstance(raw_groups, list) else [g.strip() for g in str(raw_groups).split(",") if g.strip()]
    default_rf = _count(config, rf_key, -1, errors)
    default_partitions = _count(config, partitions_key, -1, errors)
    groups = []
    for name in [*dict.fromkeys(n for n in names if n != DEFAULT_GROUP), DEFAULT_GROUP]:
        base = f"{PREFIX}{name}."
        include = _patterns(config, base + "include", errors)
        if name != DEFAULT_GROUP and not include:
            errors[base + "include"] = f"group {name!r} of topic.creation.groups needs include regexes"
        configs = {k[len(base):]: str(v) for k, v in config.items()
                   if k.startswith(base) and k[len(base):] not in _GROUP_KEYS}
        groups.append(TopicGroup(name, _count(config, base + "replication.factor", default_rf, errors),
                                 _count(config, base + "partitions", default_partitions, errors),
                                 include, _patterns(config, base + "exclude", errors), configs))
    listed = {g.name for g in groups}
    for key in config:
        group = key[len(PREFIX):].split(".", 1)[0] if key.startswith(PREFIX) else None
        if group is not None and group not in listed and key not in _WORKER_KEYS:
            errors[key] = (f"group {group!r} is not in topic.creation.groups "
                           f"({', '.join(sorted(listed - {DEFAULT_GROUP})) or 'none listed'}), so nothing reads this key")
    if errors:
        raise ConfigError(errors)
    return groups
