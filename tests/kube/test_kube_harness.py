"""The envtest-style Kubernetes control plane of the harness (conveyor.testing.kube): a real
kube-apiserver + etcd built by tools/kube/build.sh, kubectl and helm against it, and
ServiceAccount tokens whose RBAC is really enforced."""

from __future__ import annotations

import json
import time

import pytest

from conveyor.testing.errors import ComponentUnavailable
from conveyor.testing.kube import ExternalKube, KubeAPIServer, KubeCommandError, kube_binaries, wanted_kube_version

pytestmark = pytest.mark.integration


def _wait_for(predicate, timeout: float = 15.0, what: str = "condition"):
    """RBAC changes reach the authorizer through informers: allow a short propagation delay."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def test_readyz_and_version(kube_api):
    assert kube_api.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    versions = json.loads(kube_api.kubectl("version", "-o", "json").stdout)
    assert versions["serverVersion"]["gitVersion"] == wanted_kube_version() == "v1.36.3"
    assert versions["clientVersion"]["gitVersion"] == "v1.36.3"  # our kubectl, not a distro one
    assert kube_api.server.startswith("https://127.0.0.1:")


def test_service_account_token_is_subject_to_rbac(kube_api, kube_namespace):
    from kubernetes import client

    ns = kube_namespace
    kube_api.create_service_account(ns, "operator")
    token = kube_api.service_account_token(ns, "operator")
    kubeconfig = kube_api.kubeconfig_for_token(token, "operator")

    whoami = json.loads(kube_api.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig).stdout)
    assert whoami["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:operator"
    with kube_api.api_client(kubeconfig) as api:
        review = client.AuthenticationV1Api(api).create_self_subject_review(client.V1SelfSubjectReview())
        assert f"system:serviceaccounts:{ns}" in review.status.user_info.groups

        # No grants yet: RBAC denies (the admin token, in system:masters, would not be asked)
        denied = kube_api.kubectl("get", "pods", "-n", ns, kubeconfig=kubeconfig, check=False)
        assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
        with pytest.raises(client.ApiException) as exc:
            client.CoreV1Api(api).list_namespaced_pod(ns)
        assert exc.value.status == 403

        kube_api.kubectl("apply", "-f", "-", input=f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: pod-reader, namespace: {ns}}}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: operator-reads-pods, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}}
subjects:
- {{kind: ServiceAccount, name: operator, namespace: {ns}}}
""")
        _wait_for(lambda: kube_api.kubectl("auth", "can-i", "list", "pods", "-n", ns, kubeconfig=kubeconfig,
                                           check=False).stdout.strip() == "yes", what="the RoleBinding")
        assert client.CoreV1Api(api).list_namespaced_pod(ns).items == []
        assert kube_api.kubectl("get", "pods", "-n", ns, kubeconfig=kubeconfig).returncode == 0
        # ...and only what the Role says
        assert kube_api.kubectl("auth", "can-i", "list", "pods", "-n", "default", kubeconfig=kubeconfig,
                                check=False).stdout.strip() == "no"
        assert kube_api.kubectl("auth", "can-i", "delete", "pods", "-n", ns, kubeconfig=kubeconfig,
                                check=False).stdout.strip() == "no"


def test_service_account_token_needs_the_service_account(kube_api, kube_namespace):
    # no controller-manager: not even `default` exists
    with pytest.raises(LookupError, match="not found"):
        kube_api.service_account_token(kube_namespace, "default")


def test_helm_installs_a_chart(kube_api, kube_namespace, tmp_path):
    assert kube_api.helm("version", "--short").stdout.startswith("v3.")
    chart = tmp_path / "tiny"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: tiny\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n"
        "data:\n  greeting: {{ .Values.greeting }}\n"
    )
    (chart / "values.yaml").write_text("greeting: hello\n")
    kube_api.helm("install", "demo", str(chart), "-n", kube_namespace, "--set", "greeting=hi", "--wait")
    cm = json.loads(kube_api.kubectl("get", "configmap", "demo-cm", "-n", kube_namespace, "-o", "json").stdout)
    assert cm["data"] == {"greeting": "hi"}
    assert "demo" in kube_api.helm("list", "-n", kube_namespace, "-q").stdout.split()


def test_kubectl_failure_carries_stderr(kube_api):
    with pytest.raises(KubeCommandError) as exc:
        kube_api.kubectl("get", "no-such-kind")
    assert "no-such-kind" in str(exc.value)


def test_external_kube_reuses_a_kubeconfig(kube_api, kube_namespace):
    external = ExternalKube(kube_api.admin_kubeconfig)
    try:
        external.wait_ready(timeout=10)
        assert external.server == kube_api.server
        assert kube_namespace in external.kubectl("get", "namespaces", "-o", "name").stdout
        external.create_service_account(kube_namespace, "reader")
        token = external.service_account_token(kube_namespace, "reader")
        whoami = external.kubectl("auth", "whoami", "-o", "json",
                                  kubeconfig=external.kubeconfig_for_token(token, "reader"))
        assert json.loads(whoami.stdout)["status"]["userInfo"]["username"].endswith(f":{kube_namespace}:reader")
    finally:
        external.stop()
    assert kube_api.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"  # not stopped by it


def test_missing_binaries_say_how_to_build_them(tmp_path):
    (tmp_path / "kube-apiserver").write_text("")
    with pytest.raises(ComponentUnavailable) as exc:
        kube_binaries({"CONVEYOR_KUBE_BIN": str(tmp_path)})
    assert exc.value.component == "kubernetes"
    assert "kube-apiserver" in exc.value.reason and "kubectl" in exc.value.reason
    assert "tools/kube/build.sh" in exc.value.hint


def test_startup_failure_reports_the_apiserver_log(kube_binaries):
    server = KubeAPIServer(binaries=kube_binaries, startup_timeout=30, apiserver_args=["--no-such-flag"])
    with pytest.raises(ComponentUnavailable) as exc:
        server.start()
    assert "kube-apiserver exited" in exc.value.reason
    assert "no-such-flag" in exc.value.log_tail
    assert server.workdir is None  # cleaned up
