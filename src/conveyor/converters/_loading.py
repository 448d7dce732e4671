"""Finding a plugin class from a configuration value.

A value names a class in one of three ways, tried in order:

1. a name in the registry: a Kafka Connect class name
   (``org.apache.kafka.connect.json.JsonConverter``) or a Conveyor alias (``json``);
2. a dotted Python path, ``pkg.module.Class`` or ``pkg.module:Class`` (nested classes
   as ``pkg.module:Outer.Inner`` or, Java style, ``pkg.module.Outer$Inner``);
3. a class object itself (when a manifest is built in Python).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from conveyor import import_policy


class PluginNotFound(Exception):
    """The value names no class; ``str(error)`` says why."""


def load_class(spec: Any, registry: Mapping[str, type], base: type, kind: str) -> type:
    """Resolve ``spec`` to a subclass of ``base``.

    Args:
        spec: the configured value.
        registry: known names (class names and aliases) → classes.
        base: the class the result must derive from.
        kind: what is being loaded, for messages (``"converter"``, ``"transformation"``).

    Raises:
        PluginNotFound: with a message naming ``spec`` and, for an unknown name, the
            known names.
        conveyor.import_policy.ImportNotAllowed: a dotted path to a module this process
            may not import (:func:`conveyor.import_policy.restricted`).
    """
    if isinstance(spec, type):
        cls = spec
    else:
        name = str(spec).strip()
        cls = registry.get(name)
        if cls is None:
            cls = _import_path(name)
        if cls is None:
            known = ", ".join(sorted(n for n in registry if "." not in n))
            what = "is not available in Conveyor" if name.startswith("org.apache.kafka.") else None
            prefix = f"{kind} '{name}' {what}" if what else f"unknown {kind} '{name}'"
            raise PluginNotFound(
                f"{prefix}; known: {known} (or their Kafka Connect class names, or a dotted Python path to a class)"
            )
    if not isinstance(cls, type) or not issubclass(cls, base):
        raise PluginNotFound(f"'{_name(spec)}' is not a {kind}: it must subclass {base.__module__}.{base.__qualname__}")
    return cls


def _name(spec: Any) -> str:
    return f"{spec.__module__}.{spec.__qualname__}" if isinstance(spec, type) else str(spec)


def _import_path(name: str) -> Any:
    """The object at a dotted path, or ``None`` when no module along it exists.

    An import error raised *inside* an existing module is reported, not hidden.
    """
    if not name or name.startswith(".") or " " in name:
        return None
    if ":" in name:
        module_name, _, attr_path = name.partition(":")
        module = _import(module_name)
        if module is None:
            return None
        return _walk(module, attr_path.replace("$", ".").split("."), name)
    parts = name.replace("$", ".").split(".")
    for split in range(len(parts) - 1, 0, -1):
        module = _import(".".join(parts[:split]))
        if module is not None:
            return _walk(module, parts[split:], name)
    return None


def _import(module_name: str) -> Any:
    import_policy.check(module_name)  # raises ImportNotAllowed: not a PluginNotFound, nothing is known
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only "this module does not exist"; a missing dependency inside it is an error.
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            return None
        raise PluginNotFound(f"cannot import '{module_name}': {exc}") from exc
    except Exception as exc:
        raise PluginNotFound(f"cannot import '{module_name}': {type(exc).__name__}: {exc}") from exc


def _walk(obj: Any, attrs: list[str], name: str) -> Any:
    for attr in attrs:
        if not attr or not hasattr(obj, attr):
            return None
        obj = getattr(obj, attr)
    return obj
