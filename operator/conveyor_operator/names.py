"""Names and labels of the objects the operator creates for a Connector."""

from __future__ import annotations

LABEL_CONNECTOR = "conveyor.dev/connector"
LABEL_COMPONENT = "conveyor.dev/component"
ANNOTATION_RESTART = "conveyor.dev/restart"
ANNOTATION_RESTART_TASK = "conveyor.dev/restart-task"
ANNOTATION_RESTART_STRIMZI = "strimzi.io/restart"
ANNOTATION_RESTART_TASK_STRIMZI = "strimzi.io/restart-task"
ANNOTATION_OFFSETS = "conveyor.dev/connector-offsets"
ANNOTATION_OFFSETS_STRIMZI = "strimzi.io/connector-offsets"
ANNOTATION_SKIP_CLEANUP = "conveyor.dev/skip-cleanup"
ANNOTATION_SPEC_HASH = "conveyor.dev/spec-hash"
ANNOTATION_CONFIG_HASH = "conveyor.dev/config-hash"
ANNOTATION_GENERATION = "conveyor.dev/generation"
FINALIZER = "conveyor.dev/finalizer"

DRIVER = "driver"
EXECUTOR = "executor"
CLEANUP = "cleanup"
OFFSETS = "offsets"
"""Component label of a ConfigMap the operator created for ``spec.listOffsets.toConfigMap``."""
CONTROL = "control"
ANNOTATION_CONTROL_SECRET_VERSION = "conveyor.dev/control-secret-version"
"""On the control Secret and the driver pod template: :meth:`conveyor_operator.reconcile.control_key.OperatorKey.version`."""
ANNOTATION_ROTATE_CONTROL_SECRET = "conveyor.dev/rotate-control-secret"
"""On a Connector: any new value gives its control Secret new values (:mod:`conveyor_operator.reconcile.control_secret`)."""


def driver(name: str) -> str:
    """Deployment and headless Service of the driver."""
    return f"{name}-driver"


def disruption_budget(name: str) -> str:
    """PodDisruptionBudget over the driver and executor pods."""
    return f"{name}-pods"


def manifest_config_map(name: str) -> str:
    return f"{name}-connector"


SPARK_SERVICE_ACCOUNT = "conveyor-spark"
"""ServiceAccount and RoleBinding, one per namespace and shared by its connectors' drivers,
that let a driver manage its executor pods."""

EXECUTOR_SERVICE_ACCOUNT = "conveyor-executor"
"""ServiceAccount of executor pods and cleanup Jobs, one per namespace: bound to nothing, its
token never mounted (``automountServiceAccountToken: false``)."""


def control_secret(name: str) -> str:
    """Secret with the connector's control API tokens and Spark auth secret
    (:mod:`conveyor_operator.reconcile.control_secret`)."""
    return f"{name}-control"


def cleanup_job(name: str) -> str:
    return f"{name}-cleanup"


def shared_labels() -> dict[str, str]:
    """Labels of every object the operator makes; alone on those a namespace's connectors share."""
    return {"app.kubernetes.io/name": "conveyor", "app.kubernetes.io/managed-by": "conveyor-operator"}


def labels(name: str, component: str | None = None) -> dict[str, str]:
    """Labels of one connector's objects."""
    out = {**shared_labels(), "app.kubernetes.io/instance": name, LABEL_CONNECTOR: name}
    if component:
        out[LABEL_COMPONENT] = component
    return out


def selector(name: str, component: str) -> dict[str, str]:
    return {LABEL_CONNECTOR: name, LABEL_COMPONENT: component}


def pods_selector(name: str) -> str:
    """Label selector, in its string form, of a connector's driver and executor pods (a cleanup
    Job's pod is not one): the Connector's ``status.selector``, which its scale subresource gives
    to a HorizontalPodAutoscaler or KEDA (``labelSelectorPath``)."""
    return f"{LABEL_CONNECTOR}={name},{LABEL_COMPONENT} in ({DRIVER},{EXECUTOR})"
