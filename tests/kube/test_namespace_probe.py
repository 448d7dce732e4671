"""The driver's question at SIGTERM -- is my namespace being deleted? -- asked of a real
kube-apiserver with a ServiceAccount token, as a driver pod asks it
(:mod:`conveyor.runtime.deletion.namespace`). The harness server has no namespace controller,
so a deleted namespace stays ``Terminating``."""

from __future__ import annotations

import base64
import json
import uuid
from urllib.parse import urlsplit

import pytest

from conveyor.runtime.deletion.namespace import namespace_terminating

pytestmark = pytest.mark.integration


def mounted_account(kube_api, tmp_path, namespace: str, name: str):
    """A directory laid out as a pod's ``/var/run/secrets/kubernetes.io/serviceaccount``, and
    the environment a pod gets."""
    kube_api.create_service_account(namespace, name)
    account = tmp_path / name
    account.mkdir()
    (account / "token").write_text(kube_api.service_account_token(namespace, name))
    (account / "namespace").write_text(namespace)
    (account / "ca.crt").write_bytes(base64.b64decode(kube_api._cluster()["certificate-authority-data"]))
    server = urlsplit(kube_api.server)
    return account, {"KUBERNETES_SERVICE_HOST": server.hostname, "KUBERNETES_SERVICE_PORT": str(server.port)}


def test_the_answer_turns_true_when_the_namespace_is_deleted_and_nothing_is_created(kube_api, tmp_path):
    namespace = kube_api.create_namespace(f"probe-{uuid.uuid4().hex[:8]}")
    kube_api.kubectl("create", "role", "configmaps", "-n", namespace, "--verb=create", "--resource=configmaps")
    kube_api.kubectl("create", "rolebinding", "driver", "-n", namespace, "--role=configmaps",
                     f"--serviceaccount={namespace}:driver")
    account, environ = mounted_account(kube_api, tmp_path, namespace, "driver")

    assert namespace_terminating(account_dir=account, environ=environ) is False
    listed = json.loads(kube_api.kubectl("get", "configmaps", "-n", namespace, "-o", "json").stdout)["items"]
    assert [c["metadata"]["name"] for c in listed if c["metadata"]["name"].startswith("conveyor-")] == []  # dry run

    kube_api.delete_namespace(namespace)
    assert namespace_terminating(account_dir=account, environ=environ) is True


def test_no_answer_without_permission_outside_a_pod_or_without_a_server(kube_api, tmp_path):
    namespace = kube_api.create_namespace(f"probe-{uuid.uuid4().hex[:8]}")
    account, environ = mounted_account(kube_api, tmp_path, namespace, "nobody")  # no Role: 403 Forbidden
    assert namespace_terminating(account_dir=account, environ=environ) is None
    assert namespace_terminating(account_dir=account, environ={}) is None
    assert namespace_terminating(account_dir=tmp_path / "none", environ=environ) is None
    closed = {**environ, "KUBERNETES_SERVICE_PORT": "9"}
    assert namespace_terminating(timeout_s=2, account_dir=account, environ=closed) is None
    kube_api.delete_namespace(namespace)
