"""A Spark driver's token can create only its own executors (issue 28, item 3), on the real API
server with the chart's ValidatingAdmissionPolicy: as the namespace's ``conveyor-spark`` account,
with a token bound to a driver pod as the kubelet mounts it, the executor pod Spark renders from
the operator's template is admitted, and a pod with another image, ServiceAccount, connector
label, owner, Secret or host namespace is refused, as are pods of other connectors."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from _objects import connector, eventually, unique_name
from kubernetes import client

pytestmark = pytest.mark.integration

RUNTIME_IMAGE = "conveyor:0.1.0"


class AsDriver:
    """Requests to the API server as a Spark driver: ``conveyor-spark`` with a bound token."""

    def __init__(self, kube_api, namespace: str, bound_pod: tuple[str, str] | None) -> None:
        token = kube_api.service_account_token(namespace, "conveyor-spark", bound_pod=bound_pod)
        self._api_client = kube_api.api_client(kube_api.kubeconfig_for_token(token, f"driver-{namespace}"))
        self.core = client.CoreV1Api(self._api_client)
        self.namespace = namespace

    def create_pod(self, pod: dict[str, Any]) -> str | None:
        """``None`` when admitted, else the API server's message."""
        try:
            self.core.create_namespaced_pod(self.namespace, pod)
        except client.ApiException as exc:
            return exc.body or str(exc)
        return None

    def close(self) -> None:
        self._api_client.close()


@pytest.fixture
def driver_setup(kube_api, kube_namespace, chart, operator, api):
    """A Connector applied by the operator (its namespace's conveyor-spark account, its
    <name>-control Secret, its rendered executor template) and a driver pod of it, bound to a
    node without a kubelet, so a token can be bound to it."""
    name = unique_name("exec")
    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        eventually(lambda: api.core.read_namespaced_secret(f"{name}-control", kube_namespace), message="control Secret")
    template = yaml.safe_load(api.core.read_namespaced_config_map(f"{name}-connector", kube_namespace)
                              .data["executor-pod.yaml"])
    driver_pod = api.core.create_namespaced_pod(kube_namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name=f"{name}-driver-5c7b9d-q8w2z",
                                     labels={"conveyor.dev/connector": name, "conveyor.dev/component": "driver"}),
        spec=client.V1PodSpec(node_name="node-a", service_account_name="conveyor-spark",
                              containers=[client.V1Container(name="driver", image=RUNTIME_IMAGE)])))
    wait_for_policy(kube_api, kube_namespace, driver_pod)
    return name, template, (driver_pod.metadata.name, driver_pod.metadata.uid)


def wait_for_policy(kube_api, namespace: str, driver_pod) -> None:
    """The API server takes its policies from an informer: a moment after the chart is installed."""
    probe = AsDriver(kube_api, namespace, (driver_pod.metadata.name, driver_pod.metadata.uid))
    try:
        def refused() -> bool:
            return probe.create_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "policy-probe"},
                                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}) is not None
        eventually(refused, timeout_s=30, message="the drivers' admission policy in force")
    finally:
        probe.close()


def executor_pod(name: str, template: dict[str, Any], driver: tuple[str, str], index: int = 1) -> dict[str, Any]:
    """The executor pod Spark 4's client-mode driver creates from the operator's template
    (BasicExecutorFeatureStep, LocalDirsFeatureStep): its labels, owner reference, image and
    local dir added."""
    pod = copy.deepcopy(template)
    pod["metadata"]["name"] = f"{name}-exec-{index}"
    pod["metadata"]["labels"].update({"spark-app-selector": "spark-1234", "spark-role": "executor",
                                      "spark-exec-id": str(index), "spark-exec-resourceprofile-id": "0"})
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": driver[0], "uid": driver[1],
                                           "controller": True}]
    pod["spec"]["restartPolicy"] = "Never"
    pod["spec"]["hostname"] = f"{name}-exec-{index}"
    pod["spec"]["volumes"].append({"name": "spark-local-dir-1", "emptyDir": {}})
    container = pod["spec"]["containers"][0]
    container["image"] = RUNTIME_IMAGE
    container["args"] = ["executor"]
    container["env"] += [{"name": "SPARK_EXECUTOR_ID", "value": str(index)},
                         {"name": "SPARK_EXECUTOR_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    container["volumeMounts"].append({"name": "spark-local-dir-1", "mountPath": "/var/data/spark-1"})
    return pod


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = pod
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(leaf) if leaf.isdigit() else leaf] = value
    return change


def _other_label(pod: dict[str, Any]) -> None:
    pod["metadata"]["labels"]["conveyor.dev/connector"] = "another-connector"


def _other_secret_volume(pod: dict[str, Any]) -> None:
    pod["spec"]["volumes"].append({"name": "stolen", "secret": {"secretName": "another-connector-control"}})


def _projected_token(pod: dict[str, Any]) -> None:
    pod["spec"]["volumes"].append({"name": "stolen", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}}]}})


def _secret_env(pod: dict[str, Any]) -> None:
    pod["spec"]["containers"][0]["env"].append(
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "orders-db", "key": "password"}}})


REFUSED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    # what is changed in Spark's executor pod -> (the change, a part of the refusal's message)
    "another image": (_set("spec.containers.0.image", "evil/image:1"), "is not allowed (connectors.allowedImages)"),
    "another ServiceAccount": (_set("spec.serviceAccountName", "conveyor-spark"), "runs as conveyor-executor"),
    "a mounted token": (_set("spec.automountServiceAccountToken", True), "runs as conveyor-executor"),
    "another connector's label": (_other_label, "executor pods of its own connector"),
    "another owner": (_set("metadata.ownerReferences", []), "owned by the driver pod"),
    "the host network": (_set("spec.hostNetwork", True), "host's network"),
    "a chosen node": (_set("spec.nodeName", "node-a"), "pick its node"),
    "a privileged container": (_set("spec.containers.0.securityContext.privileged", True), "privileged"),
    "another Secret mounted": (_other_secret_volume, "and the Secret"),
    "a projected token": (_projected_token, "and the Secret"),
    "another Secret in the environment": (_secret_env, "into its environment"),
}


def test_the_executor_pod_spark_renders_is_admitted_and_nothing_else(kube_api, kube_namespace, driver_setup, api):
    name, template, driver = driver_setup
    as_driver = AsDriver(kube_api, kube_namespace, driver)
    try:
        assert as_driver.create_pod(executor_pod(name, template, driver)) is None, "Spark's executor pod refused"
        # and the driver may delete it (its executors end with it)
        as_driver.core.delete_namespaced_pod(f"{name}-exec-1", kube_namespace, grace_period_seconds=0)
        refusals = {}
        for i, (what, (change, expected)) in enumerate(sorted(REFUSED.items()), start=2):
            pod = executor_pod(name, template, driver, index=i)
            change(pod)
            refusals[what] = as_driver.create_pod(pod)
            assert refusals[what] is not None, f"a pod with {what} was admitted"
            assert expected in refusals[what], (what, refusals[what])
    finally:
        as_driver.close()


def test_a_driver_cannot_touch_another_connectors_pods_or_write_configmaps(kube_api, kube_namespace, driver_setup,
                                                                            api):
    name, template, driver = driver_setup
    other = executor_pod("another-connector", template, driver, index=7)
    other["metadata"]["labels"]["conveyor.dev/connector"] = "another-connector"
    other["metadata"]["ownerReferences"] = []
    api.core.create_namespaced_pod(kube_namespace, other)  # as admin
    as_driver = AsDriver(kube_api, kube_namespace, driver)
    try:
        with pytest.raises(client.ApiException) as refused:
            as_driver.core.delete_namespaced_pod(other["metadata"]["name"], kube_namespace)
        assert refused.value.status == 403 and "own connector" in refused.value.body
        with pytest.raises(client.ApiException) as refused:
            as_driver.core.patch_namespaced_pod(other["metadata"]["name"], kube_namespace,
                                                {"metadata": {"labels": {"x": "y"}}})
        assert refused.value.status == 403
        config_map = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="probe"), data={"a": "b"})
        with pytest.raises(client.ApiException) as refused:
            as_driver.core.create_namespaced_config_map(kube_namespace, config_map)
        assert "dry-run" in refused.value.body
        as_driver.core.create_namespaced_config_map(kube_namespace, config_map, dry_run="All")  # the namespace check
    finally:
        as_driver.close()


def test_a_token_not_bound_to_a_driver_pod_can_create_no_pod(kube_api, kube_namespace, driver_setup, api):
    name, template, driver = driver_setup
    unbound = AsDriver(kube_api, kube_namespace, None)
    try:
        refused = unbound.create_pod(executor_pod(name, template, driver, index=9))
        assert refused is not None and "bound token of its driver pod" in refused
    finally:
        unbound.close()
