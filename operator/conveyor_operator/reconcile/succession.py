"""One Connector after another of the same name (issue 28, item 7): a cleanup touches only what
its own Connector provisioned, and a Connector that ever ran is cleaned up even when its current
spec is invalid.

The objects of a Connector carry its name, not its uid (``<name>-driver``, ``<name>-cleanup``,
``<name>-control``, ``<name>-connector``), and so do the things its connector provisions
outside Kubernetes (an audit source's triggers, a sink's consumer group ``connect-<name>``, the
source offsets of ``<name>``). Two Connectors of one name must therefore never run side by
side: a new one waits (:func:`predecessor_objects`) until every object another Connector owns
is gone, which the garbage collector does once that Connector is, and the deletion path never
removes its finalizer while its cleanup Job runs (:mod:`conveyor_operator.handlers.deletion`).

The ``<name>-control`` Secret is among them too, though the operator may not read Secrets: a
dry-run create tells whether one of the name exists, and one is the Connector's own only if its
``<name>-connector`` ConfigMap is. A first apply writes that ConfigMap before it creates the
Secret, so an operator stopped anywhere in a first apply (killed after the Secret, before its
status was written) leaves the next one what tells it the Secret is this Connector's, and a
Secret that was there before is never replaced (:mod:`conveyor_operator.reconcile.control_secret`).
"""

from __future__ import annotations

import logging
from typing import Any

import yaml

from conveyor.manifest import ConnectorManifest, ManifestError
from conveyor_operator import names
from conveyor_operator.kube import Kube
from conveyor_operator.reconcile import render

log = logging.getLogger(__name__)


def owner_uids(obj: dict[str, Any]) -> set[str]:
    """The uids of the Connectors that own ``obj`` (its ``Connector`` owner references)."""
    return {ref.get("uid", "") for ref in obj.get("metadata", {}).get("ownerReferences") or []
            if ref.get("kind") == "Connector"}


def _named_objects(name: str) -> list[tuple[str, str, str]]:
    return [("apps/v1", "Deployment", names.driver(name)), ("v1", "Service", names.driver(name)),
            ("batch/v1", "Job", names.cleanup_job(name)), ("v1", "ConfigMap", names.manifest_config_map(name))]


def predecessor_objects(kube: Kube, namespace: str, name: str, uid: str) -> list[str]:
    """What stands in the way of the Connector ``uid`` named ``name``: the objects named for the
    connector that it does not own (an earlier Connector's, waiting for the garbage collector,
    or anyone else's, which the operator never takes over), any cleanup pod of that name (a
    Connector runs a cleanup Job only once it is being deleted, so while it reconciles every
    cleanup pod is an earlier one's), and the ``<name>-control`` Secret unless the Connector's
    own ConfigMap says an earlier first apply of it may have made that Secret.

    Returns:
        ``["Job orders-cleanup", "Pod orders-cleanup-x7k2p", ...]``, ``[]`` when none.

    Raises:
        ApiException: a read, or the Secret's dry-run create, was refused (other than a 404,
            or the 409 that says the Secret exists).
    """
    # From the API server's watch cache (no etcd read per lookup): the objects that matter are an
    # earlier Connector's, there since before that Connector was deleted, so before this one was
    # created; the cache lags etcd by a moment, not by that. One gone but still cached only
    # delays the start by one poll, and so does our own ConfigMap not yet cached.
    found, own_config_map = [], False
    for api_version, kind, object_name in _named_objects(name):
        obj = kube.get(api_version, kind, namespace, object_name, cached=True)
        if obj is None:
            continue
        if uid in owner_uids(obj):
            own_config_map = own_config_map or kind == "ConfigMap"
        else:
            found.append(f"{kind} {object_name}")
    found += [f"Pod {pod['metadata']['name']}"
              for pod in kube.list_pods(namespace, cleanup_pods_selector(name), cached=True)]
    secret = names.control_secret(name)
    if not found and not own_config_map and kube.exists_by_dry_run("v1", "Secret", namespace, secret):
        found.append(f"Secret {secret}")
    return found


def cleanup_pods_selector(name: str) -> str:
    """Label selector of a connector's cleanup Job pods."""
    return f"{names.LABEL_CONNECTOR}={name},{names.LABEL_COMPONENT}={names.CLEANUP}"


def last_applied_manifest(kube: Kube, namespace: str, name: str, uid: str,
                          allowed_spark_conf: list[str]) -> tuple[ConnectorManifest, str] | None:
    """The manifest of the last generation the operator applied for the Connector ``uid`` (the
    ``<name>-connector`` ConfigMap it wrote, which its driver and cleanup Job read), with that
    generation; ``None`` when it never applied one, or the ConfigMap is another Connector's."""
    config_map = kube.get("v1", "ConfigMap", namespace, names.manifest_config_map(name))
    if config_map is None or uid not in owner_uids(config_map):
        return None
    document = (config_map.get("data") or {}).get(render.MANIFEST_KEY)
    generation = (config_map["metadata"].get("annotations") or {}).get(names.ANNOTATION_GENERATION, "?")
    try:
        manifest = ConnectorManifest.from_dict(yaml.safe_load(document or ""), source=f"ConfigMap {namespace}/"
                                               f"{names.manifest_config_map(name)}",
                                               allowed_spark_conf=allowed_spark_conf)
    except (ManifestError, yaml.YAMLError) as exc:
        log.warning("connector %s/%s: the last applied manifest does not parse: %s", namespace, name, exc)
        return None
    return manifest, generation
