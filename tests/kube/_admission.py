"""The chart's Connector ValidatingAdmissionPolicy as tests meet it: dry-run creates that it
refuses or admits, waiting for a change of policy or binding to take effect (the API server's
policy informer picks it up a moment later), and a way to turn the chart's binding to Warn for
a test that must store a Connector the operator is to refuse itself."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import yaml
from _objects import eventually

OUT_OF_LIST = {"spark.jars": "https://example.invalid/evil.jar"}
"""A sparkConf no installation allows unless it widens the list."""


def dry_run(kube_api, namespace: str, spec: dict, name: str = "probe") -> subprocess.CompletedProcess[str]:
    """``kubectl create --dry-run=server`` of a Connector: admission runs, nothing is stored."""
    body = {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"}, **spec}}
    return kube_api.kubectl("create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(body), check=False)


def wait_until_refused(kube_api, namespace: str, spec: dict, policy: str | None = None, timeout_s: float = 60) -> str:
    """Waits until ``policy`` (default: any ValidatingAdmissionPolicy) refuses a Connector of
    ``spec``; returns the error."""
    def refused():
        result = dry_run(kube_api, namespace, spec)
        named = f"ValidatingAdmissionPolicy '{policy}'" if policy else "ValidatingAdmissionPolicy '"
        return result.returncode != 0 and named in result.stderr and result.stderr

    return eventually(refused, timeout_s=timeout_s, message=f"{policy or 'a policy'} refusing {spec}")


def wait_until_admitted(kube_api, namespace: str, spec: dict, timeout_s: float = 60) -> None:
    eventually(lambda: dry_run(kube_api, namespace, spec).returncode == 0, timeout_s=timeout_s,
               message=f"a Connector of {spec} admitted")


def _connector_policy(doc: dict) -> bool:
    return any("connectors" in rule.get("resources", [])
               for rule in doc["spec"].get("matchConstraints", {}).get("resourceRules", []))


def chart_policy_name(kube_api, chart: dict) -> str:
    """The name of the installed chart's Connector policy (and of its binding)."""
    rendered = kube_api.helm("get", "manifest", "conveyor", "--namespace", chart["namespace"]).stdout
    (policy,) = [d for d in yaml.safe_load_all(rendered)
                 if d and d.get("kind") == "ValidatingAdmissionPolicy" and _connector_policy(d)]
    return policy["metadata"]["name"]


def _connector_bindings(kube_api) -> dict[str, list[str]]:
    """Every binding of a policy of Connectors on the server (the session's chart's, and those of
    releases other tests installed and left), with its validationActions."""
    def items(kind: str) -> list[dict]:
        return json.loads(kube_api.kubectl("get", kind, "-o", "json").stdout)["items"]

    policies = {p["metadata"]["name"] for p in items("validatingadmissionpolicies") if _connector_policy(p)}
    return {b["metadata"]["name"]: b["spec"]["validationActions"]
            for b in items("validatingadmissionpolicybindings") if b["spec"]["policyName"] in policies}


@contextmanager
def chart_policy_only_warns(kube_api, chart: dict, namespace: str) -> Iterator[None]:
    """Every Connector policy's binding (the chart's, and any another test's release left) with
    ``validationActions: [Warn]`` inside the block, as before after it (each waited for). Tests
    run one at a time, so no other test sees the change."""
    name = chart_policy_name(kube_api, chart)
    bindings = _connector_bindings(kube_api)
    assert name in bindings, f"the chart's binding {name} is not on the server: {bindings}"

    def actions(binding: str, value: list[str]) -> None:
        kube_api.kubectl("patch", "validatingadmissionpolicybinding", binding, "--type=merge",
                         "-p", json.dumps({"spec": {"validationActions": value}}))

    for binding in bindings:
        actions(binding, ["Warn"])
    try:
        wait_until_admitted(kube_api, namespace, {"spark": {"sparkConf": OUT_OF_LIST}})
        yield
    finally:
        for binding, value in bindings.items():
            actions(binding, value)
        wait_until_refused(kube_api, namespace, {"spark": {"sparkConf": OUT_OF_LIST}})
