"""Each connector's ``<name>-control`` Secret: the credentials of its control API and Spark RPC.

=======================  ==============================================================
``admin-token``          every control API call (the operator, the driver pod's
                         ``preStop`` drain); mounted in the driver pod only
``task-token``           task reports and drains (``conveyor.control.auth``);
                         mounted in the driver and executor pods
``spark-auth-secret``    Spark's ``spark.authenticate`` secret between the driver and its
                         executors; mounted in both
=======================  ==============================================================

Every value is derived from the operator's key (:mod:`conveyor_operator.reconcile.control_key`), so the
operator knows them without reading the Secret back: its account may ``create`` and ``delete``
Secrets (the chart's admission policy narrows both to ``<connector>-control`` Secrets it labelled)
but never ``get`` one. The Secret is owned by the Connector, so it goes with it.

:meth:`ControlSecrets.ensure` creates it on every reconciliation; a 409 means it is there, and
the Connector's own: a first apply creates it only once the Connector's ``<name>-connector``
ConfigMap is written, and before that no Secret of the name may be in the way (an earlier
Connector's or someone else's, which the new one waits for as for its other objects,
:mod:`conveyor_operator.reconcile.succession`). The
version it was written for is kept in ``status.controlSecretVersion``; when that differs from
the wanted one (a new operator key, a ``conveyor.dev/rotate-control-secret`` annotation, a
Secret written by an operator that drew random values) the Secret is deleted and created
again. Its contents are a function of the version, so repeating that after a failure is
harmless. The driver pod template's ``conveyor.dev/control-secret-version`` annotation rolls
the pods onto new values. Values are never logged.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kubernetes.client.rest import ApiException

from conveyor.control.auth import ADMIN_TOKEN_FILE, SPARK_AUTH_SECRET_FILE, TASK_TOKEN_FILE
from conveyor_operator import GROUP, VERSION, names
from conveyor_operator.kube import Kube
from conveyor_operator.reconcile.control_key import ConnectorIdentity, OperatorKey

log = logging.getLogger(__name__)

ADMIN_TOKEN_KEY = ADMIN_TOKEN_FILE
TASK_TOKEN_KEY = TASK_TOKEN_FILE
SPARK_AUTH_SECRET_KEY = SPARK_AUTH_SECRET_FILE
KEYS = (ADMIN_TOKEN_KEY, TASK_TOKEN_KEY, SPARK_AUTH_SECRET_KEY)
"""The Secret's keys, which are also the file names the runtime reads from the mounted directory."""


def identity(connector: dict[str, Any]) -> ConnectorIdentity:
    """What ``connector`` (a Connector object) derives its credentials from."""
    meta = connector["metadata"]
    rotation = (meta.get("annotations") or {}).get(names.ANNOTATION_ROTATE_CONTROL_SECRET, "")
    return ConnectorIdentity(meta["namespace"], meta["name"], meta["uid"], rotation)


def control_secret(key: OperatorKey, who: ConnectorIdentity, owner: dict[str, Any]) -> dict[str, Any]:
    """The Secret body of ``who``, owned by ``owner`` (an owner reference of the Connector)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": names.control_secret(who.name), "namespace": who.namespace,
                     "labels": names.labels(who.name, names.CONTROL), "ownerReferences": [owner],
                     "annotations": {names.ANNOTATION_CONTROL_SECRET_VERSION: key.version(who)}},
        "stringData": {purpose: key.derive(purpose, who) for purpose in KEYS},
    }


class ControlSecrets:
    """Makes sure each connector's Secret holds the values derived for it, and knows the admin
    tokens the operator sends.

    Thread-safe: kopf handlers run on a thread pool.
    """

    def __init__(self, key: OperatorKey) -> None:
        self.key = key
        self._known: dict[tuple[str, str], ConnectorIdentity] = {}
        self._lock = threading.Lock()

    def version(self, connector: dict[str, Any]) -> str:
        """The version of ``connector``'s Secret as :meth:`ensure` writes it (the driver pod
        template's ``conveyor.dev/control-secret-version``)."""
        return self.key.version(identity(connector))

    def ensure(self, kube: Kube, connector: dict[str, Any], owner: dict[str, Any], recorded_version: str | None
               ) -> None:
        """Create ``connector``'s Secret, or replace it when ``recorded_version`` (its
        ``status.controlSecretVersion``; ``None`` before the first apply recorded it) is not the
        wanted version (:meth:`version`). Call it only once no Secret of the name can be
        another's (:func:`conveyor_operator.reconcile.succession.predecessor_objects`).

        Raises:
            ApiException: the API server refused the create or the delete (other than a 409 of
                a create, a 404 of a delete).
        """
        who = identity(connector)
        body = control_secret(self.key, who, owner)
        try:
            kube.create(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            if recorded_version != self.key.version(who):
                kube.delete("v1", "Secret", who.namespace, body["metadata"]["name"])
                self._create_if_absent(kube, body)
        with self._lock:
            self._known[(who.namespace, who.name)] = who

    @staticmethod
    def _create_if_absent(kube: Kube, body: dict[str, Any]) -> None:
        try:
            kube.create(body)
        except ApiException as exc:
            if exc.status != 409:  # another reconciliation wrote the same values meanwhile
                raise

    def admin_token(self, kube: Kube, namespace: str, connector: str) -> str | None:
        """The admin token of ``connector``'s driver; ``None`` when the Connector is gone.

        Raises:
            ApiException: the Connector could not be read (not a 404).
        """
        with self._lock:
            who = self._known.get((namespace, connector))
        if who is None:
            body = kube.get(f"{GROUP}/{VERSION}", "Connector", namespace, connector)
            if body is None:
                return None
            who = identity(body)
            with self._lock:
                self._known[(namespace, connector)] = who
        return self.key.derive(ADMIN_TOKEN_KEY, who)

    def forget(self, namespace: str, connector: str) -> None:
        """Drop what is known of ``connector`` (its driver refused the token: the Connector may
        have been re-created or rotated since); the next :meth:`admin_token` reads it again."""
        with self._lock:
            self._known.pop((namespace, connector), None)
