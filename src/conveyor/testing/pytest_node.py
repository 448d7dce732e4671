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

Function-scoped:

* ``node_namespace`` -> ``str``: a fresh namespace on the node, under Pod Security Standards
  "restricted" (labelled ``pod-security.kubernetes.io/enforce`` and ``warn``: the API server
  refuses any other pod there, so every e2e test checks that Conveyor's pods meet it); deleted
  after the test, waiting
  (up to 150 s) until it is gone, so that its pods' CPU and memory are free for the next test
  (the node has a namespace controller: its pods get their grace period).

A node that cannot start (not root, a package missing, a component that dies) *fails* the
tests that need it with the component's log tail; nothing is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from conveyor.testing.pytest_kube import _start, namespace_name

log = logging.getLogger("conveyor.testing")


@pytest.fixture(scope="session")
def kube_node():
    """The session's single-node cluster (:class:`~conveyor.testing.node.KubeNode`)."""
    from conveyor.testing.node import KubeNode

    node = _start(lambda: KubeNode().start())
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def node_kafka(kube_node):
    """A Kafka broker on the node IP (PLAINTEXT only), reachable from pods and from the host."""
    from conveyor.testing.kafka import KafkaBroker

    broker = _start(lambda: KafkaBroker(host=kube_node.node_ip, sasl_plain=False, heap="512m").start())
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def node_postgres(kube_node):
    """PostgreSQL on the node IP, admitting connections from the pod CIDR."""
    from conveyor.testing.postgres import PostgresServer

    server = _start(lambda: PostgresServer(host=kube_node.node_ip,
                                           client_cidrs=[kube_node.network.pod_cidr]).start())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def node_namespace(kube_node, request) -> Iterator[str]:
    """A fresh namespace on the node (``e-<test>-<random>``) enforcing Pod Security "restricted",
    deleted after the test."""
    from conveyor.testing.node import POD_SECURITY_RESTRICTED

    name = namespace_name(request, "e")
    kube_node.create_namespace(name, labels=POD_SECURITY_RESTRICTED)
    yield name
    try:
        kube_node.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=true", "--timeout=150s",
                          timeout=180)
    except Exception as e:  # noqa: BLE001 - cleanup only
        log.warning("namespace %s was not deleted within 150 s: %s", name, e)
