"""The connectors' status: each driver's ``GET /status`` copied into its Connector's ``.status``,
with its conditions (Ready, Degraded), pod problems and automatic restarts.

Who reads when (issue 33): :class:`~conveyor_operator.observe.status_poller.StatusPoller`, on
threads of its own (never kopf's handler threads, so creates, updates and deletes never wait for
a driver), reads a driver when :mod:`conveyor_operator.observe.status_schedule` says it is due:
every interval while it answers, backing off to a minute while it does not, at once after one of
its pods changed. A driver applied for the first time that does not answer yet keeps the status
the apply wrote (:mod:`conveyor_operator.observe.driver_start`). What it reads of the Connector and its pods comes from the operator's
in-memory indices (:func:`connector_bodies`, :func:`connector_pods`, fed by its watches), not
from a request; the status is written only when it changed. A Connector whose driver never
answers and whose pods do not change costs no API request at all."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from conveyor.control.client import DriverRefused, DriverUnreachable
from conveyor.manifest import AutoRestartSpec
from conveyor_operator import metrics, names
from conveyor_operator.context import (
    RESOURCE,
    RUNTIME,
    SPEC_PROBLEMS,
    driver_client,
    shared_kube,
    write_status,
)
from conveyor_operator.diffbase import STATUS_KEY
from conveyor_operator.handlers import autoscaling
from conveyor_operator.observe import auto_restart, starting_offsets
from conveyor_operator.observe.conditions import Conditions
from conveyor_operator.observe.driver_start import still_starting
from conveyor_operator.observe.driver_status import short_trace, task_lag
from conveyor_operator.observe.pod_health import POD_PROBLEM_REASONS, pod_problem, pod_summary
from conveyor_operator.observe.status_schedule import Key
from conveyor_operator.reconcile import initial_offsets
from conveyor_operator.reconcile.push import STATE_OF
from conveyor_operator.status import ConditionType as C

log = logging.getLogger("conveyor_operator")


@kopf.index("v1", "pods", labels={names.LABEL_CONNECTOR: kopf.PRESENT})
def connector_pods(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict[tuple[str, str], Any]:
    """The operator's in-memory index of the connectors' pods, by (namespace, Connector): what
    :func:`~conveyor_operator.observe.pod_health.pod_problem` reads of each.

    A pod that changed (its driver Ready, an executor gone) also has its connector's status read
    now instead of after a back-off: kopf calls an index on every event, on its event loop and
    without a log line per call (an event handler logs one at INFO per event, which at a thousand
    Connectors was most of the operator's log)."""
    key = (namespace, labels[names.LABEL_CONNECTOR])
    RUNTIME.status_schedule.hurry(key)
    return {key: pod_summary(body)}


@kopf.index(*RESOURCE)
def connector_bodies(namespace: str, name: str, meta: kopf.Meta, status: kopf.Status, body: kopf.Body,
                     **_: Any) -> dict[tuple[str, str], Any]:
    """The operator's in-memory index of the Connectors, by (namespace, name): what a status read
    needs of each (:func:`status_view`).

    A Connector applied once (``status.observedGeneration``) has its status read from then on; one
    being deleted no more; the status poller's resync (:func:`tracked_keys`) settles the rest."""
    key = (namespace, name)
    if _to_read(meta, status):
        RUNTIME.status_schedule.track(key)
    elif meta.get("deletionTimestamp"):
        RUNTIME.status_schedule.forget(key)
    return {key: status_view(body)}


def _to_read(meta: dict[str, Any], status: dict[str, Any]) -> bool:
    """Whether a Connector's status is read: applied once and not being deleted."""
    return not meta.get("deletionTimestamp") and status.get("observedGeneration") is not None


def tracked_keys(connectors: kopf.Index) -> list[Key]:
    """The Connectors whose status is to be read, from the index: applied once and not being
    deleted (what :func:`connector_bodies` tracks). Called on the status poller's thread while
    kopf's event loop updates the index: a copy of its keys is taken first."""
    keys: list[Key] = []
    for key in list(connectors.keys()):
        body = _latest(connectors, key)
        if body is not None and _to_read(body["metadata"], body["status"]):
            keys.append(key)
    return keys


def status_view(body: kopf.Body | dict[str, Any]) -> dict[str, Any]:
    """What a status read and its Events use of a Connector: its kind, identity, generation,
    ``spec`` and ``status``; not kopf's copy of the last handled spec
    (``status.lastHandledConfiguration``), its annotations nor its managed fields, which would
    double what a thousand Connectors cost the operator in memory."""
    meta = body.get("metadata") or {}
    status = {k: v for k, v in (body.get("status") or {}).items() if k != STATUS_KEY}
    return {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"),
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "generation", "deletionTimestamp")
                         if meta.get(k) is not None},
            "spec": dict(body.get("spec") or {}), "status": status}


def _latest(index: kopf.Index, key: Key) -> Any:
    """The value ``index`` holds for ``key`` (a Connector re-created under the same name may have
    two for a moment: its predecessor's goes with the predecessor's DELETED event)."""
    values = list(index.get(key, ()))
    return values[-1] if values else None


def read_status(key: Key, connectors: kopf.Index, pods: kopf.Index) -> None:
    """Copy the driver's ``/status`` of the Connector ``key`` into its ``.status`` and derive Ready
    and Degraded (called by the status poller, on one of its threads)."""
    namespace, name = key
    body = _latest(connectors, key)
    if body is None:  # not stored yet, or gone: the poller's resync settles which (StatusSchedule.sync)
        autoscaling.forget(key)
        return
    meta, status = body["metadata"], body["status"]
    if not _to_read(meta, status):
        return
    conditions = Conditions(status.get("conditions"), meta.get("generation"))
    if conditions.get(C.DEGRADED) and conditions.get(C.DEGRADED)["reason"] in SPEC_PROBLEMS:
        return
    connector_pod_list = list(pods.get(key, ()))
    try:
        report = driver_client(name, namespace).status()
    except (DriverUnreachable, DriverRefused) as exc:
        metrics.STATUS_READS.labels("unreachable").inc()
        RUNTIME.status_schedule.unreachable(key, time.monotonic())
        starting = isinstance(exc, DriverUnreachable) and still_starting(
            conditions, connector_pod_list, RUNTIME.settings.driver_start_timeout_seconds, datetime.now(timezone.utc))
        if not _report_pod_problem(body, conditions, connector_pod_list) and not starting:
            refused = isinstance(exc, DriverRefused) and exc.status in (401, 403)  # not our <name>-control tokens
            conditions.set(C.READY, False, "DriverUnauthorized" if refused else "DriverUnreachable", str(exc))
        _write_if_changed(status, namespace, name, conditions)
        return
    metrics.STATUS_READS.labels("answered").inc()
    RUNTIME.status_schedule.answered(key, time.monotonic())
    connector = report.get("connector") or {}
    scaled: dict[str, Any] = {}
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
        if wanted == "RUNNING":
            scaled = autoscaling.autoscale(key, body, status, report)
    elif not _report_pod_problem(body, conditions, connector_pod_list):
        conditions.set(C.READY, False, "Converging", f"connector {connector.get('state')}, want {wanted}")
    entry = {"state": connector.get("state", "UNASSIGNED")}
    if connector.get("worker_id"):
        entry["workerId"] = connector["worker_id"]
    if connector.get("trace"):
        entry["trace"] = short_trace(connector["trace"])
    restarts.pop("note", None)
    started = _starting_offsets(body, status, report.get("starting_offsets"))
    _write_if_changed(status, namespace, name, conditions, connector=entry, tasks=tasks, **restarts, **scaled,
                      **started)


def _starting_offsets(body: dict[str, Any], status: dict[str, Any], report: Any) -> dict[str, Any]:
    """``status.startingOffsets`` from the driver's first report of them, with its Events, once
    ``spec.initialOffsets`` is out of the driver's ConfigMap
    (:mod:`conveyor_operator.reconcile.initial_offsets`). Returns the status field to write."""
    if starting_offsets.recorded(status):
        return {}
    entry = starting_offsets.status_entry(report)
    if entry is None:
        return {}
    meta = body["metadata"]
    kube = shared_kube()
    try:
        if (body.get("spec") or {}).get("initialOffsets") is not None:  # else no ConfigMap holds them
            initial_offsets.forget_initial_offsets(kube, meta["namespace"], meta["name"])
    except ApiException as exc:  # a conflict with a reconcile's apply, say: the next read tries again
        log.info("connector %s/%s: spec.initialOffsets not yet out of the driver's ConfigMap: %s",
                 meta["namespace"], meta["name"], exc.reason)
        return {}
    for reason, message in starting_offsets.events(report):
        kube.event(body, "Normal", reason, message=message)
    return {"startingOffsets": entry}


def _write_if_changed(status: dict[str, Any], namespace: str, name: str, conditions: Conditions,
                      **fields: Any) -> bool:
    """Write the conditions and ``fields`` unless ``.status`` already says exactly that (a
    driver that stays unreachable, a connector whose tasks and lag stay the same): no request
    then. Returns whether it wrote."""
    if status.get("conditions") == conditions.items and all(status.get(k) == v for k, v in fields.items()):
        metrics.STATUS_WRITES.labels("unchanged").inc()
        return False
    write_status(shared_kube(), namespace, name, conditions, **fields)
    metrics.STATUS_WRITES.labels("written").inc()
    return True


def _auto_restart(body: dict[str, Any], status: dict[str, Any], failing: bool, name: str, namespace: str) -> dict[str, Any]:
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


def _report_pod_problem(body: dict[str, Any], conditions: Conditions, pods: list[dict[str, Any]]) -> bool:
    """When a pod of the connector cannot run (unschedulable, image not pulled, crash loop):
    Degraded and not Ready with the pod's reason, and a Warning Event when that is new.
    Otherwise clears a Degraded that such a problem had set. Returns True for a problem."""
    problem = pod_problem(pods)
    degraded = conditions.get(C.DEGRADED) or {}
    if problem is None:
        if degraded.get("status") == "True" and degraded.get("reason") in POD_PROBLEM_REASONS:
            conditions.set(C.DEGRADED, False, "AsExpected")
        return False
    if degraded.get("status") != "True" or degraded.get("reason") != problem.reason \
            or degraded.get("message") != problem.message:
        shared_kube().event(body, "Warning", problem.reason, problem.message)
    conditions.set(C.DEGRADED, True, problem.reason, problem.message)
    conditions.set(C.READY, False, problem.reason, problem.message)
    return True
