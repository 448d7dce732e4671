"""What the operator's handlers share: the operator's settings, its one API client, the
connectors' control secrets, the pods it has drained and when each driver's status is next due
(:data:`RUNTIME`, set up by the startup handler), a client of a connector's driver with its admin token, a Connector parsed into the
runtime's manifest, its status written back, and the retry delays."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import kopf
from kubernetes.client.rest import ApiException

from conveyor.control.client import DriverClient
from conveyor.manifest import ConnectorManifest
from conveyor_operator import GROUP, PLURAL, VERSION
from conveyor_operator.kube import Kube
from conveyor_operator.observe.autoscaler import History
from conveyor_operator.observe.conditions import Conditions
from conveyor_operator.observe.status_poller import StatusPoller
from conveyor_operator.observe.status_schedule import Key, StatusSchedule
from conveyor_operator.reconcile.control_secret import ControlSecrets
from conveyor_operator.reconcile.shared_objects import SharedObjects
from conveyor_operator.settings import OperatorSettings

log = logging.getLogger("conveyor_operator")

RESOURCE = (GROUP, VERSION, PLURAL)
MAX_EVICTIONS_KEPT = 10
MAX_BACKOFF_SECONDS = 300.0
MISSING_REFERENCE_MAX_DELAY_SECONDS = 30.0
SPEC_PROBLEMS = ("InvalidSpec", "NotAllowed", "InvalidConfig", "MissingReference")
"""Degraded reasons about the spec itself: the status reads leave them for the next edit."""


class _Runtime:
    """What the handlers share; set up by :func:`conveyor_operator.handlers.activities.startup`."""

    settings: OperatorSettings = OperatorSettings.from_env()
    kube: Kube | None = None
    shared_objects: SharedObjects = SharedObjects()
    drained_pods: set[str] = set()
    status_schedule: StatusSchedule = StatusSchedule(settings.status_interval_seconds)
    status_poller: StatusPoller | None = None
    memory_trimming: threading.Event | None = None
    control_secrets: ControlSecrets | None = None
    autoscaler_histories: dict[Key, History] = {}
    """Per autoscaled Connector, what its autoscaler measured (:mod:`conveyor_operator.observe.autoscaler`)."""
    lock = threading.Lock()


RUNTIME = _Runtime()


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


def status_fields(conditions: Conditions, **fields: Any) -> dict[str, Any]:
    """A merge patch of the Connector's ``.status``: ``conditions`` and ``fields`` (camelCase keys)."""
    return {"conditions": conditions.items, **fields}


def write_status(kube: Kube, namespace: str, name: str, conditions: Conditions, **fields: Any) -> None:
    """Patch the Connector's ``.status`` with ``conditions`` and ``fields`` (camelCase keys)."""
    kube.patch_connector_status(namespace, name, status_fields(conditions, **fields))


def backoff(retry: int) -> float:
    return min(MAX_BACKOFF_SECONDS, 5.0 * 2 ** min(retry, 10))


def missing_reference_delay(retry: int) -> float:
    """Seconds until the ``retry``-th (0-based) look for a missing Secret or ConfigMap: 5, 10,
    20, then 30 for as long as it is missing."""
    return min(MISSING_REFERENCE_MAX_DELAY_SECONDS, backoff(retry))


F = TypeVar("F", bound=Callable[..., Any])


def api_errors_retried(handler: F) -> F:
    """An error answer of the API server in ``handler`` (a quota exceeded, a webhook down, a 429
    that outlasted :data:`conveyor_operator.kube.THROTTLED_RETRY_SECONDS`) retried after
    :func:`backoff` of kopf's ``retry`` (5, 10, 20 s... up to 5 minutes), not after kopf's fixed
    minute for unexpected exceptions."""

    @functools.wraps(handler)
    def retried(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        except ApiException as exc:
            delay = backoff(kwargs.get("retry", 0))
            raise kopf.TemporaryError(f"the API server answered {exc.status} {exc.reason}; again in {delay:.0f} s",
                                      delay=delay) from exc

    return retried  # type: ignore[return-value]
