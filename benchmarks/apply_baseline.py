"""The baseline of ``benchmarks/operator_reconcile.py``: what the operator applies for each
Connector, applied by ``kubectl apply --server-side`` instead, all at once, in the same run.

For ``count`` connectors the objects the operator renders (``conveyor_operator.reconcile.render.objects``:
ConfigMap, Service, PodDisruptionBudget, Deployment; ownerReferences dropped, as there is no
Connector to own them) go to one ``kubectl apply --server-side`` process per connector, started
from ``clients`` threads at once, into a fresh namespace whose shared objects (the Spark
ServiceAccount and RoleBinding) were applied beforehand, as the operator's warm-up connector
does. Per connector: kubectl started -> the first ADDED of ``<name>-driver`` on a watch of
Deployments (the same watch and the same event as the operator's measurement).

Each kubectl is a process of its own (about 0.1-0.3 CPU s to start): that is what a user or a CI
job applying manifests pays, and the reason the ratio to the operator is the figure, not the
absolute seconds.
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable


def rendered(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the namespace's shared objects, the connector's own objects) the operator would apply
    for the Connector ``body``, ownerReferences removed."""
    from conveyor.manifest import ConnectorManifest
    from conveyor_operator.reconcile import render
    from conveyor_operator.settings import OperatorSettings

    manifest = ConnectorManifest.from_dict(body)
    settings = OperatorSettings()
    own = render.objects(manifest, str(uuid.uuid4()), 1, settings)
    for obj in own:
        obj["metadata"].pop("ownerReferences", None)
    return render.namespace_objects(manifest, settings), own


def server_side_apply(kube: Any, namespace: str, names: list[str], clients: int,
                      body: Callable[[str, str], dict[str, Any]], deployments: dict[str, float],
                      wait_all: Callable[[list[str]], None]) -> tuple[list[float], list[float]]:
    """Seconds from each connector's ``kubectl apply --server-side`` start to its Deployment
    ADDED, and from the batch's start (the first kubectl started: every connector asked for at
    once, waiting for one of the ``clients``) to it, for ``names`` (in order). ``deployments`` is
    filled by the caller's Deployment watch on ``namespace``; ``wait_all(names)`` returns once
    every name is in it.

    Raises:
        RuntimeError: a kubectl failed (its stderr in the message).
    """
    shared, _ = rendered(body("warmup", namespace))
    kube.kubectl("apply", "--server-side", "--field-manager=bench", "-f", "-",
                 input=json.dumps({"apiVersion": "v1", "kind": "List", "items": shared}))
    manifests = {name: json.dumps({"apiVersion": "v1", "kind": "List", "items": rendered(body(name, namespace))[1]})
                 for name in names}
    started: dict[str, float] = {}

    def apply(name: str) -> None:
        started[name] = time.monotonic()
        result = kube.kubectl("apply", "--server-side", "--field-manager=bench", "-f", "-", input=manifests[name],
                              check=False)
        if result.returncode != 0:
            raise RuntimeError(f"kubectl apply --server-side of {name} failed: {result.stderr[-2000:]}")

    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(apply, names))
    wait_all(names)
    batch = min(started.values())
    return [deployments[n] - started[n] for n in names], [deployments[n] - batch for n in names]
