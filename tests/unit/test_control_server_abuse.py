"""The control port holds under abuse: a client that stalls mid-request is cut at the read
deadlines, connections over the limit are answered 503 at once, and long-polls or slow
calls holding every worker thread never delay ``GET /status`` or the probes.

Each test runs a real server on 127.0.0.1 (:class:`ControlServer`, as a driver does) with
small :class:`ServerLimits`, and a stand-in driver whose calls block until released."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from conveyor.control.auth import ControlTokens
from conveyor.control.protocol import Directive, TaskReport, TaskState
from conveyor.runtime.herder.lifecycle import Phase
from conveyor.runtime.rest.connect_rest import CONNECT_ENDPOINTS
from conveyor.runtime.rest.server import ENDPOINTS, PROBES, SHORT_CALLS, ControlServer, ServerLimits

TOKENS = ControlTokens.generate()
ADMIN = {"Authorization": f"Bearer {TOKENS.admin}"}
HEADER_DEADLINE_S = 0.5
READ_DEADLINE_S = 1.5
#: What a deadline may be late by on a busy 2-core machine, and what "at once" means here.
MARGIN_S = 1.0
HOLD_S = 10.0
REPORT = json.dumps(TaskReport(task_id=0, attempt=1, state=TaskState.RUNNING, worker_id="w").to_json())


class _HeldDriver:
    """Stands in for a driver: ``sync`` (a long-poll) and, if ``hold_status``, ``status``
    block until :attr:`release` is set (for at most :data:`HOLD_S`)."""

    def __init__(self, hold_status: bool = False) -> None:
        self.metrics_registry = CollectorRegistry()
        self.lifecycle = SimpleNamespace(phase=Phase.RUNNING)
        self.hold_status = hold_status
        self.release = threading.Event()
        self._entered = 0
        self._lock = threading.Lock()

    def _hold(self) -> None:
        with self._lock:
            self._entered += 1
        self.release.wait(HOLD_S)

    def held(self) -> int:
        with self._lock:
            return self._entered

    def sync(self, task_id: int, report: Any, version: int, wait_ms: int) -> Directive:
        self._hold()
        return Directive()

    def status(self) -> dict[str, Any]:
        if self.hold_status:
            self._hold()
        return {"name": "held", "tasks": []}


def _limits(**changes: Any) -> ServerLimits:
    return ServerLimits(**{"read_header_timeout_s": HEADER_DEADLINE_S, "read_timeout_s": READ_DEADLINE_S,
                           "max_connections": 64, "max_long_calls": 4, "max_short_calls": 4, **changes})


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[tuple[ControlServer, _HeldDriver]] = []

    def start(driver: _HeldDriver, limits: ServerLimits) -> ControlServer:
        server = ControlServer(driver, "127.0.0.1", 0, TOKENS, limits)  # type: ignore[arg-type]
        server.start()
        started.append((server, driver))
        return server

    yield start
    for server, driver in started:
        driver.release.set()
        server.stop()


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, float, str]:
    """(status, seconds it took, the Connection header)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HOLD_S)
    began = time.monotonic()
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.status, time.monotonic() - began, response.getheader("Connection", "")


def _raw(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=HOLD_S)
    sock.sendall(data)
    return sock


def _seconds_until_closed(sock: socket.socket, began: float) -> float:
    """Reads (and drops) what the server sends until it closes the connection."""
    while sock.recv(65536):
        pass
    sock.close()
    return time.monotonic() - began


def _in_background(target: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def _wait_for(condition: Any, timeout_s: float = HOLD_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_half_a_request_line_is_cut_at_the_header_deadline_while_status_answers(serve):
    server = serve(_HeldDriver(), _limits())
    began = time.monotonic()
    stalled = _raw(server.port, b"GET /sta")
    status, took, _ = _get(server.port, "/status", ADMIN)
    assert status == 200 and took < MARGIN_S
    assert HEADER_DEADLINE_S - 0.1 <= _seconds_until_closed(stalled, began) < HEADER_DEADLINE_S + MARGIN_S


def test_the_next_request_on_a_kept_alive_connection_has_the_header_deadline(serve):
    """uvicorn's keep-alive timer stops at the next request's first byte; the header deadline
    starts there."""
    server = serve(_HeldDriver(), _limits())
    sock = _raw(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    began = time.monotonic()
    sock.sendall(b"GET /hea")
    assert _seconds_until_closed(sock, began) < HEADER_DEADLINE_S + MARGIN_S


def test_a_body_that_stalls_is_cut_at_the_read_deadline(serve):
    server = serve(_HeldDriver(), _limits())
    began = time.monotonic()
    stalled = _raw(server.port, b"PUT /config HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                                + f"Authorization: {ADMIN['Authorization']}\r\n\r\n{{\"a\"".encode())
    took = _seconds_until_closed(stalled, began)
    assert READ_DEADLINE_S - 0.1 <= took < READ_DEADLINE_S + MARGIN_S


def test_a_body_trickled_after_a_refusal_is_cut_at_the_read_deadline(serve):
    """A 401 answers before the body is read; a client that goes on sending the body a byte
    at a time (each byte stops uvicorn's keep-alive timer) is still cut."""
    server = serve(_HeldDriver(), _limits())
    began = time.monotonic()
    sock = _raw(server.port, b"PUT /config HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 401")
    sock.settimeout(0.1)
    closed = False
    while not closed and time.monotonic() - began < READ_DEADLINE_S + MARGIN_S:
        try:
            sock.sendall(b" ")
            closed = sock.recv(65536) == b""
        except TimeoutError:
            continue
        except OSError:  # reset: the server closed while we sent
            closed = True
    sock.close()
    assert closed, "the connection outlived the read deadline"


def test_long_polls_over_the_long_call_limit_delay_neither_status_nor_probes(serve):
    driver = _HeldDriver()
    server = serve(driver, _limits(max_long_calls=2))

    def long_poll(task_id: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=HOLD_S + 5)
        conn.request("POST", f"/internal/tasks/{task_id}/sync?wait_ms=30000", body=REPORT,
                     headers={"Authorization": f"Bearer {TOKENS.task}"})
        conn.getresponse().read()
        conn.close()

    polls = [_in_background(long_poll, task_id) for task_id in range(5)]
    _wait_for(lambda: driver.held() == 2)
    time.sleep(0.2)  # the three others queue for a thread
    for path, headers in (("/status", ADMIN), ("/healthz", None), ("/health", None), ("/metrics", None)):
        status, took, _ = _get(server.port, path, headers)
        assert status == 200 and took < MARGIN_S, (path, status, took)
    assert driver.held() == 2
    driver.release.set()
    for poll in polls:
        poll.join(HOLD_S)
    assert driver.held() == 5


def test_probes_need_no_worker_thread(serve):
    """Status requests that hang hold every short-call thread; the probes still answer."""
    driver = _HeldDriver(hold_status=True)
    server = serve(driver, _limits(max_short_calls=2))
    hung = [_in_background(_get, server.port, "/status", ADMIN) for _ in range(3)]
    _wait_for(lambda: driver.held() == 2)
    for path in ("/healthz", "/health"):
        status, took, _ = _get(server.port, path)
        assert status == 200 and took < MARGIN_S, (path, status, took)
    driver.release.set()
    for thread in hung:
        thread.join(HOLD_S)


def test_connections_over_the_limit_are_answered_503_at_once(serve):
    """uvicorn counts the caller's connection: at ``max_connections`` open, a request gets 503."""
    server = serve(_HeldDriver(), _limits(max_connections=4, read_header_timeout_s=5.0, read_timeout_s=5.0))
    held = [_raw(server.port, b"GET /sta") for _ in range(3)]
    time.sleep(0.2)  # accepted
    status, took, connection = _get(server.port, "/healthz")
    assert (status, connection.lower()) == (503, "close") and took < MARGIN_S
    for sock in held:
        sock.close()
    _wait_for(lambda: _get(server.port, "/healthz")[0] == 200, MARGIN_S * 2)


def test_every_classified_call_is_an_endpoint():
    served = {(method, path) for method, path, *_ in ENDPOINTS + CONNECT_ENDPOINTS}
    assert PROBES <= served and SHORT_CALLS <= served
