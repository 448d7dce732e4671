"""The Kubernetes quickstart's steps (``examples/kubernetes/quickstart.py``, which
``examples/kubernetes/quickstart.sh`` runs on the cluster it brings up) on the end-to-end tier's
node, broker, PostgreSQL and chart: a postgres-sink and a postgres-audit-source applied from the
example manifests, an executor pod evicted mid-stream with nothing lost or written twice, and the
audit source deleted with its trigger, function and table gone. The shell script's own part
(``python -m conveyor.testing up --node``) would need a second node on this machine; the steps
are what can break without the harness noticing."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "kubernetes" / "quickstart.py"


def _quickstart():
    spec = importlib.util.spec_from_file_location("kubernetes_quickstart", QUICKSTART)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_kubernetes_quickstart_steps_run_on_a_node(kube_node, node_kafka, node_postgres, conveyor_release,
                                                      node_namespace):
    quickstart = _quickstart()
    url = node_postgres.create_database(f"quickstart_{uuid.uuid4().hex[:8]}")
    kubectl = quickstart.Kubectl(str(kube_node.binaries.kubectl), str(kube_node.admin_kubeconfig))
    shown = quickstart.run(kubectl, node_kafka.bootstrap_servers, url, first=2000, more=6000,
                           namespace=node_namespace, timeout_s=300)
    assert shown["rows"] == shown["distinct"] == 8000, shown
    assert (shown["inserts"], shown["updates"]) == (6000, 0), shown
    assert "drained tasks" in shown["eviction"], shown
    assert all(shown["catalog_before"].values()), shown
    assert not any(shown["catalog_after"].values()), shown
