"""Operator settings, read once from the environment (``CONVEYOR_OPERATOR_*``), which the
Helm chart sets from ``values.yaml``."""

from __future__ import annotations

import os
from collections.abc import Mapping

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
    status_interval_seconds: float = Field(10.0, gt=0, description="How often status is read from the driver.")
    request_timeout_seconds: float = Field(5.0, gt=0, description="Timeout of a control API call that does not block.")
    max_workers: int = Field(32, ge=1, description="Threads running the (blocking) handlers.")
    cleanup_job_timeout_seconds: int = Field(
        600, ge=1, description="activeDeadlineSeconds of a one-shot cleanup Job."
    )
    spark_driver_cluster_role: str = Field(
        "conveyor-spark-driver",
        description="ClusterRole (shipped by the Helm chart) each connector's RoleBinding grants its driver.",
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
    field_manager: str = Field("conveyor-operator", description="Server-side apply field manager.")
    allowed_connector_modules: list[str] = Field(
        default_factory=list,
        description="Globs (fnmatch) of modules the operator may import to validate a Connector's config when "
                    "spec.class or spec.config names a class by dotted path; installed connectors (entry points "
                    "of group conveyor.connectors) are always allowed. Others are validated by the driver only.",
    )
    network_policy: bool = Field(
        True, description="Apply each connector's NetworkPolicies (conveyor_operator.network_policy); false: "
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

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorSettings:
        """Settings from ``CONVEYOR_OPERATOR_<FIELD>`` variables (comma lists for lists; an
        empty variable leaves a field whose default is None unset).

        Raises:
            pydantic.ValidationError: a variable has a value of the wrong type.
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name, field in cls.model_fields.items():
            raw = env.get(PREFIX + name.upper())
            if raw is None or (raw == "" and field.default is None):
                continue
            if field.annotation == list[str]:
                values[name] = [item.strip() for item in raw.split(",") if item.strip()]
            else:
                values[name] = raw
        return cls.model_validate(values)

    def control_url(self, name: str, namespace: str) -> str:
        return self.control_url_template.format(name=name, namespace=namespace, port=self.control_port).rstrip("/")
