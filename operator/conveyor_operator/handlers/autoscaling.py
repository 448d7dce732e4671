"""The autoscaler at work (``spec.autoscaler``): at each status read of a running sink
connector, the driver's load goes into the decision (:mod:`conveyor_operator.observe.autoscaler`);
a new task count goes to the driver live (``PUT /config``, which starts or stops only the
difference, with closing commits), then into ``status.autoscaler`` and an Event
(``AutoscalerScaledUp`` / ``AutoscalerScaledDown``). ``spec.tasksMax`` is left as the user wrote
it: the CRD refuses changes of it while the autoscaler is enabled
(:data:`conveyor.manifest.autoscaler.OWNERSHIP_RULE`), and reconciling runs the autoscaler's
count (:func:`conveyor_operator.observe.autoscaler.running_manifest`)."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Any

from conveyor.control.client import DriverRefused, DriverUnreachable
from conveyor.control.load import SinkLoad
from conveyor.manifest import ConnectorManifest, ManifestError
from conveyor.manifest.autoscaler import autoscaling
from conveyor_operator.context import RUNTIME, driver_client, parse, shared_kube
from conveyor_operator.observe import autoscaler
from conveyor_operator.observe.status_schedule import Key
from conveyor_operator.reconcile import render

log = logging.getLogger("conveyor_operator")

SCALED_UP = "AutoscalerScaledUp"
SCALED_DOWN = "AutoscalerScaledDown"
NOT_SCALED = "AutoscalerScaleFailed"


def forget(key: Key) -> None:
    """Drop what is kept of a Connector that is gone or no longer autoscaled."""
    RUNTIME.autoscaler_histories.pop(key, None)


def _send_again(manifest: ConnectorManifest, tasks: int, key: Key) -> None:
    """``PUT /config`` of ``manifest`` with ``tasks`` again (:func:`autoscaler.driver_behind`)."""
    namespace, name = key
    try:
        driver_client(name, namespace).put_config(render.spec_dict(autoscaler.with_tasks(manifest, tasks)))
    except (DriverUnreachable, DriverRefused) as exc:
        log.warning("connector %s/%s: the autoscaler's %d task(s) not sent again: %s", namespace, name, tasks, exc)
        return
    log.info("connector %s/%s: the driver ran another count than the autoscaler's %d task(s): sent again",
             namespace, name, tasks)


def autoscale(key: Key, body: dict[str, Any], status: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """Decide on the driver's ``report`` (its ``GET /status``) of a sink connector whose
    connector and tasks all run, and act on it. Returns the ``.status`` fields to write (none
    when nothing changed). Called on a status poller thread."""
    try:
        manifest = parse(body)
    except ManifestError:  # reconciling reports it
        return {}
    spec = manifest.spec.autoscaler
    if not autoscaling(spec):
        forget(key)
        return {}
    assert spec is not None
    current = autoscaler.running_tasks(manifest, status)
    known = status.get("autoscaler") or {}
    fields = {} if known.get("tasks") == current else {"autoscaler": {**known, "tasks": current}}
    try:
        load = SinkLoad.from_json(report["load"])
    except (KeyError, TypeError, ValueError):  # a source connector, or the group's lag not read yet
        return fields
    history = RUNTIME.autoscaler_histories.setdefault(key, autoscaler.History())
    namespace, name = key
    now = time.monotonic()
    if autoscaler.driver_behind(spec, history, len(report.get("tasks") or ()), current, now):
        _send_again(manifest, current, key)
        return fields
    decision = autoscaler.decide(spec, history, load, current, now)
    if decision.tasks is None or decision.evaluation is None:
        return fields
    scaled = autoscaler.with_tasks(manifest, decision.tasks)
    evaluation = decision.evaluation
    try:
        driver_client(name, namespace).put_config(render.spec_dict(scaled))
    except (DriverUnreachable, DriverRefused) as exc:
        shared_kube().event(body, "Warning", NOT_SCALED,
                            message=f"tasks {current} -> {decision.tasks} not applied: {exc}")
        log.warning("connector %s/%s: autoscaler's tasks %d -> %d not applied: %s", namespace, name, current,
                    decision.tasks, exc)
        return fields
    history.restart()
    reason = SCALED_UP if decision.tasks > current else SCALED_DOWN
    shared_kube().event(body, "Normal", reason,
                        message=f"tasks {current} -> {decision.tasks}: {evaluation.describe()}")
    log.info("connector %s/%s: autoscaler: tasks %d -> %d (%s)", namespace, name, current, decision.tasks,
             evaluation.describe())
    return {"autoscaler": {"tasks": decision.tasks, "lastScaleTime": datetime.now(timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ"), "lastDecision": evaluation.to_status()},
            "tasksMax": decision.tasks, "configHash": render.config_hash(scaled)}
