"""The status timer: the driver's ``GET /status`` copied into the Connector's ``.status``, with
its conditions (Ready, Degraded), pod problems and automatic restarts."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

import kopf
from pydantic import ValidationError

from conveyor.control.client import DriverRefused, DriverUnreachable
from conveyor.manifest import AutoRestartSpec
from conveyor_operator import names
from conveyor_operator.context import (
    RESOURCE,
    RUNTIME,
    SPEC_PROBLEMS,
    driver_client,
    shared_kube,
    write_status,
)
from conveyor_operator.observe import auto_restart
from conveyor_operator.observe.conditions import Conditions
from conveyor_operator.observe.driver_status import short_trace, task_lag
from conveyor_operator.observe.pod_health import POD_PROBLEM_REASONS, pod_problem
from conveyor_operator.reconcile.push import STATE_OF
from conveyor_operator.status import ConditionType as C

log = logging.getLogger("conveyor_operator")


@kopf.timer(*RESOURCE, interval=RUNTIME.settings.status_interval_seconds, sharp=False)
def refresh_status(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, name: str, namespace: str,
                   **_: Any) -> None:
    """Copy the driver's ``/status`` into ``.status`` and derive Ready and Degraded."""
    if meta.get("deletionTimestamp") or status.get("observedGeneration") is None:
        return
    conditions = Conditions(status.get("conditions"), meta.get("generation"))
    if conditions.get(C.DEGRADED) and conditions.get(C.DEGRADED)["reason"] in SPEC_PROBLEMS:
        return
    try:
        report = driver_client(name, namespace).status()
    except (DriverUnreachable, DriverRefused) as exc:
        if not _report_pod_problem(body, conditions, namespace, name):
            refused = isinstance(exc, DriverRefused) and exc.status in (401, 403)  # not our <name>-control tokens
            conditions.set(C.READY, False, "DriverUnauthorized" if refused else "DriverUnreachable", str(exc))
        write_status(shared_kube(), namespace, name, conditions)
        return
    connector = report.get("connector") or {}
    tasks = [{k: v for k, v in {
        "id": t.get("id"), "state": t.get("state"), "pod": t.get("pod") or t.get("worker_id") or None,
        "lag": task_lag(t.get("lag")), "trace": short_trace(t.get("trace")),
    }.items() if v is not None} for t in report.get("tasks", [])]
    failed = [t["id"] for t in tasks if t["state"] == "FAILED"]
    wanted = STATE_OF.get((body.get("spec") or {}).get("state", "running"), "RUNNING")
    failing = connector.get("state") == "FAILED" or bool(failed)
    restarts = _auto_restart(body, status, failing, name, namespace)
    if failing:
        what = "connector" if connector.get("state") == "FAILED" else f"tasks {failed}"
        note = restarts.pop("note", "")
        conditions.set(C.DEGRADED, True, "Failed", f"{what} FAILED (see status.connector/tasks trace){note}")
        conditions.set(C.READY, False, "Failed", f"{what} FAILED")
    elif connector.get("state") == wanted and all(t["state"] == wanted for t in tasks):
        conditions.set(C.DEGRADED, False, "AsExpected")
        conditions.set(C.READY, True, wanted.capitalize(), f"connector and {len(tasks)} task(s) {wanted}")
    elif not _report_pod_problem(body, conditions, namespace, name):
        conditions.set(C.READY, False, "Converging", f"connector {connector.get('state')}, want {wanted}")
    entry = {"state": connector.get("state", "UNASSIGNED")}
    if connector.get("worker_id"):
        entry["workerId"] = connector["worker_id"]
    if connector.get("trace"):
        entry["trace"] = short_trace(connector["trace"])
    restarts.pop("note", None)
    write_status(shared_kube(), namespace, name, conditions, connector=entry, tasks=tasks, **restarts)


def _auto_restart(body: kopf.Body, status: kopf.Status, failing: bool, name: str, namespace: str) -> dict[str, Any]:
    """``spec.autoRestart`` (:mod:`conveyor_operator.observe.auto_restart`): restart what failed when
    due. Returns the status fields to write (``autoRestart`` when it changed) and a ``note``
    for the Degraded message."""
    raw = (body.get("spec") or {}).get("autoRestart")
    try:
        spec = None if raw is None else AutoRestartSpec.model_validate(raw)
    except ValidationError:  # the CRD's schema admitted it; reconcile reports an invalid spec
        return {}
    current = status.get("autoRestart")
    decision = auto_restart.decide(spec, current, failing, name, datetime.now(timezone.utc))
    if decision.gave_up:
        return {"note": f"; gave up after {current['count']} automatic restart(s) (spec.autoRestart.maxRestarts)"}
    if decision.restart:
        try:
            driver_client(name, namespace).restart(only_failed=True)
        except (DriverUnreachable, DriverRefused) as exc:
            log.warning("connector %s/%s: automatic restart not delivered: %s", namespace, name, exc)
            return {}
        count = decision.status["count"] if decision.status else 0
        shared_kube().event(body, "Normal", "AutoRestarted",
                            message=f"automatic restart {count} of the failed connector/tasks (spec.autoRestart)")
        return {"autoRestart": decision.status, "note": f"; automatic restart {count} made"}
    return {} if decision.status == current else {"autoRestart": decision.status}


def _report_pod_problem(body: kopf.Body, conditions: Conditions, namespace: str, name: str) -> bool:
    """When a pod of the connector cannot run (unschedulable, image not pulled, crash loop):
    Degraded and not Ready with the pod's reason, and a Warning Event when that is new.
    Otherwise clears a Degraded that such a problem had set. Returns True for a problem."""
    kube = shared_kube()
    problem = pod_problem(kube.list_pods(namespace, f"{names.LABEL_CONNECTOR}={name}"))
    degraded = conditions.get(C.DEGRADED) or {}
    if problem is None:
        if degraded.get("status") == "True" and degraded.get("reason") in POD_PROBLEM_REASONS:
            conditions.set(C.DEGRADED, False, "AsExpected")
        return False
    if degraded.get("status") != "True" or degraded.get("reason") != problem.reason \
            or degraded.get("message") != problem.message:
        kube.event(body, "Warning", problem.reason, problem.message)
    conditions.set(C.DEGRADED, True, problem.reason, problem.message)
    conditions.set(C.READY, False, problem.reason, problem.message)
    return True
