"""pytest fixtures giving tests a real single-node Kubernetes where pods run, and the services
pods use on the host (see :mod:`conveyor.testing.node`).

Enable in a ``conftest.py`` next to the other harness plugins::

    pytest_plugins = [..., "conveyor.testing.pytest_node"]

Session-scoped (started by the first test that needs them, stopped at session end):

* ``kube_node`` -> :class:`~conveyor.testing.node.KubeNode`: the node, Ready, with CoreDNS
  (about 10 s once its binaries are built; they are built on first use).
* ``node_kafka`` -> :class:`~conveyor.testing.kafka.KafkaBroker` listening on the node IP, so
  that pods and the host reach it at the same address.
* ``node_postgres`` -> :class:`~conveyor.testing.postgres.PostgresServer` on the node IP,
  admitting the pod CIDR.

Module-scoped:

* ``second_node`` -> ``str``: the name of a second node started in the session's cluster for
  the module's tests (:meth:`~conveyor.testing.node.KubeNode.add_node`: its own kubelet,
  containerd, pod bridge and cgroup root on this machine), taken out after them, so the other
  e2e tests keep one node.

Function-scoped:

* ``node_namespace`` -> ``str``: a fresh namespace on the node, under Pod Security Standards
  "restricted" (labelled ``pod-security.kubernetes.io/enforce`` and ``warn``: the API server
  refuses any other pod there, so every e2e test checks that Conveyor's pods meet it); discarded
  after the test (:func:`discard_namespace`: Connectors' finalizers dropped, pods removed without
  their grace period), waiting until it is gone so that its pods' CPU and memory are free for the
  next test.

A node that cannot start (not root, a package missing, a component that dies) *fails* the
tests that need it with the component's log tail; nothing is skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from conveyor.testing.fixtures import running, start_or_fail
from conveyor.testing.pytest_kube import namespace_name

log = logging.getLogger("conveyor.testing")


@pytest.fixture(scope="session")
def kube_node():
    """The session's single-node cluster (:class:`~conveyor.testing.node.KubeNode`)."""
    from conveyor.testing.node import KubeNode

    with running(lambda: KubeNode().start()) as node:
        yield node


@pytest.fixture(scope="session")
def node_kafka(kube_node):
    """A Kafka broker on the node IP (PLAINTEXT only), reachable from pods and from the host."""
    from conveyor.testing.kafka import KafkaBroker

    with running(lambda: KafkaBroker(host=kube_node.node_ip, sasl_plain=False, heap="512m").start()) as broker:
        yield broker


@pytest.fixture(scope="session")
def node_postgres(kube_node):
    """PostgreSQL on the node IP, admitting connections from the pod CIDR."""
    from conveyor.testing.postgres import PostgresServer

    server = start_or_fail(lambda: PostgresServer(host=kube_node.node_ip,
                                           client_cidrs=[kube_node.network.pod_cidr]).start())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def second_node(kube_node) -> Iterator[str]:
    """A second node for this module's tests; removed after them (see the module docstring)."""
    from conveyor.testing import _support

    with _support.outside_test_timeout():
        name = start_or_fail(kube_node.add_node)
    try:
        yield name
    finally:
        kube_node.remove_node()


@pytest.fixture
def node_namespace(kube_node, request) -> Iterator[str]:
    """A fresh namespace on the node (``e-<test>-<random>``) enforcing Pod Security "restricted",
    deleted after the test."""
    from conveyor.testing.node import POD_SECURITY_RESTRICTED

    name = namespace_name(request, "e")
    kube_node.create_namespace(name, labels=POD_SECURITY_RESTRICTED)
    yield name
    discard_namespace(kube_node, name)


def discard_namespace(node, name: str, timeout_s: int = 90) -> None:
    """Delete namespace ``name`` without paying for what ran in it, and wait (up to
    ``timeout_s`` seconds) until it is gone, so that its pods' CPU and memory are free for the
    next test.

    The namespace is marked for deletion first (so nothing new can start in it), then its
    Connectors lose their finalizers (the connector-deleted stop path is what the tests that are
    about it run themselves, before they return) and its pods are removed without their grace
    period. A namespace still there after ``timeout_s`` is logged, not raised: this is cleanup.
    """
    started = time.monotonic()
    node.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false", check=False, timeout=60)
    listed = node.kubectl("get", "connectors.conveyor.dev", "-n", name, "-o", "name", check=False, timeout=60)
    for connector in listed.stdout.split() if listed.returncode == 0 else ():
        node.kubectl("patch", connector, "-n", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                     check=False, timeout=60)
    node.kubectl("delete", "pods", "--all", "-n", name, "--grace-period=0", "--force", "--wait=false",
                 check=False, timeout=60)
    gone = node.kubectl("wait", "--for=delete", f"namespace/{name}", f"--timeout={timeout_s}s", check=False,
                        timeout=timeout_s + 30)
    if gone.returncode != 0 and "not found" not in gone.stderr:
        log.warning("namespace %s was not deleted within %d s: %s", name, timeout_s, gone.stderr.strip())
    log.info("namespace %s discarded in %.1f s", name, time.monotonic() - started)
