"""Pure rendering of a Connector into the Kubernetes objects that run it.

Every function takes the validated :class:`~conveyor.manifest.ConnectorManifest` and
returns plain dicts ready for server-side apply; nothing here talks to the API server.

Objects of one connector (owned by the Connector, labelled ``conveyor.dev/connector=<name>``):

=====================================  ===============================================
``ConfigMap <name>-connector``         the manifest ``conveyor run`` reads
                                       (``connector.yaml``) and the executor pod
                                       template (``executor-pod.yaml``, ``preStop``
                                       drain hook)
``Service <name>-driver``              headless: Spark's driver ports and the control API
``Deployment <name>-driver``           one replica, ``Recreate``: ``conveyor run``
``Job <name>-cleanup``                 only on deletion without a running driver
=====================================  ===============================================

and, shared by every connector of a namespace (:func:`namespace_objects`, not owned: they
stay when the namespace's last Connector goes, and hold nothing but the binding):

=====================================  ===============================================
``ServiceAccount/RoleBinding``         ``conveyor-spark``: binds the chart's Spark driver
                                       role (executor pods, client mode)
``ServiceAccount``                     ``conveyor-executor``: executors and cleanup Jobs;
                                       no permissions, no token
=====================================  ===============================================
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

from conveyor.control.auth import (
    ADMIN_TOKEN_FILE,
    SPARK_AUTH_SECRET_FILE,
    TASK_TOKEN_FILE,
    TOKEN_DIR_ENV,
    TOKEN_FILE_ENV,
)
from conveyor.manifest import API_VERSION, KIND, ConnectorManifest
from conveyor_operator import names
from conveyor_operator.ownership import owner_reference
from conveyor_operator.reconcile.network_policy import network_policies
from conveyor_operator.reconcile.spark_pods import (
    CONTAINER_SECURITY,
    CONTROL_DIR,
    EXECUTOR_TEMPLATE_KEY,
    EXECUTOR_TEMPLATE_PATH,
    GRACE_MARGIN_SECONDS,
    MANIFEST_KEY,
    MANIFEST_PATH,
    MOUNT_ROOT,
    MOUNTED_FILE_MODE,
    SPARK_BLOCK_MANAGER_PORT,
    SPARK_DRIVER_PORT,
    WORK_DIR,
    _control_secret,
    _downward_env,
    _drain_hook,
    _storage,
    driver_host,
    driver_node_selector,
    driver_memory,
    executor_instances,
    executor_pod_template,
    image,
    pod_security,
    service_account_name,
    spark_conf,
)
from conveyor_operator.settings import OperatorSettings

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def yaml_document(doc: Any) -> str:
    """``doc`` as the YAML of the objects the operator writes (block style, keys in order)."""
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False)


SPARK_ROLE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["create", "get", "list", "watch", "delete", "deletecollection", "patch"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"],
     "verbs": ["create", "get", "list", "delete", "deletecollection"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
]
"""What a driver does with the API in its own namespace, and nothing more (Spark 4.3's
``KubernetesClusterSchedulerBackend``, ``ExecutorPodsAllocator``, ``ExecutorPodsLifecycleManager``
and the watch and polling snapshot sources, in client mode):

* pods: its own pod (``get``), executor pods (create, watch, list, delete one or by label, which
  fabric8 sends as one ``deletecollection``; ``patch`` for the decommission label and the
  deletion-cost annotation);
* persistentvolumeclaims: ``OnDemand`` executor claims (:mod:`conveyor.spark_volumes`), listed
  for reuse, created, deleted by label at stop;
* configmaps: ``create`` only, for the dry-run probe of :mod:`conveyor.runtime.deletion.namespace`
  (Spark's own executor ConfigMap is off, ``spark.kubernetes.executor.disableConfigMap``).

No services (the driver Service is the operator's; ``spark.kubernetes.driver.service.
deleteOnTermination`` is off), no secrets, no ``pods/exec`` or ``pods/log``. The Helm chart ships
them as the Spark driver role (``settings.spark_driver_cluster_role``) that each namespace's
RoleBinding grants to :data:`~conveyor_operator.names.SPARK_SERVICE_ACCOUNT`; the operator may
only ``bind`` it."""


def _metadata(manifest: ConnectorManifest, name: str, uid: str, component: str | None = None,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": manifest.metadata.namespace,
        "labels": names.labels(manifest.name, component),
        "ownerReferences": [owner_reference(manifest.name, uid)],
    }
    if annotations:
        meta["annotations"] = annotations
    return meta


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def spec_dict(manifest: ConnectorManifest) -> dict[str, Any]:
    return manifest.spec.model_dump(by_alias=True, mode="json", exclude_none=True)


def spec_hash(manifest: ConnectorManifest) -> str:
    """Hash of what a running driver cannot change in place (class, Kafka, Spark, secrets,
    shutdown, and without executor pods the task slots of the driver's own): a change rolls
    the Deployment. With executor pods a change of ``tasksMax`` is live: the driver asks Spark
    for the executors it needs (:mod:`conveyor.runtime.driver.executors`)."""
    spec = spec_dict(manifest)
    for live in ("config", "tasksMax", "state", "deletionPolicy", "autoRestart", "listOffsets", "alterOffsets",
                 "autoscaler", "initialOffsets"):
        spec.pop(live, None)
    if manifest.spec.spark.executor.instances == 0:  # local[N] in the driver pod, sized per task
        spec["localTaskSlots"] = manifest.spec.most_tasks
    return _digest(spec)


def config_hash(manifest: ConnectorManifest) -> str:
    """Hash of what the driver takes live through ``PUT /config`` (config, tasksMax)."""
    return _digest({"config": manifest.spec.config, "tasksMax": manifest.spec.tasks_max})


def manifest_document(manifest: ConnectorManifest) -> str:
    """The manifest the driver runs: the Connector's spec as given (``${secret:...}``
    references stay references; values are read from the mounted Secrets in the pod)."""
    doc = {"apiVersion": API_VERSION, "kind": KIND,
           "metadata": {"name": manifest.name, "namespace": manifest.metadata.namespace},
           "spec": spec_dict(manifest)}
    return yaml_document(doc)




def connector_config_map(manifest: ConnectorManifest, uid: str, generation: int,
                         settings: OperatorSettings) -> dict[str, Any]:
    """The manifest the driver runs and the executor pod template, in one ConfigMap (one
    API request per reconcile instead of two)."""
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": _metadata(manifest, names.manifest_config_map(manifest.name), uid,
                              annotations={names.ANNOTATION_GENERATION: str(generation)}),
        "data": {MANIFEST_KEY: manifest_document(manifest),
                 EXECUTOR_TEMPLATE_KEY: yaml_document(executor_pod_template(manifest, settings))},
    }


def namespace_objects(manifest: ConnectorManifest, settings: OperatorSettings) -> list[dict[str, Any]]:
    """The namespace's shared ServiceAccounts, as ``[ServiceAccount conveyor-executor,
    ServiceAccount conveyor-spark, RoleBinding conveyor-spark]``; not owned by any Connector (the
    garbage collector would delete them with the first one to go).

    * ``conveyor-executor`` (:data:`~conveyor_operator.names.EXECUTOR_SERVICE_ACCOUNT`): executors
      and cleanup Jobs, no binding and ``automountServiceAccountToken: false`` (issue 13: no API
      permissions, no token); always, as those pods use it whatever the driver's account.
    * ``conveyor-spark`` and its RoleBinding to the chart's Spark driver role
      (:data:`SPARK_ROLE_RULES`): the drivers; not when the spec names its own ServiceAccount
      (its permissions are then the user's business)."""
    namespace = manifest.metadata.namespace
    executor = {"name": names.EXECUTOR_SERVICE_ACCOUNT, "namespace": namespace, "labels": names.shared_labels()}
    out: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": executor,
                                  "automountServiceAccountToken": False}]
    if service_account_name(manifest) != names.SPARK_SERVICE_ACCOUNT:
        return out
    meta = {"name": names.SPARK_SERVICE_ACCOUNT, "namespace": namespace, "labels": names.shared_labels()}
    return out + [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": settings.spark_driver_role_kind,
                     "name": settings.spark_driver_cluster_role},
         "subjects": [{"kind": "ServiceAccount", "name": names.SPARK_SERVICE_ACCOUNT, "namespace": namespace}]},
    ]


def driver_service(manifest: ConnectorManifest, uid: str, settings: OperatorSettings) -> dict[str, Any]:
    """Headless Service: executors reach the driver (Spark's client mode needs a stable
    host name) and the operator reaches its control API."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _metadata(manifest, names.driver(manifest.name), uid, names.DRIVER),
        "spec": {
            "clusterIP": "None",
            "selector": names.selector(manifest.name, names.DRIVER),
            "publishNotReadyAddresses": True,
            "ports": [
                {"name": "control", "port": settings.control_port, "targetPort": settings.control_port},
                {"name": "spark-driver", "port": SPARK_DRIVER_PORT, "targetPort": SPARK_DRIVER_PORT},
                {"name": "block-manager", "port": SPARK_BLOCK_MANAGER_PORT, "targetPort": SPARK_BLOCK_MANAGER_PORT},
            ],
        },
    }


def driver_deployment(manifest: ConnectorManifest, uid: str, settings: OperatorSettings,
                      rolled_config_hash: str | None = None, control_secret_version: str = "") -> dict[str, Any]:
    """The driver: ``conveyor run`` in client mode. ``rolled_config_hash`` goes into the
    pod template only when a config change could not be applied live, so that the
    Deployment rolls and the new driver reads the new manifest; ``control_secret_version`` (the
    ``<name>-control`` Secret's, :mod:`conveyor_operator.reconcile.control_secret`) so that new tokens roll it too."""
    spark = manifest.spec.spark
    grace = manifest.spec.shutdown.grace_period_seconds
    volumes, mounts = _storage(manifest, with_manifest=True)
    volumes.append({"name": "executor-template", "configMap": {
        "name": names.manifest_config_map(manifest.name), "defaultMode": MOUNTED_FILE_MODE,
        "items": [{"key": EXECUTOR_TEMPLATE_KEY, "path": EXECUTOR_TEMPLATE_PATH.rsplit("/", 1)[1]}]}})
    mounts.append({"name": "executor-template", "mountPath": f"{MOUNT_ROOT}/templates", "readOnly": True})
    control_volume, control_mount = _control_secret(manifest, (ADMIN_TOKEN_FILE, TASK_TOKEN_FILE, SPARK_AUTH_SECRET_FILE))
    volumes.append(control_volume)
    mounts.append(control_mount)
    args = ["run", MANIFEST_PATH, "--control-host", "0.0.0.0", "--control-port", str(settings.control_port),
            "--advertised-host", driver_host(manifest), "--no-progress", "--stay-after-stop"]
    for key, value in spark_conf(manifest, settings).items():
        args += ["--conf", f"{key}={value}"]
    annotations = {names.ANNOTATION_SPEC_HASH: spec_hash(manifest)}
    if rolled_config_hash:
        annotations[names.ANNOTATION_CONFIG_HASH] = rolled_config_hash
    if control_secret_version:
        annotations[names.ANNOTATION_CONTROL_SECRET_VERSION] = control_secret_version
    memory = driver_memory(manifest)
    local = f"http://127.0.0.1:{settings.control_port}"
    # /healthz is answered on the driver's event loop, but a driver busy with its tasks may be
    # slow to get the GIL: 5 s rather than Kubernetes' default of 1 before a probe fails.
    probe = {"httpGet": {"path": "/healthz", "port": "control"}, "periodSeconds": 10, "timeoutSeconds": 5}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _metadata(manifest, names.driver(manifest.name), uid, names.DRIVER),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": names.selector(manifest.name, names.DRIVER)},
            "template": {
                "metadata": {"labels": names.labels(manifest.name, names.DRIVER), "annotations": annotations},
                "spec": {
                    "serviceAccountName": service_account_name(manifest),
                    "terminationGracePeriodSeconds": grace + GRACE_MARGIN_SECONDS,
                    "securityContext": pod_security(settings),
                    **_node_selector(manifest),
                    "volumes": volumes,
                    "containers": [{
                        "name": "driver",
                        "image": image(manifest, settings),
                        "imagePullPolicy": spark.image_pull_policy,
                        "command": ["conveyor"],
                        "args": args,
                        "workingDir": WORK_DIR,
                        "env": _downward_env(settings) + [
                            {"name": "CONVEYOR_CONTROL_URL", "value": local},
                            {"name": TOKEN_DIR_ENV, "value": CONTROL_DIR},
                            {"name": TOKEN_FILE_ENV, "value": f"{CONTROL_DIR}/{ADMIN_TOKEN_FILE}"}],
                        "ports": [
                            {"name": "control", "containerPort": settings.control_port},
                            {"name": "spark-driver", "containerPort": SPARK_DRIVER_PORT},
                            {"name": "block-manager", "containerPort": SPARK_BLOCK_MANAGER_PORT},
                        ],
                        "resources": driver_resources(manifest, memory),
                        "volumeMounts": mounts,
                        "lifecycle": _drain_hook(local, grace),
                        "readinessProbe": probe,
                        "livenessProbe": {**probe, "initialDelaySeconds": 60, "failureThreshold": 6},
                        "securityContext": CONTAINER_SECURITY,
                    }],
                },
            },
        },
    }


def disruption_budget(manifest: ConnectorManifest, uid: str) -> dict[str, Any]:
    """A PodDisruptionBudget letting voluntary disruptions (``kubectl drain``, the Eviction
    API) take one of the connector's pods at a time: the driver or one executor, never the
    driver with executors or two executors at once. Each eviction then runs the pod's
    ``preStop`` drain, whose closing commits finish before the next pod may go.

    Spark's executor pods have no controller with a scale subresource, so the budget is an
    integer ``minAvailable`` (pods - 1), as the API requires for such pods. Pods that are
    not Ready (crash-looping, Pending) may always be evicted
    (``unhealthyPodEvictionPolicy: AlwaysAllow``), so a broken connector never blocks a
    node drain. Without executor pods (``executor.instances: 0``) it allows the driver's
    eviction (``minAvailable: 0``): the drain hook still runs."""
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": _metadata(manifest, names.disruption_budget(manifest.name), uid),
        "spec": {
            "minAvailable": executor_instances(manifest),
            "selector": {
                "matchLabels": {names.LABEL_CONNECTOR: manifest.name},
                "matchExpressions": [{"key": names.LABEL_COMPONENT, "operator": "In",
                                      "values": [names.DRIVER, names.EXECUTOR]}],
            },
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def driver_resources(manifest: ConnectorManifest, memory: str) -> dict[str, Any]:
    """The driver container's resources, as Spark renders a driver pod's: a CPU request of
    ``spark.kubernetes.driver.request.cores`` (from ``sparkConf``, e.g. ``500m``; default
    ``driver.cores``), a CPU limit only if ``spark.kubernetes.driver.limit.cores`` is set, and
    ``memory`` as request and limit."""
    conf = manifest.spec.spark.spark_conf
    resources: dict[str, Any] = {
        "requests": {"cpu": conf.get("spark.kubernetes.driver.request.cores", str(manifest.spec.spark.driver.cores)),
                     "memory": memory},
        "limits": {"memory": memory},
    }
    if "spark.kubernetes.driver.limit.cores" in conf:
        resources["limits"]["cpu"] = conf["spark.kubernetes.driver.limit.cores"]
    return resources


def _node_selector(manifest: ConnectorManifest) -> dict[str, Any]:
    selector = driver_node_selector(manifest)
    return {"nodeSelector": selector} if selector else {}


def cleanup_job(manifest: ConnectorManifest, uid: str, settings: OperatorSettings, attempt: int) -> dict[str, Any]:
    """One-shot ``conveyor cleanup`` for a deleted connector whose driver is not running, as
    ``conveyor-executor`` without a token (it talks to Kafka and the connector's systems only).
    Retries are the operator's (it deletes a failed Job and backs off), so
    ``backoffLimit`` is 0."""
    volumes, mounts = _storage(manifest, with_manifest=True)
    args = ["cleanup", MANIFEST_PATH, "--timeout", str(max(30, settings.cleanup_job_timeout_seconds - 30))]
    if manifest.spec.deletion_policy.offsets.value == "delete":
        args.append("--delete-offsets")
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": _metadata(manifest, names.cleanup_job(manifest.name), uid, names.CLEANUP,
                              annotations={"conveyor.dev/attempt": str(attempt)}),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings.cleanup_job_timeout_seconds,
            "template": {
                "metadata": {"labels": names.labels(manifest.name, names.CLEANUP)},
                "spec": {
                    "restartPolicy": "Never",
                    # conveyor cleanup calls neither the control API nor the Kubernetes API
                    "serviceAccountName": names.EXECUTOR_SERVICE_ACCOUNT,
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security(settings),
                    **_node_selector(manifest),
                    "volumes": volumes,
                    "containers": [{
                        "name": "cleanup",
                        "image": image(manifest, settings),
                        "imagePullPolicy": manifest.spec.spark.image_pull_policy,
                        "command": ["conveyor"],
                        "args": args,
                        "workingDir": WORK_DIR,
                        "env": _downward_env(settings),
                        "volumeMounts": mounts,
                        "securityContext": CONTAINER_SECURITY,
                    }],
                },
            },
        },
    }


def objects(manifest: ConnectorManifest, uid: str, generation: int, settings: OperatorSettings,
            rolled_config_hash: str | None = None, control_secret_version: str = "") -> list[dict[str, Any]]:
    """The connector's own objects, in apply order: the ConfigMap first (applied before the
    control Secret is created, :mod:`conveyor_operator.reconcile.succession`), the NetworkPolicies
    before the pods they guard, the Deployment last; the namespace's shared ones are
    :func:`namespace_objects`, the control Secret is created apart
    (:mod:`conveyor_operator.reconcile.control_secret`: it is never applied)."""

    return [
        connector_config_map(manifest, uid, generation, settings),
        driver_service(manifest, uid, settings),
        disruption_budget(manifest, uid),
        *network_policies(manifest, uid, settings),
        driver_deployment(manifest, uid, settings, rolled_config_hash, control_secret_version),
    ]
