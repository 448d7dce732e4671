"""The Helm chart installed on a real API server (envtest-style, from
conveyor.testing.pytest_kube): its ServiceAccount can do what the operator does, and no more
(split from test_chart.py, which renders the chart)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "conveyor"


# --------------------------------------------------------------------------------------------
# against a real API server (envtest-style, from conveyor.testing.pytest_kube): the chart installs,
# and its ServiceAccount can do what the operator does, and no more. RBAC's escalation check is
# what matters most here: the operator may bind the chart's Spark driver ClusterRole (its `bind`
# permission), but no other role, and it creates no Roles.

SPARK_DRIVER_OBJECTS = """
apiVersion: v1
kind: ServiceAccount
metadata: {{name: demo-spark, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: demo-spark, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: {kind}, name: {role}}}
subjects: [{{kind: ServiceAccount, name: demo-spark, namespace: {ns}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {{name: demo-cleanup, namespace: {ns}}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: cleanup, image: "conveyor:0.1.0", args: [cleanup, /etc/conveyor/connector.yaml]}}]
"""

ROLE_BINDING = """
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {name}, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}
subjects: [{{kind: ServiceAccount, name: demo-spark, namespace: {ns}}}]
"""

SPARK_ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: demo-spark-role, namespace: {ns}}}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
"""

DRIVER_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: demo-driver, namespace: {ns}}}
spec:
  replicas: 1
  strategy: {{type: Recreate}}
  selector: {{matchLabels: {{app: demo}}}}
  template:
    metadata: {{labels: {{app: demo}}}}
    spec:
      containers: [{{name: driver, image: "conveyor:0.1.0", command: [conveyor], args: [run, /etc/conveyor/c.yaml]}}]
"""

# What the API server says when RBAC's escalation check refuses a RoleBinding (the create itself
# was authorized): the binder neither holds the role's permissions nor may `bind` it.
ESCALATION_REFUSED = "attempting to grant RBAC permissions not currently held"


def _install(kube_api, release: str, namespace: str, *sets: str) -> None:
    """``helm install`` with RBAC alone: these tests act as the operator with objects of their own
    (``demo-*``), which the chart's admission policies would refuse; those policies are tested in
    test_operator_admission.py, test_driver_admission.py and test_admission_policy.py."""
    args = ["install", release, str(CHART), "--namespace", namespace, "--set", "admissionPolicy.enabled=false"]
    for s in sets:
        args += ["--set", s]
    kube_api.helm(*args)


def _spark_driver_cluster_role(release: str, namespace: str) -> str:
    return f"{namespace}-{release}-conveyor-spark-driver"


def _as_operator(kube_api, release: str, namespace: str):
    token = kube_api.service_account_token(namespace, f"{release}-conveyor")
    return kube_api.kubeconfig_for_token(token, f"operator-{namespace}")


def _can_i(kube_api, kubeconfig, verb: str, resource: str, namespace: str | None = None) -> bool:
    args = ["auth", "can-i", verb, resource] + (["--namespace", namespace] if namespace else ["--all-namespaces"])
    result = kube_api.kubectl(*args, kubeconfig=kubeconfig, check=False)
    return result.stdout.strip() == "yes"


def _refused(kube_api, kubeconfig, manifest: str, *, escalation: bool = False) -> str:
    """``kubectl create`` (a plain POST) of ``manifest`` is forbidden; returns stderr. With
    ``escalation``, forbidden by RBAC's escalation check (the create itself was allowed)."""
    result = kube_api.kubectl("create", "-f", "-", kubeconfig=kubeconfig, input=manifest, check=False)
    assert result.returncode != 0 and "forbidden" in result.stderr, result.stdout + result.stderr
    if escalation:
        assert ESCALATION_REFUSED in result.stderr, result.stderr
    return result.stderr


def _assert_binds_only_the_spark_driver_role(kube_api, operator, namespace: str) -> None:
    # Bootstrap ClusterRoles the API server creates itself. Not `edit`: it is aggregated, and with
    # no controller-manager here its rules stay empty (nothing to escalate); its own rules are in
    # system:aggregate-to-edit.
    for other in ("cluster-admin", "system:aggregate-to-edit"):
        binding = ROLE_BINDING.format(name="demo-" + other.replace(":", "-"), ns=namespace, role=other)
        _refused(kube_api, operator, binding, escalation=True)
    _refused(kube_api, operator, SPARK_ROLE.format(ns=namespace))
    assert not _can_i(kube_api, operator, "create", "roles.rbac.authorization.k8s.io", namespace)
    assert not _can_i(kube_api, operator, "create", "clusterrolebindings.rbac.authorization.k8s.io")
    assert not _can_i(kube_api, operator, "escalate", "clusterroles.rbac.authorization.k8s.io")


@pytest.mark.integration
def test_installed_chart_lets_the_operator_do_its_work_cluster_wide(kube_api, kube_namespace):
    release = "cv"
    _install(kube_api, release, kube_namespace)
    kube_api.kubectl("get", "crd", "connectors.conveyor.dev")
    operator = _as_operator(kube_api, release, kube_namespace)
    spark_role = _spark_driver_cluster_role(release, kube_namespace)
    connectors_ns = kube_api.create_namespace(f"cn-{kube_namespace[-8:]}")
    try:
        # The operator binds the Spark driver ClusterRole without holding its permissions (`bind`).
        kube_api.kubectl(
            "apply", "-f", "-", kubeconfig=operator,
            input=SPARK_DRIVER_OBJECTS.format(ns=connectors_ns, role=spark_role, kind="ClusterRole"),
        )
        assert not _can_i(kube_api, operator, "create", "pods", connectors_ns), "the operator holds no driver rights"
        assert not _can_i(kube_api, operator, "deletecollection", "configmaps", connectors_ns)
        assert not _can_i(kube_api, operator, "get", "persistentvolumeclaims", connectors_ns)
        kube_api.kubectl("get", "clusterrole", spark_role)  # the chart installed it (a bind needs no role)
        _assert_binds_only_the_spark_driver_role(kube_api, operator, connectors_ns)

        # ...and the driver's ServiceAccount gets them, in its namespace only.
        driver = kube_api.kubeconfig_for_token(
            kube_api.service_account_token(connectors_ns, "demo-spark"), f"driver-{connectors_ns}"
        )
        assert _can_i(kube_api, driver, "create", "pods", connectors_ns)
        assert _can_i(kube_api, driver, "deletecollection", "persistentvolumeclaims", connectors_ns)
        assert not _can_i(kube_api, driver, "create", "pods", kube_namespace)
        assert not _can_i(kube_api, driver, "get", "secrets", connectors_ns)

        assert _can_i(kube_api, operator, "watch", "connectors.conveyor.dev")
        assert _can_i(kube_api, operator, "patch", "connectors.conveyor.dev", connectors_ns)
        assert _can_i(kube_api, operator, "list", "customresourcedefinitions.apiextensions.k8s.io")
        assert _can_i(kube_api, operator, "create", "deployments.apps", connectors_ns)
        assert _can_i(kube_api, operator, "watch", "pods", connectors_ns)
        # the driver Deployment is scaled to 0 through its scale subresource (Kube.scale_deployment)
        kube_api.kubectl("apply", "-f", "-", kubeconfig=operator, input=DRIVER_DEPLOYMENT.format(ns=connectors_ns))
        from kubernetes import client

        with kube_api.api_client(operator) as api:  # a bare PATCH, as Kube.scale_deployment sends it
            client.AppsV1Api(api).patch_namespaced_deployment_scale(
                "demo-driver", connectors_ns, {"spec": {"replicas": 0}}
            )
        assert _can_i(kube_api, operator, "create", "events", connectors_ns)
        assert _can_i(kube_api, operator, "create", "secrets", connectors_ns)
        assert not _can_i(kube_api, operator, "get", "secrets", connectors_ns), "secrets are never read"
        assert not _can_i(kube_api, operator, "list", "secrets", connectors_ns), "secrets are never listed"
        assert not _can_i(kube_api, operator, "watch", "secrets", connectors_ns)
        assert not _can_i(kube_api, operator, "create", "clusterroles.rbac.authorization.k8s.io")
        assert not _can_i(kube_api, operator, "delete", "namespaces")
    finally:
        kube_api.delete_namespace(connectors_ns)


@pytest.mark.integration
def test_installed_chart_with_watch_namespaces_is_confined_to_them(kube_api, kube_namespace):
    """Watching named namespaces: no ClusterRole at all; the Spark driver role is a Role in each."""
    release = "cv"
    watched = kube_api.create_namespace(f"w-{kube_namespace[-8:]}")
    unwatched = kube_api.create_namespace(f"u-{kube_namespace[-8:]}")
    try:
        _install(kube_api, release, kube_namespace, f"watchNamespaces={{{watched}}}")
        installed = kube_api.helm("get", "manifest", release, "--namespace", kube_namespace).stdout
        assert not [d for d in yaml.safe_load_all(installed) if d and d["kind"].startswith("Cluster")]
        operator = _as_operator(kube_api, release, kube_namespace)
        spark_role = f"{release}-conveyor-spark-driver"
        kube_api.kubectl("get", "role", spark_role, "--namespace", watched)
        kube_api.kubectl("apply", "-f", "-", kubeconfig=operator,
                         input=SPARK_DRIVER_OBJECTS.format(ns=watched, role=spark_role, kind="Role"))
        _assert_binds_only_the_spark_driver_role(kube_api, operator, watched)
        driver = kube_api.kubeconfig_for_token(kube_api.service_account_token(watched, "demo-spark"), "driver-w")
        assert _can_i(kube_api, driver, "create", "pods", watched)
        assert not _can_i(kube_api, driver, "create", "pods", unwatched)
        # RoleBindings (and the rest) can only be created where watched.
        refused = kube_api.kubectl(
            "apply", "-f", "-", kubeconfig=operator,
            input=SPARK_DRIVER_OBJECTS.format(ns=unwatched, role=spark_role, kind="Role"), check=False,
        )
        assert refused.returncode != 0 and "forbidden" in refused.stderr, refused.stderr
        assert _can_i(kube_api, operator, "watch", "connectors.conveyor.dev", watched)
        assert not _can_i(kube_api, operator, "watch", "connectors.conveyor.dev", unwatched)
        assert not _can_i(kube_api, operator, "watch", "connectors.conveyor.dev"), "not cluster-wide"
        assert not _can_i(kube_api, operator, "list", "customresourcedefinitions.apiextensions.k8s.io")
        assert not _can_i(kube_api, operator, "watch", "namespaces"), "no ClusterRole: kopf's scanning is off"
    finally:
        kube_api.delete_namespace(watched)
        kube_api.delete_namespace(unwatched)
