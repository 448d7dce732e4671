"""The ``Connector`` manifest: the same YAML shape for ``conveyor run`` and the
Kubernetes custom resource (``conveyor.dev/v1alpha1``, kind ``Connector``).

Field names follow Kubernetes conventions (camelCase in ``spec``); the connector's own
configuration under ``spec.config`` keeps Kafka Connect's dotted keys.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from conveyor import spark_security, spark_volumes
from conveyor.api.redaction import redact_value
from conveyor.connect_config import spec_fields_from_config
from conveyor.manifest.autoscaler import OWNERSHIP_RULE, AutoscalerSpec, autoscaling
from conveyor.manifest.base import (
    K8S_NAME,
    MOUNTED_KEY,
    MOUNTED_KEY_RULE,
    KeysRefused,
    ManifestError,
    StrictModel,
)
from conveyor.manifest.initial_offsets import IMMUTABLE_RULE as INITIAL_OFFSETS_RULE
from conveyor.manifest.initial_offsets import InitialOffsetsSpec
from conveyor.manifest.kafka import (
    CODE_LOADING_CLIENT_PROPERTIES,
    CODE_LOADING_REASON,
    KafkaSpec,
)
from conveyor.manifest.mounts import MOUNT_REF, mentions_mounts, mount_root, resolve_mounted_config, substitute_env

API_VERSION = "conveyor.dev/v1alpha1"
KIND = "Connector"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ConnectorState(str, enum.Enum):
    """Target state of a connector, as Kafka Connect's ``PUT /connectors/<name>/{pause,resume,stop}``."""

    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


_SPARK_MEMORY = r"^[0-9]+[kmgtKMGT]?$"
_K8S_CPU = r"^([0-9]+(\.[0-9]+)?|\.[0-9]+|[0-9]+m)$"
_CHECKED_SPARK_PROPERTIES = {
    # sparkConf properties the operator reads to size pods: a bad value must be refused here,
    # naming the property, not fail the apply of a Deployment
    "spark.executor.pyspark.memory": (_SPARK_MEMORY, "a Spark memory size such as 384m or 1g"),
    **{f"spark.kubernetes.{role}.{bound}.cores": (_K8S_CPU, "a Kubernetes CPU quantity such as 250m, 0.5 or 2")
       for role in ("driver", "executor") for bound in ("request", "limit")},
}


class ShutdownSpec(StrictModel):
    """Graceful shutdown: time for closing commits."""

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


class NameReference(StrictModel):
    """A reference by name to an object in the connector's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=K8S_NAME, description="Name of the object.")


class ConfigFromSource(StrictModel):
    """A Secret or ConfigMap whose keys become connector configuration keys, as a
    container's ``envFrom``. Keys set in ``spec.config`` win."""

    model_config = ConfigDict(
        populate_by_name=True, extra="forbid",
        json_schema_extra={"x-kubernetes-validations": [{
            "rule": "has(self.secretRef) != has(self.configMapRef)",
            "message": "set exactly one of secretRef and configMapRef",
        }]},
    )

    secret_ref: NameReference | None = Field(
        None, alias="secretRef", description="Secret in the connector's namespace; its values never leave the pods."
    )
    config_map_ref: NameReference | None = Field(
        None, alias="configMapRef", description="ConfigMap in the connector's namespace."
    )
    prefix: str = Field("", description="Prepended to every key of the source (e.g. 'connection.').")

    def model_post_init(self, __context: Any) -> None:
        if (self.secret_ref is None) == (self.config_map_ref is None):
            raise ValueError("set exactly one of secretRef and configMapRef")

    @property
    def kind(self) -> str:
        return "Secret" if self.secret_ref is not None else "ConfigMap"

    @property
    def name(self) -> str:
        return (self.secret_ref or self.config_map_ref).name  # type: ignore[union-attr]

    def directory(self, root: Path) -> Path:
        return root / ("secrets" if self.secret_ref is not None else "configmaps") / self.name


class ResourcesSpec(StrictModel):
    """CPU and memory of a Spark driver or executor."""

    cores: int = Field(1, ge=1, le=256, description="CPU cores (spark.driver.cores / spark.executor.cores).")
    memory: str = Field(
        "1g", pattern=_SPARK_MEMORY,
        description="JVM heap in Spark's size format, e.g. 512m or 2g (spark.driver.memory / spark.executor.memory).",
    )


class ExecutorSpec(ResourcesSpec):
    """Spark executors: how many pods and their resources."""

    instances: int = Field(
        1, ge=0, le=1000,
        description="Executor pods (spark.executor.instances); 0 runs the tasks in the driver pod.",
    )


class SparkSpec(StrictModel):
    """How the connector's Spark application runs on Kubernetes (client mode: the driver
    is a Deployment's pod, executors are pods it creates)."""

    image: str | None = Field(
        None, description="Image of the driver and executors; defaults to the operator's runtime image."
    )
    image_pull_policy: str = Field(
        "IfNotPresent", alias="imagePullPolicy", pattern="^(Always|IfNotPresent|Never)$",
        description="Always, IfNotPresent or Never.",
    )
    driver: ResourcesSpec = Field(default_factory=ResourcesSpec, description="Driver pod resources.")
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec, description="Executor pods and their resources.")
    service_account: str | None = Field(
        None, alias="serviceAccount", pattern=K8S_NAME,
        description="ServiceAccount of the driver (it creates executor pods); defaults to conveyor-spark, "
        "which the operator creates once per namespace, bound to the ClusterRole Spark needs.",
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict, alias="sparkConf",
        description="Extra Spark properties, from an allow-list: memory, cores and overheads, timeouts and retries, "
        "locality, node selectors, spark.kubernetes.{driver,executor}.volumes.* (mounted as Spark's, in the driver "
        "pod too), a few SQL settings; the operator's connectors.allowedSparkConf adds globs. Refused whatever "
        "that setting says: the operator's own properties (master, driver address and ports, namespace, image, "
        "service account, pod names, resources set by the fields above), conveyor.dev/ pod labels and Spark's "
        "RPC security (spark.authenticate*, spark.network.crypto.*, spark.network.sasl.*, spark.ssl.*; always "
        "authenticated and AES-GCM encrypted), as is -Dspark. in *JavaOptions.",
        json_schema_extra={"maxProperties": 256, "x-kubernetes-validations": spark_security.admission_rules()},
    )

    @field_validator("spark_conf")
    @classmethod
    def _check_spark_conf(cls, conf: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        context = info.context or {}
        also_allowed = context.get("allowed_spark_conf")
        if also_allowed is None:
            also_allowed = spark_security.allowed_patterns()
        refused = spark_security.refused_spark_conf(conf, also_allowed)
        if refused:
            raise KeysRefused(refused)
        for key, (pattern, expected) in _CHECKED_SPARK_PROPERTIES.items():
            if key in conf and not re.fullmatch(pattern, str(conf[key]).strip()):
                raise ValueError(f"{key}: {conf[key]!r} is not {expected}")
        for role in ("driver", "executor"):
            spark_volumes.volumes(conf, role)  # ValueError names the property
        return conf


class OffsetsPolicy(str, enum.Enum):
    RETAIN = "retain"
    DELETE = "delete"


class DeletionPolicySpec(StrictModel):
    """What deleting the Connector removes besides its Kubernetes objects."""

    cleanup: bool = Field(
        True,
        description="Run the connector-deleted stop path (task.stop(connector_deleted=True)) so the connector "
        "removes what it provisioned outside Kafka (tables, triggers, queues).",
    )
    offsets: OffsetsPolicy = Field(
        OffsetsPolicy.RETAIN,
        description="retain keeps the sink consumer group and source offsets (a re-created connector resumes); "
        "delete removes the consumer group connect-<name> and tombstones the source offsets.",
    )


class ConfigMapTarget(StrictModel):
    to_config_map: NameReference = Field(
        alias="toConfigMap", description="ConfigMap that receives the offsets (key offsets.json); created if missing."
    )


class ConfigMapSource(StrictModel):
    from_config_map: NameReference = Field(
        alias="fromConfigMap", description="ConfigMap whose key offsets.json holds the offsets to write."
    )


class AutoRestartSpec(StrictModel):
    enabled: bool = Field(True, description="Restart a FAILED connector or its FAILED tasks automatically.")
    max_restarts: int | None = Field(
        None, alias="maxRestarts", ge=0,
        description="Restarts in a row before giving up (unset: no limit). The count resets once the connector has "
        "run without failing for the current back-off; a manual restart resets it too.",
    )


class ConnectorSpec(StrictModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid",
                              json_schema_extra={"x-kubernetes-validations": [OWNERSHIP_RULE, INITIAL_OFFSETS_RULE]})

    connector_class: str = Field(
        alias="class",
        min_length=1,
        description="Connector: an entry-point name of group conveyor.connectors or a dotted path pkg.module:Class.",
    )
    tasks_max: int = Field(
        1, alias="tasksMax", ge=1, le=1000,
        description="Maximum number of tasks (Kafka Connect tasks.max); the scale subresource sets it. With "
        "spec.autoscaler enabled it is the count the autoscaler starts from, and it cannot be changed.",
    )
    state: ConnectorState = Field(ConnectorState.RUNNING, description="Target state: running, paused or stopped.")
    kafka: KafkaSpec = Field(description="Kafka cluster the connector reads from or writes to.")
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="Connector configuration with Kafka Connect's keys (topics, transforms, errors.tolerance, ...). "
        "${secret:<name>:<key>} and ${configmap:<name>:<key>} read a key of a source listed in configFrom; "
        "${env:NAME} reads the driver's environment.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    config_from: list[ConfigFromSource] = Field(
        default_factory=list, alias="configFrom",
        description="Secrets and ConfigMaps mounted into the pods whose keys become configuration keys.",
    )
    spark: SparkSpec = Field(default_factory=SparkSpec, description="Spark on Kubernetes settings.")
    shutdown: ShutdownSpec = Field(default_factory=ShutdownSpec, description="Graceful shutdown settings.")
    deletion_policy: DeletionPolicySpec = Field(
        default_factory=DeletionPolicySpec, alias="deletionPolicy",
        description="What deleting the Connector cleans up.",
    )
    list_offsets: ConfigMapTarget | None = Field(
        None, alias="listOffsets",
        description="Where the annotation conveyor.dev/connector-offsets=list writes the connector's offsets "
        "(Kafka Connect's GET /connectors/<name>/offsets document, as Strimzi's KafkaConnector listOffsets).",
    )
    alter_offsets: ConfigMapSource | None = Field(
        None, alias="alterOffsets",
        description="Offsets the annotation conveyor.dev/connector-offsets=alter writes (KIP-875 PATCH); the "
        "connector must be stopped (spec.state: stopped). reset needs no ConfigMap.",
    )
    initial_offsets: InitialOffsetsSpec | None = Field(
        None, alias="initialOffsets",
        description="Where a new connector starts (KIP-995): offsets written before its first task starts, when it "
        "has none yet or (existing: replace) over those found; the outcome is in status.startingOffsets. Given at "
        "creation only.",
    )
    auto_restart: AutoRestartSpec | None = Field(
        None, alias="autoRestart",
        description="Automatic restarts of a FAILED connector or tasks by the operator, as Strimzi's autoRestart: "
        "after 0, 2, 6, 12, 20, 30, 42 and 56 minutes, then every 60 (min(n*n+n, 60) minutes after the n-th).",
    )
    autoscaler: AutoscalerSpec | None = Field(
        None,
        description="The operator's autoscaler of a sink connector's task count, from its consumer lag, the "
        "records arriving and the tasks' busy time (as Flink's autoscaler); it owns spec.tasksMax while enabled.",
    )

    @model_validator(mode="before")
    @classmethod
    def _connect_spec_keys(cls, data: Any) -> Any:
        """``tasks.max`` / ``connector.class`` pasted into ``config`` (:mod:`conveyor.connect_config`)."""
        if not isinstance(data, Mapping):
            return data
        updates, refused = spec_fields_from_config(data)
        if refused:
            raise KeysRefused(refused)
        return {**data, **updates}

    @field_validator("config")
    @classmethod
    def _check_code_loading_client_keys(cls, config: dict[str, Any]) -> dict[str, Any]:
        """librdkafka properties that load a library or run a command, bare or under any prefix
        (``consumer.override.``...), are refused: a connector's author may not put code into the
        pods (issue 28, item 2)."""
        refused = {key: CODE_LOADING_REASON.format(property=suffix)
                   for key in config for suffix in CODE_LOADING_CLIENT_PROPERTIES
                   if key == suffix or key.endswith("." + suffix)}
        if refused:
            raise KeysRefused(refused)
        return config

    @field_validator("config")
    @classmethod
    def _check_mount_references(cls, config: dict[str, Any]) -> dict[str, Any]:
        """``${secret:<name>:<key>}`` / ``${configmap:<name>:<key>}`` name a Kubernetes object
        and key, so no reference reaches another file of the pod (issue 28, item 1)."""
        refused = {}
        for key, value in config.items():
            for kind, name, item in MOUNT_REF.findall(value) if isinstance(value, str) else ():
                if not re.fullmatch(K8S_NAME, name):
                    refused[key] = f"${{{kind}:{name}:...}}: {name!r} is not a {kind} name"
                elif not re.fullmatch(MOUNTED_KEY, item):
                    refused[key] = f"${{{kind}:{name}:{item}}}: {item!r} is not {MOUNTED_KEY_RULE}"
        if refused:
            raise KeysRefused(refused)
        return config

    def connect_config(self, name: str) -> dict[str, Any]:
        """The configuration Kafka Connect gives ``Connector.start``: ``config`` with
        ``connector.class``, ``tasks.max`` and ``name`` (the last two as strings)."""
        return {**self.config, "connector.class": self.connector_class, "tasks.max": str(self.tasks_max), "name": name}

    @property
    def most_tasks(self) -> int:
        """The most tasks this spec may run without a new driver: ``tasksMax``, or an enabled
        autoscaler's ``maxTasks`` when that is more (the task slots of a local Spark master)."""
        if autoscaling(self.autoscaler):
            assert self.autoscaler is not None
            return max(self.tasks_max, self.autoscaler.max_tasks)
        return self.tasks_max

    def secret_names(self) -> list[str]:
        """Every Secret the pods mount (configFrom and Kafka credentials), in order, once."""
        names = [s.name for s in self.config_from if s.secret_ref is not None]
        names += [r.name for r in self.kafka.secret_refs()]
        return list(dict.fromkeys(names))

    def config_map_names(self) -> list[str]:
        return list(dict.fromkeys(s.name for s in self.config_from if s.config_map_ref is not None))


class ConnectorManifest(StrictModel):
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
    def from_dict(cls, data: Any, source: str = "<manifest>",
                  allowed_spark_conf: Sequence[str] | None = None) -> ConnectorManifest:
        """Validate a parsed manifest.

        Args:
            allowed_spark_conf: globs of ``sparkConf`` keys allowed beyond
                :data:`conveyor.spark_security.ALLOWED`; ``None`` reads them from the environment
                (:func:`conveyor.spark_security.allowed_patterns`).

        Raises:
            ManifestError: naming each invalid field by its path.
        """
        if not isinstance(data, dict):
            raise ManifestError(f"{source}: expected a mapping with apiVersion, kind, metadata and spec")
        context = None if allowed_spark_conf is None else {"allowed_spark_conf": tuple(allowed_spark_conf)}
        try:
            return cls.model_validate(data, context=context)
        except ValidationError as exc:
            lines = []
            for err in exc.errors():
                path = ".".join(str(p) for p in err["loc"]) or "<root>"
                refused = err.get("ctx", {}).get("error")
                if isinstance(refused, KeysRefused):
                    lines += [f"  {path}.{key}: {reason}" for key, reason in refused.reasons.items()]
                    continue
                detail = err["msg"]
                if err["type"] not in ("missing", "value_error") and "input" in err:
                    detail = f"{detail} (got {redact_value(path, err['input'])})"
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
        return cls.load_as_written(path, environ)[0]

    @classmethod
    def load_as_written(cls, path: str | Path, environ: Mapping[str, str] | None = None
                        ) -> tuple[ConnectorManifest, ConnectorSpec]:
        """:meth:`load`'s manifest, and its ``spec`` as written: ``spec.config`` as in the file
        (``${env:...}``, ``${secret:...}`` and ``${configmap:...}`` unresolved, ``configFrom``
        not merged in), the other fields as in the manifest. Kafka Connect keeps a connector's
        configuration the same way, resolving references only for the connector.

        Raises:
            ManifestError: as :meth:`load`.
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
        spec = data.get("spec") if isinstance(data, dict) else None
        written_config = spec.get("config") if isinstance(spec, dict) else None
        data = substitute_env(data, os.environ if environ is None else environ, source=str(p))
        manifest = cls.from_dict(data, source=str(p))
        written = manifest.spec.model_copy(update={"config": dict(written_config or {})})
        return manifest.model_copy(update={"spec": with_mounted_config(manifest.spec, source=str(p))}), written


def with_mounted_config(spec: ConnectorSpec, source: str = "<manifest>") -> ConnectorSpec:
    """``spec`` with ``configFrom`` and ``${secret:...}``/``${configmap:...}`` resolved
    from the files mounted under :func:`mount_root` (unchanged when it uses neither).

    Raises:
        ManifestError: see :func:`resolve_mounted_config`.
    """
    if not spec.config_from and not mentions_mounts(spec.config):
        return spec
    return spec.model_copy(update={"config": resolve_mounted_config(spec, mount_root(), source=source)})


