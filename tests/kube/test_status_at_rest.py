"""What the operator's status reads cost against a real kube-apiserver (issue 33): a Connector
whose driver never answers is read less and less often and its status written once, not on
every tick; a pod of the connector that changes brings the next read forward; a pod that cannot
run is found in the operator's pod index, without a list of pods per read."""

from __future__ import annotations

import time

import pytest
from _objects import connector, eventually, unique_name

from conveyor_operator import metrics

pytestmark = pytest.mark.integration

SETTINGS = {"CONVEYOR_OPERATOR_STATUS_INTERVAL_SECONDS": "1", "CONVEYOR_OPERATOR_STATUS_MAX_BACKOFF_SECONDS": "4"}


def _count(counter, label: str) -> float:
    return counter.labels(label)._value.get()


def _pod(name: str, connector_name: str) -> dict:
    """A pod of the connector (no scheduler runs on this tier: it stays Pending)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"conveyor.dev/connector": connector_name,
                                                  "conveyor.dev/component": "executor"}},
            "spec": {"containers": [{"name": "executor", "image": "conveyor:0.1.0",
                                     "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                                         "capabilities": {"drop": ["ALL"]},
                                                         "seccompProfile": {"type": "RuntimeDefault"}}}]}}


def test_a_driver_that_never_answers_costs_no_status_write_and_fewer_reads_at_rest(kube_api, kube_namespace,
                                                                                    operator, api):
    name = unique_name("at-rest")
    with operator(env=SETTINGS):
        api.create_connector(connector(name, kube_namespace, "noop-sink", "127.0.0.1:9", {"topics": "t"}))
        eventually(lambda: (api.condition(kube_namespace, name, "Ready") or {}).get("reason") == "DriverUnreachable",
                   timeout_s=60, message="Ready False, DriverUnreachable")
        time.sleep(2)  # the write of DriverUnreachable seen back by the operator's watch
        version = api.get_connector(kube_namespace, name)["metadata"]["resourceVersion"]
        reads, written = _count(metrics.STATUS_READS, "unreachable"), _count(metrics.STATUS_WRITES, "written")
        time.sleep(12)  # 12 ticks of 1 s
        reads_at_rest = _count(metrics.STATUS_READS, "unreachable") - reads
        assert 1 <= reads_at_rest <= 5, f"{reads_at_rest} reads in 12 s: a read every 4 s at most once backed off"
        assert _count(metrics.STATUS_WRITES, "written") == written, "the same status was written again"
        assert api.get_connector(kube_namespace, name)["metadata"]["resourceVersion"] == version

        before = _count(metrics.STATUS_READS, "unreachable")
        api.core.create_namespaced_pod(kube_namespace, _pod(f"{name}-exec-1", name))
        eventually(lambda: _count(metrics.STATUS_READS, "unreachable") > before, timeout_s=2.5,
                   message="a read within a tick of the pod event, not after the 4 s back-off")

        api.core.patch_namespaced_pod_status(f"{name}-exec-1", kube_namespace, {"status": {"conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/1 nodes are available: 1 Insufficient memory."}]}})
        degraded = eventually(lambda: (c := api.condition(kube_namespace, name, "Degraded")) and
                              c["reason"] == "Unschedulable" and c, timeout_s=10,
                              message="Degraded Unschedulable, from the pod index")
        assert f"pod {name}-exec-1 cannot be scheduled" in degraded["message"]
