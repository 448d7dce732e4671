"""A HorizontalPodAutoscaler against a Connector, on a real node whose kube-controller-manager runs
the HPA controller (issue 34, item 3): the controller reads the Connector's scale subresource and
takes its ``status.selector``, the step where it refuses Strimzi's KafkaConnector
(``InvalidSelector``, strimzi-kafka-operator#10450). This cluster serves no resource metrics, so
the controller's next step, reading the pods' CPU, is where it stops."""

from __future__ import annotations

import pytest
from _connectors import apply, condition, connector, eventually, get

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_the_hpa_controller_reads_a_connectors_scale_and_selector(kube_node, node_kafka, conveyor_release,
                                                                     node_namespace):
    ns = node_namespace
    apply(kube_node, connector("scaled", ns, "noop-sink", node_kafka.bootstrap_servers, {"topics": "scaled"}))
    eventually(lambda: ((get(kube_node, "connector", "scaled", ns) or {}).get("status") or {}).get("selector"),
               120, "status.selector written by the operator")
    kube_node.kubectl("autoscale", "connector/scaled", "-n", ns, "--min=1", "--max=3", "--cpu-percent=80")

    def judged():
        hpa = get(kube_node, "hpa", "scaled", ns)
        active = condition(hpa, "ScalingActive")
        return active if active and condition(hpa, "AbleToScale") else None

    active = eventually(judged, 120, "the HPA controller's AbleToScale and ScalingActive conditions")
    hpa = get(kube_node, "hpa", "scaled", ns)
    able = condition(hpa, "AbleToScale")
    assert (able["status"], able["reason"]) == ("True", "SucceededGetScale"), able
    assert active["reason"] == "FailedGetResourceMetric", f"past the selector, to the metrics: {active}"
    kube_node.kubectl("delete", "hpa", "scaled", "-n", ns)
