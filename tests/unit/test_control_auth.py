"""Who may call the control API: the 401/403 matrix of every endpoint, and the token files."""

from __future__ import annotations

import http.client
import json
import os
import stat

import pytest
from prometheus_client import CollectorRegistry

from conveyor.control.auth import (
    ControlAuthError,
    ControlTokens,
    Role,
    find_token,
    local_token_file,
    write_local_token,
)
from conveyor.control.protocol import Directive, TaskReport, TaskState
from conveyor.runtime.rest.server import ENDPOINTS, ControlServer

REPORT = json.dumps(TaskReport(task_id=0, attempt=1, state=TaskState.RUNNING, worker_id="w").to_json())
#: A concrete request for each endpoint of the table.
REQUESTS = {
    "/status": ("GET", "/status", None),
    "/healthz": ("GET", "/healthz", None),
    "/metrics": ("GET", "/metrics", None),
    "/internal/tasks/{task_id:int}/sync": ("POST", "/internal/tasks/0/sync?wait_ms=0", REPORT),
    "/stop": ("POST", "/stop", None),
    "/restart": ("POST", "/restart", None),
    "/drain": ("POST", "/drain?task=0", None),
    "/pause": ("POST", "/pause", None),
    "/resume": ("POST", "/resume", None),
    "/state": ("POST", "/state?target=paused", None),
    "/config": ("PUT", "/config", "{}"),
    "/tasks/{task_id:int}/restart": ("POST", "/tasks/0/restart", None),
}
OPEN_PATHS = {"/healthz", "/metrics"}
TASK_PATHS = {"/internal/tasks/{task_id:int}/sync", "/drain"}


class _Driver:
    """Answers every operation; counts the calls that got through."""

    def __init__(self) -> None:
        self.metrics_registry = CollectorRegistry()
        self.calls: list[str] = []

    def sync(self, *args):
        self.calls.append("sync")
        return Directive()

    def reconfigure(self, spec, written=None):
        self.calls.append("reconfigure")
        return {}

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append(name)
            return {}
        return call


@pytest.fixture(scope="module")
def tokens() -> ControlTokens:
    return ControlTokens.generate()


@pytest.fixture(scope="module")
def server(tokens):
    driver = _Driver()
    srv = ControlServer(driver, "127.0.0.1", 0, tokens)  # type: ignore[arg-type]
    srv.start()
    yield srv
    srv.stop()


def _send(port: int, method: str, path: str, body: str | None, authorization: str | None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), raw


def test_every_endpoint_of_the_table_is_in_the_matrix():
    assert {path for _, path, *_ in ENDPOINTS} == set(REQUESTS)


@pytest.mark.parametrize("route", sorted(REQUESTS))
@pytest.mark.parametrize("credential", ["none", "garbage", "other-scheme", "task", "admin"])
def test_who_may_call_what(server, tokens, route, credential):
    method, path, body = REQUESTS[route]
    header = {"none": None, "garbage": "Bearer not-a-token", "other-scheme": f"Basic {tokens.admin}",
              "task": f"Bearer {tokens.task}", "admin": f"Bearer {tokens.admin}"}[credential]
    status, headers, raw = _send(server.port, method, path, body, header)
    if route in OPEN_PATHS or credential == "admin" or (credential == "task" and route in TASK_PATHS):
        # 2xx, or the endpoint's own answer to this body ({} is no valid spec): never 401/403
        assert status not in (401, 403), raw
        assert status < 300 or route == "/config", raw
    elif credential == "task":
        assert status == 403, raw
        assert "task token may not call" in json.loads(raw)["message"]
    else:
        assert status == 401, raw
        assert headers.get("www-authenticate") == 'Bearer realm="conveyor"'
        assert json.loads(raw)["error_code"] == 401


def test_a_refused_call_reaches_no_driver_method(tokens):
    driver = _Driver()
    srv = ControlServer(driver, "127.0.0.1", 0, tokens)  # type: ignore[arg-type]
    srv.start()
    try:
        for route in REQUESTS:
            if route not in OPEN_PATHS:
                _send(srv.port, *REQUESTS[route], f"Bearer {tokens.task}x")
        _send(srv.port, "POST", "/stop?connector_deleted=true", None, f"Bearer {tokens.task}")
    finally:
        srv.stop()
    assert driver.calls == []


def test_role_of_a_header():
    tokens = ControlTokens.generate()
    assert tokens.role_of(f"Bearer {tokens.admin}") is Role.ADMIN
    assert tokens.role_of(f"bearer  {tokens.task}") is Role.TASK
    for refused in (None, "", "Bearer", "Bearer ", tokens.admin, f"Bearer {tokens.admin[:-1]}", "Bearer ünïcode"):
        assert tokens.role_of(refused) is None, refused
    assert tokens.admin not in repr(tokens) and tokens.task not in repr(tokens)


def test_tokens_from_a_mounted_directory(tmp_path):
    (tmp_path / "admin-token").write_text("a" * 43 + "\n")
    (tmp_path / "task-token").write_text("t" * 43)
    tokens = ControlTokens.load_dir(tmp_path)
    assert (tokens.admin, tokens.task) == ("a" * 43, "t" * 43)
    (tmp_path / "task-token").write_text("")
    with pytest.raises(ControlAuthError, match="task-token is empty"):
        ControlTokens.load_dir(tmp_path)
    with pytest.raises(ControlAuthError, match="admin-token"):
        ControlTokens.load_dir(tmp_path / "missing")


def test_the_local_token_file_is_private_and_found_by_port(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.delenv("CONVEYOR_CONTROL_TOKEN_FILE", raising=False)
    (tmp_path / "run").mkdir(mode=0o755)
    path = write_local_token(18083, "secret-admin-token")
    assert path == local_token_file(18083)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert find_token("http://127.0.0.1:18083") == "secret-admin-token"
    assert find_token("http://localhost:18083/") == "secret-admin-token"
    assert find_token("http://127.0.0.1:18084") is None
    assert find_token("http://orders-driver.data.svc:18083") is None  # never sent off this machine
    named = tmp_path / "named"
    named.write_text("named-token\n")
    monkeypatch.setenv("CONVEYOR_CONTROL_TOKEN_FILE", str(named))
    assert find_token("http://orders-driver.data.svc:8083") == "named-token"
    assert find_token("http://127.0.0.1:18083", token_file=path) == "secret-admin-token"


def test_a_stale_token_file_with_wide_permissions_is_made_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    stale = local_token_file(9999)
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    stale.chmod(0o644)
    write_local_token(9999, "new")
    assert stale.read_text() == "new" and stat.S_IMODE(os.stat(stale).st_mode) == 0o600
