"""Offsets management through the Connector resource, as Strimzi's ``KafkaConnector`` does it
(KIP-875 underneath): the annotation ``conveyor.dev/connector-offsets`` (Strimzi's
``strimzi.io/connector-offsets`` is read too) asks for

* ``list``: the driver's ``GET /connectors/<name>/offsets`` document goes to key
  ``offsets.json`` of the ConfigMap ``spec.listOffsets.toConfigMap``, then the annotation is
  removed. The operator creates that ConfigMap (labelled ``conveyor.dev/component: offsets``,
  controlled by the Connector, so deleted with it) and writes only one it created so: a
  ConfigMap of that name that is anyone else's (a user's, another connector's, this connector's
  manifest) is refused, never overwritten nor adopted (issue 28: a Connector author must not
  reach, through the operator, objects they could not touch themselves). Other keys of its own
  ConfigMap are kept;
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
from collections.abc import Mapping
from typing import Any

import kopf
from kubernetes.client.rest import ApiException

from conveyor.control.client import DriverRefused, DriverUnreachable
from conveyor.manifest import KIND, ManifestError
from conveyor_operator import GROUP, names
from conveyor_operator.context import RESOURCE, backoff, driver_client, parse, shared_kube
from conveyor_operator.ownership import controlled_by
from conveyor_operator.reconcile import render

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
    """The ConfigMap ``name`` the operator creates for ``spec.listOffsets.toConfigMap``: ``document``
    (pretty JSON) under ``offsets.json``, labelled as the connector's ``offsets`` component and
    controlled by the Connector."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": names.labels(connector, names.OFFSETS),
                         "ownerReferences": [render.owner_reference(connector, uid)]},
            "data": {DATA_KEY: _text(document)}}


def _text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def operators_own(config_map: Mapping[str, Any], connector: Mapping[str, Any]) -> bool:
    """Whether ``config_map`` is the offsets ConfigMap the operator created for ``connector``
    (:func:`offsets_config_map`): controlled by that Connector (by uid) and labelled its
    ``offsets`` component."""
    labels = (config_map.get("metadata") or {}).get("labels") or {}
    return (controlled_by(config_map, GROUP, KIND, connector) and labels.get(names.LABEL_COMPONENT) == names.OFFSETS
            and labels.get(names.LABEL_CONNECTOR) == connector["metadata"]["name"])


def _listed_to(connector: Mapping[str, Any], config_map: str) -> dict[str, Any] | None:
    """The ConfigMap ``spec.listOffsets.toConfigMap`` names, when it is the operator's own; None
    when it does not exist.

    Raises:
        _Refused: it exists and is not the operator's own (:func:`operators_own`).
    """
    found = shared_kube().get("v1", "ConfigMap", connector["metadata"]["namespace"], config_map)
    if found is not None and not operators_own(found, connector):
        raise _Refused(f"ConfigMap {config_map} (spec.listOffsets.toConfigMap) exists and was not created by the "
                       "operator for this Connector: it is left as it is; name a ConfigMap that does not exist "
                       "(the operator creates it) or delete that one")
    return found


def _write_listed(connector: Mapping[str, Any], config_map: str, document: dict[str, Any]) -> None:
    """Create the operator's ConfigMap ``config_map`` with ``document``, or update it if it is the
    operator's own (only its ``offsets.json``, conditional on the ``resourceVersion`` checked).

    Raises:
        _Refused: the ConfigMap is someone else's (:func:`_listed_to`).
        ApiException: 409 when it changed between the check and the update (kopf retries the handler).
    """
    kube = shared_kube()
    meta = connector["metadata"]
    own = _listed_to(connector, config_map)
    if own is None:
        try:
            kube.create(offsets_config_map(meta["namespace"], config_map, meta["name"], meta["uid"], document))
            return
        except ApiException as exc:
            if exc.status != 409:
                raise
        own = _listed_to(connector, config_map)  # created meanwhile: by whom?
        if own is None:
            raise kopf.TemporaryError(f"ConfigMap {config_map} was created and deleted meanwhile", delay=1) from None
    kube.merge_patch("v1", "ConfigMap", meta["namespace"], config_map, {
        "metadata": {"resourceVersion": own["metadata"]["resourceVersion"]}, "data": {DATA_KEY: _text(document)}})


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


def _perform(operation: str, body: kopf.Body, name: str, namespace: str) -> str:
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
        _listed_to(body, target)  # a ConfigMap that is not the operator's is refused before the driver is asked
        document = client.offsets(name)
        _write_listed(body, target, document)
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
def connector_offsets(body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, retry: int,
                      **_: Any) -> None:
    """``conveyor.dev/connector-offsets: list | alter | reset`` (see the module docstring)."""
    _handle(names.ANNOTATION_OFFSETS, body, meta, name, namespace, retry)


@kopf.on.create(*RESOURCE, annotations={names.ANNOTATION_OFFSETS_STRIMZI: kopf.PRESENT})
@kopf.on.update(*RESOURCE, annotations={names.ANNOTATION_OFFSETS_STRIMZI: kopf.PRESENT})
@kopf.on.resume(*RESOURCE, annotations={names.ANNOTATION_OFFSETS_STRIMZI: kopf.PRESENT})
def strimzi_connector_offsets(body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, retry: int,
                              **_: Any) -> None:
    """Strimzi's ``strimzi.io/connector-offsets``, the same way."""
    _handle(names.ANNOTATION_OFFSETS_STRIMZI, body, meta, name, namespace, retry)


def _handle(key: str, body: kopf.Body, meta: kopf.Meta, name: str, namespace: str, retry: int) -> None:
    operation = (meta.get("annotations") or {}).get(key)
    if operation is None:
        return
    kube = shared_kube()
    try:
        if operation not in OPERATIONS:
            raise _Refused(f"{key}: {operation!r} is not one of {', '.join(OPERATIONS)}")
        message = _perform(operation, body, name, namespace)
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
