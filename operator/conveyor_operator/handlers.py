"""kopf handlers: what the operator does for each Connector and its pods.

==========================  ==========================================================
event                       what happens
==========================  ==========================================================
create / update / resume    validate (images and ServiceAccounts against the
                            operator's allow-lists too); apply the namespace's Spark RBAC (once per
                            namespace), the ConfigMap, Service and Deployment
                            (server-side apply, owned by the Connector); push config
                            and state changes to a running driver (``PUT /config``,
                            ``POST /state``) or roll it
timer                       ``GET /status`` of the driver into ``.status``
(metrics)                   each create / update / resume is counted and timed
                            (:mod:`conveyor_operator.metrics`)
``conveyor.dev/restart``    restart the tasks; ``conveyor.dev/restart-task: "<id>"``
                            restarts one; the annotation is removed when done
delete (finalizer)          ``POST /stop?connector_deleted=true`` to the driver, or a
                            one-shot cleanup Job when none runs; failures keep the
                            finalizer, back off, and show as ``CleanupFailed``
pod DisruptionTarget or     ``POST /drain?pod=`` (closing-aware commits), an
deletionTimestamp           ``EvictionTranslated`` Event and a ``status.evictions`` entry
==========================  ==========================================================

Handlers are synchronous (kopf runs them in its thread pool) and share one
:class:`~conveyor_operator.kube.Kube` created at startup.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime, timezone
from typing import Any, NoReturn

import kopf
from kubernetes import client
from kubernetes import config as kube_config
from pydantic import ValidationError

from conveyor.control.client import DriverClient, DriverRefused, DriverUnreachable
from conveyor.manifest import AutoRestartSpec, ConnectorManifest, ManifestError
from conveyor_operator import (
    GROUP,
    PLURAL,
    VERSION,
    auto_restart,
    connector_classes,
    metrics,
    names,
    network_policy,
    render,
    succession,
)
from conveyor_operator.conditions import Conditions
from conveyor_operator.control_key import OperatorKey
from conveyor_operator.control_secret import ControlSecrets, NotOurs
from conveyor_operator.kube import Kube
from conveyor_operator.logs import redact_handlers
from conveyor_operator.pod_health import POD_PROBLEM_REASONS, pod_problem
from conveyor_operator.settings import OperatorSettings
from conveyor_operator.shared_objects import SharedObjects
from conveyor_operator.status import ConditionType as C
from conveyor_operator.validation import check_references, not_permitted

log = logging.getLogger("conveyor_operator")

RESOURCE = (GROUP, VERSION, PLURAL)
MAX_EVICTIONS_KEPT = 10
MAX_BACKOFF_SECONDS = 300.0
MISSING_REFERENCE_MAX_DELAY_SECONDS = 30.0
_STATE_OF = {"running": "RUNNING", "paused": "PAUSED", "stopped": "STOPPED"}
SPEC_PROBLEMS = ("InvalidSpec", "NotAllowed", "InvalidConfig", "MissingReference")
"""Degraded reasons about the spec itself: the status timer leaves them for the next edit."""


class _Runtime:
    """What the handlers share; set up by :func:`startup`."""

    settings: OperatorSettings = OperatorSettings.from_env()
    kube: Kube | None = None
    shared_objects: SharedObjects = SharedObjects()
    drained_pods: set[str] = set()
    control_secrets: ControlSecrets | None = None
    lock = threading.Lock()


RUNTIME = _Runtime()


def _configuration() -> client.Configuration:
    """In-cluster credentials, else ``$KUBECONFIG`` (read at call time: the client reads
    the variable only when it is imported)."""
    configuration = client.Configuration()
    try:
        kube_config.load_incluster_config(client_configuration=configuration)
    except kube_config.ConfigException:
        kube_config.load_kube_config(config_file=os.environ.get("KUBECONFIG"), client_configuration=configuration)
    return configuration


def _api_client(max_workers: int) -> client.ApiClient:
    configuration = _configuration()
    configuration.connection_pool_maxsize = max_workers
    return client.ApiClient(configuration)


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
    redact_handlers()  # also those installed since main() (kopf run configures its own)
    ours = OperatorSettings.from_env()
    RUNTIME.settings = ours
    RUNTIME.kube = Kube(_api_client(ours.max_workers), ours.field_manager,
                        request_timeout_s=(5.0, ours.kube_request_timeout_seconds))
    RUNTIME.drained_pods = set()
    RUNTIME.shared_objects = SharedObjects()
    RUNTIME.control_secrets = ControlSecrets(OperatorKey.load(ours.key_file))
    settings.persistence.finalizer = names.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="kopf.conveyor.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="kopf.conveyor.dev", key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = ours.max_workers
    settings.peering.standalone = True
    settings.watching.server_timeout = 600
    settings.watching.client_timeout = 660
    # Watching named namespaces, kopf needs neither to list namespaces nor to watch CRDs (it
    # finds the Connector resource through discovery), so the chart's namespaced mode has no
    # ClusterRole at all; a CRD installed after the operator then needs an operator restart.
    settings.scanning.disabled = bool(ours.watch_namespaces)
    # Only the pods of connectors reach the operator: the API server filters, not kopf.
    settings.watching.label_selectors["v1", "pods"] = names.LABEL_CONNECTOR


@kopf.on.login()
def login(**_: Any) -> kopf.ConnectionInfo:
    """kopf's own connection, from the same credentials as the handlers' client."""
    cfg = _configuration()
    token = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    scheme, _, token = (token or "").partition(" ") if token and " " in token else ("Bearer", "", token)
    return kopf.ConnectionInfo(
        server=cfg.host, ca_path=cfg.ssl_ca_cert, insecure=not cfg.verify_ssl,
        username=cfg.username or None, password=cfg.password or None,
        scheme=scheme if token else None, token=token or None,
        certificate_path=cfg.cert_file, private_key_path=cfg.key_file,
    )


@kopf.on.cleanup()
def shutdown(**_: Any) -> None:
    if RUNTIME.kube is not None:
        RUNTIME.kube.api.close()


def shared_kube() -> Kube:
    assert RUNTIME.kube is not None, "operator not started"
    return RUNTIME.kube


def driver_client(manifest_name: str, namespace: str, base_url: str | None = None) -> DriverClient:
    """A client of the connector's driver (at its Service, or ``base_url``) that sends the admin
    token of the connector's ``<name>-control`` Secret."""
    s = RUNTIME.settings
    secrets = RUNTIME.control_secrets
    assert secrets is not None, "operator not started"
    return DriverClient(base_url or s.control_url(manifest_name, namespace), s.request_timeout_seconds,
                        token=secrets.admin_token(shared_kube(), namespace, manifest_name),
                        on_unauthorized=lambda: secrets.forget(namespace, manifest_name))


def parse(body: kopf.Body | dict[str, Any]) -> ConnectorManifest:
    """The Connector as the runtime's manifest model.

    Raises:
        ManifestError: naming each invalid field (``spec.tasksMax: ...``).
    """
    meta = body["metadata"]
    return ConnectorManifest.from_dict({
        "apiVersion": body.get("apiVersion"), "kind": body.get("kind"),
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "spec": dict(body.get("spec") or {}),
    }, source=f"Connector {meta['namespace']}/{meta['name']}", allowed_spark_conf=RUNTIME.settings.allowed_spark_conf)


def write_status(namespace: str, name: str, conditions: Conditions, **fields: Any) -> None:
    shared_kube().patch_connector_status(namespace, name, {"conditions": conditions.items, **fields})


def _reject(body: kopf.Body, conditions: Conditions, reason: str, message: str) -> None:
    """An invalid spec: say so in conditions and an Event, and do not retry (the next
    edit of the Connector triggers a new reconciliation)."""
    metrics.reject()
    conditions.set(C.DEGRADED, True, reason, message)
    conditions.set(C.READY, False, reason, message)
    conditions.set(C.PROGRESSING, False, reason, message)
    shared_kube().event(body, "Warning", reason, message=message)
    meta = body["metadata"]
    write_status(meta["namespace"], meta["name"], conditions, observedGeneration=meta.get("generation"))


@kopf.on.create(*RESOURCE)
@kopf.on.update(*RESOURCE)
@kopf.on.resume(*RESOURCE)
@metrics.observe_reconcile
def reconcile(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, uid: str, retry: int = 0, **_: Any) -> None:
    """Render and apply what runs the connector; push live changes to its driver.

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
    missing = check_references(shared_kube(), manifest)
    if missing:
        conditions.set(C.DEGRADED, True, "MissingReference", missing)
        conditions.set(C.READY, False, "MissingReference", missing)
        shared_kube().event(body, "Warning", "MissingReference", message=missing)
        write_status(manifest.metadata.namespace, manifest.name, conditions, observedGeneration=generation)
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
    rolled = None if known_config is None else _current_rolled_hash(kube, ns, name)
    if known_config is not None and known_config != wanted_config:
        if not _push_config(body, manifest):
            rolled = wanted_config
    elif known_config is not None:
        _push_state(manifest)
    ensure_namespace_objects(manifest)
    assert RUNTIME.control_secrets is not None, "operator not started"
    try:
        control_secret_version = RUNTIME.control_secrets.ensure(
            kube, body, render.owner_reference(name, uid), status.get("controlSecretVersion"), not first_apply)
    except NotOurs as exc:
        _wait_for_predecessor(ns, name, conditions, generation, [str(exc)])
    for obj in render.objects(manifest, uid, generation or 0, RUNTIME.settings, rolled, control_secret_version):
        kube.apply(obj)
    for policy in network_policy.disabled_policies(manifest, RUNTIME.settings):
        kube.delete(*policy)
    applied = f"generation {generation} applied" + (f"; {left_to_driver}" if left_to_driver else "")
    conditions.set(C.PROGRESSING, True, "Reconciled", applied)
    conditions.set(C.DEGRADED, False, "AsExpected")
    if conditions.get(C.READY) is None or conditions.get(C.READY).get("reason") in SPEC_PROBLEMS:
        conditions.set(C.READY, False, "DriverStarting", "waiting for the driver's first status")
    write_status(ns, name, conditions, observedGeneration=generation, tasksMax=manifest.spec.tasks_max,
                  configHash=wanted_config, controlSecretVersion=control_secret_version)


def _wait_for_predecessor(namespace: str, name: str, conditions: Conditions, generation: int | None,
                          earlier: list[str]) -> NoReturn:
    message = (f"{', '.join(earlier)} of the same name is not this Connector's (an earlier Connector's "
               "still going, or someone else's): this one starts once they are gone, so that an earlier "
               "cleanup never touches what it provisions and the operator never takes over another's objects")
    conditions.set(C.PROGRESSING, False, "WaitingForPredecessor", message)
    write_status(namespace, name, conditions, observedGeneration=generation)
    raise kopf.TemporaryError(message, delay=RUNTIME.settings.wait_poll_seconds)


def ensure_namespace_objects(manifest: ConnectorManifest) -> None:
    """The namespace's shared Spark ServiceAccount and RoleBinding (applied once per
    namespace and process, see :mod:`conveyor_operator.shared_objects`)."""
    for obj in render.namespace_objects(manifest, RUNTIME.settings):
        RUNTIME.shared_objects.ensure(shared_kube(), obj)


def _current_rolled_hash(kube: Kube, namespace: str, name: str) -> str | None:
    deployment = kube.get("apps/v1", "Deployment", namespace, names.driver(name))
    if deployment is None:
        return None
    annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
    return annotations.get(names.ANNOTATION_CONFIG_HASH)


def _push_config(body: kopf.Body, manifest: ConnectorManifest) -> bool:
    """``PUT /config`` to the running driver. False when it cannot take it live (not
    reachable, or it refused): the caller then rolls the Deployment."""
    driver = driver_client(manifest.name, manifest.metadata.namespace)
    try:
        driver.put_config(render.spec_dict(manifest))
    except DriverUnreachable:
        return False
    except DriverRefused as exc:
        if exc.status == 400:
            shared_kube().event(body, "Warning", "InvalidConfig", message=exc.message)
        elif exc.status == 409:  # only a new driver may take it (conveyor.runtime.rest.live_config)
            shared_kube().event(body, "Normal", "RollingDriver", message=exc.message)
        log.info("driver of %s refused the new config live (%s): rolling", manifest.name, exc)
        return False
    shared_kube().event(body, "Normal", "Reconfigured", message="configuration applied to the running driver")
    return True


def _push_state(manifest: ConnectorManifest) -> None:
    """Move a running driver to ``spec.state`` when it is elsewhere (a driver that is
    not running reads the state from its ConfigMap when it starts)."""
    driver = driver_client(manifest.name, manifest.metadata.namespace)
    try:
        current = (driver.status().get("connector") or {}).get("state")
        if current in _STATE_OF.values() and current != _STATE_OF[manifest.spec.state.value]:
            driver.set_state(manifest.spec.state.value)
    except (DriverUnreachable, DriverRefused) as exc:
        log.info("state of %s not pushed to its driver: %s", manifest.name, exc)


def task_lag(lag: Any) -> int | None:
    """A task's lag for ``status.tasks[].lag``: the driver reports it per partition
    (``{"topic:partition": records}``); the status holds their sum."""
    if isinstance(lag, bool):
        return None
    if isinstance(lag, int):
        return lag
    if isinstance(lag, dict):
        return sum(v for v in lag.values() if isinstance(v, int) and not isinstance(v, bool))
    return None


def backoff(retry: int) -> float:
    return min(MAX_BACKOFF_SECONDS, 5.0 * 2 ** min(retry, 10))


def missing_reference_delay(retry: int) -> float:
    """Seconds until the ``retry``-th (0-based) look for a missing Secret or ConfigMap: 5, 10,
    20, then 30 for as long as it is missing."""
    return min(MISSING_REFERENCE_MAX_DELAY_SECONDS, backoff(retry))


@kopf.on.create(*RESOURCE, annotations={names.ANNOTATION_RESTART: kopf.PRESENT})
@kopf.on.update(*RESOURCE, annotations={names.ANNOTATION_RESTART: kopf.PRESENT})
@kopf.on.resume(*RESOURCE, annotations={names.ANNOTATION_RESTART: kopf.PRESENT})
def restart(body: kopf.Body, name: str, namespace: str, retry: int, **_: Any) -> None:
    """``conveyor.dev/restart``: restart every task, then remove the annotation."""
    try:
        result = driver_client(name, namespace).restart()
    except (DriverUnreachable, DriverRefused) as exc:
        raise kopf.TemporaryError(f"restart not delivered: {exc}", delay=backoff(retry)) from None
    shared_kube().remove_annotation(namespace, name, names.ANNOTATION_RESTART)
    shared_kube().patch_connector_status(namespace, name, {"autoRestart": None})  # a manual restart resets the count
    shared_kube().event(body, "Normal", "Restarted", message=f"tasks restarted: {result}")


@kopf.on.create(*RESOURCE, annotations={names.ANNOTATION_RESTART_TASK: kopf.PRESENT})
@kopf.on.update(*RESOURCE, annotations={names.ANNOTATION_RESTART_TASK: kopf.PRESENT})
@kopf.on.resume(*RESOURCE, annotations={names.ANNOTATION_RESTART_TASK: kopf.PRESENT})
def restart_task(body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, retry: int, **_: Any) -> None:
    """``conveyor.dev/restart-task: "<id>"``: restart one task, then remove the annotation."""
    value = meta["annotations"][names.ANNOTATION_RESTART_TASK]
    try:
        task_id = int(value)
    except ValueError:
        shared_kube().event(body, "Warning", "InvalidAnnotation",
                  message=f"{names.ANNOTATION_RESTART_TASK}: {value!r} is not a task id; removed")
        shared_kube().remove_annotation(namespace, name, names.ANNOTATION_RESTART_TASK)
        return
    try:
        driver_client(name, namespace).restart_task(task_id)
    except DriverRefused as exc:
        if exc.status == 404:
            shared_kube().event(body, "Warning", "InvalidAnnotation", message=f"{exc.message}; annotation removed")
            shared_kube().remove_annotation(namespace, name, names.ANNOTATION_RESTART_TASK)
            return
        raise kopf.TemporaryError(f"restart of task {task_id} not delivered: {exc}", delay=backoff(retry)) from None
    except DriverUnreachable as exc:
        raise kopf.TemporaryError(f"restart of task {task_id} not delivered: {exc}", delay=backoff(retry)) from None
    shared_kube().remove_annotation(namespace, name, names.ANNOTATION_RESTART_TASK)
    shared_kube().event(body, "Normal", "TaskRestarted", message=f"task {task_id} restarted")


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
        write_status(namespace, name, conditions)
        return
    connector = report.get("connector") or {}
    tasks = [{k: v for k, v in {
        "id": t.get("id"), "state": t.get("state"), "pod": t.get("pod") or t.get("worker_id") or None,
        "lag": task_lag(t.get("lag")), "trace": _short(t.get("trace")),
    }.items() if v is not None} for t in report.get("tasks", [])]
    failed = [t["id"] for t in tasks if t["state"] == "FAILED"]
    wanted = _STATE_OF.get((body.get("spec") or {}).get("state", "running"), "RUNNING")
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
        entry["trace"] = _short(connector["trace"])
    restarts.pop("note", None)
    write_status(namespace, name, conditions, connector=entry, tasks=tasks, **restarts)


def _auto_restart(body: kopf.Body, status: kopf.Status, failing: bool, name: str, namespace: str) -> dict[str, Any]:
    """``spec.autoRestart`` (:mod:`conveyor_operator.auto_restart`): restart what failed when
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


TRACE_SUMMARY_CHARS = 300


def _short(trace: str | None, limit: int = TRACE_SUMMARY_CHARS) -> str | None:
    """A Python traceback's summary for ``.status``: the first line of its (last) exception,
    ``Type: message``, at most ``limit`` characters; the lines after it (a database's
    ``DETAIL`` quoting row values) and the frames are left out. The whole trace stays in the
    pod's log and the driver's authenticated ``GET /status``."""
    if not trace:
        return None
    lines = [line for line in trace.strip().splitlines() if line.strip()]
    after_frames = max((i for i, line in enumerate(lines) if line.startswith(" ")), default=-1) + 1
    summary = (lines[after_frames] if after_frames < len(lines) else lines[-1]).strip()
    return summary if len(summary) <= limit else summary[:limit - 1] + "…"


from conveyor_operator import deletion, eviction, offsets  # noqa: E402,F401 - registers their handlers
