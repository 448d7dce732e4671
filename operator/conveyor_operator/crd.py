"""The ``connectors.conveyor.dev`` CustomResourceDefinition, generated from the typed
models (:class:`conveyor.manifest.ConnectorSpec`, :class:`conveyor_operator.status.ConnectorStatus`).

``python -m conveyor_operator.crd --write`` regenerates the committed copies
(``crds/`` and ``charts/conveyor/crds/``) and the chart's Connector admission policy
(:mod:`conveyor_operator.admission_policy`); a unit test fails when they drift.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from conveyor.manifest import ConnectorSpec
from conveyor_operator import GROUP, KIND, PLURAL, VERSION, admission_policy
from conveyor_operator.status import ConnectorStatus

SHORT_NAMES = ["cnr"]
MAX_NAME_LENGTH = 52
"""Room for the longest suffix the operator adds (``-cleanup-<gen>``) within a DNS label."""
CRD_FILE = f"{PLURAL}.{GROUP}.yaml"
REPO_ROOT = Path(__file__).resolve().parents[2]
COMMITTED = [REPO_ROOT / "crds" / CRD_FILE, REPO_ROOT / "charts" / "conveyor" / "crds" / CRD_FILE]

_DROP = {"title"}


def openapi_schema(model: type) -> dict[str, Any]:
    """A structural OpenAPI v3 schema of a pydantic model: ``$ref`` inlined, ``Optional``
    unwrapped, titles dropped (Kubernetes rejects ``$ref`` and ``anyOf`` with ``null``)."""
    schema = model.model_json_schema(by_alias=True, mode="validation")
    defs = schema.pop("$defs", {})
    return _convert(schema, defs)


def _convert(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_convert(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    while "$ref" in node or "anyOf" in node or "allOf" in node:
        if "$ref" in node:
            target = copy.deepcopy(defs[node.pop("$ref").rsplit("/", 1)[-1]])
            node = {**target, **node}
        elif "anyOf" in node:
            options = [o for o in node.pop("anyOf") if o.get("type") != "null"]
            if len(options) != 1:
                raise ValueError(f"cannot express anyOf {options} in a structural schema")
            node = {**options[0], **node}
            if node.get("default", 0) is None:
                del node["default"]
        else:
            parts = node.pop("allOf")
            if len(parts) != 1:
                raise ValueError(f"cannot express allOf {parts} in a structural schema")
            node = {**parts[0], **node}
    if isinstance(node.get("description"), str):
        node["description"] = " ".join(node["description"].replace("``", "").split())
    if "enum" in node and "type" not in node:
        node["type"] = "string"
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "properties":
            out[key] = {k: _convert(v, defs) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(value, defs)
        else:
            out[key] = value
    if out.get("x-kubernetes-preserve-unknown-fields"):
        out.pop("additionalProperties", None)
    if out.get("additionalProperties") is True:
        del out["additionalProperties"]
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("type") == "object" and "properties" in out:
        out.pop("additionalProperties", None)
    return out


def connector_crd() -> dict[str, Any]:
    """The whole CRD as a dict."""
    spec = openapi_schema(ConnectorSpec)
    spec["description"] = "Desired state of the connector."
    status = openapi_schema(ConnectorStatus)
    status["description"] = "Observed state, written by the operator."
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "conveyor"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": KIND.lower(), "kind": KIND, "listKind": f"{KIND}List",
                      "shortNames": SHORT_NAMES, "categories": ["conveyor"]},
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A Kafka-Connect-style connector run by Conveyor as a Spark application: sink "
                                   "connectors move records from Kafka topics to an external system, source "
                                   "connectors from an external system into Kafka.",
                    "required": ["spec"],
                    "x-kubernetes-validations": [{
                        "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') "
                                "&& size(self.metadata.name) <= %d" % MAX_NAME_LENGTH,
                        "message": "metadata.name must start with a letter, hold only lowercase letters, digits "
                                   "and '-', and be at most %d characters (it names a Service and a Deployment)"
                                   % MAX_NAME_LENGTH,
                    }],
                    "properties": {
                        "apiVersion": {"type": "string", "description": "conveyor.dev/v1alpha1"},
                        "kind": {"type": "string", "description": "Connector"},
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": status,
                    },
                }},
                "subresources": {
                    "status": {},
                    "scale": {"specReplicasPath": ".spec.tasksMax", "statusReplicasPath": ".status.tasksMax",
                              "labelSelectorPath": ".status.selector"},
                },
                "additionalPrinterColumns": [
                    {"name": "Class", "type": "string", "jsonPath": ".spec.class"},
                    {"name": "Tasks", "type": "integer", "jsonPath": ".spec.tasksMax"},
                    {"name": "State", "type": "string", "jsonPath": ".status.connector.state",
                     "description": "The state the connector is in, as its driver reports it (RUNNING, PAUSED, "
                                    "STOPPED, FAILED, UNASSIGNED)."},
                    {"name": "Desired", "type": "string", "jsonPath": ".spec.state", "priority": 1,
                     "description": "spec.state: the state asked for."},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }],
        },
    }


def render() -> str:
    header = "# Generated by `python -m conveyor_operator.crd --write` from the typed models; do not edit.\n"
    return header + yaml.safe_dump(connector_crd(), sort_keys=False, width=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the committed copies instead of printing")
    args = parser.parse_args(argv)
    text = render()
    if not args.write:
        sys.stdout.write(text)
        return 0
    for path in COMMITTED:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    print(f"wrote {admission_policy.write().relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
