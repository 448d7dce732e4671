"""Fixtures of the operator's end-to-end tests: the Helm chart installed into the
harness's real kube-apiserver, and the operator (kopf, in-process) authenticated as the
chart's ServiceAccount with a TokenRequest token, so the chart's RBAC is what is tested."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from _objects import operator_key_file

from conveyor.testing.ports import free_port

# The operator reads the status interval from the environment when it starts (its startup handler).
os.environ.setdefault("CONVEYOR_OPERATOR_STATUS_INTERVAL_SECONDS", "1")

CHART = Path(__file__).resolve().parents[2] / "charts" / "conveyor"
OPERATOR_NAMESPACE = "conveyor-system"


@pytest.fixture(scope="session")
def chart(kube_api, tmp_path_factory) -> dict[str, str]:
    """``helm install`` of charts/conveyor (once per session): its namespace, the operator's
    ServiceAccount, its environment, and its key (the chart's Secret, in a file as the pod
    mounts it)."""
    result = kube_api.helm("install", "conveyor", str(CHART), "--namespace", OPERATOR_NAMESPACE,
                           "--create-namespace")
    rendered = kube_api.helm("get", "manifest", "conveyor", "--namespace", OPERATOR_NAMESPACE).stdout
    key_file = operator_key_file(kube_api, [d for d in yaml.safe_load_all(rendered) if d],
                                 tmp_path_factory.mktemp("operator-key"))
    accounts = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") == "ServiceAccount"]
    assert len(accounts) == 1, f"the chart should create one ServiceAccount, made {len(accounts)}"
    deployment = next(d for d in yaml.safe_load_all(rendered) if d and d.get("kind") == "Deployment")
    env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0].get("env", [])
           if "value" in e}
    return {"namespace": OPERATOR_NAMESPACE, "service_account": accounts[0]["metadata"]["name"],
            "operator_env": {**env, "CONVEYOR_OPERATOR_KEY_FILE": str(key_file)}, "install_output": result.stdout}


@pytest.fixture
def operator(kube_api, chart, kube_namespace, monkeypatch):
    """A factory: ``with operator(control_port) as runner:`` runs the operator against
    the harness, as the chart's ServiceAccount (cluster-wide RBAC), watching the test's
    namespace only (connectors other tests left behind must not reach this test's
    driver), reaching drivers at 127.0.0.1:<port>; ``env`` sets ``CONVEYOR_OPERATOR_*``
    variables over the chart's."""

    @contextmanager
    def run(control_port: int | None = None, env: dict[str, str] | None = None) -> Iterator[object]:
        from kopf.testing import KopfRunner

        token = kube_api.service_account_token(chart["namespace"], chart["service_account"])
        kubeconfig = kube_api.kubeconfig_for_token(token, "conveyor-operator")
        for key, value in chart["operator_env"].items():     # the operator as the chart configures it
            if key.startswith("CONVEYOR_OPERATOR_") and key != "CONVEYOR_OPERATOR_STATUS_INTERVAL_SECONDS":
                monkeypatch.setenv(key, value)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        monkeypatch.setenv("CONVEYOR_OPERATOR_CONTROL_URL_TEMPLATE",
                           f"http://127.0.0.1:{control_port or free_port()}")
        monkeypatch.setenv("CONVEYOR_OPERATOR_REQUEST_TIMEOUT_SECONDS", "2")
        monkeypatch.setenv("CONVEYOR_OPERATOR_WAIT_POLL_SECONDS", "1")  # production: 5
        monkeypatch.setenv("CONVEYOR_OPERATOR_DRIVER_START_TIMEOUT_SECONDS", "2")  # production: 300
        for key, value in (env or {}).items():                # a test's own settings, over the chart's
            monkeypatch.setenv(key, value)
        with KopfRunner(["run", "--standalone", "--namespace", kube_namespace, "-m", "conveyor_operator.handlers"],
                        timeout=120) as runner:
            yield runner
        assert runner.exception is None, runner.output
        assert runner.exit_code == 0, runner.output

    return run


@pytest.fixture(scope="session")
def helm() -> str:
    """Path of the harness's helm binary, for ``helm template`` tests (no API server needed)."""
    from conveyor.testing.errors import ComponentUnavailable
    from conveyor.testing.kube import ensure_kube_binaries

    error: ComponentUnavailable | None = None
    try:
        return str(ensure_kube_binaries().helm)
    except ComponentUnavailable as e:
        error = e
    pytest.fail(f"the chart tests need helm: {error}", pytrace=False)


@pytest.fixture
def api(kube_api):
    """Typed clients of the harness's API server, as admin (:class:`_objects.Api`)."""
    from _objects import Api

    with kube_api.api_client() as api_client:
        yield Api(api_client)
