"""The ``Connector`` manifest: the same YAML shape for ``conveyor run`` and the
Kubernetes custom resource (``conveyor.dev/v1alpha1``, kind ``Connector``).

Field names follow Kubernetes conventions (camelCase in ``spec``); the connector's own
configuration under ``spec.config`` keeps Kafka Connect's dotted keys.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

API_VERSION = "conveyor.dev/v1alpha1"
KIND = "Connector"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


class ManifestError(ValueError):
    """A manifest is unreadable or invalid; the message names each offending field
    by its path (``spec.tasksMax``) and says what was expected."""


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class ConnectorState(str, enum.Enum):
    """Target state of a connector, as Kafka Connect's ``PUT /connectors/<name>/{pause,resume,stop}``."""

    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


class KafkaSpec(_Model):
    bootstrap_servers: str = Field(
        alias="bootstrapServers",
        min_length=1,
        description="Comma-separated host:port list of the Kafka brokers.",
    )


class ShutdownSpec(_Model):
    grace_period_seconds: int = Field(
        60,
        alias="gracePeriodSeconds",
        ge=1,
        description="Seconds a task gets for its closing commit on shutdown or drain.",
    )


class ObjectMeta(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow")

    name: str = Field(description="Connector name (a DNS label); the sink consumer group is connect-<name>.")
    namespace: str = Field("default", description="Kubernetes namespace; part of transactional ids.")

    def model_post_init(self, __context: Any) -> None:
        if not _DNS_LABEL.match(self.name) or len(self.name) > 63:
            raise ValueError(f"metadata.name {self.name!r} must be a DNS label (lowercase letters, digits, '-')")


class ConnectorSpec(_Model):
    connector_class: str = Field(
        alias="class",
        min_length=1,
        description="Connector: an entry-point name of group conveyor.connectors or a dotted path pkg.module:Class.",
    )
    tasks_max: int = Field(1, alias="tasksMax", ge=1, description="Maximum number of tasks (Kafka Connect tasks.max).")
    state: ConnectorState = Field(ConnectorState.RUNNING, description="Target state: running, paused or stopped.")
    kafka: KafkaSpec = Field(description="Kafka cluster the connector reads from or writes to.")
    config: dict[str, Any] = Field(
        default_factory=dict, description="Connector configuration with Kafka Connect's keys (topics, transforms, ...)."
    )
    shutdown: ShutdownSpec = Field(default_factory=ShutdownSpec, description="Graceful shutdown settings.")


class ConnectorManifest(_Model):
    api_version: str = Field(API_VERSION, alias="apiVersion")
    kind: str = Field(KIND)
    metadata: ObjectMeta
    spec: ConnectorSpec

    def model_post_init(self, __context: Any) -> None:
        if self.api_version != API_VERSION:
            raise ValueError(f"apiVersion must be {API_VERSION!r}, got {self.api_version!r}")
        if self.kind != KIND:
            raise ValueError(f"kind must be {KIND!r}, got {self.kind!r}")

    @property
    def name(self) -> str:
        return self.metadata.name

    @classmethod
    def from_dict(cls, data: Any, source: str = "<manifest>") -> ConnectorManifest:
        """Validate a parsed manifest.

        Raises:
            ManifestError: naming each invalid field by its path.
        """
        if not isinstance(data, dict):
            raise ManifestError(f"{source}: expected a mapping with apiVersion, kind, metadata and spec")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            lines = []
            for err in exc.errors():
                path = ".".join(str(p) for p in err["loc"]) or "<root>"
                detail = err["msg"]
                if err["type"] not in ("missing", "value_error") and "input" in err:
                    detail = f"{detail} (got {err['input']!r})"
                lines.append(f"  {path}: {detail}")
            raise ManifestError(f"{source}: invalid Connector manifest\n" + "\n".join(lines)) from None

    @classmethod
    def load(cls, path: str | Path, environ: Mapping[str, str] | None = None) -> ConnectorManifest:
        """Read and validate a YAML manifest file, replacing ``${env:NAME}`` references
        in string values with environment variables (Kafka Connect's
        ``EnvVarConfigProvider`` syntax).

        Raises:
            ManifestError: the file is missing, is not YAML, references an unset
                variable (naming the field and the variable), or is invalid.
        """
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise ManifestError(f"{p}: cannot read manifest: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ManifestError(f"{p}: not valid YAML: {exc}") from None
        data = substitute_env(data, os.environ if environ is None else environ, source=str(p))
        return cls.from_dict(data, source=str(p))


def substitute_env(data: Any, environ: Mapping[str, str], source: str = "<manifest>", path: str = "") -> Any:
    """Replace ``${env:NAME}`` in every string of ``data``.

    Raises:
        ManifestError: a referenced variable is not set.
    """
    if isinstance(data, dict):
        return {k: substitute_env(v, environ, source, f"{path}.{k}" if path else str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [substitute_env(v, environ, source, f"{path}[{i}]") for i, v in enumerate(data)]
    if isinstance(data, str) and "${env:" in data:

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise ManifestError(f"{source}: {path}: environment variable {name} is not set")
            return environ[name]

        return _ENV_REF.sub(value, data)
    return data
