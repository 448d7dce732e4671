"""pytest fixtures giving tests a real Kubernetes API server (envtest-style: etcd + kube-apiserver).

Enable in a ``conftest.py`` (next to ``conveyor.testing.pytest_plugin``)::

    pytest_plugins = ["conveyor.testing.pytest_plugin", "conveyor.testing.pytest_kube"]

Session-scoped (started lazily by the first test that needs them, stopped at session end):

* ``kube_binaries`` -> :class:`~conveyor.testing.kube.KubeBinaries`: kube-apiserver, etcd,
  kubectl and helm as built by ``tools/kube/build.sh`` (``$CONVEYOR_KUBE_BIN`` overrides); a
  checkout without them in its cache builds them on first use (~8 min, then cached).
* ``kube_api`` -> :class:`~conveyor.testing.kube.KubeEndpoint`: a started
  :class:`~conveyor.testing.kube.KubeAPIServer` (about 3 s), or
  :class:`~conveyor.testing.kube.ExternalKube` when ``$CONVEYOR_KUBECONFIG`` names an admin
  kubeconfig (``python -m conveyor.testing up --kube`` prints one). ``.server``,
  ``.admin_kubeconfig``, ``.kubectl(...)``, ``.helm(...)``, ``.api_client()``,
  ``.service_account_token(ns, name)``, ``.kubeconfig_for_token(token, name)``.

Function-scoped:

* ``kube_namespace`` -> ``str``: a namespace with a unique name derived from the test name
  (``t-<test>-<random>``), created as admin; deletion is requested after the test (on the
  harness's own server it then stays ``Terminating``: there is no namespace controller).

There is no kube-controller-manager, scheduler or kubelet: see :mod:`conveyor.testing.kube`
for what that means (no default ServiceAccounts, no garbage collection, no Pods).

When the control plane cannot start (binaries that cannot be built, a process dies, no
``/readyz``) the fixture *fails* with the :class:`~conveyor.testing.errors.ComponentUnavailable`
message (with the build log's tail); nothing is ever skipped.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterator

import pytest

from conveyor.testing.fixtures import running, start_or_fail

log = logging.getLogger("conveyor.testing")



def pytest_report_header(config: pytest.Config) -> list[str]:
    from conveyor.testing.kube import ENV_BIN, ENV_KUBECONFIG

    return [f"conveyor.testing: {verb} {var}={os.environ[var]}"
            for var, verb in ((ENV_KUBECONFIG, "reusing"), (ENV_BIN, "using"))
            if os.environ.get(var)]


@pytest.fixture(scope="session")
def kube_binaries():
    """kube-apiserver, etcd, kubectl and helm (:class:`~conveyor.testing.kube.KubeBinaries`),
    built on first use (:func:`~conveyor.testing.kube.ensure_kube_binaries`)."""
    from conveyor.testing.kube import ensure_kube_binaries

    return start_or_fail(ensure_kube_binaries)


@pytest.fixture(scope="session")
def kube_api(kube_binaries):
    """The session's Kubernetes API server (KubeAPIServer, or ExternalKube for $CONVEYOR_KUBECONFIG)."""
    from conveyor.testing.kube import start_or_reuse

    with running(start_or_reuse) as endpoint:
        yield endpoint


def namespace_name(request: pytest.FixtureRequest, prefix: str) -> str:
    """``<prefix>-<test name>-<random>``: a DNS-1123 label of at most 63 characters."""
    slug = re.sub(r"^test_?", "", request.node.name.lower())
    slug = re.sub(r"[^a-z0-9]+", "-", slug).strip("-")[:44].strip("-") or "t"
    return f"{prefix}-{slug}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kube_namespace(kube_api, request) -> Iterator[str]:
    """A fresh namespace for this test (``t-<test name>-<random>``, at most 63 chars)."""
    name = namespace_name(request, "t")
    kube_api.create_namespace(name)
    yield name
    try:
        kube_api.delete_namespace(name)
    except Exception as e:  # noqa: BLE001 - cleanup only
        log.warning("could not delete namespace %s: %s", name, e)
