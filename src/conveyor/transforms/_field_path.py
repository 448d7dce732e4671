"""Field paths, as KIP-821's ``SingleFieldPath`` and ``FieldSyntaxVersion``.

``field.syntax.version`` (``V1`` or ``V2``, any case; default ``V1``):

* ``V1``: the path is one field name at the top level, dots included.
* ``V2``: dotted steps into nested structs/maps; a step containing dots is wrapped
  in backticks (``\\``` escapes a backtick): ```foo.bar`.baz`` is field ``baz`` of
  field ``foo.bar``. An unclosed backtick is a configuration error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conveyor.api.errors import ConfigError
from conveyor.api.schema import Field, Schema
from conveyor.converters._config import get_choice
from conveyor.transforms._base import require_map_or_null, require_struct_or_null

FIELD_SYNTAX_VERSION_CONFIG = "field.syntax.version"


def syntax_version(config: Mapping[str, Any]) -> str:
    """``V1`` or ``V2`` from ``field.syntax.version``."""
    return get_choice(config, FIELD_SYNTAX_VERSION_CONFIG, ("V1", "V2"), "V1")


def _incomplete(path: str, at: int, key: str) -> ConfigError:
    return ConfigError(
        {
            key: f"Incomplete backtick pair in path: [{path}], consider adding a backslash before backtick at "
            f"position {at} to escape it"
        }
    )


def parse_v2(path: str, key: str = "field") -> list[str]:
    """The steps of a V2 path (``SingleFieldPath.buildFieldPathV2``)."""
    steps: list[str] = []
    idx = 0
    n = len(path)
    while 0 <= idx < n:
        if path[idx] != "`":
            start = idx
            idx = path.find(".", idx)
            if idx >= 0:
                steps.append(path[start:idx])
                idx += 1
            else:
                steps.append(path[start:])
        else:
            backtick_at = idx
            idx += 1
            field = []
            start = idx
            while True:
                idx = path.find("`", idx)
                if idx == -1:
                    raise _incomplete(path, backtick_at, key)
                escaped = path[idx - 1] == "\\"
                if idx >= n - 1:
                    if escaped:
                        raise _incomplete(path, backtick_at, key)
                    field.append(path[start:idx])
                    steps.append("".join(field))
                    idx += 1
                    break
                if path[idx + 1] != ".":
                    idx += 1
                    continue
                if escaped:
                    field.append(path[start : idx - 1])
                    field.append("`")
                    idx += 1
                    start = idx
                    continue
                field.append(path[start:idx])
                steps.append("".join(field))
                idx += 2
                break
    if path and path[-1] == ".":
        steps.append("")
    return steps


class SingleFieldPath:
    """A path to one field of a struct or map."""

    __slots__ = ("path", "steps")

    def __init__(self, path: str, version: str = "V1", key: str = "field") -> None:
        self.path = path
        self.steps = [path] if version == "V1" else parse_v2(path, key)

    def field_from(self, schema: Schema | None) -> Field | None:
        """The field at this path in a struct schema, or ``None``."""
        if schema is None:
            return None
        current = schema
        for step in self.steps[:-1]:
            field = current.field(step)
            if field is None:
                return None
            current = field.schema
        return current.field(self.steps[-1])

    def value_from_struct(self, struct: Mapping[str, Any] | None, schema: Schema, with_default: bool = True) -> Any:
        """The value at this path in a struct (``None`` when absent)."""
        if struct is None:
            return None
        current: Mapping[str, Any] | None = struct
        current_schema = schema
        for step in self.steps[:-1]:
            field = current_schema.field(step)
            if field is None:
                return None
            current = require_struct_or_null(_get(current, field, with_default), "nested field access")
            if current is None:
                return None
            current_schema = field.schema
        field = current_schema.field(self.steps[-1])
        return None if field is None else _get(current, field, with_default)  # type: ignore[arg-type]

    def value_from_map(self, value: Mapping[str, Any] | None) -> Any:
        """The value at this path in a schemaless map (``None`` when absent)."""
        if value is None:
            return None
        current: Mapping[str, Any] | None = value
        for step in self.steps[:-1]:
            current = require_map_or_null(current.get(step), "nested field access")  # type: ignore[union-attr]
            if current is None:
                return None
        return current.get(self.steps[-1])  # type: ignore[union-attr]


def _get(struct: Mapping[str, Any], field: Field, with_default: bool) -> Any:
    value = struct.get(field.name)
    if value is None and with_default:
        return field.schema.default
    return value
