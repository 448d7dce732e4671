"""The control API reads no more body than it allows: a huge or malformed Content-Length is
refused before any byte is read, and the connection is closed (the unread body must never be
taken for the next request)."""

from __future__ import annotations

import http.client
import json

import pytest

from conveyor.control.auth import ControlTokens
from conveyor.runtime.rest.server import MAX_BODY_BYTES, ControlServer

TOKENS = ControlTokens.generate()
AUTH = {"Authorization": f"Bearer {TOKENS.admin}"}


@pytest.fixture
def server():
    srv = ControlServer(driver=object(), host="127.0.0.1", port=0, tokens=TOKENS)  # type: ignore[arg-type] - no call reaches it
    srv.start()
    yield srv
    srv.stop()


def request(port: int, method: str, path: str, length: str, body: bytes = b"") -> tuple[int, dict | bytes, bool]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest(method, path)
    conn.putheader("Content-Length", length)
    conn.putheader("Authorization", AUTH["Authorization"])
    conn.endheaders(body)
    response = conn.getresponse()
    raw = response.read()
    payload = json.loads(raw) if response.getheader("Content-Type") == "application/json" else raw
    closed = response.getheader("Connection", "").lower() == "close" or response.will_close
    conn.close()
    return response.status, payload, closed


@pytest.mark.parametrize("path", ["/config", "/internal/tasks/0/sync"])
def test_a_body_over_the_limit_is_refused_with_413_unread(server, path):
    method = "PUT" if path == "/config" else "POST"
    status, payload, closed = request(server.port, method, path, str(MAX_BODY_BYTES + 1))
    assert status == 413, payload
    assert "over the" in payload["message"] and closed


@pytest.mark.parametrize("length", ["-5", "abc", "1e9"])
def test_a_malformed_content_length_is_a_400(server, length):
    """The HTTP parser (h11) refuses it before the application runs."""
    status, payload, closed = request(server.port, "PUT", "/config", length)
    assert status == 400 and closed, payload


def test_a_body_within_the_limit_is_read(server):
    body = json.dumps([1, 2]).encode()
    status, payload, _ = request(server.port, "PUT", "/config", str(len(body)), body)
    assert status == 400 and "expected a JSON object" in payload["message"], payload


def test_a_chunked_body_over_the_limit_is_refused(server):
    """A chunked body declares no length: the server counts what it reads and stops at the limit."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    chunk = b"x" * (64 * 1024)
    # Just over the limit, so that the client has sent it all before the server answers and
    # closes (a longer body races the close: the client's send can meet a reset).
    chunks = MAX_BODY_BYTES // len(chunk) + 1
    conn.request("PUT", "/config", body=iter([chunk] * chunks), encode_chunked=True, headers=AUTH)
    response = conn.getresponse()
    payload = json.loads(response.read())
    assert response.status == 413 and "over the" in payload["message"], payload
    conn.close()


class _SlowSyncs:
    """Stands in for a driver: every sync holds its caller as a long-poll does."""

    metrics_registry = None

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s

    def sync(self, task_id, report, version, wait_ms):
        import time

        from conveyor.control.protocol import Directive

        time.sleep(self.hold_s)
        return Directive()

    def status(self):
        return {"name": "slow", "tasks": []}


def test_status_answers_while_a_hundred_long_polls_are_held():
    """One long-poll per task: 100 held syncs (over anyio's default of 40 worker threads) must
    not delay a status request."""
    import threading
    import time

    from conveyor.control.protocol import TaskReport, TaskState

    srv = ControlServer(driver=_SlowSyncs(hold_s=4.0), host="127.0.0.1", port=0, tokens=TOKENS)  # type: ignore[arg-type]
    srv.start()
    report = json.dumps(TaskReport(task_id=0, attempt=1, state=TaskState.RUNNING, worker_id="w").to_json()).encode()
    answered: list[int] = []

    def long_poll(task_id: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("POST", f"/internal/tasks/{task_id}/sync?wait_ms=4000", body=report,
                     headers={"Authorization": f"Bearer {TOKENS.task}"})
        answered.append(conn.getresponse().status)
        conn.close()

    threads = [threading.Thread(target=long_poll, args=(i,)) for i in range(100)]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        started = time.monotonic()
        conn.request("GET", "/status", headers=AUTH)
        assert conn.getresponse().status == 200
        assert time.monotonic() - started < 1.0
        assert not answered, "a long-poll came back before its hold ended"
        for t in threads:
            t.join(30)
        assert answered == [200] * 100
    finally:
        srv.stop()
