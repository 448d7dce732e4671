"""A Connector whose pods cannot run says which pod and why — a condition and an Event —
instead of staying silently Pending: an image the node does not have, a driver no node can
fit, a driver container that crash-loops. And a config the connector's own validation refuses is Degraded naming the key, from the
real operator image (which must import the built-in connectors)."""

from __future__ import annotations

import json

import pytest
from _connectors import SMALL_SPARK, apply, condition, connector, eventually, get

from conveyor.testing.node_images import BUSYBOX_IMAGE

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def degraded(node, namespace: str, name: str):
    c = condition(get(node, "connector", name, namespace), "Degraded")
    return c if c and c["status"] == "True" else None


def warning_events(node, namespace: str, name: str) -> list[dict]:
    out = node.kubectl("get", "events", "-n", namespace, "--field-selector",
                       f"involvedObject.kind=Connector,involvedObject.name={name},type=Warning", "-o", "json")
    return json.loads(out.stdout)["items"]


def sink(namespace: str, name: str, **spark) -> dict:
    body = connector(name, namespace, "noop-sink", "kafka.invalid:9092", {"topics": "t"})
    body["spec"]["spark"] = {**SMALL_SPARK, **spark}
    return body


def test_an_image_the_node_does_not_have_is_named_in_a_condition_and_an_event(
        kube_node, conveyor_release, node_namespace):
    apply(kube_node, sink(node_namespace, "no-image", image="localhost/conveyor:missing", imagePullPolicy="Never"))
    cond = eventually(lambda: degraded(kube_node, node_namespace, "no-image"), 120, "Degraded")
    assert cond["reason"] == "ErrImageNeverPull", cond
    assert "localhost/conveyor:missing" in cond["message"] and "no-image-driver" in cond["message"], cond
    events = eventually(lambda: warning_events(kube_node, node_namespace, "no-image"), 30, "a Warning Event")
    assert any(e["reason"] == "ErrImageNeverPull" for e in events), events


def test_a_driver_no_node_can_fit_is_named_in_a_condition_and_an_event(kube_node, conveyor_release, node_namespace):
    apply(kube_node, sink(node_namespace, "too-big", driver={"cores": 64, "memory": "512m"}, sparkConf={}))
    cond = eventually(lambda: degraded(kube_node, node_namespace, "too-big"), 120, "Degraded")
    assert cond["reason"] == "Unschedulable", cond
    assert "Insufficient cpu" in cond["message"], cond
    events = eventually(lambda: warning_events(kube_node, node_namespace, "too-big"), 30, "a Warning Event")
    assert any(e["reason"] == "Unschedulable" for e in events), events


def test_a_driver_that_crash_loops_is_named_in_a_condition_and_an_event(kube_node, conveyor_release, node_namespace):
    # an image without the driver's entrypoint: every start of the container fails at once
    apply(kube_node, sink(node_namespace, "crashing", image=BUSYBOX_IMAGE, imagePullPolicy="Never"))
    cond = eventually(lambda: (c := degraded(kube_node, node_namespace, "crashing"))
                      and c["reason"] == "CrashLoopBackOff" and c, 180, "Degraded with reason CrashLoopBackOff")
    assert "crashing-driver" in cond["message"] and "restarted" in cond["message"], cond
    ready = condition(get(kube_node, "connector", "crashing", node_namespace), "Ready")
    assert ready["status"] == "False", ready
    events = eventually(lambda: [e for e in warning_events(kube_node, node_namespace, "crashing")
                                 if e["reason"] == "CrashLoopBackOff"], 30, "a CrashLoopBackOff Warning Event")
    assert "crashing-driver" in events[0]["message"], events


def test_a_config_the_connector_refuses_is_degraded_naming_the_key(kube_node, conveyor_release, node_namespace):
    body = connector("bad", node_namespace, "postgres-sink", "kafka.invalid:9092",
                     {"topics": "t", "connection.url": "postgresql://db/x", "insert.mode": "sideways"})
    apply(kube_node, body)
    cond = eventually(lambda: degraded(kube_node, node_namespace, "bad"), 60, "Degraded")
    assert cond["reason"] == "InvalidConfig", cond
    assert "insert.mode" in cond["message"], cond
