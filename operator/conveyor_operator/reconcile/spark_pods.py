"""The pods that run a connector, as the operator renders them: where the operator mounts what
(paths, ports), their security contexts, memory sizing, the driver's Spark properties and the
executors' pod template (:mod:`.render` puts them into the objects it applies).

Pure functions of the validated :class:`~conveyor.manifest.ConnectorManifest` and the
operator's settings; nothing here talks to the API server.
"""

from __future__ import annotations

import math
import re
from typing import Any

from conveyor import spark_security, spark_volumes
from conveyor.control.auth import SPARK_AUTH_SECRET_FILE, TASK_TOKEN_FILE, TOKEN_FILE_ENV
from conveyor.manifest import ConnectorManifest
from conveyor_operator import names
from conveyor_operator.settings import OperatorSettings

MOUNT_ROOT = "/etc/conveyor"
MANIFEST_KEY = "connector.yaml"
EXECUTOR_TEMPLATE_KEY = "executor-pod.yaml"


MANIFEST_PATH = f"{MOUNT_ROOT}/connector/connector.yaml"


EXECUTOR_TEMPLATE_PATH = f"{MOUNT_ROOT}/templates/executor-pod.yaml"


CONTROL_DIR = f"{MOUNT_ROOT}/control"
"""Where the connector's ``<name>-control`` Secret is mounted (:mod:`conveyor_operator.reconcile.control_secret`);
its ``spark-auth-secret`` there is :data:`conveyor.spark_security.SECRET_FILE`."""


SPARK_DRIVER_PORT = 7078


SPARK_BLOCK_MANAGER_PORT = 7079


WORK_DIR = "/tmp"
"""Working directory and ``HOME`` of every container: the root filesystem is read-only and
``/tmp`` is an ``emptyDir``. Spark writes to the working directory (``spark-warehouse``, and on
executors the files and jars it fetches, ``SparkEnv.sparkFilesDir``)."""


MOUNTED_FILE_MODE = 0o444
"""``defaultMode`` of Secret and ConfigMap volumes: readable by any UID, since pods set no
``fsGroup`` by default and the files are then owned by root (a mode of 0400 would be unreadable)."""


IN_CLUSTER_MASTER = "k8s://https://kubernetes.default.svc:443"


GRACE_MARGIN_SECONDS = 15
"""Added to ``shutdown.gracePeriodSeconds`` for ``terminationGracePeriodSeconds``: the
``preStop`` drain may use the whole grace period, then the process needs time to exit."""


def executor_instances(manifest: ConnectorManifest) -> int:
    """Executor pods to request: ``spec.spark.executor.instances``, raised so that every task
    has a core (each task is a Spark job that never ends, one core each): at least
    ``ceil(tasksMax / executor.cores)``. 0 stays 0 (the tasks run in the driver pod, on
    ``local[tasksMax]``)."""
    executor = manifest.spec.spark.executor
    if executor.instances == 0:
        return 0
    return max(executor.instances, math.ceil(manifest.spec.tasks_max / executor.cores))


def service_account_name(manifest: ConnectorManifest) -> str:
    return manifest.spec.spark.service_account or names.SPARK_SERVICE_ACCOUNT


def driver_host(manifest: ConnectorManifest) -> str:
    return f"{names.driver(manifest.name)}.{manifest.metadata.namespace}.svc"


def _storage(manifest: ConnectorManifest, with_manifest: bool) -> tuple[list[dict], list[dict]]:
    """Volumes and mounts: ``/tmp`` (an ``emptyDir``, the one writable path of the read-only
    root filesystem), and for the pods that read the manifest (``with_manifest``: the driver,
    the cleanup Job) the manifest and every Secret and ConfigMap the spec reads (mode
    :data:`MOUNTED_FILE_MODE`). Executors mount none of those: the driver resolves the config
    and the Kafka credentials and sends them over Spark's encrypted RPC, so the drivers' pod
    admission policy can refuse any Secret but ``<name>-control`` in an executor pod."""
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    if not with_manifest:
        return volumes, mounts
    volumes.append({"name": "connector", "configMap": {
        "name": names.manifest_config_map(manifest.name), "defaultMode": MOUNTED_FILE_MODE,
        "items": [{"key": MANIFEST_KEY, "path": MANIFEST_PATH.rsplit("/", 1)[1]}]}})
    mounts.append({"name": "connector", "mountPath": f"{MOUNT_ROOT}/connector", "readOnly": True})
    for i, secret in enumerate(manifest.spec.secret_names()):
        volumes.append({"name": f"secret-{i}", "secret": {"secretName": secret, "defaultMode": MOUNTED_FILE_MODE}})
        mounts.append({"name": f"secret-{i}", "mountPath": f"{MOUNT_ROOT}/secrets/{secret}", "readOnly": True})
    for i, config_map in enumerate(manifest.spec.config_map_names()):
        volumes.append({"name": f"configmap-{i}", "configMap": {"name": config_map, "defaultMode": MOUNTED_FILE_MODE}})
        mounts.append({"name": f"configmap-{i}", "mountPath": f"{MOUNT_ROOT}/configmaps/{config_map}",
                       "readOnly": True})
    for volume in spark_volumes.volumes(manifest.spec.spark.spark_conf, "driver"):  # Spark mounts the executors'
        volumes.append(volume.volume())
        mounts.append(volume.volume_mount())
    return volumes, mounts


NODE_SELECTOR = "spark.kubernetes.node.selector."
DRIVER_NODE_SELECTOR = "spark.kubernetes.driver.node.selector."


def driver_node_selector(manifest: ConnectorManifest) -> dict[str, str]:
    """The driver pod's (and the cleanup Job's) ``nodeSelector`` from ``sparkConf`` as Spark
    reads it for the pods it makes: ``spark.kubernetes.node.selector.<label>`` for every pod,
    ``spark.kubernetes.driver.node.selector.<label>`` for the driver only, winning on the same
    label (Spark 3.3's rule). Spark puts the executors' on their pods itself."""
    conf = manifest.spec.spark.spark_conf
    chosen = {key[len(NODE_SELECTOR):]: value for key, value in conf.items() if key.startswith(NODE_SELECTOR)}
    chosen.update({key[len(DRIVER_NODE_SELECTOR):]: value for key, value in conf.items()
                   if key.startswith(DRIVER_NODE_SELECTOR)})
    return {label: value for label, value in sorted(chosen.items()) if label}


def pod_security(settings: OperatorSettings) -> dict[str, Any]:
    """The ``securityContext`` of every pod the operator creates, as Pod Security Standards
    "restricted" requires: non-root, the runtime's default seccomp profile. No UID, GID or
    fsGroup unless the settings pin them (``pod_run_as_user``, ``pod_fs_group``): the image's
    numeric ``USER`` satisfies ``runAsNonRoot``, and platforms that assign a UID per namespace
    (OpenShift's ``restricted-v2``) refuse a pod with one outside their range."""
    security: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if settings.pod_run_as_user is not None:
        security["runAsUser"] = settings.pod_run_as_user
    if settings.pod_fs_group is not None:
        security["fsGroup"] = settings.pod_fs_group
    return security


CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True, "runAsNonRoot": True,
}
"""Every container's ``securityContext``: Pod Security Standards "restricted" (no privilege
escalation, every capability dropped, non-root) and a read-only root filesystem (writes go
to the ``/tmp`` ``emptyDir``, Spark's local dirs and the user's volumes)."""


def _downward_env(settings: OperatorSettings) -> list[dict[str, Any]]:
    """The environment of the pods that read the manifest (driver, cleanup Job): the pod's
    identity, where Secrets are mounted, and the platform's extra ``sparkConf`` globs, so that
    they accept what the operator accepted."""
    return [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "CONVEYOR_MOUNT_DIR", "value": MOUNT_ROOT},
        {"name": "HOME", "value": WORK_DIR},
        {"name": spark_security.ALLOWED_ENV, "value": ",".join(settings.allowed_spark_conf)},
    ]


def _control_secret(manifest: ConnectorManifest, keys: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The volume and mount of ``keys`` of the connector's control Secret at :data:`CONTROL_DIR`;
    files mode 0444: readable by the container's user whatever its UID (no ``fsGroup`` needed)."""
    volume = {"name": "control", "secret": {"secretName": names.control_secret(manifest.name),
                                            "defaultMode": MOUNTED_FILE_MODE,
                                            "items": [{"key": key, "path": key} for key in keys]}}
    return volume, {"name": "control", "mountPath": CONTROL_DIR, "readOnly": True}


def _drain_hook(url: str, grace: int) -> dict[str, Any]:
    return {"preStop": {"exec": {"command": ["conveyor", "drain", "--url", url, "--timeout", str(grace)]}}}


_SIZE = re.compile(r"^([0-9]+)([kmgt]?)$", re.IGNORECASE)


#: Memory of one task's Python worker when ``spark.executor.pyspark.memory`` is not set: Spark's
#: minimum memory overhead, which on executor pods is what Python workers live in.
PYTHON_WORKER_MEMORY = "384m"


def _mib(spark_memory: str) -> float:
    """MiB of a size in Spark's format (``512m``, ``2g``; a bare number is bytes).

    Raises:
        ValueError: not such a size.
    """
    match = _SIZE.match(spark_memory)
    if not match:
        raise ValueError(f"not a Spark memory size: {spark_memory!r}")
    number, unit = int(match.group(1)), match.group(2).lower()
    return {"": number / 2**20, "k": number / 1024, "m": number, "g": number * 1024, "t": number * 2**20}[unit]


def container_memory(spark_memory: str) -> str:
    """Container memory for a JVM heap in Spark's format: heap plus Spark's default
    overhead (10%, at least 384 MiB), as ``spark.{driver,executor}.memoryOverhead``."""
    return f"{int(_with_overhead(spark_memory))}Mi"


def _with_overhead(spark_memory: str) -> float:
    mib = _mib(spark_memory)
    return mib + max(384, mib * 0.10)


def driver_memory(manifest: ConnectorManifest) -> str:
    """The driver container's memory (request = limit). With executor pods, the driver's
    heap plus overhead (:func:`container_memory`). Without (``executor.instances: 0``), the
    tasks run in the driver pod on ``local[tasksMax]``, each with a Python worker outside the
    JVM heap, so the container also gets ``tasksMax`` × ``spark.executor.pyspark.memory``
    (from ``sparkConf``; default :data:`PYTHON_WORKER_MEMORY`), as Spark adds that memory
    to an executor pod's. Scaling ``tasksMax`` then resizes the pod (the driver rolls,
    see :func:`spec_hash`); an enabled autoscaler's ``maxTasks`` sizes it instead when that is
    more, so that its scaling never rolls the driver."""
    spark = manifest.spec.spark
    jvm = _with_overhead(spark.driver.memory)
    if spark.executor.instances > 0:
        return f"{int(jvm)}Mi"
    worker = _mib(spark.spark_conf.get("spark.executor.pyspark.memory", PYTHON_WORKER_MEMORY))
    return f"{int(jvm + manifest.spec.most_tasks * worker)}Mi"


def image(manifest: ConnectorManifest, settings: OperatorSettings) -> str:
    return manifest.spec.spark.image or settings.runtime_image


def spark_conf(manifest: ConnectorManifest, settings: OperatorSettings) -> dict[str, str]:
    """Spark properties of the driver (client mode on the in-cluster API), passed as
    ``conveyor run --conf``; with them :data:`conveyor.spark_security.ENFORCED` (authenticated,
    AES-GCM encrypted RPC) and, with executor pods, the secret-file keys (the connector's
    ``<name>-control`` Secret, mounted at :data:`CONTROL_DIR` in the driver and executor pods).
    ``spec.spark.sparkConf`` cannot set any of these (the manifest refuses them); the driver
    applies its other keys itself."""
    spark = manifest.spec.spark
    sa = service_account_name(manifest)
    conf = {
        "spark.submit.deployMode": "client",
        "spark.app.name": f"conveyor-{manifest.name}",
        "spark.driver.host": driver_host(manifest),
        # The pod's own address, as Spark's cluster-mode driver binds: executors are handed
        # the bind address as the driver's (spark.kubernetes.executor.useDriverPodIP), and
        # 0.0.0.0 there is no address to connect to.
        "spark.driver.bindAddress": "$(POD_IP)",
        "spark.driver.port": str(SPARK_DRIVER_PORT),
        "spark.driver.blockManager.port": str(SPARK_BLOCK_MANAGER_PORT),
        "spark.driver.cores": str(spark.driver.cores),
        "spark.driver.memory": spark.driver.memory,
    }
    if spark.executor.instances > 0:
        conf.update({
            "spark.master": IN_CLUSTER_MASTER,
            "spark.kubernetes.namespace": manifest.metadata.namespace,
            "spark.kubernetes.container.image": image(manifest, settings),
            "spark.kubernetes.container.image.pullPolicy": spark.image_pull_policy,
            "spark.kubernetes.driver.pod.name": "$(POD_NAME)",
            "spark.kubernetes.authenticate.driver.serviceAccountName": sa,
            # The pod template names it too (the template wins over Spark's fallback to the
            # driver's account); no API permissions, no token.
            "spark.kubernetes.authenticate.executor.serviceAccountName": names.EXECUTOR_SERVICE_ACCOUNT,
            # Spark's executor ConfigMap (a copy of SPARK_CONF_DIR, which drivers do not have)
            # would need configmaps create/delete; no driver Service to delete at stop either.
            "spark.kubernetes.executor.disableConfigMap": "true",
            "spark.kubernetes.driver.service.deleteOnTermination": "false",
            "spark.kubernetes.executor.podNamePrefix": manifest.name,  # Spark adds "-exec-<id>"
            "spark.kubernetes.executor.podTemplateFile": EXECUTOR_TEMPLATE_PATH,
            "spark.kubernetes.executor.podTemplateContainerName": "executor",
            "spark.kubernetes.executor.deleteOnTermination": "true",
            # The least kept: the driver raises it at start until every task has a core, and
            # asks for more executors when tasksMax grows (conveyor.runtime.driver.executors),
            # so a change of tasksMax never rolls the Deployment.
            "spark.executor.instances": str(spark.executor.instances),
            "spark.executor.cores": str(spark.executor.cores),
            "spark.executor.memory": spark.executor.memory,
        })
    conf.update(spark_security.ENFORCED)
    conf.update(spark_security.secret_file_properties(spark.executor.instances > 0))
    return conf


def executor_pod_template(manifest: ConnectorManifest, settings: OperatorSettings) -> dict[str, Any]:
    grace = manifest.spec.shutdown.grace_period_seconds
    volumes, mounts = _storage(manifest, with_manifest=False)
    control_volume, control_mount = _control_secret(manifest, (TASK_TOKEN_FILE, SPARK_AUTH_SECRET_FILE))
    volumes.append(control_volume)
    mounts.append(control_mount)
    url = f"http://{driver_host(manifest)}:{settings.control_port}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"labels": names.labels(manifest.name, names.EXECUTOR)},
        "spec": {
            "serviceAccountName": names.EXECUTOR_SERVICE_ACCOUNT,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": grace + GRACE_MARGIN_SECONDS,
            "securityContext": pod_security(settings),
            "volumes": volumes,
            "containers": [{
                "name": "executor",
                # Spark appends "executor" to the image's entrypoint; this launcher (in the
                # runtime image) starts Spark's executor backend the way Spark's own image does.
                "command": ["conveyor-spark-executor"],
                "workingDir": WORK_DIR,
                "env": [{"name": "CONVEYOR_MOUNT_DIR", "value": MOUNT_ROOT}, {"name": "HOME", "value": WORK_DIR},
                        {"name": "CONVEYOR_CONTROL_URL", "value": url},
                        {"name": TOKEN_FILE_ENV, "value": f"{CONTROL_DIR}/{TASK_TOKEN_FILE}"},
                        # Spark's SecurityManager reads a secret file only when spark.master is a
                        # k8s:// URL; an executor's first RpcEnv (the driver-properties fetcher)
                        # has no spark.master yet: without it that handshake fails ("A secret key
                        # must be specified"). Passed as Spark passes startup properties.
                        {"name": "SPARK_JAVA_OPT_MASTER", "value": f"-Dspark.master={IN_CLUSTER_MASTER}"}],
                "volumeMounts": mounts,
                "lifecycle": _drain_hook(url, grace),
                "securityContext": CONTAINER_SECURITY,
            }],
        },
    }

