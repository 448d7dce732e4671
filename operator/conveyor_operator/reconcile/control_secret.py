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

:meth:`ControlSecrets.ensure` creates it on every reconciliation (a 409 means it is there: the
Connector's own once it was applied, otherwise an earlier Connector's or someone else's, which
the new one waits for as for its other objects, :mod:`conveyor_operator.reconcile.succession`). The
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


class NotOurs(Exception):
    """The connector's Secret exists but is not known to be its own (``str``: ``"Secret <name>"``)."""


class ControlSecrets:
    """Makes sure each connector's Secret holds the values derived for it, and knows the admin
    tokens the operator sends.

    Thread-safe: kopf handlers run on a thread pool.
    """

    def __init__(self, key: OperatorKey) -> None:
        self.key = key
        self._known: dict[tuple[str, str], ConnectorIdentity] = {}
        self._lock = threading.Lock()

    def ensure(self, kube: Kube, connector: dict[str, Any], owner: dict[str, Any], recorded_version: str | None,
               applied_before: bool) -> tuple[str, bool]:
        """Create ``connector``'s Secret, or replace it when ``recorded_version`` (its
        ``status.controlSecretVersion``) is not the wanted version; returns the wanted version and
        whether this call created the Secret where none was (see :meth:`discard`).

        Args:
            applied_before: the operator applied this Connector before (``status.configHash``),
                so a Secret of its name is its own; until then one is an earlier Connector's or
                someone else's, which is never replaced.

        Raises:
            NotOurs: a Secret of that name exists and the Connector was never applied.
            ApiException: the API server refused the create or the delete (other than a 409 of
                a create, a 404 of a delete).
        """
        who = identity(connector)
        version = self.key.version(who)
        body = control_secret(self.key, who, owner)
        created = True
        try:
            kube.create(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            if not applied_before:
                raise NotOurs(f"Secret {body['metadata']['name']}") from None
            created = False
            if recorded_version != version:
                kube.delete("v1", "Secret", who.namespace, body["metadata"]["name"])
                self._create_if_absent(kube, body)
        with self._lock:
            self._known[(who.namespace, who.name)] = who
        return version, created

    def discard(self, kube: Kube, namespace: str, connector: str) -> None:
        """Delete the Secret that :meth:`ensure` has just created for a first apply that then
        failed before recording it (``status.configHash``): the retry then creates it again,
        where a Secret left behind would be taken for an earlier Connector's (:class:`NotOurs`)
        and the Connector would wait for it forever. Best effort: a failure is logged."""
        try:
            kube.delete("v1", "Secret", namespace, names.control_secret(connector))
        except ApiException as exc:
            log.warning("connector %s/%s: the control Secret of a failed first apply was not deleted (%s); "
                        "the Connector waits for it until it is", namespace, connector, exc.reason)

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
