"""Whether the driver pod's own namespace is being deleted, asked when SIGTERM comes.

Kubernetes deletes a namespace's pods before its other objects (ordered namespace deletion,
KEP-5080): on v1.36 a driver pod got SIGTERM 6 s after ``kubectl delete namespace`` and was
gone at 13 s, while its Connector was only deleted at 48 s. By the time the Connector's
finalizer runs, no driver is left to run the connector-deleted stop path and no cleanup Job
can be created in the terminating namespace. So the driver asks at SIGTERM, and runs that
path itself (``spec.deletionPolicy``) when the answer is yes.

The question is a dry-run creation of a ConfigMap in the pod's namespace with the pod's
ServiceAccount token (the driver's Role may create ConfigMaps, as Spark on Kubernetes needs):
the API server's NamespaceLifecycle admission refuses it with 403 and cause
``NamespaceTerminating`` exactly when the namespace is being deleted. A dry run persists
nothing. No new permission is needed, as reading the Namespace object would need a ClusterRole.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def namespace_terminating(timeout_s: float = 5.0, account_dir: Path = SERVICE_ACCOUNT_DIR,
                          environ: Mapping[str, str] | None = None) -> bool | None:
    """Whether this pod's namespace is being deleted.

    Args:
        timeout_s: seconds the API server has to answer.
        account_dir: the mounted ServiceAccount (``token``, ``ca.crt``, ``namespace``).
        environ: where ``KUBERNETES_SERVICE_HOST``/``_PORT`` are read (default ``os.environ``).

    Returns:
        True or False; None outside a pod, without a mounted token, or when the API server
        cannot say (unreachable, another error): the caller then does a plain stop. Never raises.
    """
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    token_file = account_dir / "token"
    if not host or not token_file.is_file():
        return None
    try:
        namespace = (account_dir / "namespace").read_text().strip()
        context = ssl.create_default_context(cafile=str(account_dir / "ca.crt"))
        host = f"[{host}]" if ":" in host else host
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "conveyor-namespace-probe-"}}
        request = urllib.request.Request(
            f"https://{host}:{port}/api/v1/namespaces/{namespace}/configmaps?dryRun=All", method="POST",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token_file.read_text().strip()}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout_s, context=context):
            return False
    except urllib.error.HTTPError as exc:
        if exc.code == 403 and "NamespaceTerminating" in exc.read().decode(errors="replace"):
            return True
        log.warning("cannot tell whether namespace is being deleted: HTTP %d from the API server", exc.code)
    except (OSError, ValueError) as exc:
        log.warning("cannot tell whether namespace is being deleted: %s", exc)
    return None
