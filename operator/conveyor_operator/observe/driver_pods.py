"""Which pods the operator may call directly, with the connector's admin token, when its
driver does not answer through the Service (issue 28, "no deputy").

Labels prove nothing: ``conveyor.dev/connector=<name>,conveyor.dev/component=driver`` is on any
pod someone gave those labels, and a pod's ``status.podIP`` outlives the pod's network (a Failed
or terminating pod's address may already be another pod's, in any namespace). A pod is the
connector's driver only when the operator started it:

    Pod --controller--> ReplicaSet --controller--> Deployment ``<name>-driver``
        --controller--> Connector ``<name>`` with the Connector's uid

and it is ``Running`` with no ``deletionTimestamp`` (so its IP is still its own). Any other pod
gets no request: the deletion path then falls back to its cleanup Job.

Why calls through the driver Service stay: the Service (``render.driver_service``) selects by the
same two labels, so a pod carrying them would be an endpoint too. The pods that can carry them are

* the operator's driver pods (its Deployment's template);
* Spark's executor pods, whose labels the operator renders (``executor`` component) but to
  which ``spark.kubernetes.executor.label.*`` adds any label; ``spec.spark.sparkConf`` refuses
  ``spark.kubernetes.*.label.*`` keys (issue 28's sparkConf allow-list), so a Connector author
  cannot relabel them;
* pods created by whoever may create pods in the namespace: not a Connector author, who may
  only create Connectors. Anyone who may create pods there (the drivers' ServiceAccount
  included) can mount the ``<name>-control`` Secret into one and read the token anyway, so the
  Service gives them nothing more.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from conveyor.manifest import KIND
from conveyor_operator import GROUP, names
from conveyor_operator.kube import Kube
from conveyor_operator.ownership import controlled_by

APPS = "apps"


def started_driver_pods(connector: Mapping[str, Any], deployment: dict[str, Any] | None,
                        replica_sets: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of ``pods`` that are the connector's driver as the operator started it, and
    running (see the module docstring); in the order given.

    Args:
        connector: the Connector (``metadata.name``, ``namespace`` and ``uid`` are read).
        deployment: the Deployment ``<name>-driver`` as read from the API, or None.
        replica_sets, pods: as listed from the API (the ones not in the chain are left out).
    """
    if (deployment is None or deployment["metadata"].get("name") != names.driver(connector["metadata"]["name"])
            or not controlled_by(deployment, GROUP, KIND, connector)):
        return []
    owned_sets = [rs for rs in replica_sets if controlled_by(rs, APPS, "Deployment", deployment)]
    return [pod for pod in pods
            if _running(pod) and any(controlled_by(pod, APPS, "ReplicaSet", rs) for rs in owned_sets)]


def _running(pod: dict[str, Any]) -> bool:
    return ((pod.get("status") or {}).get("phase") == "Running"
            and not (pod.get("metadata") or {}).get("deletionTimestamp") and _address(pod) is not None)


def _address(pod: dict[str, Any]) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address((pod.get("status") or {}).get("podIP") or "")
    except ValueError:
        return None


def pod_url(pod: dict[str, Any], port: int) -> str:
    """``http://<podIP>:<port>`` of a pod :func:`started_driver_pods` chose (an IPv6 address in
    brackets)."""
    address = _address(pod)
    return f"http://[{address}]:{port}" if isinstance(address, ipaddress.IPv6Address) else f"http://{address}:{port}"


def driver_pod_urls(kube: Kube, connector: Mapping[str, Any], port: int) -> list[str]:
    """Control API URLs of :func:`started_driver_pods` (three API reads: the Deployment, its
    ReplicaSets and the driver pods, by the labels the operator renders)."""
    meta = connector["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    deployment = kube.get("apps/v1", "Deployment", namespace, names.driver(name))
    if deployment is None:
        return []
    selector = f"{names.LABEL_CONNECTOR}={name},{names.LABEL_COMPONENT}={names.DRIVER}"
    replica_sets = kube.list_objects("apps/v1", "ReplicaSet", namespace, selector)
    pods = kube.list_pods(namespace, selector)
    return [pod_url(pod, port) for pod in started_driver_pods(connector, deployment, replica_sets, pods)]
