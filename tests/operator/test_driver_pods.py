"""The pods the operator calls directly with the admin token: only the driver its own
Deployment started, running (issue 28, "no deputy")."""

from conveyor_operator.observe.driver_pods import pod_url, started_driver_pods

NS = "data"
LABELS = {"conveyor.dev/connector": "orders", "conveyor.dev/component": "driver"}
CONNECTOR = {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
             "metadata": {"name": "orders", "namespace": NS, "uid": "connector-uid"}}


def _controller(api_version: str, kind: str, name: str, uid: str) -> list[dict]:
    return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True,
             "blockOwnerDeletion": True}]


DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
    "name": "orders-driver", "namespace": NS, "uid": "deployment-uid", "labels": LABELS,
    "ownerReferences": _controller("conveyor.dev/v1alpha1", "Connector", "orders", "connector-uid")}}
REPLICA_SET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
    "name": "orders-driver-5d8f", "namespace": NS, "uid": "rs-uid", "labels": LABELS,
    "ownerReferences": _controller("apps/v1", "Deployment", "orders-driver", "deployment-uid")}}


def _pod(name: str = "orders-driver-5d8f-x1", ip: str = "10.88.0.7", phase: str = "Running",
         owners: list[dict] | None = None, **meta) -> dict:
    owners = _controller("apps/v1", "ReplicaSet", "orders-driver-5d8f", "rs-uid") if owners is None else owners
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": LABELS, "ownerReferences": owners, **meta},
            "status": {"phase": phase, "podIP": ip}}


def _chosen(pods, deployment=DEPLOYMENT, replica_sets=(REPLICA_SET,), connector=CONNECTOR) -> list[str]:
    return [p["metadata"]["name"] for p in started_driver_pods(connector, deployment, list(replica_sets), pods)]


def test_the_running_pod_of_the_operators_deployment_is_chosen():
    assert _chosen([_pod()]) == ["orders-driver-5d8f-x1"]
    assert pod_url(_pod(), 8083) == "http://10.88.0.7:8083"
    assert pod_url(_pod(ip="fd00::7"), 8083) == "http://[fd00::7]:8083"


def test_a_pod_with_the_drivers_labels_but_no_owner_chain_to_the_connector_is_not_chosen():
    assert _chosen([_pod("bare", owners=[])]) == [], "labels alone"
    same_name = _controller("apps/v1", "ReplicaSet", "orders-driver-5d8f", "some-other-rs-uid")
    assert _chosen([_pod("other-rs", owners=same_name)]) == [], "a ReplicaSet's name, not its uid"
    assert _chosen([_pod("executor", owners=_controller("v1", "Pod", "orders-driver-5d8f-x1", "pod-uid"))]) == [], \
        "a Spark executor (owned by the driver pod)"
    not_controller = [{**_controller("apps/v1", "ReplicaSet", "orders-driver-5d8f", "rs-uid")[0], "controller": False}]
    assert _chosen([_pod("adopted", owners=not_controller)]) == [], "an owner reference that is not the controller"


def test_a_chain_that_ends_elsewhere_than_this_connector_is_not_followed():
    pod = [_pod()]
    assert _chosen(pod, deployment=None) == []
    user_rs = {**REPLICA_SET, "metadata": {**REPLICA_SET["metadata"], "ownerReferences": []}}
    assert _chosen(pod, replica_sets=[user_rs]) == [], "a ReplicaSet the Deployment does not control"
    foreign = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "ownerReferences": _controller(
        "conveyor.dev/v1alpha1", "Connector", "orders", "uid-of-an-earlier-connector-of-that-name")}}
    assert _chosen(pod, deployment=foreign) == [], "a Deployment of another Connector (uid)"
    renamed = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "name": "orders-other"}}
    assert _chosen(pod, deployment=renamed) == [], "not the Deployment the operator renders"
    elsewhere = {**CONNECTOR, "metadata": {**CONNECTOR["metadata"], "namespace": "other"}}
    assert _chosen(pod, connector=elsewhere) == [], "owner references are namespace-local"


def test_a_terminating_failed_or_addressless_pod_is_not_chosen():
    assert _chosen([_pod(phase="Failed")]) == [], "a Failed pod's IP may be another pod's by now"
    assert _chosen([_pod(phase="Succeeded"), _pod(phase="Pending", ip="")]) == []
    assert _chosen([_pod(deletionTimestamp="2026-11-28T00:00:00Z")]) == [], "terminating"
    assert _chosen([_pod(ip="")]) == [] and _chosen([_pod(ip="driver.example.com")]) == []
    assert _chosen([_pod("gone", phase="Failed"), _pod("new")]) == ["new"]
