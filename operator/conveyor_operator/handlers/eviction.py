"""Eviction translation: a connector pod about to be disrupted (a ``DisruptionTarget``
condition: the eviction API, a node drain, preemption, the taint manager) gets its tasks
drained, so their closing-aware commits (KIP-275's ``is_closing()``) happen before the pod
goes, and the eviction is recorded (an ``EvictionTranslated`` Event, ``status.evictions``).
The pods' own ``preStop`` hook asks for the same drain; whichever comes first does it, the
other finds nothing left to commit.

A pod deleted without that condition (a rollout of the driver Deployment, Spark removing an
executor, ``kubectl delete pod``) is no eviction: its ``preStop`` hook drains it, and a
driver's SIGTERM stops every task with a closing commit; nothing is recorded."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from conveyor.control.client import DriverRefused, DriverUnreachable
from conveyor_operator import GROUP, KIND, VERSION, names
from conveyor_operator.context import MAX_EVICTIONS_KEPT, RUNTIME, driver_client, shared_kube
from conveyor_operator.observe.conditions import now

log = logging.getLogger(__name__)


def disruption(status: dict[str, Any]) -> str | None:
    """``"DisruptionTarget"`` for a pod that Kubernetes is disrupting, None otherwise
    (including a plain deletion; see the module docstring)."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return "DisruptionTarget"
    return None


def committed_offsets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{"topic", "partition", "offset"}]`` from a drain result's ``"topic:partition"`` keys."""
    out = []
    for task in result.get("tasks") or []:
        for key, offset in (task.get("committed") or {}).items():
            topic, _, partition = str(key).rpartition(":")
            if topic and partition.isdigit():
                out.append({"topic": topic, "partition": int(partition), "offset": int(offset)})
    return sorted(out, key=lambda c: (c["topic"], c["partition"]))


@kopf.on.event("v1", "pods", labels={names.LABEL_CONNECTOR: kopf.PRESENT})
def pod_event(event: dict[str, Any], meta: kopf.Meta, status: kopf.Status, name: str, namespace: str,
              **_: Any) -> None:
    if event.get("type") == "DELETED":
        with RUNTIME.lock:
            RUNTIME.drained_pods.discard(meta.get("uid"))
        return
    labels = meta.get("labels") or {}
    if labels.get(names.LABEL_COMPONENT) not in (names.DRIVER, names.EXECUTOR):
        return
    trigger = disruption(status)
    if trigger is None:
        return
    with RUNTIME.lock:
        if meta["uid"] in RUNTIME.drained_pods:
            return
        RUNTIME.drained_pods.add(meta["uid"])
    connector_name = labels[names.LABEL_CONNECTOR]
    kube = shared_kube()
    connector = kube.get(f"{GROUP}/{VERSION}", KIND, namespace, connector_name)
    if connector is None or connector["metadata"].get("deletionTimestamp"):
        return
    grace = ((connector.get("spec") or {}).get("shutdown") or {}).get("gracePeriodSeconds", 60)
    try:
        result = driver_client(connector_name, namespace).drain(pod=name, timeout_s=float(grace))
    except DriverRefused as exc:
        if exc.status != 404:
            shared_kube().event(connector, "Warning", "EvictionNotTranslated", message=f"pod {name} ({trigger}): {exc}")
            return
        result = {"tasks": [], "complete": True}
    except DriverUnreachable as exc:
        shared_kube().event(connector, "Warning", "EvictionNotTranslated",
                  message=f"pod {name} ({trigger}): driver not reachable ({exc}); the pod's preStop hook drains")
        return
    committed = committed_offsets(result)
    tasks = [t["id"] for t in result.get("tasks") or []]
    complete = bool(result.get("complete"))
    listed = ", ".join(f"{c['topic']}-{c['partition']}@{c['offset']}" for c in committed) or "nothing new"
    message = (f"pod {name} ({trigger}): drained tasks {tasks}, committed {listed}"
               + ("" if complete else "; NOT every closing commit finished in time"))
    shared_kube().event(connector, "Normal" if complete else "Warning", "EvictionTranslated", message)
    entry = {"pod": name, "time": now(), "trigger": trigger, "tasks": tasks, "committed": committed,
             "complete": complete}
    kube.append_to_connector_status(namespace, connector_name, "evictions", entry, keep=MAX_EVICTIONS_KEPT)
    log.info("connector %s/%s: %s", namespace, connector_name, message)
