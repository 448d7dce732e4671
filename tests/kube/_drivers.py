"""Drivers of the operator's Connectors run in the test process, where the kube tier has no
node: the real driver on the session's SparkSession, reached by the operator at 127.0.0.1."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from _objects import Api, eventually

from conveyor.control.auth import ControlTokens
from conveyor.testing.runs import control_request


class LocalDriver:
    """The driver the operator's Deployment would run, on the session's SparkSession: the manifest
    it rendered (its ``<name>-connector`` ConfigMap, as written) and the tokens of its
    ``<name>-control`` Secret (as the pod mounts them, so the operator's calls are authenticated as
    on the node), serving the control API at 127.0.0.1:``port``, where the operator calls. Stopped
    through the API, it keeps serving its status until :meth:`stop`, as ``--stay-after-stop`` does.
    ``tokens`` replaces the Secret's (an impostor)."""

    def __init__(self, spark, api: Api, namespace: str, name: str, tmp: Path, port: int,
                 tokens: ControlTokens | None = None) -> None:
        from conveyor.manifest import ConnectorManifest
        from conveyor.runtime.driver.driver import Driver

        path = tmp / f"{name}-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(api.core.read_namespaced_config_map(f"{name}-connector", namespace).data["connector.yaml"])
        manifest, written = ConnectorManifest.load_as_written(path)
        if tokens is None:
            secret = api.core.read_namespaced_secret(f"{name}-control", namespace).data
            tokens = ControlTokens(admin=base64.b64decode(secret["admin-token"]).decode(),
                                   task=base64.b64decode(secret["task-token"]).decode())
        self.url, self.admin_token = f"http://127.0.0.1:{port}", tokens.admin
        self.driver = Driver(manifest, spark=spark, control_port=port, control_tokens=tokens, written_spec=written)
        self.driver.start()

    def status(self) -> dict:
        code, body = control_request(self.url, "/status", token=self.admin_token, timeout_s=5)
        if code != 200:
            raise AssertionError(f"GET /status: HTTP {code}: {body}")
        return body

    def wait_running(self, tasks: int = 1, timeout_s: float = 120.0) -> dict:
        def running():
            try:
                st = self.status()
            except OSError:
                return None
            return st if len(st["tasks"]) == tasks and all(t["state"] == "RUNNING" for t in st["tasks"]) else None
        return eventually(running, timeout_s, "local driver RUNNING")

    def stop(self) -> None:
        """A plain stop (as SIGTERM to the pod), then the control API closes."""
        try:
            self.driver.stop()
        finally:
            self.driver.close()
