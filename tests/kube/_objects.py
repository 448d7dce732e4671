"""Small helpers over the admin API client for the operator's end-to-end tests."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException

T = TypeVar("T")
GROUP, VERSION, PLURAL = "conveyor.dev", "v1alpha1", "connectors"


def connector(name: str, namespace: str, connector_class: str, bootstrap: str, config: dict[str, Any],
              annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Connector", "metadata": meta,
            "spec": {"class": connector_class, "kafka": {"bootstrapServers": bootstrap}, "config": config, **spec}}


def eventually(probe: Callable[[], T], timeout_s: float = 60.0, message: str = "condition") -> T:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except ApiException as exc:
            if exc.status != 404:
                raise
            last = None
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {message} (last: {last!r})")


class Api:
    """Typed API groups over one admin ApiClient."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.rbac = client.RbacAuthorizationV1Api(api_client)
        self.policy = client.PolicyV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def create_connector(self, body: dict[str, Any]) -> dict[str, Any]:
        ns = body["metadata"]["namespace"]
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)

    def get_connector(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def delete_connector(self, namespace: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    def condition(self, namespace: str, name: str, type_: str) -> dict[str, Any] | None:
        body = self.get_connector(namespace, name) or {}
        return next((c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)

    def events(self, namespace: str, name: str, reason: str | None = None) -> list[Any]:
        items = self.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
        return [e for e in items if reason is None or e.reason == reason]


def unique_name(prefix: str) -> str:
    """``<prefix>-<6 hex digits>``: a Connector name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def operator_key_file(kube_api, rendered: list[dict[str, Any]], directory: Path) -> Path:
    """The operator key of a chart release (``rendered``: its manifest's objects; the key is its
    Secret's, read as admin) in a file, as the operator pod mounts it: for an operator run
    in-process."""
    meta = next(d for d in rendered if d["kind"] == "Secret" and d["metadata"]["name"].endswith("-operator-key"))
    encoded = kube_api.kubectl("get", "secret", meta["metadata"]["name"], "-n", meta["metadata"]["namespace"],
                               "-o", "jsonpath={.data.key}").stdout
    path = directory / "operator-key"
    path.write_bytes(base64.b64decode(encoded))
    return path
