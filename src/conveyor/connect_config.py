"""A Kafka Connect configuration pasted into ``spec.config`` means what it meant in Connect.

Connect keeps ``connector.class`` and ``tasks.max`` in the connector's configuration; Conveyor
has them as ``spec.class`` and ``spec.tasksMax``. :func:`spec_fields_from_config` reconciles
the two, so a migrated configuration never silently runs the wrong connector or one task:

* ``tasks.max`` in ``spec.config`` sets ``spec.tasksMax`` when that is not given. When both
  are given ``spec.tasksMax`` wins (``kubectl scale`` sets it) and the driver logs a warning
  naming both (:func:`tasks_max_overridden`). Not a whole number from 1 to 1000: refused.
* ``connector.class`` in ``spec.config`` must name the connector ``spec.class`` names (Apache
  Kafka's FileStream connectors are Conveyor's ``file-sink`` / ``file-source``); anything else
  is refused, naming both fields.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

#: Kafka Connect connector classes and the Conveyor connector that does the same work.
CONNECT_EQUIVALENTS = {
    "org.apache.kafka.connect.file.FileStreamSinkConnector": "file-sink",
    "org.apache.kafka.connect.file.FileStreamSourceConnector": "file-source",
}
MAX_TASKS = 1000


def conveyor_name(name: str) -> str:
    """``name`` as Conveyor names it: a Connect class (full or simple name, or without the
    ``Connector`` suffix, as Connect's aliases) maps to its equivalent; anything else is kept."""
    for java, conveyor in CONNECT_EQUIVALENTS.items():
        simple = java.rpartition(".")[2]
        if name in (java, simple, simple.removesuffix("Connector")):
            return conveyor
    return name


@functools.lru_cache(maxsize=1)
def _installed() -> dict[str, str]:
    # Scanning the installed distributions costs milliseconds; manifests are parsed often.
    return {ep.name: ep.value for ep in entry_points(group="conveyor.connectors")}


def _canonical(name: str) -> str:
    """An entry-point name resolved to its ``module:Class``; a dotted ``module.Class`` path
    written with a colon; so that two spellings of one connector compare equal."""
    value = _installed().get(name, name)
    if ":" not in value and "." in value:
        module, _, attr = value.rpartition(".")
        value = f"{module}:{attr}"
    return value


def _looks_like_java(name: str) -> bool:
    return name.startswith(("org.", "io.", "com.")) and ":" not in name


def spec_fields_from_config(spec: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``(the spec's fields to set, {field path under spec: why it is refused})`` for a spec
    (the raw mapping, aliases as written) whose ``config`` holds Connect's spec keys."""
    config = spec.get("config")
    if not isinstance(config, Mapping):
        return {}, {}
    updates: dict[str, Any] = {}
    refused: dict[str, str] = {}
    if "tasks.max" in config:
        raw = config["tasks.max"]
        try:
            tasks = int(str(raw))
        except ValueError:
            tasks = 0
        if not 1 <= tasks <= MAX_TASKS:
            refused["config.tasks.max"] = f"must be a whole number from 1 to {MAX_TASKS} (got {raw!r})"
        elif spec.get("tasksMax", spec.get("tasks_max")) is None:
            updates["tasksMax"] = tasks
    given = spec.get("class", spec.get("connector_class"))
    if "connector.class" in config and given is not None:
        named = str(config["connector.class"])
        if _canonical(conveyor_name(named)) != _canonical(str(given)):
            hint = (" (a Java connector: Conveyor runs the Python connector spec.class names)"
                    if _looks_like_java(named) else "")
            refused["config.connector.class"] = (f"{named} is not the connector spec.class names ({given}){hint}: "
                                                 "remove it or make it name the same connector")
    return updates, refused


def tasks_max_overridden(config: Mapping[str, Any], tasks_max: int) -> str | None:
    """The warning for a ``spec.config.tasks.max`` that ``spec.tasksMax`` overrides, or ``None``."""
    raw = config.get("tasks.max")
    if raw is None or str(raw) == str(tasks_max):
        return None
    return f"spec.config.tasks.max ({raw}) is overridden by spec.tasksMax ({tasks_max})"
