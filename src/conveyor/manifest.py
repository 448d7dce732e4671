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
from conveyor.api.redaction import redact_value, remember_resolved
from conveyor.connect_config import spec_fields_from_config

API_VERSION = "conveyor.dev/v1alpha1"
KIND = "Connector"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_MOUNT_REF = re.compile(r"\$\{(secret|configmap):([^:}]+):([^}]+)\}")


class ManifestError(ValueError):
    """A manifest is unreadable or invalid; the message names each offending field
    by its path (``spec.tasksMax``) and says what was expected."""


class NotMounted(ManifestError):
    """A Secret, ConfigMap or one of their keys that a manifest references is not mounted."""


class _KeysRefused(ValueError):
    """Raised by a validator of a mapping field to name each refused key in the field's path
    (``spec.spark.sparkConf.spark.authenticate: ...``), one line each."""

    def __init__(self, reasons: dict[str, str]) -> None:
        super().__init__("; ".join(f"{key}: {reason}" for key, reason in reasons.items()))
        self.reasons = reasons


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class ConnectorState(str, enum.Enum):
    """Target state of a connector, as Kafka Connect's ``PUT /connectors/<name>/{pause,resume,stop}``."""

    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


K8S_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
"""A Kubernetes object name (DNS subdomain, as RE2 and Python read it), e.g. of a Secret."""
MOUNTED_KEY = r"^\.?[-_a-zA-Z0-9][-._a-zA-Z0-9]*$"
"""A Secret or ConfigMap key as Kubernetes' ``IsConfigMapKey``: ``[-._a-zA-Z0-9]+``, not ``.``
or ``..`` and not starting with ``..``, so no path separator and no way out of the mount. In
a form both RE2 (the CRD's ``pattern``) and Python read the same."""
MOUNTED_KEY_RULE = "a Secret or ConfigMap key ([-._a-zA-Z0-9]+, not '.' or '..' nor starting with '..')"
"""What :data:`MOUNTED_KEY` asks, in words (read after "is not")."""
_SPARK_MEMORY = r"^[0-9]+[kmgtKMGT]?$"
_K8S_CPU = r"^([0-9]+(\.[0-9]+)?|\.[0-9]+|[0-9]+m)$"
_CHECKED_SPARK_PROPERTIES = {
    # sparkConf properties the operator reads to size pods: a bad value must be refused here,
    # naming the property, not fail the apply of a Deployment
    "spark.executor.pyspark.memory": (_SPARK_MEMORY, "a Spark memory size such as 384m or 1g"),
    **{f"spark.kubernetes.{role}.{bound}.cores": (_K8S_CPU, "a Kubernetes CPU quantity such as 250m, 0.5 or 2")
       for role in ("driver", "executor") for bound in ("request", "limit")},
}


CODE_LOADING_CLIENT_PROPERTIES = ("plugin.library.paths", "ssl.engine.location", "ssl.providers",
                                  "sasl.kerberos.kinit.cmd")
"""librdkafka properties (CONFIGURATION.md) whose value is a library to load or a command to run."""
CODE_LOADING_REASON = "librdkafka's {property} would load code or run a command in the pods"
"""Why a ``spec.config`` key ending in one of :data:`CODE_LOADING_CLIENT_PROPERTIES` is refused."""


class SecretKeySelector(_Model):
    """One key of a Secret in the connector's namespace, as Kubernetes' ``secretKeyRef``."""

    name: str = Field(min_length=1, max_length=253, pattern=K8S_NAME, description="Name of the Secret.")
    key: str = Field(min_length=1, max_length=253, json_schema_extra={"pattern": MOUNTED_KEY},
                     description="Key within the Secret: [-._a-zA-Z0-9]+, not '.' or '..' nor starting with '..'.")

    @field_validator("key")
    @classmethod
    def _check_key(cls, key: str) -> str:
        if not re.fullmatch(MOUNTED_KEY, key):
            raise ValueError(f"{key!r} is not {MOUNTED_KEY_RULE}")
        return key

    def mounted_file(self, mount_root: Path, field: str) -> Path:
        """Where the driver and executor pods see this key (Secrets are mounted as files),
        checked by :func:`mounted_file`.

        Raises:
            ManifestError: see :func:`mounted_file` (names ``field``).
        """
        return mounted_file(mount_root, "secret", self.name, self.key, field)


class KafkaTlsSpec(_Model):
    """TLS to the brokers (librdkafka ``security.protocol`` SSL or SASL_SSL)."""

    trusted_certificate: SecretKeySelector | None = Field(
        None, alias="trustedCertificate",
        description="PEM CA certificate(s) the brokers' certificates are checked against (ssl.ca.pem); "
        "unset uses the image's system trust store.",
    )
    certificate: SecretKeySelector | None = Field(
        None, description="PEM client certificate for mutual TLS (ssl.certificate.pem); needs key."
    )
    key: SecretKeySelector | None = Field(
        None, description="PEM private key of the client certificate (ssl.key.pem); needs certificate."
    )

    def model_post_init(self, __context: Any) -> None:
        if (self.certificate is None) != (self.key is None):
            raise ValueError("spec.kafka.tls: certificate and key must be set together")


class SaslMechanism(str, enum.Enum):
    """SASL mechanisms with a username and password, as librdkafka's ``sasl.mechanism``."""

    PLAIN = "plain"
    SCRAM_SHA_256 = "scram-sha-256"
    SCRAM_SHA_512 = "scram-sha-512"


class KafkaAuthenticationSpec(_Model):
    """SASL authentication with a username and a password kept in a Secret."""

    type: SaslMechanism = Field(description="SASL mechanism: plain, scram-sha-256 or scram-sha-512.")
    username: str = Field(min_length=1, description="SASL username (sasl.username).")
    password_secret: SecretKeySelector = Field(
        alias="passwordSecret", description="Secret key holding the SASL password (sasl.password)."
    )


class KafkaSpec(_Model):
    """Kafka cluster and how to authenticate to it."""

    bootstrap_servers: str = Field(
        alias="bootstrapServers",
        min_length=1,
        description="Comma-separated host:port list of the Kafka brokers.",
    )
    tls: KafkaTlsSpec | None = Field(None, description="TLS to the brokers; unset means plaintext.")
    authentication: KafkaAuthenticationSpec | None = Field(
        None, description="SASL authentication; unset means none."
    )

    def secret_refs(self) -> list[SecretKeySelector]:
        """Every Secret key this spec reads (the operator mounts them into the pods)."""
        refs = []
        if self.tls is not None:
            refs += [r for r in (self.tls.trusted_certificate, self.tls.certificate, self.tls.key) if r is not None]
        if self.authentication is not None:
            refs.append(self.authentication.password_secret)
        return refs

    def client_properties(self, mount_root: Path | None = None) -> dict[str, str]:
        """librdkafka properties for every client the runtime creates: ``bootstrap.servers``
        plus TLS and SASL settings read from the mounted Secrets under ``mount_root``
        (default :func:`mount_root`).

        TLS material goes in as PEM text (``ssl.ca.pem``, ``ssl.certificate.pem``,
        ``ssl.key.pem``), not file paths, as the SASL password goes in as text: the driver reads
        the Secrets and its clients on the executors get the values over Spark's encrypted RPC,
        so executor pods mount no Secret but the connector's ``<name>-control`` (issue 28, item 3:
        a driver may only create executors that mount that one).

        Raises:
            ManifestError: a referenced Secret key is not mounted (names the field).
        """
        root = mount_root or globals()["mount_root"]()
        props = {"bootstrap.servers": self.bootstrap_servers}
        tls, sasl = self.tls, self.authentication
        if tls is None and sasl is None:
            return props
        props["security.protocol"] = {(True, False): "SSL", (True, True): "SASL_SSL"}.get(
            (tls is not None, sasl is not None), "SASL_PLAINTEXT")
        if tls is not None:
            for prop, ref, field in (("ssl.ca.pem", tls.trusted_certificate, "trustedCertificate"),
                                     ("ssl.certificate.pem", tls.certificate, "certificate"),
                                     ("ssl.key.pem", tls.key, "key")):
                if ref is not None:
                    props[prop] = ref.mounted_file(root, f"spec.kafka.tls.{field}").read_text()
            if "ssl.key.pem" in props:
                remember_resolved(props["ssl.key.pem"], "spec.kafka.tls.key")
        if sasl is not None:
            props["sasl.mechanism"] = sasl.type.value.upper()
            props["sasl.username"] = sasl.username
            password = sasl.password_secret.mounted_file(root, "spec.kafka.authentication.passwordSecret")
            props["sasl.password"] = password.read_text().strip()
            remember_resolved(props["sasl.password"], "spec.kafka.authentication.passwordSecret")
        return props


def mount_root() -> Path:
    """Directory the pods see Secrets and ConfigMaps under (``$CONVEYOR_MOUNT_DIR``,
    default ``/etc/conveyor``): ``secrets/<name>/<key>`` and ``configmaps/<name>/<key>``."""
    return Path(os.environ.get("CONVEYOR_MOUNT_DIR", "/etc/conveyor"))


def mounted_file(root: Path, kind: str, name: str, key: str, field: str) -> Path:
    """The file of ``key`` in the Secret (``kind`` ``"secret"``) or ConfigMap (``"configmap"``)
    ``name`` mounted under ``root`` (``secrets/<name>/<key>``, ``configmaps/<name>/<key>``),
    after checking that ``key`` is a Kubernetes key and that the path, symlinks followed (the
    kubelet's ``..data`` links), lies inside that source's directory: a key is never a way to
    another file of the pod (issue 28, item 1).

    Returns:
        The path as mounted (not resolved, so that a rotated Secret is read anew).

    Raises:
        NotMounted: the file is not there (names ``field``).
        ManifestError: ``key`` is not a Secret or ConfigMap key, or leads outside the mount;
            names ``field``, never the file's content.
    """
    if not re.fullmatch(MOUNTED_KEY, key) or len(key) > 253:
        raise ManifestError(f"{field}: {key!r} is not {MOUNTED_KEY_RULE}")
    directory = root / ("secrets" if kind == "secret" else "configmaps") / name
    path = directory / key
    try:
        inside = path.resolve(strict=True).is_relative_to(directory.resolve(strict=True))
    except (OSError, RuntimeError):  # missing, or a symlink loop
        raise NotMounted(f"{field}: {path} is not mounted (is the Secret or ConfigMap missing?)") from None
    if not inside:
        raise ManifestError(f"{field}: key {key!r} of {kind} {name!r} leads outside its mount")
    if not path.is_file():
        raise NotMounted(f"{field}: {path} is not mounted (is the Secret or ConfigMap missing?)")
    return path


class ShutdownSpec(_Model):
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


class NameReference(_Model):
    """A reference by name to an object in the connector's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=K8S_NAME, description="Name of the object.")


class ConfigFromSource(_Model):
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


class ResourcesSpec(_Model):
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


class SparkSpec(_Model):
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
            raise _KeysRefused(refused)
        for key, (pattern, expected) in _CHECKED_SPARK_PROPERTIES.items():
            if key in conf and not re.fullmatch(pattern, str(conf[key]).strip()):
                raise ValueError(f"{key}: {conf[key]!r} is not {expected}")
        for role in ("driver", "executor"):
            spark_volumes.volumes(conf, role)  # ValueError names the property
        return conf


class OffsetsPolicy(str, enum.Enum):
    RETAIN = "retain"
    DELETE = "delete"


class DeletionPolicySpec(_Model):
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


class ConfigMapTarget(_Model):
    to_config_map: NameReference = Field(
        alias="toConfigMap", description="ConfigMap that receives the offsets (key offsets.json); created if missing."
    )


class ConfigMapSource(_Model):
    from_config_map: NameReference = Field(
        alias="fromConfigMap", description="ConfigMap whose key offsets.json holds the offsets to write."
    )


class AutoRestartSpec(_Model):
    enabled: bool = Field(True, description="Restart a FAILED connector or its FAILED tasks automatically.")
    max_restarts: int | None = Field(
        None, alias="maxRestarts", ge=0,
        description="Restarts in a row before giving up (unset: no limit). The count resets once the connector has "
        "run without failing for the current back-off; a manual restart resets it too.",
    )


class ConnectorSpec(_Model):
    connector_class: str = Field(
        alias="class",
        min_length=1,
        description="Connector: an entry-point name of group conveyor.connectors or a dotted path pkg.module:Class.",
    )
    tasks_max: int = Field(
        1, alias="tasksMax", ge=1, le=1000,
        description="Maximum number of tasks (Kafka Connect tasks.max); the scale subresource sets it.",
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
    auto_restart: AutoRestartSpec | None = Field(
        None, alias="autoRestart",
        description="Automatic restarts of a FAILED connector or tasks by the operator, as Strimzi's autoRestart: "
        "after 0, 2, 6, 12, 20, 30, 42 and 56 minutes, then every 60 (min(n*n+n, 60) minutes after the n-th).",
    )

    @model_validator(mode="before")
    @classmethod
    def _connect_spec_keys(cls, data: Any) -> Any:
        """``tasks.max`` / ``connector.class`` pasted into ``config`` (:mod:`conveyor.connect_config`)."""
        if not isinstance(data, Mapping):
            return data
        updates, refused = spec_fields_from_config(data)
        if refused:
            raise _KeysRefused(refused)
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
            raise _KeysRefused(refused)
        return config

    @field_validator("config")
    @classmethod
    def _check_mount_references(cls, config: dict[str, Any]) -> dict[str, Any]:
        """``${secret:<name>:<key>}`` / ``${configmap:<name>:<key>}`` name a Kubernetes object
        and key, so no reference reaches another file of the pod (issue 28, item 1)."""
        refused = {}
        for key, value in config.items():
            for kind, name, item in _MOUNT_REF.findall(value) if isinstance(value, str) else ():
                if not re.fullmatch(K8S_NAME, name):
                    refused[key] = f"${{{kind}:{name}:...}}: {name!r} is not a {kind} name"
                elif not re.fullmatch(MOUNTED_KEY, item):
                    refused[key] = f"${{{kind}:{name}:{item}}}: {item!r} is not {MOUNTED_KEY_RULE}"
        if refused:
            raise _KeysRefused(refused)
        return config

    def connect_config(self, name: str) -> dict[str, Any]:
        """The configuration Kafka Connect gives ``Connector.start``: ``config`` with
        ``connector.class``, ``tasks.max`` and ``name`` (the last two as strings)."""
        return {**self.config, "connector.class": self.connector_class, "tasks.max": str(self.tasks_max), "name": name}

    def secret_names(self) -> list[str]:
        """Every Secret the pods mount (configFrom and Kafka credentials), in order, once."""
        names = [s.name for s in self.config_from if s.secret_ref is not None]
        names += [r.name for r in self.kafka.secret_refs()]
        return list(dict.fromkeys(names))

    def config_map_names(self) -> list[str]:
        return list(dict.fromkeys(s.name for s in self.config_from if s.config_map_ref is not None))


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
                if isinstance(refused, _KeysRefused):
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
    if not spec.config_from and not _mentions_mounts(spec.config):
        return spec
    return spec.model_copy(update={"config": resolve_mounted_config(spec, mount_root(), source=source)})


def _mentions_mounts(config: Mapping[str, Any]) -> bool:
    return any(isinstance(v, str) and _MOUNT_REF.search(v) for v in config.values())


def resolve_mounted_config(spec: ConnectorSpec, root: Path, source: str = "<manifest>") -> dict[str, Any]:
    """``spec.config`` with ``configFrom`` merged in (keys set in ``spec.config`` win) and
    ``${secret:<name>:<key>}`` / ``${configmap:<name>:<key>}`` replaced, reading the files
    the pods see under ``root`` (``secrets/<name>/<key>``, ``configmaps/<name>/<key>``).

    Raises:
        ManifestError: a source is not mounted, or a reference names a Secret or ConfigMap
            that ``configFrom`` does not list or a key it does not have (names the field).
    """
    merged: dict[str, Any] = {}
    for i, src in enumerate(spec.config_from):
        directory = src.directory(root)
        if not directory.is_dir():
            raise ManifestError(f"{source}: spec.configFrom[{i}]: {src.kind} {src.name!r} is not mounted at {directory}")
        for item in sorted(directory.iterdir()):
            if item.is_file() and not item.name.startswith("."):
                file = mounted_file(root, src.kind.lower(), src.name, item.name, f"spec.configFrom[{i}]")
                merged[src.prefix + item.name] = file.read_text()
                remember_resolved(merged[src.prefix + item.name], f"${{{src.kind.lower()}:{src.name}:{item.name}}}")
    merged.update(spec.config)
    listed = {("secret", s.name) for s in spec.config_from if s.secret_ref is not None}
    listed |= {("configmap", s.name) for s in spec.config_from if s.config_map_ref is not None}

    def substitute(key: str, value: Any) -> Any:
        if not isinstance(value, str):
            return value

        def read(match: re.Match[str]) -> str:
            kind, name, item = match.groups()
            if (kind, name) not in listed:
                raise ManifestError(f"{source}: spec.config.{key}: ${{{kind}:{name}:...}} needs {name!r} in spec.configFrom")
            try:
                path = mounted_file(root, kind, name, item, f"spec.config.{key}")
            except NotMounted:
                raise ManifestError(f"{source}: spec.config.{key}: {kind} {name!r} has no key {item!r}") from None
            except ManifestError as exc:
                raise ManifestError(f"{source}: {exc}") from None
            resolved = path.read_text()
            remember_resolved(resolved, match.group(0))
            return resolved

        return _MOUNT_REF.sub(read, value)

    return {k: substitute(k, v) for k, v in merged.items()}


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
            remember_resolved(environ[name], match.group(0))
            return environ[name]

        return _ENV_REF.sub(value, data)
    return data
