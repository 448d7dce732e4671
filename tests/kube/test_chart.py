"""The Helm chart charts/conveyor: it lints and renders, the operator Deployment is one non-root
replica, the RBAC is exactly what the operator needs (nothing more), the values are typed and
documented.

helm is a real binary (built from the Go module proxy by tools/kube/build.sh). A missing helm
fails these tests, with the way to get it; it never skips them.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

pytestmark = pytest.mark.integration  # helm is a built binary: not the unit tier (tests/README.md)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "conveyor"
NAMESPACE = "conveyor-system"
RELEASE = "rel"

OPERATOR_CLUSTER_ROLE = f"{NAMESPACE}-{RELEASE}-conveyor"
# The one ClusterRole of every Spark driver (helper conveyor.sparkDriverClusterRoleName).
SPARK_DRIVER_CLUSTER_ROLE = f"{NAMESPACE}-{RELEASE}-conveyor-spark-driver"

# What the operator does with each resource (the brief of the operator), as (group, resource) -> verbs.
OPERATOR_NEEDS: dict[tuple[str, str], set[str]] = {
    ("conveyor.dev", "connectors"): {"get", "list", "watch", "patch", "update"},
    ("conveyor.dev", "connectors/status"): {"get", "patch", "update"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"get", "list", "watch"},
    ("", "namespaces"): {"get", "list", "watch"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("", "configmaps"): {"get", "list", "watch", "create", "patch", "update", "delete"},
    ("", "services"): {"get", "list", "watch", "create", "patch", "update", "delete"},
    ("", "serviceaccounts"): {"get", "list", "watch", "create", "patch", "update", "delete"},
    # each connector's <name>-control Secret, created (and deleted to be replaced) with derived values,
    # never read; a dry-run create tells whether a referenced Secret exists
    ("", "secrets"): {"create", "delete"},
    # watched only (evictions become drains): the Spark driver, not the operator, manages pods
    ("", "pods"): {"get", "list", "watch"},
    ("apps", "deployments"): {"get", "list", "watch", "create", "patch", "update", "delete"},
    # conveyor_operator.kube.Kube.scale_deployment: PATCH .../deployments/<driver>/scale (to 0 before a cleanup Job)
    ("apps", "deployments/scale"): {"patch"},
    # read only: the owner chain pod -> ReplicaSet -> driver Deployment before a pod is called
    # directly (conveyor_operator.observe.driver_pods)
    ("apps", "replicasets"): {"list"},
    ("batch", "jobs"): {"get", "list", "watch", "create", "patch", "update", "delete"},
    # the PodDisruptionBudget of each connector's pods (render.disruption_budget)
    ("policy", "poddisruptionbudgets"): {"get", "list", "watch", "create", "patch", "update", "delete"},
    # the NetworkPolicies of each connector's driver and executors (conveyor_operator.reconcile.network_policy);
    # delete: networkPolicy.enabled=false removes those applied before
    ("networking.k8s.io", "networkpolicies"): {"get", "list", "watch", "create", "patch", "update", "delete"},
    # the per-connector RoleBinding of the Spark driver ClusterRole; the operator creates no Roles
    ("rbac.authorization.k8s.io", "rolebindings"): {"get", "list", "watch", "create", "patch", "update", "delete"},
}
# ...and what it may do only with named objects: (group, resource) -> (verbs, resourceNames).
# `bind` lets it refer to the Spark driver ClusterRole in a RoleBinding without holding its
# permissions (RBAC's escalation check is skipped), and to no other role.
OPERATOR_NEEDS_NAMED: dict[tuple[str, str], tuple[set[str], set[str]]] = {
    ("rbac.authorization.k8s.io", "clusterroles"): ({"bind"}, {SPARK_DRIVER_CLUSTER_ROLE}),
}
# The chart's Spark driver ClusterRole, which the operator binds per connector; the operator does
# not hold these permissions (a copy of conveyor_operator.reconcile.render.SPARK_ROLE_RULES, checked equal).
SPARK_DRIVER_ROLE: dict[tuple[str, str], set[str]] = {
    ("", "pods"): {"create", "get", "list", "watch", "delete", "deletecollection", "patch"},
    ("", "persistentvolumeclaims"): {"create", "get", "list", "delete", "deletecollection"},
    ("", "configmaps"): {"create"},  # the namespace-deletion dry-run probe only
}
CLUSTER_SCOPED = {
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("", "namespaces"),
    ("rbac.authorization.k8s.io", "clusterroles"),
}

Grant = tuple[str, str, str, "str | None"]
"""(apiGroup, resource, verb, resourceName); resourceName None: any object."""


def _union(*grants: dict[tuple[str, str], set[str]]) -> set[Grant]:
    return {
        (group, resource, verb, None)
        for grant in grants
        for (group, resource), verbs in grant.items()
        for verb in verbs
    }


def _named(grants: dict[tuple[str, str], tuple[set[str], set[str]]]) -> set[Grant]:
    return {
        (group, resource, verb, name)
        for (group, resource), (verbs, names) in grants.items()
        for verb in verbs
        for name in names
    }


REQUIRED = _union(OPERATOR_NEEDS) | _named(OPERATOR_NEEDS_NAMED)
REQUIRED_CLUSTER = {p for p in REQUIRED if p[:2] in CLUSTER_SCOPED}
REQUIRED_NAMESPACED = REQUIRED - REQUIRED_CLUSTER


# --------------------------------------------------------------------------------------------
# helm


def _find_helm() -> str:
    """The helm binary of ``conveyor.testing.kube`` (built with tools/kube/build.sh on first use)."""
    from conveyor.testing.errors import ComponentUnavailable
    from conveyor.testing.kube import ensure_kube_binaries

    error: ComponentUnavailable | None = None
    try:
        return str(ensure_kube_binaries().helm)
    except ComponentUnavailable as e:
        error = e  # fail outside the except block: no "during handling of..." noise
    pytest.fail(f"the chart tests need helm: {error}", pytrace=False)


@pytest.fixture(scope="module")
def helm() -> str:
    return _find_helm()


def _run(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], check=False, capture_output=True, text=True, timeout=120)


def _render(helm: str, *sets: str) -> list[dict]:
    """``helm template`` of the chart, parsed; each of ``sets`` is a ``--set`` argument."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for s in sets:
        args += ["--set", s]
    result = _run(helm, *args)
    assert result.returncode == 0, f"helm {' '.join(args)} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _one(docs: list[dict], kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def _grants(role: dict) -> set[Grant]:
    """What a Role or ClusterRole grants: (apiGroup, resource, verb, resourceName) with
    resourceName None when a rule names no objects (any object)."""
    out = set()
    for rule in role["rules"]:
        assert not rule.get("nonResourceURLs"), rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [None]:
                        out.add((group, resource, verb, name))
    return out


def _cluster_role(docs: list[dict], name: str) -> dict:
    found = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one ClusterRole {name}, got {[d['metadata']['name'] for d in docs if d['kind'] == 'ClusterRole']}"
    return found[0]


def _assert_no_wildcards(role: dict) -> None:
    for rule in role["rules"]:
        for key in ("apiGroups", "resources", "verbs"):
            assert all("*" not in item for item in rule[key]), f"wildcard in {role['kind']} rule {rule}"


# --------------------------------------------------------------------------------------------
# lint and render

SET_VARIANTS = {
    "defaults": [],
    "watchNamespaces": ["watchNamespaces={a,b}"],
    "existing-service-account": ["serviceAccount.create=false", "serviceAccount.name=ops"],
    "no-network-policy": ["networkPolicy.enabled=false"],
}


@pytest.mark.parametrize("sets", SET_VARIANTS.values(), ids=SET_VARIANTS.keys())
def test_lint_strict_is_clean(helm, sets):
    args = ["lint", "--strict", str(CHART)]
    for s in sets:
        args += ["--set", s]
    result = _run(helm, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[ERROR]" not in result.stdout and "[WARNING]" not in result.stdout, result.stdout


def test_chart_metadata_matches_the_package():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2" and chart["name"] == "conveyor" and chart["type"] == "application"
    assert chart["appVersion"] == project["version"], "appVersion is the default image tag: the package version"


def test_renders_the_operator_objects(helm):
    docs = _render(helm)
    assert sorted(d["kind"] for d in docs) == [
        "ClusterRole", "ClusterRole", "ClusterRoleBinding", "Deployment", "NetworkPolicy", "Secret", "ServiceAccount"
    ]
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRole"} == {
        OPERATOR_CLUSTER_ROLE, SPARK_DRIVER_CLUSTER_ROLE
    }
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "conveyor"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"] == yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


def test_the_operators_key_is_a_kept_secret_mounted_into_the_operator_alone(helm):
    """The key the control credentials are derived from (conveyor_operator.reconcile.control_key): 64
    random characters, kept across uninstalls, mounted read-only and named by
    CONVEYOR_OPERATOR_KEY_FILE; ``operatorKey.existingSecret`` replaces it."""
    import base64

    docs = _render(helm)
    secret = _one(docs, "Secret")
    assert secret["metadata"]["name"] == f"{RELEASE}-conveyor-operator-key"
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    key = base64.b64decode(secret["data"]["key"])
    assert len(key) == 64 and key != base64.b64decode(_one(_render(helm), "Secret")["data"]["key"]), "random"
    pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "operator-key")
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    container = pod["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "operator-key")
    assert mount["readOnly"] is True
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CONVEYOR_OPERATOR_KEY_FILE"] == f"{mount['mountPath']}/key"

    docs = _render(helm, "operatorKey.existingSecret=platform-key")
    assert [d for d in docs if d["kind"] == "Secret"] == []
    volumes = _one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert next(v for v in volumes if v["name"] == "operator-key")["secret"]["secretName"] == "platform-key"


def test_the_chart_ships_the_connector_crd():
    """crds/ holds the generated CRD (written by the CRD generator), the same as the repository's."""
    files = sorted(p.name for p in (CHART / "crds").iterdir())
    assert files == ["connectors.conveyor.dev.yaml"]
    crd = yaml.safe_load((CHART / "crds" / "connectors.conveyor.dev.yaml").read_text())
    assert crd["kind"] == "CustomResourceDefinition" and crd["metadata"]["name"] == "connectors.conveyor.dev"
    assert crd["spec"]["names"]["plural"] == "connectors" and crd["spec"]["scope"] == "Namespaced"
    assert (CHART / "crds" / "connectors.conveyor.dev.yaml").read_text() == (
        ROOT / "crds" / "connectors.conveyor.dev.yaml"
    ).read_text()


# --------------------------------------------------------------------------------------------
# the operator Deployment


def test_deployment_is_one_non_root_replica(helm):
    deployment = _one(_render(helm), "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}, "never two operators, not even during a rollout"
    pod = spec["template"]["spec"]
    # Pod Security "restricted", no UID pinned (the image's numeric USER, or the platform's)
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()


def test_operator_container_command_image_env_and_probe(helm):
    pod = _one(_render(helm), "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["conveyor-operator"]
    assert container["image"] == "conveyor-operator:0.1.0"
    assert pod["serviceAccountName"] == f"{RELEASE}-conveyor"
    env = {e["name"]: e for e in container["env"]}
    assert env["CONVEYOR_OPERATOR_RUNTIME_IMAGE"]["value"] == "conveyor:0.1.0"
    assert env["CONVEYOR_OPERATOR_WATCH_NAMESPACES"]["value"] == ""
    assert float(env["CONVEYOR_OPERATOR_STATUS_INTERVAL_SECONDS"]["value"]) > 0
    assert env["CONVEYOR_OPERATOR_LOG_LEVEL"]["value"] == "INFO"
    assert env["CONVEYOR_OPERATOR_SPARK_DRIVER_CLUSTER_ROLE"]["value"] == SPARK_DRIVER_CLUSTER_ROLE
    assert env["CONVEYOR_OPERATOR_SPARK_DRIVER_ROLE_KIND"]["value"] == "ClusterRole"
    assert env["CONVEYOR_OPERATOR_ALLOWED_CONNECTOR_MODULES"]["value"] == "", "no module beyond installed connectors"
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert all(isinstance(e.get("value", ""), str) for e in container["env"])
    probe = container["livenessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert probe["path"] == "/healthz" and ports[probe["port"]] == 8080
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/tmp" in mounts, "a writable /tmp under the read-only root filesystem"


def test_values_reach_the_deployment(helm):
    deployment = _one(
        _render(
            helm,
            "image.repository=registry.example:5000/ops/conveyor-operator",
            "image.tag=1.2.3",
            "runtimeImage.repository=registry.example:5000/ops/conveyor",
            "runtimeImage.tag=4.5.6",
            "watchNamespaces={data,etl}",
            "allowedConnectorModules={acme.connectors.*,my_sinks}",
            "statusIntervalSeconds=5",
            "logLevel=DEBUG",
            "podAnnotations.team=data",
            "imagePullSecrets[0].name=regcred",
            "nodeSelector.pool=ops",
            "tolerations[0].key=dedicated",
            "tolerations[0].operator=Exists",
            "resources.limits.memory=1Gi",
        ),
        "Deployment",
    )
    template = deployment["spec"]["template"]
    pod = template["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert container["image"] == "registry.example:5000/ops/conveyor-operator:1.2.3"
    assert env["CONVEYOR_OPERATOR_RUNTIME_IMAGE"] == "registry.example:5000/ops/conveyor:4.5.6"
    assert env["CONVEYOR_OPERATOR_WATCH_NAMESPACES"] == "data,etl"
    assert env["CONVEYOR_OPERATOR_ALLOWED_CONNECTOR_MODULES"] == "acme.connectors.*,my_sinks"
    from conveyor_operator.settings import OperatorSettings

    assert OperatorSettings.from_env(env).allowed_connector_modules == ["acme.connectors.*", "my_sinks"]
    assert env["CONVEYOR_OPERATOR_STATUS_INTERVAL_SECONDS"] == "5"
    assert env["CONVEYOR_OPERATOR_LOG_LEVEL"] == "DEBUG"
    assert template["metadata"]["annotations"] == {"team": "data"}
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["nodeSelector"] == {"pool": "ops"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert container["resources"]["limits"]["memory"] == "1Gi"


def test_connector_pods_uid_and_fs_group_reach_the_operator_only_when_set(helm):
    (container,) = _one(_render(helm), "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert "CONVEYOR_OPERATOR_POD_RUN_AS_USER" not in env and "CONVEYOR_OPERATOR_POD_FS_GROUP" not in env
    assert env["HOME"] == "/tmp"
    (container,) = _one(_render(helm, "connectorPods.runAsUser=1000650000", "connectorPods.fsGroup=0"),
                        "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CONVEYOR_OPERATOR_POD_RUN_AS_USER"] == "1000650000" and env["CONVEYOR_OPERATOR_POD_FS_GROUP"] == "0"
    from conveyor_operator.settings import OperatorSettings

    settings = OperatorSettings.from_env(env)
    assert (settings.pod_run_as_user, settings.pod_fs_group) == (1000650000, 0)
    result = _run(helm, "template", RELEASE, str(CHART), "--set", "connectorPods.runAsUser=0")
    assert result.returncode != 0 and "runAsUser" in result.stderr, "root is refused by the schema"


def test_the_operator_reads_the_spark_driver_cluster_role_variable(helm):
    """The Deployment's variables, read as the operator reads them (OperatorSettings.from_env)."""
    from conveyor_operator.settings import PREFIX, OperatorSettings

    (container,) = _one(_render(helm), "Deployment")["spec"]["template"]["spec"]["containers"]
    variables = {e["name"]: e["value"] for e in container["env"] if e["name"].startswith(PREFIX)}
    settings = OperatorSettings.from_env(variables)
    assert settings.spark_driver_cluster_role == SPARK_DRIVER_CLUSTER_ROLE


@pytest.mark.parametrize(
    "namespace, sets, expected",
    [
        (NAMESPACE, [], SPARK_DRIVER_CLUSTER_ROLE),
        ("other", [], f"other-{RELEASE}-conveyor-spark-driver"),
        ("other", ["fullnameOverride=ops"], "other-ops-spark-driver"),
    ],
    ids=["defaults", "namespace", "fullnameOverride"],
)
def test_one_spark_driver_cluster_role_name_everywhere(helm, namespace, sets, expected):
    """The ClusterRole, the operator's `bind` of it and the operator's variable name the same role."""
    args = ["template", RELEASE, str(CHART), "--namespace", namespace]
    for s in sets:
        args += ["--set", s]
    result = _run(helm, *args)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    spark = _cluster_role(docs, expected)
    assert spark["metadata"]["labels"]["app.kubernetes.io/component"] == "spark-driver"
    (operator,) = [d for d in docs if d["kind"] == "ClusterRole" and d is not spark]
    binds = {g for g in _grants(operator) if g[:3] == ("rbac.authorization.k8s.io", "clusterroles", "bind")}
    assert binds == {("rbac.authorization.k8s.io", "clusterroles", "bind", expected)}
    (container,) = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CONVEYOR_OPERATOR_SPARK_DRIVER_CLUSTER_ROLE"] == expected


def test_operator_pod_network_policy_admits_only_its_metrics_port(helm):
    """The operator only calls out; its pod accepts no connection but to its metrics port (the
    kubelet's liveness probe comes from the node, which CNIs admit). Egress is not restricted.
    With the operator's metrics off it admits nothing (tests/kube/test_chart_metrics.py: scrapers)."""
    docs = _render(helm)
    policy = _one(docs, "NetworkPolicy")
    deployment = _one(docs, "Deployment")
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"] == {"podSelector": {"matchLabels": deployment["spec"]["selector"]["matchLabels"]},
                              "policyTypes": ["Ingress"], "ingress": [{"ports": [{"protocol": "TCP", "port": 8081}]}]}
    policy = _one(_render(helm, "metrics.operator.enabled=false"), "NetworkPolicy")
    assert policy["spec"]["ingress"] == []
    assert not [d for d in _render(helm, "networkPolicy.enabled=false") if d["kind"] == "NetworkPolicy"]


def test_connector_network_policies_admit_the_operator_pods_the_chart_runs(helm):
    """The operator's settings name the chart's operator pods: the peer each connector's driver
    NetworkPolicy admits to the control API selects the Deployment's pod template."""
    from conveyor_operator.reconcile.network_policy import operator_peer
    from conveyor_operator.settings import PREFIX, OperatorSettings

    for namespace in (NAMESPACE, "ops"):
        result = _run(helm, "template", RELEASE, str(CHART), "--namespace", namespace)
        assert result.returncode == 0, result.stderr
        deployment = _one([d for d in yaml.safe_load_all(result.stdout) if d], "Deployment")
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        settings = OperatorSettings.from_env({e["name"]: e["value"] for e in container["env"]
                                              if e["name"].startswith(PREFIX)})
        assert settings.network_policy is True
        peer = operator_peer(settings)
        assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
        selector = peer["podSelector"]["matchLabels"]
        assert selector == deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    (container,) = _one(_render(helm, "networkPolicy.enabled=false"), "Deployment")["spec"]["template"]["spec"][
        "containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert OperatorSettings.from_env({"CONVEYOR_OPERATOR_NETWORK_POLICY": env["CONVEYOR_OPERATOR_NETWORK_POLICY"]
                                      }).network_policy is False


def test_existing_service_account(helm):
    docs = _render(helm, "serviceAccount.create=false", "serviceAccount.name=ops")
    assert not [d for d in docs if d["kind"] == "ServiceAccount"]
    assert _one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "ops"
    assert _one(docs, "ClusterRoleBinding")["subjects"] == [
        {"kind": "ServiceAccount", "name": "ops", "namespace": NAMESPACE}
    ]


# --------------------------------------------------------------------------------------------
# RBAC


def _assert_exactly(granted: set[Grant], required: set[Grant], what: str) -> None:
    missing = required - granted
    extra = granted - required
    assert not missing, f"{what} lacks {sorted(missing, key=str)}"
    assert not extra, f"{what} grants more than needed: {sorted(extra, key=str)}"


def _assert_holds_none_of_the_spark_drivers_own(granted: set[Grant]) -> None:
    """The operator binds the Spark driver ClusterRole; it does not hold what is in it."""
    assert not {g for g in granted if g[:2] in {("", "persistentvolumeclaims")}}
    assert not {g for g in granted if g[2] == "deletecollection"}
    assert {g[2] for g in granted if g[:2] == ("", "pods")} <= {"get", "list", "watch"}
    assert not {g for g in granted if g[:2] == ("rbac.authorization.k8s.io", "roles") and g[2] != "bind"}, \
        "the operator creates no Roles"
    assert not {g for g in granted if g[2] in ("escalate", "bind") and g[3] is None}, "bind/escalate of any role"


def test_cluster_wide_rbac_is_exactly_what_the_operator_needs(helm):
    docs = _render(helm)
    role = _cluster_role(docs, OPERATOR_CLUSTER_ROLE)
    _assert_no_wildcards(role)
    granted = _grants(role)
    _assert_exactly(granted, REQUIRED, "the operator ClusterRole")
    assert {g[2] for g in granted if g[:2] == ("", "secrets")} == {"create", "delete"}, "secrets: never read"
    _assert_holds_none_of_the_spark_drivers_own(granted)

    binding = _one(docs, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    sa = _one(docs, "ServiceAccount")
    assert sa["metadata"]["namespace"] == NAMESPACE
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}]
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]


@pytest.mark.parametrize("sets", [[], ["watchNamespaces={a}"]], ids=["cluster-wide", "watchNamespaces"])
def test_the_spark_driver_role_is_the_operators_spark_role(helm, sets):
    """The chart's Spark driver role (a ClusterRole cluster-wide, a Role per watched namespace) is
    exactly conveyor_operator.reconcile.render.SPARK_ROLE_RULES (the source of truth), and the operator may
    `bind` that role and no other."""
    from conveyor_operator.reconcile.render import SPARK_ROLE_RULES

    expected = _grants({"kind": "Role", "rules": SPARK_ROLE_RULES})
    assert expected == _union(SPARK_DRIVER_ROLE), "the Spark driver rules changed: update SPARK_DRIVER_ROLE and the chart"
    docs = _render(helm, *sets)
    if sets:
        spark = _namespaced(docs, "Role", f"{RELEASE}-conveyor-spark-driver", "a")
        operator = _namespaced(docs, "Role", f"{RELEASE}-conveyor", "a")
        resources = "roles"
    else:
        spark, operator, resources = _cluster_role(docs, SPARK_DRIVER_CLUSTER_ROLE), \
            _cluster_role(docs, OPERATOR_CLUSTER_ROLE), "clusterroles"
    _assert_no_wildcards(spark)
    assert _grants(spark) == expected
    assert sorted(spark["rules"], key=str) == sorted(SPARK_ROLE_RULES, key=str), "the same rules, rule by rule"
    (bind,) = [r for r in operator["rules"] if "bind" in r["verbs"]]
    assert bind == {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": [resources],
        "verbs": ["bind"],
        "resourceNames": [spark["metadata"]["name"]],
    }
    # the chart binds the Spark driver role to no one: the operator does, per namespace
    assert not [d for d in docs if d["kind"].endswith("Binding") and d["roleRef"]["name"] == spark["metadata"]["name"]]


def _namespaced(docs, kind: str, name: str, namespace: str) -> dict:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name
                and d["metadata"]["namespace"] == namespace]
    return found


def test_watch_namespaces_rbac_is_roles_in_those_namespaces_and_no_cluster_role(helm):
    """Issue 13 item 4: watching named namespaces, the chart needs no ClusterRole at all."""
    docs = _render(helm, "watchNamespaces={a,b}")
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    operator_roles = {d["metadata"]["namespace"]: d for d in docs
                      if d["kind"] == "Role" and d["metadata"]["name"] == f"{RELEASE}-conveyor"}
    spark_roles = {d["metadata"]["namespace"]: d for d in docs
                   if d["kind"] == "Role" and d["metadata"]["name"] == f"{RELEASE}-conveyor-spark-driver"}
    bindings = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "RoleBinding"}
    assert sorted(operator_roles) == sorted(spark_roles) == sorted(bindings) == ["a", "b"]
    assert len([d for d in docs if d["kind"] == "Role"]) == 4
    sa = _one(docs, "ServiceAccount")["metadata"]
    bind = ("rbac.authorization.k8s.io", "roles", "bind", f"{RELEASE}-conveyor-spark-driver")
    for namespace, role in operator_roles.items():
        _assert_no_wildcards(role)
        _assert_exactly(_grants(role), REQUIRED_NAMESPACED | {bind}, f"the operator Role in {namespace}")
        _assert_holds_none_of_the_spark_drivers_own(_grants(role))
        binding = bindings[namespace]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": role["metadata"]["name"],
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]
    (container,) = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CONVEYOR_OPERATOR_SPARK_DRIVER_ROLE_KIND"] == "Role"
    assert env["CONVEYOR_OPERATOR_SPARK_DRIVER_CLUSTER_ROLE"] == f"{RELEASE}-conveyor-spark-driver"


def test_rbac_can_be_left_to_someone_else(helm):
    docs = _render(helm, "rbac.create=false")
    assert sorted(d["kind"] for d in docs) == ["Deployment", "NetworkPolicy", "Secret", "ServiceAccount"]


def test_cluster_role_names_hold_the_release_namespace(helm):
    """Two releases of one name in two namespaces must not share (and fight over) a ClusterRole."""
    a = {d["metadata"]["name"] for d in _render(helm) if d["kind"] == "ClusterRole"}
    result = _run(helm, "template", RELEASE, str(CHART), "--namespace", "other")
    b = {d["metadata"]["name"] for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "ClusterRole"}
    assert len(a) == len(b) == 2 and not a & b


# --------------------------------------------------------------------------------------------
# values and their schema

BAD_VALUES = {
    "replicaCount-not-integer": ["replicaCount=two"],
    "two-operators": ["replicaCount=2"],
    "unknown-top-level-key": ["replicas=1"],
    "unknown-nested-key": ["image.name=x"],
    "bad-log-level": ["logLevel=verbose"],
    "bad-namespace": ["watchNamespaces={Not_A_Namespace}"],
    "bad-pull-policy": ["image.pullPolicy=Sometimes"],
    "non-positive-interval": ["statusIntervalSeconds=0"],
    "fractional-interval": ["statusIntervalSeconds=2.5"],
    "rbac-create-not-boolean": ["rbac.create=maybe"],
}


@pytest.mark.parametrize("sets", BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_schema_rejects_bad_values(helm, sets):
    args = ["template", RELEASE, str(CHART)]
    for s in sets:
        args += ["--set", s]
    result = _run(helm, *args)
    assert result.returncode != 0, f"helm accepted --set {sets}"
    assert "schema" in result.stderr, result.stderr


def test_schema_accepts_a_stopped_operator(helm):
    assert _one(_render(helm, "replicaCount=0"), "Deployment")["spec"]["replicas"] == 0


def test_schema_is_draft07_closed_and_covers_values():
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    assert set(values) <= set(schema["properties"]), "every value is in the schema"
    assert set(schema["properties"]) - set(values) <= {"global"}, "the schema describes no value that does not exist"
    for key, prop in schema["properties"].items():
        assert "type" in prop or "$ref" in prop, f"{key} has no type"


KEY_LINE = re.compile(r"^(?P<indent>\s*)(?:-\s+)?(?P<key>[A-Za-z_][\w.-]*)\s*:(?:\s|$)")


def test_every_key_in_values_yaml_has_a_comment():
    """A key is documented by a comment on its own line (`key: value  # ...`) or by the comment
    block right above it."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = []
    for number, line in enumerate(lines, start=1):
        match = KEY_LINE.match(line)
        if not match:
            continue
        before = lines[number - 2].strip() if number > 1 else ""
        inline = re.search(r"\s#\s*\S", line.split(":", 1)[1])
        if not (before.startswith("#") or inline):
            undocumented.append(f"line {number}: {line.strip()}")
    assert not undocumented, "keys without a comment in values.yaml:\n" + "\n".join(undocumented)
    # The regular expression does find the keys: every key of the parsed file was seen.
    seen = {m["key"] for m in map(KEY_LINE.match, lines) if m}

    def keys(node):
        if isinstance(node, dict):
            for k, v in node.items():
                yield k
                yield from keys(v)
        elif isinstance(node, list):
            for item in node:
                yield from keys(item)

    assert set(keys(yaml.safe_load("\n".join(lines)))) <= seen
