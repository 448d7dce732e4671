"""``spec.initialOffsets`` left out of what the driver runs once its first start has written
them (``status.startingOffsets`` recorded, :mod:`conveyor_operator.observe.starting_offsets`):
a restarted driver (a crash, an eviction, a rolled Deployment) then resumes from the committed
offsets instead of writing them again, which with ``existing: replace`` would rewind the
connector. The field is live: leaving it out rolls no pod (:func:`render.spec_hash`)."""

from __future__ import annotations

import yaml

from conveyor.manifest import ConnectorManifest
from conveyor_operator import names
from conveyor_operator.kube import Kube
from conveyor_operator.reconcile.render import yaml_document
from conveyor_operator.reconcile.spark_pods import MANIFEST_KEY


def settled_manifest(manifest: ConnectorManifest, started: bool) -> ConnectorManifest:
    """``manifest`` without ``spec.initialOffsets`` once the driver has ``started`` (its
    starting offsets are recorded): what the operator renders for the driver."""
    if manifest.spec.initial_offsets is None or not started:
        return manifest
    return manifest.model_copy(update={"spec": manifest.spec.model_copy(update={"initial_offsets": None})})


def forget_initial_offsets(kube: Kube, namespace: str, name: str) -> bool:
    """Remove ``spec.initialOffsets`` from the manifest in the driver's ConfigMap at once (the
    next reconcile would, but a driver restart before it would write them again). Returns
    whether the ConfigMap changed.

    Raises:
        kubernetes.client.ApiException: the API server refused the read or the patch.
    """
    config_map = kube.get("v1", "ConfigMap", namespace, names.manifest_config_map(name))
    document = ((config_map or {}).get("data") or {}).get(MANIFEST_KEY)
    manifest = yaml.safe_load(document) if document else None
    spec = manifest.get("spec") if isinstance(manifest, dict) else None
    if not isinstance(spec, dict) or "initialOffsets" not in spec:
        return False
    spec.pop("initialOffsets")
    kube.merge_patch("v1", "ConfigMap", namespace, names.manifest_config_map(name),
                     {"metadata": {"resourceVersion": config_map["metadata"]["resourceVersion"]},
                      "data": {MANIFEST_KEY: yaml_document(manifest)}})
    return True
