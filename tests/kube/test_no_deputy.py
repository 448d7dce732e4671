"""The operator acts for a Connector author only on what the operator itself made for that
Connector (issue 28, "no deputy"): its admin token goes to no pod it did not start, and
``spec.listOffsets.toConfigMap`` writes no ConfigMap it did not create. Against the harness's
real kube-apiserver, with the operator running as the chart's ServiceAccount."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from _objects import Api, connector, eventually, unique_name
from kubernetes import client

from conveyor.testing.ports import free_port

pytestmark = pytest.mark.integration

LISTED = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 7}}]}


class _Driverlike(http.server.BaseHTTPRequestHandler):
    """The control API's answers the operator acts on, as a driver gives them: ``POST /stop`` that
    ran the connector-deleted stop path, ``GET /connectors/<name>/offsets`` (:data:`LISTED`); 404
    otherwise. Records each request's path and ``Authorization`` header on its server."""

    def _answer(self, document: dict | None) -> None:
        self.server.seen.append((self.path.split("?")[0], self.headers.get("Authorization")))
        body = json.dumps(document or {"message": "not found"}).encode()
        self.send_response(200 if document else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        stopped = {"name": "c", "connector_deleted": True, "tasks": [], "removed": []}
        self._answer(stopped if self.path.startswith("/stop") else None)

    def do_GET(self):
        self._answer(LISTED if self.path.endswith("/offsets") else None)

    def log_message(self, *args):
        pass


@contextmanager
def _listening(host: str, port: int) -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer((host, port), _Driverlike)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _owner(obj, kind: str, api_version: str) -> client.V1OwnerReference:
    return client.V1OwnerReference(api_version=api_version, kind=kind, name=obj.metadata.name, uid=obj.metadata.uid,
                                   controller=True, block_owner_deletion=True)


def _pod(api: Api, namespace: str, name: str, labels: dict, ip: str, phase: str = "Running",
         owners: list | None = None, finalizers: list | None = None) -> client.V1Pod:
    """A pod as the kubelet would report it (there is none: the test writes its status)."""
    pod = api.core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels, owner_references=owners, finalizers=finalizers),
        spec=client.V1PodSpec(containers=[client.V1Container(name="driver", image="conveyor:test")])))
    api.core.patch_namespaced_pod_status(name, namespace, {"status": {
        "phase": phase, "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "127.0.0.1"}})
    return pod


def test_the_admin_token_goes_only_to_a_running_driver_pod_the_operators_deployment_started(
        kube_api, kube_namespace, operator, api):
    """The driver Service answers nothing, so the deletion path calls driver pods directly: of the
    pods labelled as the connector's driver (all on the control port, in list order first), only
    the running one whose owner chain leads to the Connector is called, with the admin token;
    a labelled pod of someone else's, a Failed and a terminating pod of the Deployment get
    nothing."""
    name, port = unique_name("deputy"), free_port()
    labels = {"conveyor.dev/connector": name, "conveyor.dev/component": "driver"}
    with ExitStack() as stack:
        bare, failed, terminating, driver = (stack.enter_context(_listening(f"127.0.0.{i}", port))
                                             for i in (2, 3, 4, 5))
        with operator(env={"CONVEYOR_OPERATOR_CONTROL_PORT": str(port)}):
            api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"},
                                           deletionPolicy={"cleanup": True}))
            deployment = eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace),
                                    message="driver Deployment")
            admin_token = eventually(lambda: api.core.read_namespaced_secret(f"{name}-control", kube_namespace),
                                     message="control Secret").data["admin-token"]
            # what the Deployment controller would make of the Deployment
            replica_set = api.apps.create_namespaced_replica_set(kube_namespace, client.V1ReplicaSet(
                metadata=client.V1ObjectMeta(name=f"{name}-driver-5d8f", labels=labels,
                                             owner_references=[_owner(deployment, "Deployment", "apps/v1")]),
                spec=client.V1ReplicaSetSpec(
                    replicas=1, selector=client.V1LabelSelector(match_labels=deployment.spec.selector.match_labels),
                    template=deployment.spec.template)))
            by_replica_set = [_owner(replica_set, "ReplicaSet", "apps/v1")]
            _pod(api, kube_namespace, f"{name}-driver-a-bare", labels, "127.0.0.2")
            _pod(api, kube_namespace, f"{name}-driver-b-failed", labels, "127.0.0.3", phase="Failed",
                 owners=by_replica_set)
            _pod(api, kube_namespace, f"{name}-driver-c-terminating", labels, "127.0.0.4", owners=by_replica_set,
                 finalizers=["conveyor.test/hold"])
            api.core.delete_namespaced_pod(f"{name}-driver-c-terminating", kube_namespace)
            _pod(api, kube_namespace, f"{name}-driver-d-started", labels, "127.0.0.5", owners=by_replica_set)
            try:
                api.delete_connector(kube_namespace, name)
                eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=60,
                           message="the Connector gone once the started driver pod ran the stop path")
            finally:
                api.core.patch_namespaced_pod(f"{name}-driver-c-terminating", kube_namespace,
                                              {"metadata": {"finalizers": None}})
    bearer = f"Bearer {base64.b64decode(admin_token).decode()}"
    assert [(path, auth == bearer) for path, auth in driver.seen] == [("/stop", True)], "with the admin token"
    assert [path for path, _ in bare.seen + failed.seen + terminating.seen] == [], "no request to any other pod"
    assert "driver" in api.events(kube_namespace, name, "CleanedUp")[0].message


def _annotate_list(api: Api, namespace: str, name: str) -> None:
    api.custom.patch_namespaced_custom_object("conveyor.dev", "v1alpha1", namespace, "connectors", name, {
        "metadata": {"annotations": {"conveyor.dev/connector-offsets": "list"}}})
    eventually(lambda: "conveyor.dev/connector-offsets" not in
               (api.get_connector(namespace, name)["metadata"].get("annotations") or {}),
               timeout_s=30, message="the list annotation handled")


@pytest.mark.parametrize("whose", ["a user's", "another connector's", "this connector's manifest"])
def test_list_offsets_refuses_a_config_map_the_operator_did_not_create_for_the_connector(
        kube_api, kube_namespace, operator, api, whose):
    """``spec.listOffsets.toConfigMap`` naming an existing ConfigMap that is not the one the operator
    created for this Connector: nothing written, no owner reference added (deleting the Connector
    would have garbage-collected it), and the Connector's Event says why, naming the field."""
    name, other, port = unique_name("lister"), unique_name("other"), free_port()
    target = {"a user's": f"{name}-settings", "another connector's": f"{other}-connector",
              "this connector's manifest": f"{name}-connector"}[whose]
    with _listening("127.0.0.1", port) as driver, operator(port):
        api.create_connector(connector(other, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}))
        if whose == "a user's":
            api.core.create_namespaced_config_map(kube_namespace, client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=target, labels={"team": "data"}), data={"mine": "kept"}))
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"},
                                       listOffsets={"toConfigMap": {"name": target}}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        eventually(lambda: api.apps.read_namespaced_deployment(f"{other}-driver", kube_namespace),
                   message="the other connector's Deployment")
        before = api.core.read_namespaced_config_map(target, kube_namespace)
        _annotate_list(api, kube_namespace, name)
        after = api.core.read_namespaced_config_map(target, kube_namespace)
        assert "offsets.json" not in (after.data or {})
        assert (after.data, after.metadata.labels, after.metadata.owner_references) == \
            (before.data, before.metadata.labels, before.metadata.owner_references)
        assert after.metadata.resource_version == before.metadata.resource_version, "not written at all"
        assert not [path for path, _ in driver.seen if path.endswith("/offsets")], "refused before the driver is asked"
        failed = api.events(kube_namespace, name, "OffsetsFailed")  # posted before the annotation goes
    assert failed, "an OffsetsFailed Event"
    message = failed[0].message
    assert f"ConfigMap {target} (spec.listOffsets.toConfigMap) exists and was not created by the operator" in message
