"""The NetworkPolicies of one connector (issue 13, item 6): who may connect to its pods.

Two policies per connector, owned by the Connector like its PodDisruptionBudget, so that "the
connector's own pods" is exactly the label ``conveyor.dev/connector=<name>``:

=====================================  ===============================================
``NetworkPolicy <name>-driver``        driver pod: the control API
                                       (``settings.control_port``) from the
                                       connector's own pods (executors' ``preStop``
                                       drain, their task runners), from the
                                       operator's pods and from
                                       ``settings.network_policy_metrics_peers``
                                       (Prometheus: ``GET /metrics``); Spark's driver RPC
                                       (:data:`~conveyor_operator.reconcile.render.SPARK_DRIVER_PORT`)
                                       and block manager
                                       (:data:`~conveyor_operator.reconcile.render.SPARK_BLOCK_MANAGER_PORT`)
                                       from the connector's executors
``NetworkPolicy <name>-executor``      executor pods: any port from the connector's
                                       driver and executors (Spark's executor block
                                       manager, on a random port unless
                                       ``spark.blockManager.port`` is set, is all an
                                       executor listens on)
=====================================  ===============================================

Ingress only: egress stays open (connectors reach Kafka and external systems the operator
cannot know). The cleanup Job's pod listens on nothing and is not selected.

The operator's pods are those labelled ``settings.network_policy_operator_labels`` in the
namespace ``settings.network_policy_operator_namespace`` (the chart passes its own); when either
is unset (an operator run outside the chart) the control port admits every source, and only
the bearer token protects it. NetworkPolicy needs a CNI that enforces it, and kubelet probes
(``/healthz`` on the control port) come from the node, which most CNIs always admit.
"""

from __future__ import annotations

from typing import Any

from conveyor.manifest import ConnectorManifest
from conveyor_operator import names
from conveyor_operator.ownership import owner_reference
from conveyor_operator.reconcile.spark_pods import SPARK_BLOCK_MANAGER_PORT, SPARK_DRIVER_PORT
from conveyor_operator.settings import OperatorSettings

API_VERSION = "networking.k8s.io/v1"
KIND = "NetworkPolicy"


def policy_name(connector: str, component: str) -> str:
    """``<connector>-driver`` or ``<connector>-executor``."""
    return f"{connector}-{component}"


def operator_peer(settings: OperatorSettings) -> dict[str, Any] | None:
    """The operator's pods as a NetworkPolicy peer (its namespace by the
    ``kubernetes.io/metadata.name`` label the API server sets on every namespace, and its pod
    labels), or None when the settings do not say where the operator runs.

    Raises:
        ValueError: an operator label that is not ``key=value``.
    """
    namespace = settings.network_policy_operator_namespace
    labels = {}
    for item in settings.network_policy_operator_labels:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"network_policy_operator_labels: {item!r} is not key=value")
        labels[key.strip()] = value.strip()
    if not namespace or not labels:
        return None
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "podSelector": {"matchLabels": labels}}


def _pods(connector: str, *components: str) -> dict[str, Any]:
    """A peer: the connector's pods of ``components``, in the policy's namespace."""
    return {"podSelector": {
        "matchLabels": {names.LABEL_CONNECTOR: connector},
        "matchExpressions": [{"key": names.LABEL_COMPONENT, "operator": "In", "values": list(components)}],
    }}


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def network_policies(manifest: ConnectorManifest, uid: str, settings: OperatorSettings) -> list[dict[str, Any]]:
    """The connector's two NetworkPolicies (see the module's table), or none when
    ``settings.network_policy`` is off."""
    if not settings.network_policy:
        return []
    name, namespace = manifest.name, manifest.metadata.namespace
    own_pods = _pods(name, names.DRIVER, names.EXECUTOR)
    operator = operator_peer(settings)
    control: dict[str, Any] = {"ports": _tcp(settings.control_port)}
    if operator is not None:
        control["from"] = [own_pods, operator, *settings.network_policy_metrics_peers]

    def policy(component: str, ingress: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": policy_name(name, component), "namespace": namespace,
                         "labels": names.labels(name, component),
                         "ownerReferences": [owner_reference(name, uid)]},
            "spec": {"podSelector": {"matchLabels": names.selector(name, component)},
                     "policyTypes": ["Ingress"], "ingress": ingress},
        }

    return [
        policy(names.DRIVER, [
            control,
            {"from": [_pods(name, names.EXECUTOR)], "ports": _tcp(SPARK_DRIVER_PORT, SPARK_BLOCK_MANAGER_PORT)},
        ]),
        policy(names.EXECUTOR, [{"from": [own_pods]}]),
    ]


def disabled_policies(manifest: ConnectorManifest, settings: OperatorSettings) -> list[tuple[str, str, str, str]]:
    """``(apiVersion, kind, namespace, name)`` of the policies to delete when
    ``settings.network_policy`` is off (they may remain from when it was on); none when on."""
    if settings.network_policy:
        return []
    return [(API_VERSION, KIND, manifest.metadata.namespace, policy_name(manifest.name, component))
            for component in (names.DRIVER, names.EXECUTOR)]
