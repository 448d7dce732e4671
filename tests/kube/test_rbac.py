"""Least-privilege RBAC (issue 13 item 4) on a real kube-apiserver with RBAC, after a real
``helm install`` and the operator's own reconciliation: ``kubectl auth can-i
--as=system:serviceaccount:<ns>:<sa>`` for every ServiceAccount the chart and the operator
create, and the allow-lists of images and ServiceAccounts a Connector may name.

The matrix is printed as a table (``pytest -s``), to be pasted where it is reported.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _objects import connector, eventually, operator_key_file, unique_name

from conveyor.testing.ports import free_port

pytestmark = pytest.mark.integration

DRIVER_SA, EXECUTOR_SA = "conveyor-spark", "conveyor-executor"
SELF_REVIEWS = {"selfsubjectreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io",
                "selfsubjectrulesreviews.authorization.k8s.io"}
"""What every authenticated user may do (system:basic-user, system:discovery): the rest of a
``can-i --list`` of a ServiceAccount with no binding."""


_name = unique_name


SUBRESOURCES = {"exec", "log", "eviction", "token", "status", "scale"}


def _can_i(kube_api, account: str, verb: str, resource: str, namespace: str) -> bool:
    """``kubectl auth can-i`` as admin impersonating ``account`` (``<ns>:<name>``); ``resource``
    is ``type``, ``type/name``, or ``type/subresource`` for one of :data:`SUBRESOURCES` (kubectl
    would read ``pods/exec`` as the pod named exec: that one goes as ``--subresource``)."""
    kind, _, rest = resource.partition("/")
    args = [kind, f"--subresource={rest}"] if rest in SUBRESOURCES else [resource]
    result = kube_api.kubectl("auth", "can-i", verb, *args, "--namespace", namespace,
                              f"--as=system:serviceaccount:{account}", check=False)
    return result.stdout.strip() == "yes"


def _table(rows: list[tuple[str, str, bool, bool]]) -> str:
    """``ServiceAccount | verb resource -n ns | yes/no`` rows (Markdown), a mark where the answer
    is not the expected one."""
    lines = ["| ServiceAccount | can it | answer |", "| --- | --- | --- |"]
    for account, what, answer, expected in rows:
        lines.append(f"| {account} | {what} | {'yes' if answer else 'no'}{'' if answer == expected else ' (!)'} |")
    return "\n".join(lines)


def _resources_listed(kube_api, account: str, namespace: str) -> set[str]:
    """The resources of ``kubectl auth can-i --list`` (first column; non-resource URLs left out)."""
    out = kube_api.kubectl("auth", "can-i", "--list", "--namespace", namespace,
                           f"--as=system:serviceaccount:{account}").stdout
    listed = set()
    for line in out.splitlines()[1:]:
        resource = line.split()[0] if line.split() else ""
        if resource and not resource.startswith("["):  # "[]" opens a non-resource URL row
            listed.add(resource)
    return listed


def test_every_service_account_can_do_what_it_needs_and_nothing_more(kube_api, kube_namespace, chart, operator, api):
    ns, other = kube_namespace, chart["namespace"]
    name = _name("rbac")
    with operator():
        api.create_connector(connector(name, ns, "noop-sink", "k:9092", {"topics": "t"}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", ns), message="driver Deployment")
    executor = api.core.read_namespaced_service_account(EXECUTOR_SA, ns)
    assert executor.automount_service_account_token is False
    bindings = api.rbac.list_namespaced_role_binding(ns).items
    assert not [b for b in bindings if any(s.name == EXECUTOR_SA for s in b.subjects or [])], "bound to nothing"
    template = api.core.read_namespaced_config_map(f"{name}-connector", ns).data
    assert f"serviceAccountName: {EXECUTOR_SA}" in template["executor-pod.yaml"]
    assert "automountServiceAccountToken: false" in template["executor-pod.yaml"]

    driver, execs, op = f"{ns}:{DRIVER_SA}", f"{ns}:{EXECUTOR_SA}", f"{other}:{chart['service_account']}"
    spark_role = chart["operator_env"]["CONVEYOR_OPERATOR_SPARK_DRIVER_CLUSTER_ROLE"]
    checks: list[tuple[str, str, str, str, bool]] = [  # (account, verb, resource, namespace, expected)
        *[(driver, verb, "pods", ns, True)
          for verb in ("create", "get", "list", "watch", "delete", "deletecollection", "patch")],
        *[(driver, verb, "persistentvolumeclaims", ns, True)
          for verb in ("create", "get", "list", "delete", "deletecollection")],
        (driver, "create", "configmaps", ns, True),
        *[(driver, verb, resource, ns, False) for verb, resource in [
            ("get", "configmaps"), ("list", "configmaps"), ("delete", "configmaps"),
            ("get", "secrets"), ("list", "secrets"), ("watch", "secrets"),
            ("create", "services"), ("delete", "services"), ("create", "pods/exec"), ("get", "pods/log"),
            ("create", "pods/eviction"), ("update", "pods"), ("create", "serviceaccounts/token"),
            ("create", "serviceaccounts"), ("create", "rolebindings.rbac.authorization.k8s.io"),
            ("patch", "deployments.apps"), ("create", "jobs.batch"), ("patch", "connectors.conveyor.dev")]],
        (driver, "create", "pods", other, False), (driver, "create", "pods", "kube-system", False),
        (driver, "list", "pods", "default", False),
        *[(execs, verb, resource, ns, False) for verb, resource in [
            ("get", "pods"), ("list", "pods"), ("create", "pods"), ("create", "configmaps"), ("get", "configmaps"),
            ("get", "secrets"), ("get", "services"), ("list", "persistentvolumeclaims"),
            ("create", "serviceaccounts/token"), ("get", "connectors.conveyor.dev")]],
        (op, "create", "secrets", ns, True), (op, "delete", "secrets", ns, True),
        *[(op, verb, "secrets", ns, False) for verb in ("get", "list", "watch", "update", "patch")],
        (op, "create", "serviceaccounts", ns, True), (op, "create", "rolebindings.rbac.authorization.k8s.io", ns, True),
        (op, "bind", f"clusterroles.rbac.authorization.k8s.io/{spark_role}", ns, True),
        (op, "bind", "clusterroles.rbac.authorization.k8s.io/cluster-admin", ns, False),
        (op, "escalate", "clusterroles.rbac.authorization.k8s.io", ns, False),
        (op, "create", "roles.rbac.authorization.k8s.io", ns, False),
        (op, "create", "pods", ns, False), (op, "create", "pods/exec", ns, False), (op, "get", "pods/log", ns, False),
        (op, "create", "serviceaccounts/token", ns, False),
    ]
    rows = [(account.split(":")[1] if account != op else f"{account.split(':')[1]} (operator)",
             f"{verb} {resource} -n {'<connectors>' if namespace == ns else namespace}", _can_i(kube_api, account, verb, resource, namespace), expected)
            for account, verb, resource, namespace, expected in checks]
    print("\n" + _table(rows))
    wrong = [row for row in rows if row[2] != row[3]]
    assert not wrong, "unexpected answers (marked (!)):\n" + _table(rows)
    # conveyor-executor may do nothing with any resource: its whole list is the self-reviews
    # every authenticated user has.
    listed = _resources_listed(kube_api, execs, ns)
    print(f"\nkubectl auth can-i --list --as=system:serviceaccount:{execs}: resources {sorted(listed)}")
    assert listed <= SELF_REVIEWS, listed


def test_images_and_service_accounts_outside_the_allow_lists_are_not_allowed(kube_api, kube_namespace, chart,
                                                                            operator, api):
    ns = kube_namespace
    runtime_image = chart["operator_env"]["CONVEYOR_OPERATOR_RUNTIME_IMAGE"]
    assert chart["operator_env"]["CONVEYOR_OPERATOR_ALLOWED_SERVICE_ACCOUNTS"] == DRIVER_SA
    image, account = _name("img"), _name("sa")
    with operator():
        api.create_connector(connector(image, ns, "noop-sink", "k:9092", {"topics": "t"},
                                       spark={"image": "evil/image:1"}))
        api.create_connector(connector(account, ns, "noop-sink", "k:9092", {"topics": "t"},
                                       spark={"serviceAccount": "default"}))
        for name, message in [
            (image, "spec.spark.image: 'evil/image:1' is not allowed (connectors.allowedImages)"),
            (account, "spec.spark.serviceAccount: 'default' is not allowed (connectors.allowedServiceAccounts)"),
        ]:
            degraded = eventually(lambda n=name: api.condition(ns, n, "Degraded"), message=f"{name} Degraded")
            assert (degraded["status"], degraded["reason"], degraded["message"]) == ("True", "NotAllowed", message)
            events = eventually(lambda n=name: api.events(ns, n, "NotAllowed"), message="NotAllowed Event")
            assert events[0].type == "Warning" and events[0].message == message
            assert not api.apps.list_namespaced_deployment(ns, label_selector=f"conveyor.dev/connector={name}").items
            assert not api.core.list_namespaced_config_map(ns, label_selector=f"conveyor.dev/connector={name}").items
        # the runtime image with another tag is the default's; fixing the spec heals it
        tag = runtime_image.rsplit(":", 1)[0] + ":other-tag"
        api.custom.patch_namespaced_custom_object("conveyor.dev", "v1alpha1", ns, "connectors", image,
                                                  {"spec": {"spark": {"image": tag}}})
        eventually(lambda: (api.condition(ns, image, "Degraded") or {}).get("status") == "False",
                   message="Degraded=False with an allowed image")
        dep = api.apps.read_namespaced_deployment(f"{image}-driver", ns)
        assert dep.spec.template.spec.containers[0].image == tag
        # a Connector refused from the start never ran: deleting it starts no cleanup Job
        api.delete_connector(ns, account)
        eventually(lambda: api.get_connector(ns, account) is None, message="the refused Connector goes")
        assert not api.batch.list_namespaced_job(ns).items


CHART = Path(__file__).resolve().parents[2] / "charts" / "conveyor"


def test_watching_one_namespace_the_operator_works_without_any_cluster_role(kube_api, kube_namespace, api,
                                                                            monkeypatch, tmp_path):
    """The chart's namespaced mode (watchNamespaces) creates no ClusterRole: the real operator,
    as that release's ServiceAccount, reconciles a Connector there, and binds the namespace's
    Spark driver Role, without a permission error."""
    from kopf.testing import KopfRunner

    release, home = "nsmode", kube_api.create_namespace(f"op-{kube_namespace[-8:]}")
    try:
        kube_api.helm("install", release, str(CHART), "--namespace", home,
                      "--set", f"watchNamespaces={{{kube_namespace}}}")
        rendered = [d for d in yaml.safe_load_all(kube_api.helm("get", "manifest", release, "--namespace", home).stdout)
                    if d]
        assert not [d for d in rendered if d["kind"].startswith("Cluster")], "no ClusterRole, no ClusterRoleBinding"
        deployment = next(d for d in rendered if d["kind"] == "Deployment")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]:
            if e["name"].startswith("CONVEYOR_OPERATOR_") and "value" in e and "INTERVAL" not in e["name"]:
                monkeypatch.setenv(e["name"], e["value"])
        token = kube_api.service_account_token(home, f"{release}-conveyor")
        monkeypatch.setenv("KUBECONFIG", str(kube_api.kubeconfig_for_token(token, "nsmode-operator")))
        monkeypatch.setenv("CONVEYOR_OPERATOR_CONTROL_URL_TEMPLATE", f"http://127.0.0.1:{free_port()}")
        monkeypatch.setenv("CONVEYOR_OPERATOR_REQUEST_TIMEOUT_SECONDS", "2")
        monkeypatch.setenv("CONVEYOR_OPERATOR_KEY_FILE", str(operator_key_file(kube_api, rendered, tmp_path)))
        name = _name("nsmode")
        with KopfRunner(["run", "--standalone", "--namespace", kube_namespace, "-m", "conveyor_operator.handlers"],
                        timeout=120) as runner:
            api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}))
            eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace),
                       message="driver Deployment")
            binding = api.rbac.read_namespaced_role_binding(DRIVER_SA, kube_namespace)
            assert (binding.role_ref.kind, binding.role_ref.name) == ("Role", f"{release}-conveyor-spark-driver")
            api.core.read_namespaced_service_account(EXECUTOR_SA, kube_namespace)
            eventually(lambda: (api.condition(kube_namespace, name, "Progressing") or {}).get("status") == "True",
                       message="Progressing")
        assert runner.exception is None, runner.output
        for refused in ("Not enough permissions", "Forbidden", "forbidden"):
            assert refused not in runner.output, runner.output
        assert _can_i(kube_api, f"{kube_namespace}:{DRIVER_SA}", "create", "pods", kube_namespace)
        assert not _can_i(kube_api, f"{kube_namespace}:{DRIVER_SA}", "get", "secrets", kube_namespace)
    finally:
        kube_api.helm("uninstall", release, "--namespace", home, check=False)
        kube_api.delete_namespace(home)
