"""Every pod Conveyor creates is admitted in a namespace enforcing Pod Security Standards
"restricted" (``pod-security.kubernetes.io/enforce: restricted``), by a real kube-apiserver's
PodSecurity admission: the operator's driver Deployment, executor pod template (as Spark
completes it) and cleanup Job, and the chart's operator Deployment.

Pods are created with ``dryRun=All`` (admission runs, nothing is stored; the harness has no
kubelet). A pod that breaks the standard is refused there, so the namespace is known to enforce
it; the workloads themselves (Deployment, Job) draw no ``would violate PodSecurity`` warning
(``warn: restricted`` checks pod templates).
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conveyor_operator.reconcile import render
from conveyor_operator.settings import OperatorSettings
from kubernetes import client
from kubernetes.client.rest import ApiException

from conveyor.manifest import ConnectorManifest
from conveyor.testing.node import POD_SECURITY_RESTRICTED
from conveyor.testing.pytest_kube import namespace_name

pytestmark = pytest.mark.integration

CHART = Path(__file__).resolve().parents[2] / "charts" / "conveyor"
SETTINGS = {
    "default": OperatorSettings(),
    "pinned-uid": OperatorSettings(pod_run_as_user=1000650000, pod_fs_group=1000650000),  # as OpenShift assigns
}


@pytest.fixture
def restricted_namespace(kube_api, request) -> Iterator[str]:
    """A namespace labelled to enforce (and warn of) Pod Security "restricted"."""
    name = namespace_name(request, "pss")
    kube_api.create_namespace(name, labels=POD_SECURITY_RESTRICTED)
    yield name
    kube_api.delete_namespace(name)


def _manifest(namespace: str) -> ConnectorManifest:
    """A connector reading a Secret and a ConfigMap, with a claim and an emptyDir from sparkConf:
    every kind of volume the operator renders."""
    conf = {}
    for role in ("driver", "executor"):
        conf |= {f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.archive.mount.path": "/archive",
                 f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.archive.options.claimName": "archive",
                 f"spark.kubernetes.{role}.volumes.emptyDir.cache.mount.path": "/cache"}
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
        "metadata": {"name": "orders", "namespace": namespace},
        "spec": {"class": "postgres-sink", "tasksMax": 2, "kafka": {"bootstrapServers": "kafka:9092"},
                 "config": {"topics": "orders", "connection.url": "${secret:pg:url}", "x": "${configmap:c:k}"},
                 "configFrom": [{"secretRef": {"name": "pg"}}, {"configMapRef": {"name": "c"}}],
                 "spark": {"sparkConf": conf}}})


def _pod(namespace: str, name: str, template: dict[str, Any]) -> dict[str, Any]:
    """A Pod of a pod template (``metadata`` + ``spec``)."""
    meta = copy.deepcopy(template.get("metadata") or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta, "name": name, "namespace": namespace},
            "spec": copy.deepcopy(template["spec"])}


def _as_spark_makes_it(executor: dict[str, Any], image: str) -> dict[str, Any]:
    """The executor pod template as Spark completes it (Spark 4's BasicExecutorFeatureStep and
    LocalDirsFeatureStep): the image, its env and ports, the ``spark-local-dir-1`` emptyDir for
    ``SPARK_LOCAL_DIRS``, the executors' conf ConfigMap, the user's volume properties."""
    pod = copy.deepcopy(executor)
    spec = pod["spec"]
    (container,) = spec["containers"]
    container["image"] = image
    container["args"] = ["executor"]
    container["env"] = [*container.get("env", []), {"name": "SPARK_LOCAL_DIRS", "value": "/var/data/spark-1"},
                        {"name": "SPARK_EXECUTOR_ID", "value": "1"}]
    container["ports"] = [{"name": "blockmanager", "containerPort": 7079}]
    container["resources"] = {"requests": {"cpu": "1", "memory": "1408Mi"}, "limits": {"memory": "1408Mi"}}
    spec["volumes"] = [*spec["volumes"], {"name": "spark-local-dir-1", "emptyDir": {}},
                       {"name": "spark-conf-volume-exec", "configMap": {"name": "spark-exec-conf-map"}},
                       {"name": "archive", "persistentVolumeClaim": {"claimName": "archive"}},
                       {"name": "cache", "emptyDir": {}}]
    container["volumeMounts"] = [*container["volumeMounts"],
                                 {"name": "spark-local-dir-1", "mountPath": "/var/data/spark-1"},
                                 {"name": "spark-conf-volume-exec", "mountPath": "/opt/spark/conf"},
                                 {"name": "archive", "mountPath": "/archive"}, {"name": "cache", "mountPath": "/cache"}]
    spec["restartPolicy"] = "Never"
    return pod


def _conveyor_pods(namespace: str, settings: OperatorSettings) -> dict[str, dict[str, Any]]:
    m = _manifest(namespace)
    driver = render.driver_deployment(m, "uid", settings)["spec"]["template"]
    executor = _as_spark_makes_it(render.executor_pod_template(m, settings), render.image(m, settings))
    cleanup = render.cleanup_job(m, "uid", settings, attempt=1)["spec"]["template"]
    return {"driver": _pod(namespace, "orders-driver-x", driver),
            "executor": _pod(namespace, "orders-exec-1", executor),
            "cleanup": _pod(namespace, "orders-cleanup-x", cleanup)}


def _admit(kube_api, pod: dict[str, Any]) -> str | None:
    """``POST pods?dryRun=All``: None when admitted, else the API server's message."""
    with kube_api.api_client() as api:
        try:
            client.CoreV1Api(api).create_namespaced_pod(pod["metadata"]["namespace"], pod, dry_run="All")
        except ApiException as e:
            return json.loads(e.body).get("message", e.body) if e.body else str(e)
    return None


def _server_dry_run_warnings(kube_api, obj: dict[str, Any]) -> str:
    """``kubectl create --dry-run=server`` of ``obj``: its stderr (warnings), after a success."""
    result = kube_api.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj))
    return result.stderr


@pytest.mark.parametrize("settings", SETTINGS.values(), ids=SETTINGS.keys())
def test_the_operators_pods_are_admitted_under_restricted(kube_api, restricted_namespace, settings):
    for role, pod in _conveyor_pods(restricted_namespace, settings).items():
        refused = _admit(kube_api, pod)
        assert refused is None, f"the {role} pod was refused: {refused}"
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, role  # the issue's, beyond PSS


def test_the_namespace_enforces_restricted(kube_api, restricted_namespace):
    """The same pods, each one requirement short, are refused: the namespace really enforces."""
    pod = _conveyor_pods(restricted_namespace, OperatorSettings())["driver"]
    breaks = {
        "seccompProfile": lambda p: p["spec"]["securityContext"].pop("seccompProfile"),
        "allowPrivilegeEscalation": lambda p: p["spec"]["containers"][0]["securityContext"].pop(
            "allowPrivilegeEscalation"),
        "capabilities": lambda p: p["spec"]["containers"][0]["securityContext"].pop("capabilities"),
        "runAsNonRoot": lambda p: [p["spec"]["securityContext"].pop("runAsNonRoot"),
                                   p["spec"]["containers"][0]["securityContext"].pop("runAsNonRoot")],
        "hostPath": lambda p: p["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/srv"}}),
    }
    for broken, damage in breaks.items():
        bad = copy.deepcopy(pod)
        damage(bad)
        message = _admit(kube_api, bad)
        assert message and "violates PodSecurity" in message and '"restricted' in message, (broken, message)


def test_the_operators_workloads_draw_no_pod_security_warning(kube_api, restricted_namespace):
    m = _manifest(restricted_namespace)
    settings = OperatorSettings()
    for obj in (render.driver_deployment(m, "uid", settings), render.cleanup_job(m, "uid", settings, attempt=1)):
        obj = copy.deepcopy(obj)
        obj["metadata"].pop("ownerReferences")  # the Connector does not exist here
        warnings = _server_dry_run_warnings(kube_api, obj)
        assert "PodSecurity" not in warnings, (obj["kind"], warnings)
    bad = copy.deepcopy(render.driver_deployment(m, "uid", settings))
    bad["metadata"].pop("ownerReferences")
    bad["spec"]["template"]["spec"]["securityContext"].pop("seccompProfile")
    assert "would violate PodSecurity" in _server_dry_run_warnings(kube_api, bad)  # warn mode is on


def _helm_template(kube_api, namespace: str) -> list[dict[str, Any]]:
    result = subprocess.run([str(kube_api.binaries.helm), "template", "rel", str(CHART), "--namespace", namespace],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def test_the_charts_operator_pod_is_admitted_under_restricted(kube_api, restricted_namespace):
    (deployment,) = [d for d in _helm_template(kube_api, restricted_namespace) if d["kind"] == "Deployment"]
    pod = _pod(restricted_namespace, "operator-x", deployment["spec"]["template"])
    refused = _admit(kube_api, pod)
    assert refused is None, refused
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert "PodSecurity" not in _server_dry_run_warnings(kube_api, deployment)
