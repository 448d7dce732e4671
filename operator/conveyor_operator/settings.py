"""Operator settings, read once from the environment (``CONVEYOR_OPERATOR_*``), which the
Helm chart sets from ``values.yaml``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

PREFIX = "CONVEYOR_OPERATOR_"


class OperatorSettings(BaseModel):
    runtime_image: str = Field(
        "conveyor:0.1.0", description="Image of drivers, executors and cleanup Jobs when spec.spark.image is unset."
    )
    watch_namespaces: list[str] = Field(
        default_factory=list, description="Namespaces to watch; empty watches all (cluster-wide)."
    )
    control_url_template: str = Field(
        "http://{name}-driver.{namespace}.svc:{port}",
        description="URL of a connector's driver control API; {name}, {namespace} and {port} are filled in.",
    )
    control_port: int = Field(8083, description="Port of the driver's control API (container and Service).")
    status_interval_seconds: float = Field(
        10.0, gt=0, description="How often status is read from a driver that answers."
    )
    status_max_backoff_seconds: float = Field(
        60.0, gt=0, description="Longest wait between status reads of a driver that does not answer (the waits "
        "double from status_interval_seconds); a change of one of the connector's pods ends the wait.",
    )
    driver_start_timeout_seconds: float = Field(
        300.0, gt=0, description="How long a driver applied for the first time may take to answer its first status "
        "read (image pull, Spark start) while Ready stays False with reason DriverStarting; after it, or once one "
        "of the connector's pods is Ready, a driver that does not answer is DriverUnreachable. As the Flink "
        "Kubernetes operator's deployment readiness timeout.",
    )
    status_workers: int = Field(
        16, ge=1, description="Threads reading drivers' statuses (conveyor_operator.observe.status_poller), apart "
        "from max_workers: a driver that does not answer holds one for up to request_timeout_seconds.",
    )
    request_timeout_seconds: float = Field(5.0, gt=0, description="Timeout of a control API call that does not block.")
    kube_request_timeout_seconds: float = Field(
        30.0, gt=0, description="Read timeout of each Kubernetes API call the operator's handlers make (the "
        "connect timeout is 5 s); kopf's own watches use their server/client timeouts (600/660 s).",
    )
    max_workers: int = Field(32, ge=1, description="Threads running the (blocking) handlers.")
    kopf_connections: int = Field(
        32, ge=0, description="Connections kopf's own requests (its finalizer and annotation patches) share, "
        "besides one per watch; 0 for no bound, kopf's own default: a thousand Connectors created at once then "
        "opened 829 TLS connections to the API server, a third of a MiB each (issue 33).",
    )
    wait_poll_seconds: float = Field(
        5.0, gt=0, description="How often the operator looks again at what a Connector waits for: a driver pod "
        "still terminating, its cleanup Job, an earlier Connector's objects of the same name."
    )
    cleanup_job_timeout_seconds: int = Field(
        600, ge=1, description="activeDeadlineSeconds of a one-shot cleanup Job."
    )
    spark_driver_cluster_role: str = Field(
        "conveyor-spark-driver",
        description="The role (shipped by the Helm chart) each namespace's RoleBinding conveyor-spark grants "
                    "its drivers: a ClusterRole, or with spark_driver_role_kind Role a Role of that namespace.",
    )
    spark_driver_role_kind: Literal["ClusterRole", "Role"] = Field(
        "ClusterRole",
        description="Kind of spark_driver_cluster_role: the chart's ClusterRole when the operator watches every "
                    "namespace, a Role in each watched namespace otherwise (no ClusterRole at all).",
    )
    pod_run_as_user: int | None = Field(
        None, ge=1,
        description="runAsUser of every driver, executor and cleanup pod; unset: the image's USER (10001), "
                    "or the UID the platform assigns (OpenShift's restricted-v2). Never 0: Pod Security "
                    "Standards 'restricted' forbids root.",
    )
    pod_fs_group: int | None = Field(
        None, ge=0,
        description="fsGroup of every driver, executor and cleanup pod (group owning the volumes mounted into "
                    "them, e.g. a PersistentVolumeClaim an archive sink writes to); unset: none, or the "
                    "platform's.",
    )
    allowed_images: list[str] = Field(
        default_factory=list,
        description="fnmatch patterns (case-sensitive) of the images a Connector may name in spec.spark.image "
                    "(chart value connectors.allowedImages); empty: the runtime image's repository with any tag "
                    "or digest (default_allowed_images).",
    )
    allowed_service_accounts: list[str] = Field(
        default_factory=lambda: ["conveyor-spark"],
        description="fnmatch patterns of the ServiceAccounts a Connector may name in spec.spark.serviceAccount "
                    "(chart value connectors.allowedServiceAccounts); the namespace's conveyor-spark by default.",
    )
    allowed_spark_conf: list[str] = Field(
        default_factory=list,
        description="fnmatch globs of spec.spark.sparkConf keys allowed beyond conveyor.spark_security.ALLOWED "
                    "(chart value connectors.allowedSparkConf), e.g. spark.jars.packages for a platform that lets "
                    "its connectors load code; passed to every driver and cleanup Job as CONVEYOR_ALLOWED_SPARK_CONF. "
                    "The operator's own properties and Spark's RPC security stay refused.",
    )
    key_file: str = Field(
        "", description="File with the key (32 bytes or more) every connector's control credentials are derived "
                        "from (conveyor_operator.reconcile.control_key); the chart mounts its <release>-operator-key Secret. "
                        "Empty: a random key per process, so a restarted operator replaces each control Secret once.",
    )
    field_manager: str = Field("conveyor-operator", description="Server-side apply field manager.")
    allowed_connector_modules: list[str] = Field(
        default_factory=list,
        description="Globs (fnmatch) of modules the operator may import to validate a Connector's config when "
                    "spec.class or spec.config names a class by dotted path; installed connectors (entry points "
                    "of group conveyor.connectors) are always allowed. Others are validated by the driver only.",
    )
    network_policy: bool = Field(
        True, description="Apply each connector's NetworkPolicies (conveyor_operator.reconcile.network_policy); false: "
                          "none, and those applied before are deleted.",
    )
    network_policy_operator_namespace: str = Field(
        "", description="Namespace of the operator's pods, admitted to the drivers' control API; the chart "
                        "passes its release namespace. Empty (or no labels): the control port admits every source.",
    )
    network_policy_operator_labels: list[str] = Field(
        default_factory=list,
        description="Labels (key=value) of the operator's pods, admitted to the drivers' control API; the chart "
                    "passes its operator's selector labels.",
    )
    network_policy_metrics_peers: list[dict[str, Any]] = Field(
        default_factory=list,
        description="NetworkPolicy peers (JSON list, e.g. Prometheus's namespace) also admitted to the drivers' "
                    "control port, to scrape GET /metrics; the chart passes metrics.scrapers. Only meaningful "
                    "with the operator's namespace and labels set (otherwise every source is admitted).",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorSettings:
        """Settings from ``CONVEYOR_OPERATOR_<FIELD>`` variables (comma lists for lists of
        strings, JSON for lists of objects; an empty variable leaves a field whose default is
        None unset).

        Raises:
            pydantic.ValidationError: a variable has a value of the wrong type.
            json.JSONDecodeError: a list of objects that is not JSON.
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name, field in cls.model_fields.items():
            raw = env.get(PREFIX + name.upper())
            if raw is None or (raw == "" and field.default is None):
                continue
            if field.annotation == list[str]:
                values[name] = [item.strip() for item in raw.split(",") if item.strip()]
            elif field.annotation == list[dict[str, Any]]:
                values[name] = json.loads(raw) if raw.strip() else []
            else:
                values[name] = raw
        return cls.model_validate(values)

    def image_patterns(self) -> list[str]:
        """:attr:`allowed_images`, or when empty :func:`default_allowed_images` of the runtime image."""
        return self.allowed_images or default_allowed_images(self.runtime_image)

    def control_url(self, name: str, namespace: str) -> str:
        return self.control_url_template.format(name=name, namespace=namespace, port=self.control_port).rstrip("/")


def image_repository(image: str) -> str:
    """An image reference without its tag and digest: ``reg:5000/team/conveyor:1.2@sha256:ab`` ->
    ``reg:5000/team/conveyor`` (a ``:`` after the last ``/`` starts the tag, as in the OCI
    distribution reference grammar)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def default_allowed_images(runtime_image: str) -> list[str]:
    """The runtime image's repository with any tag or digest, as fnmatch patterns:
    ``["<repo>", "<repo>:*", "<repo>@*"]``."""
    repository = image_repository(runtime_image)
    return [repository, f"{repository}:*", f"{repository}@*"]
