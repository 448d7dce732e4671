"""Each connector's ``<name>-control`` Secret: the credentials of its control API and Spark RPC.

=======================  ==============================================================
``admin-token``          every control API call (the operator, the driver pod's
                         ``preStop`` drain); mounted in the driver pod only
``task-token``           task reports and drains (``conveyor.runtime.control_auth``);
                         mounted in the driver and executor pods
``spark-auth-secret``    Spark's ``spark.authenticate`` secret between the driver and its
                         executors; mounted in both
=======================  ==============================================================

Values are 256 random bits each (:func:`secrets.token_urlsafe`). The Secret is *created*
once, never server-side applied (an apply would write new values every reconciliation), and
owned by the Connector, so it goes with it. Deleting it rotates every value: the operator
creates a new one and the driver pod template's ``conveyor.dev/control-secret-uid``
annotation rolls the pods onto it. Values are never logged; the operator keeps the admin
token in memory only to call the driver.
"""

from __future__ import annotations

import base64
import secrets
import threading
from typing import Any

from kubernetes.client.rest import ApiException

from conveyor.manifest import ConnectorManifest
from conveyor.runtime.control_auth import ADMIN_TOKEN_FILE, SPARK_AUTH_SECRET_FILE, TASK_TOKEN_FILE
from conveyor_operator import names
from conveyor_operator.kube import Kube

ADMIN_TOKEN_KEY = ADMIN_TOKEN_FILE
TASK_TOKEN_KEY = TASK_TOKEN_FILE
SPARK_AUTH_SECRET_KEY = SPARK_AUTH_SECRET_FILE
KEYS = (ADMIN_TOKEN_KEY, TASK_TOKEN_KEY, SPARK_AUTH_SECRET_KEY)
"""The Secret's keys, which are also the file names the runtime reads from the mounted directory."""


def new_control_secret(manifest: ConnectorManifest, owner: dict[str, Any]) -> dict[str, Any]:
    """A Secret body with fresh values for every key of :data:`KEYS`, owned by ``owner``
    (an owner reference of the Connector)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": names.control_secret(manifest.name), "namespace": manifest.metadata.namespace,
                     "labels": names.labels(manifest.name, names.CONTROL), "ownerReferences": [owner]},
        "stringData": {key: secrets.token_urlsafe(32) for key in KEYS},
    }


def _admin_token(secret: dict[str, Any]) -> str | None:
    encoded = (secret.get("data") or {}).get(ADMIN_TOKEN_KEY)
    return base64.b64decode(encoded).decode("ascii").strip() if encoded else None


class ControlSecrets:
    """Makes sure each connector has its Secret, and keeps the admin tokens the operator sends.

    Thread-safe: kopf handlers run on a thread pool.
    """

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def ensure(self, kube: Kube, manifest: ConnectorManifest, owner: dict[str, Any]) -> str:
        """Create the connector's Secret unless it exists; returns its ``metadata.uid``.

        Raises:
            ApiException: the API server refused the read or the create (other than 409).
        """
        namespace, name = manifest.metadata.namespace, names.control_secret(manifest.name)
        existing = kube.get("v1", "Secret", namespace, name)
        if existing is None:
            try:
                existing = kube.create(new_control_secret(manifest, owner))
            except ApiException as exc:
                if exc.status != 409:  # created meanwhile by another reconciliation: use that one
                    raise
                existing = kube.get("v1", "Secret", namespace, name) or {}
        token = _admin_token(existing)
        if token:
            with self._lock:
                self._tokens[(namespace, manifest.name)] = token
        return str(existing.get("metadata", {}).get("uid", ""))

    def admin_token(self, kube: Kube, namespace: str, connector: str) -> str | None:
        """The admin token of ``connector``'s driver (``None`` while its Secret does not exist)."""
        with self._lock:
            token = self._tokens.get((namespace, connector))
        if token is None:
            secret = kube.get("v1", "Secret", namespace, names.control_secret(connector))
            token = _admin_token(secret) if secret else None
            if token:
                with self._lock:
                    self._tokens[(namespace, connector)] = token
        return token

    def forget(self, namespace: str, connector: str) -> None:
        """Drop a cached token (the driver refused it: the Secret was replaced)."""
        with self._lock:
            self._tokens.pop((namespace, connector), None)
