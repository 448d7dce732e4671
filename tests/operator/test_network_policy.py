"""The NetworkPolicies the operator renders per connector (issue 13, item 6). The test node's
bridge CNI does not enforce NetworkPolicy, so these are checked as objects: here what they admit,
in tests/kube that the API server takes them as the operator applies them."""

import json

import pytest
from conveyor_operator import names
from conveyor_operator.reconcile import network_policy, render
from conveyor_operator.settings import OperatorSettings

from conveyor.manifest import ConnectorManifest

OPERATOR_LABELS = ["app.kubernetes.io/name=conveyor", "app.kubernetes.io/instance=rel",
                   "app.kubernetes.io/component=operator"]
SETTINGS = OperatorSettings(network_policy_operator_namespace="conveyor-system",
                            network_policy_operator_labels=OPERATOR_LABELS)


def manifest(**spec):
    base = {"class": "noop-sink", "tasksMax": 2, "kafka": {"bootstrapServers": "kafka:9092"},
            "config": {"topics": "orders"}}
    base.update(spec)
    return ConnectorManifest.from_dict({"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
                                        "metadata": {"name": "orders", "namespace": "data"}, "spec": base})


def policies(settings=SETTINGS, **spec):
    return {p["metadata"]["name"]: p for p in network_policy.network_policies(manifest(**spec), "uid-1", settings)}


def own(*components):
    return {"podSelector": {"matchLabels": {names.LABEL_CONNECTOR: "orders"},
                            "matchExpressions": [{"key": names.LABEL_COMPONENT, "operator": "In",
                                                  "values": list(components)}]}}


OPERATOR = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "conveyor-system"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "conveyor", "app.kubernetes.io/instance": "rel",
                                            "app.kubernetes.io/component": "operator"}}}


def test_two_owned_ingress_policies_select_the_connectors_driver_and_executors():
    found = policies()
    assert set(found) == {"orders-driver", "orders-executor"}
    for component in ("driver", "executor"):
        policy = found[f"orders-{component}"]
        assert (policy["apiVersion"], policy["kind"]) == ("networking.k8s.io/v1", "NetworkPolicy")
        assert policy["metadata"]["namespace"] == "data"
        assert policy["metadata"]["ownerReferences"] == [render.owner_reference("orders", "uid-1")]
        assert policy["metadata"]["labels"][names.LABEL_CONNECTOR] == "orders"
        assert policy["spec"]["podSelector"] == {"matchLabels": {names.LABEL_CONNECTOR: "orders",
                                                                 names.LABEL_COMPONENT: component}}
        assert policy["spec"]["policyTypes"] == ["Ingress"], "egress stays open: connectors reach external systems"


def test_driver_admits_control_from_own_pods_and_the_operator_and_spark_from_executors():
    ingress = policies()["orders-driver"]["spec"]["ingress"]
    assert ingress == [
        {"ports": [{"protocol": "TCP", "port": 8083}], "from": [own("driver", "executor"), OPERATOR]},
        {"from": [own("executor")], "ports": [{"protocol": "TCP", "port": render.SPARK_DRIVER_PORT},
                                              {"protocol": "TCP", "port": render.SPARK_BLOCK_MANAGER_PORT}]},
    ]
    # the ports are the driver container's and the Service's
    deployment = render.driver_deployment(manifest(), "uid-1", SETTINGS)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    admitted = {p["port"] for rule in ingress for p in rule["ports"]}
    assert admitted == {p["containerPort"] for p in container["ports"]}
    # a peer with namespaceSelector and podSelector in ONE element: the operator's pods, not
    # every pod of its namespace nor pods so labelled in any namespace
    assert set(ingress[0]["from"][1]) == {"namespaceSelector", "podSelector"}


def test_control_port_follows_the_setting():
    settings = SETTINGS.model_copy(update={"control_port": 9090})
    assert policies(settings)["orders-driver"]["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 9090}]


def test_executors_admit_only_the_connectors_driver_and_executors():
    assert policies()["orders-executor"]["spec"]["ingress"] == [{"from": [own("driver", "executor")]}]


def test_other_connectors_pods_are_not_admitted():
    """Every peer is selected by this connector's label (or is the operator): a pod of
    connector ``orders-2`` in the same namespace matches none."""
    other = {names.LABEL_CONNECTOR: "orders-2", names.LABEL_COMPONENT: "executor"}
    for policy in policies().values():
        for rule in policy["spec"]["ingress"]:
            for peer in rule["from"]:
                if "namespaceSelector" in peer:
                    continue  # the operator
                labels = peer["podSelector"]["matchLabels"]
                assert not labels.items() <= other.items()


def test_without_the_operators_place_the_control_port_admits_every_source():
    """An operator run outside the chart (no namespace/labels): restricting the control port
    would lock it out; the bearer token still protects the control API."""
    for settings in (OperatorSettings(), SETTINGS.model_copy(update={"network_policy_operator_labels": []}),
                     SETTINGS.model_copy(update={"network_policy_operator_namespace": ""})):
        control = policies(settings)["orders-driver"]["spec"]["ingress"][0]
        assert control == {"ports": [{"protocol": "TCP", "port": 8083}]}


def test_a_label_that_is_not_key_value_is_refused():
    with pytest.raises(ValueError, match="not key=value"):
        policies(SETTINGS.model_copy(update={"network_policy_operator_labels": ["app"]}))


def test_disabled_renders_none_and_names_the_ones_to_delete():
    off = SETTINGS.model_copy(update={"network_policy": False})
    assert policies(off) == {}
    assert "NetworkPolicy" not in [o["kind"] for o in render.objects(manifest(), "u", 1, off)]
    assert network_policy.disabled_policies(manifest(), off) == [
        ("networking.k8s.io/v1", "NetworkPolicy", "data", "orders-driver"),
        ("networking.k8s.io/v1", "NetworkPolicy", "data", "orders-executor"),
    ]
    assert network_policy.disabled_policies(manifest(), SETTINGS) == []


def test_local_mode_keeps_the_same_policies():
    """With ``executor.instances: 0`` the driver still binds Spark's ports on its pod IP."""
    assert policies(spark={"executor": {"instances": 0}}) == policies()


def test_settings_from_the_environment():
    settings = OperatorSettings.from_env({
        "CONVEYOR_OPERATOR_NETWORK_POLICY": "false",
        "CONVEYOR_OPERATOR_NETWORK_POLICY_OPERATOR_NAMESPACE": "ops",
        "CONVEYOR_OPERATOR_NETWORK_POLICY_OPERATOR_LABELS": "a=1, b=2",
    })
    assert settings.network_policy is False
    assert settings.network_policy_operator_namespace == "ops"
    assert settings.network_policy_operator_labels == ["a=1", "b=2"]
    assert OperatorSettings.from_env({}).network_policy is True


def test_metrics_scrapers_are_admitted_to_the_drivers_control_port_only():
    """The chart's metrics.scrapers (CONVEYOR_OPERATOR_NETWORK_POLICY_METRICS_PEERS, JSON) join the
    control port's sources, so that Prometheus can scrape GET /metrics; Spark's ports stay closed to them."""
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    settings = OperatorSettings.from_env({
        "CONVEYOR_OPERATOR_NETWORK_POLICY_OPERATOR_NAMESPACE": "conveyor-system",
        "CONVEYOR_OPERATOR_NETWORK_POLICY_OPERATOR_LABELS": ",".join(OPERATOR_LABELS),
        "CONVEYOR_OPERATOR_NETWORK_POLICY_METRICS_PEERS": json.dumps([prometheus]),
    })
    assert settings.network_policy_metrics_peers == [prometheus]
    control, spark = policies(settings)["orders-driver"]["spec"]["ingress"]
    assert control["from"] == [own("driver", "executor"), OPERATOR, prometheus]
    assert prometheus not in spark["from"]
    assert OperatorSettings.from_env({"CONVEYOR_OPERATOR_NETWORK_POLICY_METRICS_PEERS": ""}
                                     ).network_policy_metrics_peers == []
    assert OperatorSettings().network_policy_metrics_peers == []
