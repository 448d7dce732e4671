"""Typed connector configuration.

Kafka Connect passes configurations as ``Map<String, String>``; Conveyor passes the
manifest's ``spec.config`` mapping as it is and lets connectors validate it into a
pydantic model. Keys keep Kafka Connect's dotted spelling through field aliases::

    class PostgresSinkConfig(ConnectorConfig):
        connection_url: str = Field(alias="connection.url", description="libpq URL")
        batch_size: int = Field(3000, alias="batch.size", ge=1)

String values are coerced the way Kafka Connect's ``ConfigDef`` does (``"5"`` → ``5``,
``"true"`` → ``True``), so a configuration written for Kafka Connect works unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from conveyor.api.errors import ConfigError
from conveyor.api.redaction import redact_text, redact_value

M = TypeVar("M", bound=BaseModel)


class ConnectorConfig(BaseModel):
    """Base for connector configuration models.

    Unknown keys are ignored (the runtime's own keys such as ``tasks.max`` or
    ``transforms`` share the mapping); fields are read by alias or by name.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    def problems(self) -> dict[str, str]:
        """Checks across keys, made once every key parsed: ``{config key: message}`` for each
        key that does not fit the others (as Kafka Connect's ``Connector.validate`` adds to
        ``ConfigDef``'s per-key validation); empty when the configuration holds together (the
        default). :func:`parse_config` raises them as one :class:`ConfigError`. No I/O."""
        return {}


def parse_config(model: type[M], config: Mapping[str, Any]) -> M:
    """Validate ``config`` into ``model``, then its checks across keys
    (:meth:`ConnectorConfig.problems`).

    Raises:
        ConfigError: one entry per invalid or missing key, named by its config key
            (the alias) and saying the expected type, e.g.
            ``{"batch.size": "Input should be a valid integer (got 'ten')"}``; else one per
            key that does not fit the others.
    """
    try:
        parsed = model.model_validate(dict(config))
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(model, exc)) from None
    problems = parsed.problems() if isinstance(parsed, ConnectorConfig) else {}
    if problems:
        raise ConfigError(problems)
    return parsed


def describe_validation_error(model: type[BaseModel], exc: ValidationError) -> dict[str, str]:
    """``{config key: message}`` for a pydantic validation error of ``model``; the key is ``""``
    for an error about the whole config. Messages show the offending value unless its key
    names a secret, with URL and connection-string passwords hidden
    (:mod:`conveyor.api.redaction`), and never the whole config."""
    aliases = {name: (field.alias or name) for name, field in model.model_fields.items()}
    errors: dict[str, str] = {}
    for err in exc.errors():
        loc = [str(part) for part in err["loc"]]
        if loc:
            loc[0] = aliases.get(loc[0], loc[0])
        key = ".".join(loc)  # "" for the whole config (a model validator)
        message = redact_text(err["msg"])
        if loc and err["type"] != "missing" and "input" in err:  # never the whole config: it holds secrets
            message = f"{message} (got {redact_value(key, err['input'])})"
        errors[key] = message
    return errors
