"""Why a connector's pods are not running, in the words of the Connector's conditions: an
image that cannot be pulled, a pod the scheduler cannot place, a container that crash-loops or
cannot be created. Read from the pods' own status (what ``kubectl describe pod`` shows), so a
stuck connector says which pod and why instead of staying silently Pending."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conveyor_operator import names

#: Container waiting reasons that do not go away by waiting (the kubelet's names).
STUCK_WAITING = frozenset({
    "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "RegistryUnavailable",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff",
})

#: Every reason a :class:`PodProblem` can have.
POD_PROBLEM_REASONS = STUCK_WAITING | {"Unschedulable"}


@dataclass(frozen=True)
class PodProblem:
    """A pod of the connector that cannot run: ``reason`` is a Kubernetes reason (``Unschedulable``,
    ``ImagePullBackOff``, ``CrashLoopBackOff``, ...), ``message`` names the pod and says why."""

    pod: str
    reason: str
    message: str


def _problem(pod: dict[str, Any]) -> PodProblem | None:
    name = (pod.get("metadata") or {}).get("name", "?")
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" \
                and cond.get("reason") == "Unschedulable":
            return PodProblem(name, "Unschedulable", f"pod {name} cannot be scheduled: {cond.get('message', '')}")
    statuses = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    for container in statuses:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in STUCK_WAITING:
            detail = waiting.get("message") or ""
            if reason == "CrashLoopBackOff":
                last = ((container.get("lastState") or {}).get("terminated") or {})
                detail = f"restarted {container.get('restartCount', 0)} times, last exit code " \
                         f"{last.get('exitCode', '?')} ({last.get('reason', 'unknown')})"
            image = container.get("image", "")
            return PodProblem(name, reason, f"pod {name}, container {container.get('name')} (image {image}): "
                                            f"{reason}{': ' + detail if detail else ''}")
    return None


def pod_problem(pods: Iterable[dict[str, Any]]) -> PodProblem | None:
    """The first pod (by name) of ``pods`` that cannot run, or None when each is running,
    starting normally or terminating."""
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("name", "")):
        problem = _problem(pod)
        if problem is not None:
            return problem
    return None


def component(pod: dict[str, Any]) -> str:
    """The pod's ``conveyor.dev/component`` label (``driver``, ``executor``, ``cleanup``), or ``""``."""
    return ((pod.get("metadata") or {}).get("labels") or {}).get(names.LABEL_COMPONENT, "")


def pod_ready(pod: dict[str, Any]) -> bool:
    """Whether the pod's ``Ready`` condition is True (its readiness probe passes)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def pod_summary(pod: dict[str, Any]) -> dict[str, Any]:
    """What :func:`pod_problem` reads of a pod (name, deletion, conditions, container statuses)
    and its ``conveyor.dev/component`` label (:func:`component`): the operator keeps this much of
    each connector pod in memory (its pod index), not the whole object."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    kept = {k: meta[k] for k in ("name", "deletionTimestamp") if meta.get(k)}
    if role := component(pod):
        kept["labels"] = {names.LABEL_COMPONENT: role}
    return {
        "metadata": kept,
        "status": {k: status[k] for k in ("conditions", "initContainerStatuses", "containerStatuses")
                   if status.get(k)},
    }
