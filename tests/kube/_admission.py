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


def wait_until_refused(kube_api, namespace: str, spec: dict, policy: str, timeout_s: float = 60) -> str:
    """Waits until ``policy`` refuses a Connector of ``spec``; returns the error."""
    def refused():
        result = dry_run(kube_api, namespace, spec)
        return result.returncode != 0 and f"ValidatingAdmissionPolicy '{policy}'" in result.stderr and result.stderr

    return eventually(refused, timeout_s=timeout_s, message=f"{policy} refusing {spec}")


def wait_until_admitted(kube_api, namespace: str, spec: dict, timeout_s: float = 60) -> None:
    eventually(lambda: dry_run(kube_api, namespace, spec).returncode == 0, timeout_s=timeout_s,
               message=f"a Connector of {spec} admitted")


def chart_policy_name(kube_api, chart: dict) -> str:
    """The name of the installed chart's Connector policy (and of its binding)."""
    rendered = kube_api.helm("get", "manifest", "conveyor", "--namespace", chart["namespace"]).stdout
    (policy,) = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") == "ValidatingAdmissionPolicy"]
    return policy["metadata"]["name"]


@contextmanager
def chart_policy_only_warns(kube_api, chart: dict, namespace: str) -> Iterator[None]:
    """The chart's binding with ``validationActions: [Warn]`` inside the block, ``[Deny]`` again
    after it (each waited for). Tests run one at a time, so no other test sees the change."""
    name = chart_policy_name(kube_api, chart)

    def actions(value: list[str]) -> None:
        kube_api.kubectl("patch", "validatingadmissionpolicybinding", name, "--type=merge",
                         "-p", json.dumps({"spec": {"validationActions": value}}))

    actions(["Warn"])
    try:
        wait_until_admitted(kube_api, namespace, {"spark": {"sparkConf": OUT_OF_LIST}})
        yield
    finally:
        actions(["Deny"])
        wait_until_refused(kube_api, namespace, {"spark": {"sparkConf": OUT_OF_LIST}}, name)
