"""Offsets management through the Connector resource, as Strimzi's ``KafkaConnector`` does it
(KIP-875 underneath): the annotation ``conveyor.dev/connector-offsets`` (Strimzi's
``strimzi.io/connector-offsets`` is read too) asks for

* ``list``: the driver's ``GET /connectors/<name>/offsets`` document goes to key
  ``offsets.json`` of the ConfigMap ``spec.listOffsets.toConfigMap`` (created if missing,
  other keys kept), then the annotation is removed;
* ``alter``: the document in key ``offsets.json`` of ``spec.alterOffsets.fromConfigMap`` is
  written (``PATCH``); ``reset``: every offset is removed (``DELETE``). Both need the
  connector ``STOPPED`` (``spec.state: stopped``): until it is, a ``Warning`` Event says so and
  the annotation stays, so the change to ``stopped`` runs the request; done, the annotation is
  removed.

A request that cannot succeed as written (no ``listOffsets``, a missing ConfigMap or key,
malformed JSON, an unknown value, a 400 from the driver) gets a ``Warning`` Event naming what to
fix, and its annotation is removed. Every outcome is an Event on the Connector
(``OffsetsListed``, ``OffsetsAltered``, ``OffsetsReset``, ``OffsetsFailed``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import kopf

from conveyor.manifest import ManifestError
from conveyor_operator import names, render
from conveyor_operator.control import DriverRefused, DriverUnreachable
from conveyor_operator.handlers import RESOURCE, backoff, driver_client, parse, shared_kube

log = logging.getLogger(__name__)

DATA_KEY = "offsets.json"
OPERATIONS = ("list", "alter", "reset")
NOT_STOPPED_RETRY_S = 15.0


class _Refused(Exception):
    """The request cannot succeed as written: say why, drop the annotation."""


class _Waiting(Exception):
    """Not yet: the connector is not stopped. The annotation stays; the next change of the
    Connector (``spec.state: stopped``) runs the request again."""


def offsets_config_map(namespace: str, name: str, connector: str, uid: str, document: dict[str, Any]
                       ) -> dict[str, Any]:
    """The ConfigMap ``name`` holding ``document`` (pretty JSON) under ``offsets.json``, owned by
    the Connector without being its controller (it may be the user's own ConfigMap)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": names.labels(connector, "offsets"),
                         "ownerReferences": [{**render.owner_reference(connector, uid), "controller": False,
                                              "blockOwnerDeletion": False}]},
            "data": {DATA_KEY: json.dumps(document, indent=2, sort_keys=True) + "\n"}}


def _offsets_from(namespace: str, config_map: str) -> dict[str, Any]:
    found = shared_kube().get("v1", "ConfigMap", namespace, config_map)
    if found is None:
        raise _Refused(f"ConfigMap {config_map} (spec.alterOffsets.fromConfigMap) does not exist")
    text = (found.get("data") or {}).get(DATA_KEY)
    if text is None:
        raise _Refused(f"ConfigMap {config_map} has no key {DATA_KEY}")
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise _Refused(f"ConfigMap {config_map} key {DATA_KEY} is not JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("offsets"), list):
        raise _Refused(f'ConfigMap {config_map} key {DATA_KEY} must hold {{"offsets": [...]}} '
                       "(Kafka Connect's GET /connectors/<name>/offsets document)")
    return document


def _perform(operation: str, body: kopf.Body, name: str, namespace: str, uid: str) -> str:
    """Run one operation; returns the Event's message.

    Raises:
        _Refused, _Waiting: see the module docstring.
    """
    try:
        spec = parse(body).spec
    except ManifestError as exc:
        raise _Refused(f"the Connector is invalid: {exc}") from None
    client = driver_client(name, namespace)
    if operation == "list":
        if spec.list_offsets is None:
            raise _Refused("list needs spec.listOffsets.toConfigMap.name")
        target = spec.list_offsets.to_config_map.name
        document = client.offsets(name)
        shared_kube().apply(offsets_config_map(namespace, target, name, uid, document))
        return f"{len(document.get('offsets') or [])} offset(s) written to ConfigMap {target} key {DATA_KEY}"
    if spec.state.value != "stopped":
        raise _Waiting(f"{operation} of offsets needs the connector stopped: set spec.state to stopped; "
                       "the annotation is kept until then")
    if operation == "alter":
        if spec.alter_offsets is None:
            raise _Refused("alter needs spec.alterOffsets.fromConfigMap.name")
        answer = client.alter_offsets(name, _offsets_from(namespace, spec.alter_offsets.from_config_map.name))
    else:
        answer = client.reset_offsets(name)
    return str(answer.get("message", answer))


_REASONS = {"list": "OffsetsListed", "alter": "OffsetsAltered", "reset": "OffsetsReset"}


@kopf.on.create(*RESOURCE, annotations={names.ANNOTATION_OFFSETS: kopf.PRESENT})
@kopf.on.update(*RESOURCE, annotations={names.ANNOTATION_OFFSETS: kopf.PRESENT})
@kopf.on.resume(*RESOURCE, annotations={names.ANNOTATION_OFFSETS: kopf.PRESENT})
def connector_offsets(body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, uid: str, retry: int,
                      **_: Any) -> None:
    """``conveyor.dev/connector-offsets: list | alter | reset`` (see the module docstring)."""
    _handle(names.ANNOTATION_OFFSETS, body, meta, name, namespace, uid, retry)


@kopf.on.create(*RESOURCE, annotations={names.ANNOTATION_OFFSETS_STRIMZI: kopf.PRESENT})
@kopf.on.update(*RESOURCE, annotations={names.ANNOTATION_OFFSETS_STRIMZI: kopf.PRESENT})
@kopf.on.resume(*RESOURCE, annotations={names.ANNOTATION_OFFSETS_STRIMZI: kopf.PRESENT})
def strimzi_connector_offsets(body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, uid: str, retry: int,
                              **_: Any) -> None:
    """Strimzi's ``strimzi.io/connector-offsets``, the same way."""
    _handle(names.ANNOTATION_OFFSETS_STRIMZI, body, meta, name, namespace, uid, retry)


def _handle(key: str, body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, uid: str, retry: int) -> None:
    operation = (meta.get("annotations") or {}).get(key)
    if operation is None:
        return
    kube = shared_kube()
    try:
        if operation not in OPERATIONS:
            raise _Refused(f"{key}: {operation!r} is not one of {', '.join(OPERATIONS)}")
        message = _perform(operation, body, name, namespace, uid)
    except _Refused as exc:
        kube.event(body, "Warning", "OffsetsFailed", message=f"{exc}; annotation {key} removed")
        kube.remove_annotation(namespace, name, key)
        return
    except _Waiting as exc:  # not a retry: a retrying handler would hold back the reconcile that stops it
        kube.event(body, "Warning", "OffsetsWaiting", message=str(exc))
        return
    except DriverRefused as exc:
        if exc.status == 400 and "STOPPED state" in exc.message:  # spec.state not reached the driver yet
            raise kopf.TemporaryError(exc.message, delay=NOT_STOPPED_RETRY_S) from None
        if exc.status in (400, 404):
            kube.event(body, "Warning", "OffsetsFailed", message=f"{exc.message}; annotation {key} removed")
            kube.remove_annotation(namespace, name, key)
            return
        raise kopf.TemporaryError(f"offsets {operation} not delivered: {exc}", delay=backoff(retry)) from None
    except DriverUnreachable as exc:
        raise kopf.TemporaryError(f"offsets {operation} not delivered: {exc}", delay=backoff(retry)) from None
    # the Event first: once the annotation is gone, the outcome is there to read
    kube.event(body, "Normal", _REASONS[operation], message=message)
    kube.remove_annotation(namespace, name, key)
