"""The operator's token can make only what the operator makes for Connectors (issue 28, item 4),
on the real API server with the chart's ValidatingAdmissionPolicies: as the chart's
ServiceAccount, a Deployment or Job under another ServiceAccount or image, an object without the
operator's label, another RoleBinding, ServiceAccount or Secret are refused; what the operator
renders is admitted. Every request is a dry run: admission runs, nothing is stored."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from _objects import eventually
from conveyor_operator.reconcile import render
from conveyor_operator.settings import OperatorSettings
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from conveyor.manifest import ConnectorManifest

pytestmark = pytest.mark.integration

LABELS = {"app.kubernetes.io/name": "conveyor", "app.kubernetes.io/managed-by": "conveyor-operator"}


@pytest.fixture
def as_operator(kube_api, chart):
    token = kube_api.service_account_token(chart["namespace"], chart["service_account"])
    with kube_api.api_client(kube_api.kubeconfig_for_token(token, "operator-admission")) as api_client:
        yield api_client


def _manifest(namespace: str) -> ConnectorManifest:
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "orders", "namespace": namespace},
        "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"}, "config": {"topics": "t"}}})


def _create(api_client, obj: dict[str, Any]) -> str | None:
    """``None`` when admitted (dry run), else the API server's message."""
    resources = DynamicClient(api_client).resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    try:
        resources.create(body=obj, namespace=obj["metadata"]["namespace"], dry_run="All")
    except ApiException as exc:
        return exc.body or str(exc)
    return None


def test_the_operators_token_makes_only_what_the_operator_renders(kube_api, kube_namespace, chart, as_operator,
                                                                  api):
    settings = OperatorSettings(runtime_image="conveyor:0.1.0")
    manifest = _manifest(kube_namespace)
    deployment = render.driver_deployment(manifest, "uid-1", settings)
    job = render.cleanup_job(manifest, "uid-1", settings, attempt=1)

    def refused_when_admitted() -> bool:  # the API server takes policies from an informer
        probe = {**deployment, "metadata": {**deployment["metadata"], "labels": {}}}
        return _create(as_operator, probe) is not None
    eventually(refused_when_admitted, timeout_s=30, message="the operator's admission policies in force")

    assert _create(as_operator, deployment) is None, "the driver Deployment the operator renders"
    assert _create(as_operator, job) is None, "the cleanup Job the operator renders"

    def changed(obj: dict[str, Any], change) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        change(out)
        return out

    pod = ("spec", "template", "spec")

    def at(obj, path):
        for key in path:
            obj = obj[key]
        return obj

    refused = {
        "a driver under the namespace's default account": changed(
            deployment, lambda d: at(d, pod).__setitem__("serviceAccountName", "default")),
        "a driver with another image": changed(
            deployment, lambda d: at(d, pod)["containers"][0].__setitem__("image", "evil/image:1")),
        "a driver on the host network": changed(deployment, lambda d: at(d, pod).__setitem__("hostNetwork", True)),
        "a driver with a host volume": changed(deployment, lambda d: at(d, pod)["volumes"].append(
            {"name": "host", "hostPath": {"path": "/"}})),
        "a cleanup Job under the drivers' account": changed(
            job, lambda j: at(j, pod).__setitem__("serviceAccountName", "conveyor-spark")),
        "a cleanup Job with a token": changed(
            job, lambda j: at(j, pod).__setitem__("automountServiceAccountToken", True)),
        "a Deployment without the operator's label": changed(deployment, lambda d: d["metadata"].__setitem__(
            "labels", {"app": "x"})),
        "another Secret": {"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": "stolen", "namespace": kube_namespace, "labels": LABELS}, "stringData": {"a": "b"}},
        "another ServiceAccount": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
            "name": "admin", "namespace": kube_namespace, "labels": LABELS}},
        "another RoleBinding": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {
            "name": "admin", "namespace": kube_namespace, "labels": LABELS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": chart["operator_env"]["CONVEYOR_OPERATOR_SPARK_DRIVER_CLUSTER_ROLE"]},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": kube_namespace}]},
    }
    admitted = [what for what, obj in refused.items() if _create(as_operator, obj) is None]
    assert admitted == [], f"admitted: {admitted}"


def test_the_operators_token_deletes_nothing_it_did_not_make(kube_api, kube_namespace, as_operator, api):
    api.core.create_namespaced_config_map(kube_namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="someone-elses"), data={"a": "b"}))
    core = client.CoreV1Api(as_operator)

    def refused() -> str | None:
        try:
            core.delete_namespaced_config_map("someone-elses", kube_namespace, dry_run="All")
        except client.ApiException as exc:
            return exc.body if exc.status == 403 else None
        return None
    message = eventually(refused, timeout_s=30, message="the delete refused")
    assert "touches only objects it made" in message
    assert api.core.read_namespaced_config_map("someone-elses", kube_namespace).data == {"a": "b"}


def test_the_operators_token_reads_no_secret_and_learns_only_whether_one_exists(kube_api, kube_namespace, chart,
                                                                                 as_operator, api):
    """No ``get`` on Secrets: the operator derives its control credentials
    (conveyor_operator.reconcile.control_key) and asks whether a referenced Secret exists with a dry-run
    create of an empty, labelled Secret, which the policy admits under any name, and only so."""
    from conveyor_operator.kube import EXISTENCE_PROBE_LABELS, Kube

    api.core.create_namespaced_secret(kube_namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="theirs"), string_data={"password": "s3cret"}))
    core = client.CoreV1Api(as_operator)
    with pytest.raises(ApiException) as forbidden:
        core.read_namespaced_secret("theirs", kube_namespace)
    assert forbidden.value.status == 403
    operator = f"system:serviceaccount:{chart['namespace']}:{chart['service_account']}"
    for verb in ("get", "list", "watch", "update", "patch"):
        assert kube_api.kubectl("auth", "can-i", verb, "secrets", "-n", kube_namespace, "--as", operator,
                                check=False).stdout.strip() == "no", verb

    kube = Kube(as_operator, "conveyor-operator")
    assert kube.exists_by_dry_run("v1", "Secret", kube_namespace, "theirs") is True
    assert kube.exists_by_dry_run("v1", "Secret", kube_namespace, "nobodys") is False
    assert api.core.list_namespaced_secret(kube_namespace, label_selector="conveyor.dev/existence-probe").items == []

    probe = {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "stolen", "namespace": kube_namespace, "labels": dict(EXISTENCE_PROBE_LABELS)}}
    with pytest.raises(ApiException) as stored:                      # not a dry run: refused
        core.create_namespaced_secret(kube_namespace, probe)
    assert stored.value.status == 403 and "-control Secrets, not stolen" in stored.value.body
    with_data = {**probe, "stringData": {"a": "b"}}
    assert "-control Secrets, not stolen" in (_create(as_operator, with_data) or "")

    def delete_refused() -> str | None:
        try:
            core.delete_namespaced_secret("theirs", kube_namespace, dry_run="All")
        except ApiException as exc:
            return exc.body if exc.status == 403 else None
        return None
    assert "touches only objects it made" in eventually(delete_refused, timeout_s=30, message="the delete refused")
    assert api.core.read_namespaced_secret("theirs", kube_namespace).data is not None
