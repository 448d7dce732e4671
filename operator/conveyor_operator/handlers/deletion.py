"""Deletion through the finalizer: the connector-deleted stop path (KAFKA-14651's
``stop(connector_deleted=True)``), by the running driver or by a one-shot cleanup Job. A
Connector with nothing to remove outside Kubernetes (``deletionPolicy: {cleanup: false}``,
offsets retained) carries no finalizer (:func:`cleanup_at_deletion`).

Failures keep the finalizer and back off (5 s doubling to 5 min) with a
``CleanupFailed`` condition and Event; ``conveyor.dev/skip-cleanup: "true"`` gives up
explicitly. An operator that is down only delays all this: the finalizer waits for it.

A driver that no longer answers through its Service (no ready endpoint, the Service gone) is
asked through its pod's IP, only that of a running pod the operator's own Deployment started
(:mod:`conveyor_operator.observe.driver_pods`). When the Connector's namespace is deleted, Kubernetes
deletes its pods first (KEP-5080) and the Connector only after they are gone: the driver, at
SIGTERM, sees the namespace terminating and runs the connector-deleted stop path itself
(:mod:`conveyor.runtime.deletion.namespace`). The operator then finds no driver and cannot
create a cleanup Job in a terminating namespace: it removes the finalizer with a
``NamespaceTerminating`` warning rather than hold the namespace in ``Terminating`` forever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import kopf

from conveyor.control.client import DriverRefused, DriverTimedOut, DriverUnreachable
from conveyor.manifest import ManifestError, OffsetsPolicy
from conveyor_operator import names
from conveyor_operator.context import (
    RESOURCE,
    RUNTIME,
    backoff,
    driver_client,
    parse,
    shared_kube,
    write_status,
)
from conveyor_operator.kube import namespace_terminating
from conveyor_operator.observe.conditions import Conditions
from conveyor_operator.observe.driver_pods import driver_pod_urls
from conveyor_operator.observe.pod_health import component
from conveyor_operator.reconcile import render, succession
from conveyor_operator.reconcile.push import ensure_namespace_objects
from conveyor_operator.status import ConditionType as C
from conveyor_operator.validate.checks import not_permitted

log = logging.getLogger(__name__)


#: Degraded reasons under which reconciliation applied nothing: the connector never ran.
NEVER_APPLIED = ("InvalidConfig", "NotAllowed")


def never_ran(conditions: list[dict[str, Any]], driver_deployment_exists: Callable[[], bool]) -> str:
    """Why there is nothing to clean up, or ``""``: the spec was refused before anything was
    applied (``Degraded`` with a reason of :data:`NEVER_APPLIED`) and no driver Deployment exists
    (one from an earlier, valid generation would mean the connector ran).
    ``driver_deployment_exists`` is asked (a GET) only of a Connector whose conditions say refused."""
    degraded = next((c for c in conditions if c.get("type") == C.DEGRADED.value), {})
    if degraded.get("status") != "True" or degraded.get("reason") not in NEVER_APPLIED or driver_deployment_exists():
        return ""
    return f"the spec was refused ({degraded['reason']}) before anything was applied, so the connector never ran"


def cleanup_at_deletion(spec: kopf.Spec | dict[str, Any], **_: Any) -> bool:
    """Whether deleting the Connector has anything to do outside Kubernetes, so that it carries the
    finalizer (kopf adds it, and removes it again, as this says; a filter of :func:`delete`).

    Only a spec that says ``deletionPolicy: {cleanup: false}`` and keeps the offsets (``offsets``
    unset or ``retain``) has nothing: its deletion is the garbage collector's alone, with no
    finalizer held by an operator that may be down, and no two writes of the Connector per
    delete (issue 33). The spec's own ``deletionPolicy`` decides even when another of its fields is
    invalid (the CRD has checked the policy's types): ``cleanup: false`` is what it asks for at
    deletion, whatever an earlier generation said. Any other invalid spec keeps the finalizer, and
    :func:`delete` cleans up with the last applied generation's policy."""
    policy = spec.get("deletionPolicy") or {}
    if not isinstance(policy, dict):
        return True
    return policy.get("cleanup", True) is not False or policy.get("offsets", OffsetsPolicy.RETAIN.value) != OffsetsPolicy.RETAIN.value


@kopf.on.delete(*RESOURCE, when=cleanup_at_deletion)
def delete(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, name: str, namespace: str, uid: str,
           retry: int, connector_pods: kopf.Index, **_: Any) -> None:
    """Hold the finalizer until what the connector provisioned outside Kafka is gone."""
    conditions = Conditions(status.get("conditions"), meta.get("generation"))
    if (meta.get("annotations") or {}).get(names.ANNOTATION_SKIP_CLEANUP) == "true":
        indexed = any(component(pod) == names.CLEANUP for pod in connector_pods.get((namespace, name), []))
        if conditions.get(C.DELETING) is not None or indexed:
            _end_cleanup_job(namespace, name, uid)
        shared_kube().event(body, "Warning", "CleanupSkipped",
                  message=f'{names.ANNOTATION_SKIP_CLEANUP} is "true": nothing outside Kubernetes was cleaned up')
        return
    try:
        manifest = parse(body)
    except ManifestError:
        last = succession.last_applied_manifest(shared_kube(), namespace, name, uid,
                                                RUNTIME.settings.allowed_spark_conf)
        if last is None:
            shared_kube().event(body, "Normal", "NothingToCleanUp",
                                message="the spec was never valid, so the connector never ran")
            return
        manifest, generation = last
        if retry == 0:
            shared_kube().event(body, "Normal", "CleanupOfLastApplied",
                                message=f"the current spec is invalid: cleaning up with generation {generation}, "
                                        "the last one applied")
    policy = manifest.spec.deletion_policy
    delete_offsets = policy.offsets is OffsetsPolicy.DELETE
    if not policy.cleanup and not delete_offsets:
        return
    if reason := never_ran(conditions.items, lambda: shared_kube().get(
            "apps/v1", "Deployment", namespace, names.driver(name)) is not None):
        shared_kube().event(body, "Normal", "NothingToCleanUp", message=reason)
        return
    if not conditions.is_true(C.DELETING):
        # written before any cleanup Job is created: the skip-cleanup path above reads it as "a Job may exist"
        conditions.set(C.DELETING, True, "CleaningUp", "running the connector-deleted stop path")
        write_status(shared_kube(), namespace, name, conditions)
    grace = manifest.spec.shutdown.grace_period_seconds
    try:
        report = _stop_driver(body, connector_deleted=policy.cleanup, delete_offsets=delete_offsets,
                              timeout_s=grace)
    except DriverTimedOut as exc:
        # Still stopping (closing commits, the connector's cleanup): never a Job beside it.
        # The next call waits for the same stop and returns its report.
        raise kopf.TemporaryError(f"the driver is still stopping: {exc}", delay=RUNTIME.settings.wait_poll_seconds) from None
    except DriverUnreachable:
        return _cleanup_with_job(body, manifest, uid, conditions, retry)
    except DriverRefused as exc:
        return _fail(body, conditions, f"the driver refused to stop: {exc.message}", retry)
    problem = stop_problem(report)
    if problem:
        return _fail(body, conditions, problem, retry)
    undone = not_carried_out(report, cleanup=policy.cleanup, delete_offsets=delete_offsets)
    if undone:
        # The driver had stopped before (a plain stop, a SIGTERM) and answered with that
        # stop's report: it cannot run the connector-deleted path again, a Job can.
        shared_kube().event(body, "Normal", "DriverAlreadyStopped",
                            message=f"the driver had already stopped without {undone}: a cleanup Job runs it")
        return _cleanup_with_job(body, manifest, uid, conditions, retry)
    # The driver has stopped for good; it must not be restarted to run again.
    shared_kube().scale_deployment(namespace, names.driver(name), 0)
    shared_kube().event(body, "Normal", "CleanedUp", message=f"connector-deleted stop done by the driver: {summary(report)}")


def _stop_driver(connector: kopf.Body, **stop: Any) -> dict[str, Any]:
    """``POST /stop`` to the driver through its Service, else to the own IP of each running driver
    pod the operator started (the Service may be gone or list no endpoint: a namespace being
    deleted, a pod not Ready).

    Raises:
        DriverTimedOut, DriverRefused: from the driver that took the request.
        DriverUnreachable: no driver answered, through the Service or directly.
    """
    name, namespace = connector["metadata"]["name"], connector["metadata"]["namespace"]
    try:
        return driver_client(name, namespace).stop(**stop)
    except DriverTimedOut:
        raise
    except DriverUnreachable as through_service:
        for url in driver_pod_urls(shared_kube(), connector, RUNTIME.settings.control_port):
            try:
                return driver_client(name, namespace, url).stop(**stop)
            except DriverTimedOut:
                raise
            except DriverUnreachable:
                continue
        raise through_service from None


def stop_problem(report: dict[str, Any]) -> str:
    """Why a driver's stop report is not a success (``""`` when it is)."""
    problems = []
    if report.get("connector_trace"):
        problems.append(f"connector stop failed: {report['connector_trace'].strip().splitlines()[-1]}")
    for task in report.get("tasks") or []:
        if task.get("cleanup_error"):
            problems.append(f"task {task.get('id')}'s connector-deleted stop failed: "
                            f"{task['cleanup_error'].strip().splitlines()[-1]}")
        elif task.get("trace") and task.get("state") == "FAILED" and not task.get("cleaned_up"):
            problems.append(f"task {task.get('id')} failed: {task['trace'].strip().splitlines()[-1]}")
    if report.get("offsets_error"):
        problems.append(f"deleting offsets failed: {report['offsets_error']}")
    return "; ".join(problems)


def not_carried_out(report: dict[str, Any], cleanup: bool, delete_offsets: bool) -> str:
    """What a driver's stop report shows was asked for and not done (``""`` when nothing):
    the connector-deleted stop path, the deletion of the offsets."""
    undone = []
    if cleanup and not report.get("connector_deleted"):
        undone.append("the connector-deleted stop path")
    if delete_offsets and report.get("offsets_deleted") is None and not report.get("offsets_error"):
        undone.append("deleting the offsets")
    return " and ".join(undone)


def summary(report: dict[str, Any]) -> str:
    removed = report.get("removed") or []
    parts = [f"removed {', '.join(map(str, removed))}" if removed else "nothing reported removed"]
    if report.get("offsets_deleted"):
        parts.append(f"offsets deleted: {report['offsets_deleted']}")
    return "; ".join(parts)


def _fail(body: kopf.Body, conditions: Conditions, message: str, retry: int) -> None:
    delay = backoff(retry)
    meta = body["metadata"]
    conditions.set(C.CLEANUP_FAILED, True, "CleanupFailed", message)
    write_status(shared_kube(), meta["namespace"], meta["name"], conditions)
    shared_kube().event(body, "Warning", "CleanupFailed",
              message=f"{message}; retrying in {delay:.0f}s (annotate {names.ANNOTATION_SKIP_CLEANUP}=true to give up)")
    raise kopf.TemporaryError(message, delay=delay)


def _cleanup_with_job(body: kopf.Body, manifest: Any, uid: str, conditions: Conditions, retry: int) -> None:
    """No driver answers: make sure none runs, then run ``conveyor cleanup`` as a Job; never with
    an image or ServiceAccount the settings do not allow (a Warning ``NotAllowed``, and the
    finalizer goes: the operator never ran such a spec)."""
    kube = shared_kube()
    ns, name = manifest.metadata.namespace, manifest.name
    refused = not_permitted(manifest, RUNTIME.settings)
    if refused:
        kube.event(body, "Warning", "NotAllowed", message=f"no cleanup Job: {refused}; nothing was cleaned up")
        return
    kube.scale_deployment(ns, names.driver(name), 0)
    # A Deployment's status.replicas leaves terminating pods out: list the pods themselves, so
    # the Job never runs beside a driver (or its executors) still stopping.
    remaining = [pod["metadata"]["name"] for pod in kube.list_pods(ns, names.pods_selector(name))]
    if remaining:
        raise kopf.TemporaryError(f"waiting for {', '.join(sorted(remaining))} to terminate before the cleanup Job",
                                  delay=RUNTIME.settings.wait_poll_seconds)
    job = kube.get("batch/v1", "Job", ns, names.cleanup_job(name))
    if job is not None and uid not in succession.owner_uids(job):
        raise kopf.TemporaryError(f"waiting for Job {names.cleanup_job(name)} of an earlier Connector named {name} "
                                  "to go", delay=RUNTIME.settings.wait_poll_seconds)
    if job is None:
        try:
            # the Job runs as the namespace's conveyor-executor
            ensure_namespace_objects(manifest, RUNTIME.settings, RUNTIME.shared_objects, kube)
            kube.apply(render.cleanup_job(manifest, uid, RUNTIME.settings, attempt=retry + 1))
        except Exception as exc:
            if not namespace_terminating(exc):
                raise
            message = (f"namespace {ns} is being deleted and no driver answers: no cleanup Job can be created "
                       "there, so the operator cannot run the connector-deleted stop path; the driver ran it at "
                       "SIGTERM if it could see its namespace terminating (see its log)")
            log.warning("connector %s/%s: %s", ns, name, message)
            kube.event(body, "Warning", "NamespaceTerminating", message=message)
            return
        shared_kube().event(body, "Normal", "CleanupJobStarted",
                  message=f"no driver answers: Job {names.cleanup_job(name)} runs the connector-deleted stop path")
        raise kopf.TemporaryError("waiting for the cleanup Job", delay=RUNTIME.settings.wait_poll_seconds)
    outcome = job_outcome(job)
    if outcome is None:
        raise kopf.TemporaryError("waiting for the cleanup Job", delay=RUNTIME.settings.wait_poll_seconds)
    kube.delete("batch/v1", "Job", ns, names.cleanup_job(name))
    if outcome:
        _fail(body, conditions, f"cleanup Job {names.cleanup_job(name)} failed: {outcome} (see its pod's log)", retry)
    shared_kube().event(body, "Normal", "CleanedUp", message=f"connector-deleted stop done by Job {names.cleanup_job(name)}")


def _end_cleanup_job(namespace: str, name: str, uid: str) -> None:
    """Delete this Connector's cleanup Job, if one runs, and wait until its pods are gone:
    giving up on a cleanup must not leave it running past the finalizer, where it could drop
    what a new Connector of the same name provisions.

    :func:`delete` asks this only of a Connector that began a cleanup (its ``Deleting``
    condition, written before any cleanup Job is created) or whose name has a cleanup pod in the
    operator's pod index (an earlier Connector's Job): any other has no Job to end, and its
    skip-cleanup deletion makes no request of its own but the Event (issue 33).

    Raises:
        kopf.TemporaryError: a cleanup pod is still there (checked again after
            the setting ``wait_poll_seconds``).
    """
    kube = shared_kube()
    job = kube.get("batch/v1", "Job", namespace, names.cleanup_job(name))
    if job is not None and uid in succession.owner_uids(job):
        kube.delete("batch/v1", "Job", namespace, names.cleanup_job(name))
    pods = [pod["metadata"]["name"] for pod in kube.list_pods(namespace, succession.cleanup_pods_selector(name))]
    if pods:
        raise kopf.TemporaryError(f"waiting for the cleanup pods {', '.join(sorted(pods))} to terminate",
                                  delay=RUNTIME.settings.wait_poll_seconds)


def job_outcome(job: dict[str, Any]) -> str | None:
    """``""`` for a succeeded Job, the failure reason for a failed one, None while it runs."""
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") in ("Complete", "SuccessCriteriaMet"):
            return ""
        if condition.get("type") in ("Failed", "FailureTarget"):
            return condition.get("message") or condition.get("reason") or "Failed"
    if status.get("succeeded"):
        return ""
    if status.get("failed"):
        return "its pod failed"
    return None
