"""The Connector's own handlers: reconcile its spec into what runs it (validate, apply, push
live changes), and the restart annotations."""

from __future__ import annotations

from typing import Any, NoReturn

import kopf

from conveyor.control.client import DriverRefused, DriverUnreachable
from conveyor.manifest import ConnectorManifest, ManifestError
from conveyor.manifest.autoscaler import autoscaling
from conveyor_operator import metrics, names
from conveyor_operator.context import (
    RESOURCE,
    RUNTIME,
    SPEC_PROBLEMS,
    api_errors_retried,
    backoff,
    driver_client,
    missing_reference_delay,
    parse,
    shared_kube,
    status_fields,
    write_status,
)
from conveyor_operator.handlers import autoscaling as autoscaling_handlers
from conveyor_operator.observe import autoscaler, starting_offsets
from conveyor_operator.observe.conditions import Conditions
from conveyor_operator.observe.driver_start import STARTING
from conveyor_operator.reconcile import initial_offsets, network_policy, render, succession
from conveyor_operator.reconcile.push import current_rolled_hash, ensure_namespace_objects, push_config, push_state
from conveyor_operator.status import ConditionType as C
from conveyor_operator.validate import connector_classes
from conveyor_operator.validate.checks import check_references, not_permitted


def _reject(body: kopf.Body, conditions: Conditions, reason: str, message: str) -> None:
    """An invalid spec: say so in conditions and an Event, and do not retry (the next
    edit of the Connector triggers a new reconciliation)."""
    metrics.reject()
    conditions.set(C.DEGRADED, True, reason, message)
    conditions.set(C.READY, False, reason, message)
    conditions.set(C.PROGRESSING, False, reason, message)
    shared_kube().event(body, "Warning", reason, message=message)
    meta = body["metadata"]
    write_status(shared_kube(), meta["namespace"], meta["name"], conditions, observedGeneration=meta.get("generation"))


@kopf.on.create(*RESOURCE)
@kopf.on.update(*RESOURCE)
@kopf.on.resume(*RESOURCE)
@metrics.observe_reconcile
@api_errors_retried
def reconcile(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, uid: str, patch: kopf.Patch, retry: int = 0,
              **_: Any) -> None:
    """Render and apply what runs the connector; push live changes to its driver. The status it
    ends with goes into kopf's ``patch``: kopf writes it once the handler returns, in one request
    with its own record of the handled change (:mod:`conveyor_operator.diffbase`).

    A missing Secret or ConfigMap is looked for again after 5, 10, 20 then every 30 seconds
    (:func:`missing_reference_delay`): the operator may not watch Secrets, and the usual cause is
    a ``kubectl apply`` of a folder that created the Connector just before its Secret."""
    if meta.get("deletionTimestamp"):
        return
    generation = meta.get("generation")
    conditions = Conditions(status.get("conditions"), generation)
    try:
        manifest = parse(body)
    except ManifestError as exc:
        return _reject(body, conditions, "InvalidSpec", str(exc))
    refused = not_permitted(manifest, RUNTIME.settings)
    if refused:
        return _reject(body, conditions, "NotAllowed", refused)
    errors, left_to_driver = connector_classes.config_errors(manifest, RUNTIME.settings)
    if errors:
        return _reject(body, conditions, "InvalidConfig", errors)
    if left_to_driver:
        shared_kube().event(body, "Normal", connector_classes.EVENT_REASON, message=left_to_driver)
    manifest = autoscaler.running_manifest(manifest, status)
    manifest = initial_offsets.settled_manifest(manifest, starting_offsets.recorded(status))
    missing = check_references(shared_kube(), manifest)
    if missing:
        conditions.set(C.DEGRADED, True, "MissingReference", missing)
        conditions.set(C.READY, False, "MissingReference", missing)
        shared_kube().event(body, "Warning", "MissingReference", message=missing)
        write_status(shared_kube(), manifest.metadata.namespace, manifest.name, conditions,
                     observedGeneration=generation)
        raise kopf.TemporaryError(missing, delay=missing_reference_delay(retry))

    kube = shared_kube()
    ns, name = manifest.metadata.namespace, manifest.name
    # Until its first apply (status.configHash is written after it) the names may be another's;
    # after it they are this Connector's, so the API calls of the check are spared on every update.
    first_apply = status.get("configHash") is None
    if first_apply and (earlier := succession.predecessor_objects(kube, ns, name, uid)):
        _wait_for_predecessor(ns, name, conditions, generation, earlier)
    wanted_config = render.config_hash(manifest)
    known_config = status.get("configHash")
    rolled = None if known_config is None else current_rolled_hash(kube, ns, name)
    if known_config is not None and known_config != wanted_config:
        if not push_config(body, manifest, driver_client(name, ns), kube):
            rolled = wanted_config
    elif known_config is not None:
        push_state(manifest, driver_client(name, ns))
    ensure_namespace_objects(manifest, RUNTIME.settings, RUNTIME.shared_objects, kube)
    assert RUNTIME.control_secrets is not None, "operator not started"
    control_secret_version = RUNTIME.control_secrets.version(body)
    config_map, *others = render.objects(manifest, uid, generation or 0, RUNTIME.settings, rolled,
                                         control_secret_version)
    # The ConfigMap before the Secret: what tells a first apply cut short that a Secret of the name
    # is this Connector's (succession.predecessor_objects).
    kube.apply(config_map)
    RUNTIME.control_secrets.ensure(kube, body, render.owner_reference(name, uid), status.get("controlSecretVersion"))
    for obj in others:
        kube.apply(obj)
    for policy in network_policy.disabled_policies(manifest, RUNTIME.settings):
        kube.delete(*policy)
    applied = f"generation {generation} applied" + (f"; {left_to_driver}" if left_to_driver else "")
    conditions.set(C.PROGRESSING, True, "Reconciled", applied)
    conditions.set(C.DEGRADED, False, "AsExpected")
    if conditions.get(C.READY) is None or conditions.get(C.READY).get("reason") in SPEC_PROBLEMS:
        conditions.set(C.READY, False, STARTING, "waiting for the driver's first status")
    patch.status.update(status_fields(conditions, observedGeneration=generation,
                                      tasksMax=manifest.spec.tasks_max, selector=names.pods_selector(name),
                                      configHash=wanted_config,
                                      controlSecretVersion=control_secret_version,
                                      **_autoscaler_status(manifest, status)))


def _autoscaler_status(manifest: ConnectorManifest, status: kopf.Status) -> dict[str, Any]:
    """``status.autoscaler`` removed once the autoscaler is not enabled (its count is then gone)."""
    if status.get("autoscaler") is not None and not autoscaling(manifest.spec.autoscaler):
        autoscaling_handlers.forget((manifest.metadata.namespace, manifest.name))
        return {"autoscaler": None}
    return {}


def _wait_for_predecessor(namespace: str, name: str, conditions: Conditions, generation: int | None,
                          earlier: list[str]) -> NoReturn:
    message = (f"{', '.join(earlier)} of the same name is not this Connector's (an earlier Connector's "
               "still going, or someone else's): this one starts once they are gone, so that an earlier "
               "cleanup never touches what it provisions and the operator never takes over another's objects")
    conditions.set(C.PROGRESSING, False, "WaitingForPredecessor", message)
    write_status(shared_kube(), namespace, name, conditions, observedGeneration=generation)
    raise kopf.TemporaryError(message, delay=RUNTIME.settings.wait_poll_seconds)


@kopf.on.create(*RESOURCE, annotations={names.ANNOTATION_RESTART: kopf.PRESENT})
@kopf.on.update(*RESOURCE, annotations={names.ANNOTATION_RESTART: kopf.PRESENT})
@kopf.on.resume(*RESOURCE, annotations={names.ANNOTATION_RESTART: kopf.PRESENT})
def restart(body: kopf.Body, name: str, namespace: str, retry: int, **_: Any) -> None:
    """``conveyor.dev/restart``: restart every task, then remove the annotation."""
    _restart(names.ANNOTATION_RESTART, body, name, namespace, retry)


@kopf.on.create(*RESOURCE, annotations={names.ANNOTATION_RESTART_STRIMZI: kopf.PRESENT})
@kopf.on.update(*RESOURCE, annotations={names.ANNOTATION_RESTART_STRIMZI: kopf.PRESENT})
@kopf.on.resume(*RESOURCE, annotations={names.ANNOTATION_RESTART_STRIMZI: kopf.PRESENT})
def strimzi_restart(body: kopf.Body, name: str, namespace: str, retry: int, **_: Any) -> None:
    """Strimzi's ``strimzi.io/restart`` on a KafkaConnector, the same way."""
    _restart(names.ANNOTATION_RESTART_STRIMZI, body, name, namespace, retry)


def _restart(key: str, body: kopf.Body, name: str, namespace: str, retry: int) -> None:
    try:
        result = driver_client(name, namespace).restart()
    except (DriverUnreachable, DriverRefused) as exc:
        raise kopf.TemporaryError(f"restart not delivered: {exc}", delay=backoff(retry)) from None
    shared_kube().remove_annotation(namespace, name, key)
    shared_kube().patch_connector_status(namespace, name, {"autoRestart": None})  # a manual restart resets the count
    shared_kube().event(body, "Normal", "Restarted", message=f"tasks restarted: {result}")


@kopf.on.create(*RESOURCE, annotations={names.ANNOTATION_RESTART_TASK: kopf.PRESENT})
@kopf.on.update(*RESOURCE, annotations={names.ANNOTATION_RESTART_TASK: kopf.PRESENT})
@kopf.on.resume(*RESOURCE, annotations={names.ANNOTATION_RESTART_TASK: kopf.PRESENT})
def restart_task(body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, retry: int, **_: Any) -> None:
    """``conveyor.dev/restart-task: "<id>"``: restart one task, then remove the annotation."""
    _restart_task(names.ANNOTATION_RESTART_TASK, body, meta, name, namespace, retry)


@kopf.on.create(*RESOURCE, annotations={names.ANNOTATION_RESTART_TASK_STRIMZI: kopf.PRESENT})
@kopf.on.update(*RESOURCE, annotations={names.ANNOTATION_RESTART_TASK_STRIMZI: kopf.PRESENT})
@kopf.on.resume(*RESOURCE, annotations={names.ANNOTATION_RESTART_TASK_STRIMZI: kopf.PRESENT})
def strimzi_restart_task(body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, retry: int, **_: Any) -> None:
    """Strimzi's ``strimzi.io/restart-task: "<id>"`` on a KafkaConnector, the same way."""
    _restart_task(names.ANNOTATION_RESTART_TASK_STRIMZI, body, meta, name, namespace, retry)


def _restart_task(key: str, body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, retry: int) -> None:
    value = meta["annotations"][key]
    try:
        task_id = int(value)
    except ValueError:
        shared_kube().event(body, "Warning", "InvalidAnnotation", message=f"{key}: {value!r} is not a task id; removed")
        shared_kube().remove_annotation(namespace, name, key)
        return
    try:
        driver_client(name, namespace).restart_task(task_id)
    except DriverRefused as exc:
        if exc.status == 404:
            shared_kube().event(body, "Warning", "InvalidAnnotation", message=f"{exc.message}; annotation removed")
            shared_kube().remove_annotation(namespace, name, key)
            return
        raise kopf.TemporaryError(f"restart of task {task_id} not delivered: {exc}", delay=backoff(retry)) from None
    except DriverUnreachable as exc:
        raise kopf.TemporaryError(f"restart of task {task_id} not delivered: {exc}", delay=backoff(retry)) from None
    shared_kube().remove_annotation(namespace, name, key)
    shared_kube().event(body, "Normal", "TaskRestarted", message=f"task {task_id} restarted")
