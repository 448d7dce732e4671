"""Finding connector classes: entry points of group ``conveyor.connectors`` or dotted paths."""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from conveyor import import_policy
from conveyor.api import Connector, SinkConnector, SourceConnector

ENTRY_POINT_GROUP = "conveyor.connectors"


class PluginError(LookupError):
    """A class named in a configuration cannot be found or is of the wrong kind."""


def load_object(path: str) -> Any:
    """Import ``pkg.module:Name`` or ``pkg.module.Name``.

    Raises:
        PluginError: when the module or the attribute does not exist.
        conveyor.import_policy.ImportNotAllowed: the module may not be imported here.
    """
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise PluginError(f"{path!r} is not a dotted path like 'package.module:Class'")
    import_policy.check(module_name)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(f"cannot import module {module_name!r} for {path!r}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PluginError(f"module {module_name!r} has no attribute {attr!r}") from None


@functools.lru_cache(maxsize=1)
def _installed() -> dict[str, EntryPoint]:
    # Scanning every installed distribution costs milliseconds; the set is fixed for a process.
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def connector_entry_points() -> dict[str, str]:
    """``{entry-point name: "module:Class"}`` of installed connectors (read once per process)."""
    return {name: ep.value for name, ep in _installed().items()}


def load_connector_class(name: str) -> type[Connector]:
    """Resolve ``spec.class``: an entry-point name first, then a dotted path.

    Raises:
        PluginError: unknown name (the message lists the installed connectors), or a
            class that is not a SinkConnector/SourceConnector subclass.
    """
    eps = _installed()
    if name in eps:
        cls = eps[name].load()
    elif "." in name or ":" in name:
        cls = load_object(name)
    else:
        known = ", ".join(sorted(eps)) or "none installed"
        raise PluginError(f"unknown connector class {name!r}; installed connectors: {known}")
    if not (isinstance(cls, type) and issubclass(cls, (SinkConnector, SourceConnector))):
        raise PluginError(f"{name!r} is not a SinkConnector or SourceConnector subclass")
    return cls
