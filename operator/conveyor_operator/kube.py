"""The few API server calls the operator makes, over the official ``kubernetes`` client's
``ApiClient`` with the paths of ``kubernetes.dynamic``'s discovery: server-side apply, create,
get, delete, and merge patches of a Connector's status and annotations."""

from __future__ import annotations

import json
import logging
import tempfile
import threading
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.discovery import LazyDiscoverer
from tenacity import (
    RetryCallState,
    retry,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from conveyor_operator import GROUP, VERSION

log = logging.getLogger(__name__)

EXISTENCE_PROBE_LABELS = {"app.kubernetes.io/managed-by": "conveyor-operator", "conveyor.dev/existence-probe": "true"}
"""Labels of the empty object :meth:`Kube.exists_by_dry_run` creates (the chart's admission policy
admits a dry-run create of such a Secret under any name)."""


def namespace_terminating(exc: BaseException) -> bool:
    """Whether ``exc`` is the API server refusing to create anything in a namespace being
    deleted (403 with cause ``NamespaceTerminating``)."""
    return isinstance(exc, ApiException) and exc.status == 403 and "NamespaceTerminating" in str(exc.body or "")


class _InMemoryDiscoverer(LazyDiscoverer):
    """``kubernetes.dynamic``'s lazy discovery (one API group version at a time, on first use),
    kept in this process only: the operator's pod has no place for the cache file, and a file
    shared by processes could describe another API server at the same address."""

    def _write_cache(self) -> None:
        pass


class _Discovery(DynamicClient):
    """``kubernetes.dynamic``'s client, whose discovery requests are bounded by the operator's
    request timeout like every other call (an API server that stops answering must fail the
    handler, not hold its thread)."""

    def __init__(self, api_client: client.ApiClient, request_timeout_s: tuple[float, float]) -> None:
        self._request_timeout_s = request_timeout_s
        cache_file = f"{tempfile.gettempdir()}/conveyor-operator-discovery-{uuid.uuid4().hex}.json"  # never written
        super().__init__(api_client, cache_file=cache_file, discoverer=_InMemoryDiscoverer)

    def request(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        params.setdefault("_request_timeout", self._request_timeout_s)
        return super().request(method, path, body, **params)


def _plain(_client: Any, data: Any) -> Any:
    return data


_CACHED = [("resourceVersion", "0")]
"""A read served from the API server's watch cache: any version, no quorum read of etcd."""

THROTTLED_RETRY_SECONDS = 60.0
"""How long a call the API server throttles (429) is tried again before its handler fails."""


def _throttled(exc: BaseException) -> bool:
    """The API server's priority and fairness (or a webhook's rate limit) refused the request
    for now: 429 Too Many Requests."""
    return isinstance(exc, ApiException) and exc.status == 429


_jitter = wait_random_exponential(multiplier=0.2, max=5.0)


def _retry_after(state: RetryCallState) -> float:
    """The wait the API server asks for in ``Retry-After`` (whole seconds; APF says 1), with up
    to as much again of jitter so that throttled threads do not come back at once; else a
    jittered exponential back-off (0.2 s doubling, at most 5 s)."""
    exc = state.outcome.exception() if state.outcome else None
    header = ((getattr(exc, "headers", None) or {}).get("Retry-After") or "").strip()
    if header.isdigit():
        asked = min(float(header), 10.0)
        return asked + _jitter(state) * asked / 5.0
    return _jitter(state)


class Kube:
    """API calls over one shared :class:`kubernetes.client.ApiClient` (thread-safe; its connection
    pool should be as large as the operator's worker pool), at the paths ``kubernetes.dynamic``'s
    discovery gives.

    Every method raises :class:`kubernetes.client.rest.ApiException` for an error answer other
    than the 404s documented per method.
    """

    def __init__(self, api_client: client.ApiClient, field_manager: str,
                 request_timeout_s: tuple[float, float] = (5.0, 30.0)) -> None:
        """``request_timeout_s``: (connect, read) seconds of every call, so an API server that
        stops answering fails the handler (urllib3's ``MaxRetryError``/``ReadTimeoutError``,
        which kopf retries) instead of holding one of its workers forever."""
        self.api = api_client
        self.field_manager = field_manager
        self.request_timeout_s = request_timeout_s
        self._discovery: _Discovery | None = None
        self._resources: dict[tuple[str, str], Any] = {}
        self._discovery_lock = threading.Lock()

    def resource_path(self, api_version: str, kind: str, namespace: str, name: str | None = None) -> str:
        """The URL path of ``kind`` objects in ``namespace`` (of ``name``, when given), as the API
        server's discovery documents it (``kubernetes.dynamic``; each group version asked once).

        Raises:
            kubernetes.dynamic.exceptions.ResourceNotFoundError: the API server serves no such kind.
        """
        key = (api_version, kind)
        resource = self._resources.get(key)
        if resource is None:
            resource = self._resources[key] = self._client().resources.get(api_version=api_version, kind=kind)
        return resource.path(name=name, namespace=namespace)

    def _client(self) -> _Discovery:
        if self._discovery is not None:
            return self._discovery
        with self._discovery_lock:
            if self._discovery is None:
                self._discovery = _Discovery(self.api, self.request_timeout_s)
            return self._discovery

    @retry(retry=retry_if_exception(_throttled), wait=_retry_after, stop=stop_after_delay(THROTTLED_RETRY_SECONDS),
           reraise=True)
    def _call(self, path: str, method: str, body: Any = None, query: list | None = None,
              content_type: str = "application/json") -> Any:
        """One request over the shared ApiClient; the answer as plain JSON data (no model). A
        request the API server throttles (429) is sent again after the ``Retry-After`` it asks
        for, for up to :data:`THROTTLED_RETRY_SECONDS` (the official client never retries, and a
        failed handler waits for kopf's retry, a minute by default).

        Not through ``kubernetes.dynamic``'s ``request``: it turns every error answer into its own
        exception with the formatted traceback of where it was caught, which for the 404s of
        :meth:`get` (most of a create's lookups) cost more CPU than the request itself.

        Raises:
            ApiException: an error answer (a 429 only once it has lasted :data:`THROTTLED_RETRY_SECONDS`).
        """
        response = self.api.call_api(
            path, method, query_params=list(query or []), body=body, auth_settings=["BearerToken"],
            header_params={"Accept": "application/json", "Content-Type": content_type},
            _preload_content=False, _return_http_data_only=True, _request_timeout=self.request_timeout_s)
        try:
            data = response.data
        finally:
            response.release_conn()
        return json.loads(data) if data else None

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply ``obj`` as the operator's field manager, taking over conflicts."""
        meta = obj["metadata"]
        path = self.resource_path(obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
        return self._call(path, "PATCH", obj, [("fieldManager", self.field_manager), ("force", "true")],
                          "application/apply-patch+yaml")

    def create(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """Create ``obj`` (POST); an existing one is a 409 :class:`ApiException`. ``dry_run``:
        the API server admits and checks it (409 included) but stores nothing."""
        meta = obj["metadata"]
        query = [("fieldManager", self.field_manager)] + ([("dryRun", "All")] if dry_run else [])
        return self._call(self.resource_path(obj["apiVersion"], obj["kind"], meta["namespace"]), "POST", obj, query)

    def exists_by_dry_run(self, api_version: str, kind: str, namespace: str, name: str) -> bool:
        """Whether the object exists, found without reading it: a dry-run create answers 409
        for an existing name (what the operator may know of a Secret it may not ``get``).

        Raises:
            ApiException: the create was refused for another reason (403: not permitted).
        """
        probe = {"apiVersion": api_version, "kind": kind,
                 "metadata": {"name": name, "namespace": namespace, "labels": dict(EXISTENCE_PROBE_LABELS)}}
        try:
            self.create(probe, dry_run=True)
        except ApiException as exc:
            if exc.status == 409:
                return True
            if exc.status == 422:  # not a valid name: no such object can exist
                return False
            raise
        return False

    def get(self, api_version: str, kind: str, namespace: str, name: str, cached: bool = False
            ) -> dict[str, Any] | None:
        """The object, or None when it does not exist. ``cached``: as the API server's watch cache
        holds it (``resourceVersion=0``: no read from etcd, possibly a moment old)."""
        try:
            return self._call(self.resource_path(api_version, kind, namespace, name), "GET",
                              query=_CACHED if cached else None)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def list_objects(self, api_version: str, kind: str, namespace: str, label_selector: str, cached: bool = False
                     ) -> list[dict[str, Any]]:
        """Objects of ``kind`` in ``namespace`` matching ``label_selector`` (server-side);
        ``cached`` as in :meth:`get`."""
        query = [("labelSelector", label_selector), *(_CACHED if cached else [])]
        return self._call(self.resource_path(api_version, kind, namespace), "GET", query=query).get("items") or []

    def list_pods(self, namespace: str, label_selector: str, cached: bool = False) -> list[dict[str, Any]]:
        """Pods of ``namespace`` matching ``label_selector`` (server-side); ``cached`` as in :meth:`get`."""
        return self.list_objects("v1", "Pod", namespace, label_selector, cached)

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        """Delete with background propagation; a missing object is fine."""
        try:
            self._call(self.resource_path(api_version, kind, namespace, name), "DELETE",
                       {"propagationPolicy": "Background"})
        except ApiException as exc:
            if exc.status != 404:
                raise

    def merge_patch(self, api_version: str, kind: str, namespace: str, name: str, patch: dict[str, Any]
                    ) -> dict[str, Any]:
        """JSON merge patch (RFC 7386) of one object; a ``metadata.resourceVersion`` in ``patch``
        makes it conditional (409 Conflict when the object changed since)."""
        return self._call(self.resource_path(api_version, kind, namespace, name), "PATCH", patch,
                          [("fieldManager", self.field_manager)], "application/merge-patch+json")

    def scale_deployment(self, namespace: str, name: str, replicas: int) -> None:
        """Set a Deployment's replicas through its scale subresource; a missing one is fine."""
        path = self.resource_path("apps/v1", "Deployment", namespace, name) + "/scale"
        try:
            self._call(path, "PATCH", {"spec": {"replicas": replicas}}, content_type="application/merge-patch+json")
        except ApiException as exc:
            if exc.status != 404:
                raise

    def patch_connector_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge-patch ``status`` (lists replace whole); a Connector already gone is fine."""
        path = self.resource_path(f"{GROUP}/{VERSION}", "Connector", namespace, name) + "/status"
        try:
            self._call(path, "PATCH", {"status": status}, content_type="application/merge-patch+json")
        except ApiException as exc:
            if exc.status != 404:
                raise

    @retry(retry=retry_if_exception(lambda exc: isinstance(exc, ApiException) and exc.status == 409),
           stop=stop_after_attempt(8), wait=wait_random_exponential(multiplier=0.05, max=1), reraise=True)
    def append_to_connector_status(self, namespace: str, name: str, field: str, entry: dict[str, Any],
                                   keep: int) -> None:
        """Append ``entry`` to the list ``status.<field>``, keeping its newest ``keep`` entries.

        Optimistic concurrency: the patch carries the ``resourceVersion`` read, so a write by
        anyone else in between answers 409 Conflict, and the read-append-write is retried (8
        attempts, jittered back-off up to 1 s) instead of overwriting the other write. A
        Connector already gone is fine; a conflict on the last attempt raises the ApiException.
        """
        path = self.resource_path(f"{GROUP}/{VERSION}", "Connector", namespace, name)
        connector = self.get(f"{GROUP}/{VERSION}", "Connector", namespace, name)
        if connector is None:
            return
        entries = list((connector.get("status") or {}).get(field) or []) + [entry]
        body = {"metadata": {"resourceVersion": connector["metadata"]["resourceVersion"]},
                "status": {field: entries[-keep:]}}
        try:
            self._call(path + "/status", "PATCH", body, content_type="application/merge-patch+json")
        except ApiException as exc:
            if exc.status != 404:
                raise

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Record a core/v1 Event about ``obj`` (``type_`` Normal or Warning). Best effort:
        a failure to record is logged, never raised."""
        meta = obj["metadata"]
        stamp = datetime.now(timezone.utc)
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{stamp.strftime('%s')}{uuid.uuid4().hex[:8]}",
                         "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta.get("uid")},
            "type": type_, "reason": reason, "message": message[:1024],
            "source": {"component": self.field_manager},
            "reportingComponent": self.field_manager, "reportingInstance": self.field_manager,
            "firstTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), "count": 1,
        }
        try:
            self._call(self.resource_path("v1", "Event", meta["namespace"]), "POST", body)
        except ApiException as exc:
            log.warning("could not record event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], exc.reason)

    def remove_annotation(self, namespace: str, name: str, key: str) -> None:
        path = self.resource_path(f"{GROUP}/{VERSION}", "Connector", namespace, name)
        self._call(path, "PATCH", {"metadata": {"annotations": {key: None}}},
                   content_type="application/merge-patch+json")
