"""Kafka Connect's REST documents (4.x), built from what a Conveyor driver knows.

Each function returns the JSON document Kafka Connect's worker returns for the same
resource, with its field names (the Jackson property names of Connect's
``org.apache.kafka.connect.runtime.rest.entities`` classes):

* ``ConnectorStateInfo`` ``{"name", "connector": {"state", "worker_id"[, "trace"]},
  "tasks": [{"id", "state", "worker_id"[, "trace"]}], "type"}`` (:func:`connector_state_info`);
* ``ConnectorInfo`` ``{"name", "config": {str: str}, "tasks": [{"connector", "task"}], "type"}``
  (:func:`connector_info`);
* ``TaskInfo`` ``{"id": {"connector", "task"}, "config": {str: str}}`` (:func:`task_infos`);
* ``PluginInfo`` ``{"class", "type", "version"}`` (:func:`plugin_infos`);
* ``ConfigKeyInfo`` / ``ConfigInfos`` (:func:`config_key_infos`, :func:`config_infos`).

Configurations are Connect's ``Map<String, String>``: every value a string
(:func:`connect_string`). Nothing here talks to Spark, Kafka or Kubernetes.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from conveyor.api import Connector, SinkConnector
from conveyor.connect_config import conveyor_name
from conveyor.runtime.config.plugins import connector_entry_points, load_connector_class

#: ``ConnectorStateInfo``'s keys for the connector and for each task, in Connect's order.
_TASK_KEYS = ("id", "state", "worker_id", "version", "trace")
_CONNECTOR_KEYS = ("state", "worker_id", "version", "trace")


def connect_string(value: Any) -> str:
    """A config value as Kafka Connect's ``Map<String, String>`` holds it: ``true``/``false``
    for booleans, comma-separated lists (as ``ConfigDef``'s ``LIST`` type), compact JSON for
    mappings, ``str()`` for the rest; ``None`` is the empty string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return connect_string(value.value)
    if isinstance(value, (list, tuple)):
        return ",".join(connect_string(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def connect_config(name: str, connector_class: str, tasks_max: int, config: Mapping[str, Any]) -> dict[str, str]:
    """The connector's configuration as Kafka Connect stores it: the connector's keys plus
    ``connector.class``, ``tasks.max`` and ``name``, every value a string."""
    out = {key: connect_string(value) for key, value in config.items()}
    out.update({"connector.class": connector_class, "tasks.max": str(tasks_max), "name": name})
    return out


def _strip(entry: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    # Connect's trace is @JsonInclude(NON_EMPTY): absent when null or "".
    return {k: entry[k] for k in keys if k in entry and (k != "trace" or entry[k])}


def connector_state_info(status: Mapping[str, Any], version: str) -> dict[str, Any]:
    """Connect's ``ConnectorStateInfo`` from Conveyor's status document (``Herder.status()``),
    without Conveyor's extras (assignment, lag, counters, ``spark``, ``unassigned_lag``);
    ``version`` is the connector's (Connect 4.1 shows the plugin version of each, KIP-1136)."""
    return {"name": status["name"], "connector": _strip({**status["connector"], "version": version}, _CONNECTOR_KEYS),
            "tasks": [_strip({**t, "version": version}, _TASK_KEYS) for t in status["tasks"]],
            "type": status["type"]}


def connector_info(name: str, config: Mapping[str, str], task_ids: list[int], connector_type: str
                   ) -> dict[str, Any]:
    """Connect's ``ConnectorInfo``."""
    return {"name": name, "config": dict(config),
            "tasks": [{"connector": name, "task": i} for i in task_ids], "type": connector_type}


def task_infos(name: str, task_configs: Mapping[int, Mapping[str, Any]], task_class: str) -> list[dict[str, Any]]:
    """Connect's ``[TaskInfo]``: each task's configuration with ``task.class``, as strings."""
    return [{"id": {"connector": name, "task": task_id},
             "config": {**{k: connect_string(v) for k, v in config.items()}, "task.class": task_class}}
            for task_id, config in sorted(task_configs.items())]


def class_name(cls: type) -> str:
    """``package.module.Class``: how Kafka Connect names a plugin (``connector.class``)."""
    return f"{cls.__module__}.{cls.__qualname__}"


def connector_type_of(cls: type[Connector]) -> str:
    return "sink" if issubclass(cls, SinkConnector) else "source"


def plugin_version(cls: type[Connector]) -> str:
    """The ``version()`` of a new instance of ``cls``; ``"undefined"`` when it cannot be built."""
    try:
        return str(cls().version())
    except Exception:  # noqa: BLE001 - a plugin that cannot even be built has an undefined version
        return "undefined"


def installed_connectors() -> dict[str, type[Connector]]:
    """``{entry-point name: class}`` of every installed connector that loads."""
    out: dict[str, type[Connector]] = {}
    for name in sorted(connector_entry_points()):
        try:
            out[name] = load_connector_class(name)
        except Exception:  # noqa: BLE001, S112 - a broken plugin is left out, as Connect's scanner does
            continue
    return out


def plugin_infos(connectors_only: bool = True, version: str = "undefined") -> list[dict[str, str]]:
    """Connect's ``GET /connector-plugins``: ``[{"class", "type", "version"}]`` of the
    installed connectors (``type`` ``sink`` or ``source``), sorted by class name as Connect
    sorts them; with ``connectors_only`` false, then the runtime's own plugins by Kafka Connect
    class name, each at ``version``: converters (``converter``), header converters
    (``header_converter``: every key/value converter serves headers too, as Connect's do),
    transformations (``transformation``) and predicates (``predicate``)."""
    plugins = sorted(({"class": class_name(cls), "type": connector_type_of(cls), "version": plugin_version(cls)}
                      for cls in installed_connectors().values()), key=lambda p: p["class"])
    if connectors_only:
        return plugins
    from conveyor.converters import KAFKA_CONNECT_CONVERTERS, LAZY_CONVERTERS
    from conveyor.converters.header_converters import HEADER_CONVERTERS
    from conveyor.transforms._registry import PREDICATES, PREDICATES_PACKAGE, TRANSFORMATIONS, TRANSFORMS_PACKAGE

    by_type = {
        "converter": [*KAFKA_CONNECT_CONVERTERS, *(n for n in LAZY_CONVERTERS if "." in n)],
        "header_converter": [*KAFKA_CONNECT_CONVERTERS, *(n for n in HEADER_CONVERTERS if "." in n)],
        "transformation": [n for n in TRANSFORMATIONS if n.startswith(TRANSFORMS_PACKAGE)],
        "predicate": [n for n in PREDICATES if n.startswith(PREDICATES_PACKAGE)],
    }
    for kind, names in by_type.items():
        plugins += [{"class": name, "type": kind, "version": version} for name in sorted(names)]
    return plugins


def find_plugin(name: str) -> type[Connector] | None:
    """The connector class called ``name``: its entry-point name, full class name, simple class
    name, or simple name without the ``Connector`` suffix (Connect's plugin aliases); Apache
    Kafka's FileStream connectors name ``file-sink`` / ``file-source``."""
    name = conveyor_name(name)
    for entry_point, cls in installed_connectors().items():
        simple = cls.__name__
        if name in (entry_point, class_name(cls), simple, simple.removesuffix("Connector")):
            return cls
    return None


_CONNECT_TYPES = {bool: "BOOLEAN", int: "LONG", float: "DOUBLE", str: "STRING", list: "LIST", dict: "STRING"}


def _connect_type(field: FieldInfo, key: str) -> str:
    annotation = field.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = typing.get_origin(annotation) or annotation
    if base in (typing.Union, types.UnionType) and args:
        base = typing.get_origin(args[0]) or args[0]
    if any(part in key for part in ("password", "secret")):
        return "PASSWORD"
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return "STRING"
    return _CONNECT_TYPES.get(base, "STRING") if isinstance(base, type) else "STRING"


def config_key_infos(model: type[BaseModel], group: str) -> list[dict[str, Any]]:
    """Connect's ``ConfigKeyInfo`` for each field of a pydantic config model, in field order.

    ``required`` is true for a field without a default; ``default_value`` is Connect's string
    form of the default (``null`` when required); ``importance`` is ``HIGH`` for required
    fields, ``MEDIUM`` otherwise (pydantic has no such notion)."""
    out = []
    for order, (name, field) in enumerate(model.model_fields.items(), start=1):
        key = field.alias or name
        required = field.is_required()
        default = None if required else field.get_default(call_default_factory=True)
        out.append({"name": key, "type": _connect_type(field, key), "required": required,
                    "default_value": None if required else connect_string(default),
                    "importance": "HIGH" if required else "MEDIUM", "documentation": field.description or "",
                    "group": group, "order": order, "width": "NONE", "display_name": key, "dependents": []})
    return out


def config_infos(name: str, keys: list[dict[str, Any]], config: Mapping[str, Any], errors: Mapping[str, str]
                 ) -> dict[str, Any]:
    """Connect's ``ConfigInfos`` for a validated ``config``: one ``{"definition", "value"}`` per
    key (``errors`` are ``{key: message}``; an error about no particular key goes to ``name``)."""
    by_key = {k["name"]: k for k in keys}
    known = set(by_key)
    errors = {("name" if not key else key): message for key, message in errors.items()}
    configs = []
    for key, definition in by_key.items():
        value = config.get(key)
        configs.append({"definition": definition,
                        "value": {"name": key, "value": None if value is None else connect_string(value),
                                  "recommended_values": [], "errors": [errors[key]] if key in errors else [],
                                  "visible": True}})
    for key in errors.keys() - known:  # a key the models do not define (a nested or pass-through key)
        configs.append({"definition": None, "value": {"name": key, "value": connect_string(config.get(key)),
                                                      "recommended_values": [], "errors": [errors[key]],
                                                      "visible": True}})
    groups = list(dict.fromkeys(k["group"] for k in keys))
    return {"name": name, "error_count": sum(len(c["value"]["errors"]) for c in configs), "groups": groups,
            "configs": configs}
