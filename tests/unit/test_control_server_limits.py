"""The control API reads no more body than it allows: a huge or malformed Content-Length is
refused before any byte is read, and the connection is closed (the unread body must never be
taken for the next request)."""

from __future__ import annotations

import http.client
import json

import pytest

from conveyor.runtime.control_server import MAX_BODY_BYTES, ControlServer


@pytest.fixture
def server():
    srv = ControlServer(driver=object(), host="127.0.0.1", port=0)  # type: ignore[arg-type] - no call reaches it
    srv.start()
    yield srv
    srv.stop()


def request(port: int, method: str, path: str, length: str, body: bytes = b"") -> tuple[int, dict, bool]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest(method, path)
    conn.putheader("Content-Length", length)
    conn.endheaders(body)
    response = conn.getresponse()
    payload = json.loads(response.read())
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
    status, payload, closed = request(server.port, "PUT", "/config", length)
    assert status == 400 and "Content-Length" in payload["message"] and closed, payload


def test_a_body_within_the_limit_is_read(server):
    body = json.dumps([1, 2]).encode()
    status, payload, _ = request(server.port, "PUT", "/config", str(len(body)), body)
    assert status == 400 and "expected a JSON object" in payload["message"], payload
