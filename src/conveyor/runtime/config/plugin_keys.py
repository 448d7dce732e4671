"""Keys under a converter's, transformation's or predicate's prefix that the plugin never reads
(``value.converter.schemas.enabel``, ``transforms.route.regx``): each plugin is configured once
more on a :class:`~conveyor.converters._config.ReadTracking` mapping, and what it did not ask
for is reported with the closest key it did. Kafka Connect only logs them ("supplied but isn't a
known config"); here they are warnings of the driver's validation, as other unknown keys are
(:mod:`conveyor.runtime.config.keys`), since a plugin may ignore a key Connect's reads.

Run after the pipeline validated (every class resolves and configures); a plugin that fails here
anyway is left out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from conveyor.converters import converter_class
from conveyor.converters._config import ReadTracking, parse_list, sub_config
from conveyor.transforms.chain import predicate_class, transformation_class

log = logging.getLogger(__name__)

_NOT_THE_PLUGINS = {"transforms": ("type", "predicate", "negate"), "predicates": ("type",)}


def unread_plugin_keys(config: Mapping[str, Any], key_default: str, value_default: str) -> dict[str, str | None]:
    """``{full key: the closest full key the plugin reads, or None}`` for the converters'
    (``key.converter.*``, ``value.converter.*``), transformations' and predicates' keys."""
    out: dict[str, str | None] = {}
    for side, default in (("key", key_default), ("value", value_default)):
        name = config.get(f"{side}.converter") or default
        out.update(_unread(lambda n=name: converter_class(n)(), f"{side}.converter.", config,
                           lambda plugin, own, s=side: plugin.configure(own, s == "key")))
    for kind, resolve in (("transforms", transformation_class), ("predicates", predicate_class)):
        try:
            aliases = parse_list(kind, config.get(kind) or "")
        except Exception:  # noqa: BLE001 - reported by the pipeline's validation
            continue
        for alias in aliases:
            prefix = f"{kind}.{alias}."
            kind_name = config.get(prefix + "type")
            out.update(_unread(lambda k=kind_name, r=resolve: r(k)(), prefix, config,
                               lambda plugin, own: plugin.configure(own), skip=_NOT_THE_PLUGINS[kind]))
    return out


def _unread(make: Any, prefix: str, config: Mapping[str, Any], configure: Any,
            skip: tuple[str, ...] = ()) -> dict[str, str | None]:
    own = {k: v for k, v in sub_config(config, prefix).items() if k not in skip}
    if not own:
        return {}
    tracked = ReadTracking(own)
    try:
        plugin = make()
        configure(plugin, tracked)
    except Exception:  # noqa: BLE001 - a plugin that cannot be configured is the pipeline check's to report
        log.debug("%s* not checked for unread keys", prefix, exc_info=True)
        return {}
    try:
        plugin.close()
    except Exception:  # noqa: BLE001
        log.debug("closing the plugin of %s* failed", prefix, exc_info=True)
    return {prefix + key: None if hint is None else prefix + hint for key, hint in tracked.unread().items()}
