"""Live changes pushed to a running driver (``PUT /config``, ``POST /state``), and the objects a
namespace's connectors share."""

from __future__ import annotations

import logging

import kopf

from conveyor.control.client import DriverClient, DriverRefused, DriverUnreachable
from conveyor.manifest import ConnectorManifest
from conveyor_operator import names
from conveyor_operator.kube import Kube
from conveyor_operator.reconcile import render
from conveyor_operator.reconcile.shared_objects import SharedObjects
from conveyor_operator.settings import OperatorSettings

log = logging.getLogger("conveyor_operator")

STATE_OF = {"running": "RUNNING", "paused": "PAUSED", "stopped": "STOPPED"}
"""``spec.state`` as the driver's connector state."""


def ensure_namespace_objects(manifest: ConnectorManifest, settings: OperatorSettings, shared: SharedObjects,
                             kube: Kube) -> None:
    """The namespace's shared Spark ServiceAccount and RoleBinding (applied once per
    namespace and process, see :mod:`conveyor_operator.reconcile.shared_objects`)."""
    for obj in render.namespace_objects(manifest, settings):
        shared.ensure(kube, obj)


def current_rolled_hash(kube: Kube, namespace: str, name: str) -> str | None:
    deployment = kube.get("apps/v1", "Deployment", namespace, names.driver(name))
    if deployment is None:
        return None
    annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
    return annotations.get(names.ANNOTATION_CONFIG_HASH)


def push_config(body: kopf.Body, manifest: ConnectorManifest, driver: DriverClient, kube: Kube) -> bool:
    """``PUT /config`` to the running driver, with an Event on ``body`` for what came of it.
    False when it cannot take it live (not reachable, or it refused): the caller then rolls the
    Deployment."""
    try:
        driver.put_config(render.spec_dict(manifest))
    except DriverUnreachable:
        return False
    except DriverRefused as exc:
        if exc.status == 400:
            kube.event(body, "Warning", "InvalidConfig", message=exc.message)
        elif exc.status == 409:  # only a new driver may take it (conveyor.runtime.rest.live_config)
            kube.event(body, "Normal", "RollingDriver", message=exc.message)
        log.info("driver of %s refused the new config live (%s): rolling", manifest.name, exc)
        return False
    kube.event(body, "Normal", "Reconfigured", message="configuration applied to the running driver")
    return True


def push_state(manifest: ConnectorManifest, driver: DriverClient) -> None:
    """Move a running driver to ``spec.state`` when it is elsewhere (a driver that is
    not running reads the state from its ConfigMap when it starts)."""
    try:
        current = (driver.status().get("connector") or {}).get("state")
        if current in STATE_OF.values() and current != STATE_OF[manifest.spec.state.value]:
            driver.set_state(manifest.spec.state.value)
    except (DriverUnreachable, DriverRefused) as exc:
        log.info("state of %s not pushed to its driver: %s", manifest.name, exc)
