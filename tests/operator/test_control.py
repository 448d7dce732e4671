"""The driver client tells a driver that is gone from one that is busy (issue 11 §3), and sends
its token to the driver's URL only: never through a redirect (issue 28)."""

import http.server
import os
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager

import pytest

from conveyor.control.client import DriverClient, DriverRefused, DriverTimedOut, DriverUnreachable
from conveyor.testing.ports import free_port


def test_a_closed_port_is_unreachable_not_timed_out():
    port = free_port()  # nothing listens there
    with pytest.raises(DriverUnreachable) as caught:
        DriverClient(f"http://127.0.0.1:{port}", timeout_s=2).status()
    assert not isinstance(caught.value, DriverTimedOut)


def test_a_driver_that_takes_the_request_and_does_not_answer_in_time_is_timed_out():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    accepting = threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True)
    accepting.start()
    try:
        with pytest.raises(DriverTimedOut, match=r"no answer to GET /status within 1s"):
            DriverClient(f"http://127.0.0.1:{server.getsockname()[1]}", timeout_s=1).status()
    finally:
        for conn in held:
            conn.close()
        server.close()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Records each request's path and ``Authorization`` header on its server."""

    def do_GET(self):
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        body = b'{"name": "c", "connector": {"state": "RUNNING"}, "tasks": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _redirecting_to(target: str, status: int):
    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    return Redirect


@contextmanager
def _serving(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_the_admin_token_goes_nowhere_else(status):
    with _serving(_Recorder) as (elsewhere, elsewhere_url), \
            _serving(_redirecting_to(elsewhere_url, status)) as (_, driver_url):
        with pytest.raises(DriverRefused) as refused:
            DriverClient(driver_url, timeout_s=2, token="admin-token-value").status()
        # the same client reaches the recording server directly: it would have recorded a redirected call
        DriverClient(elsewhere_url, timeout_s=2).status()
    assert refused.value.status == status
    assert "redirects are not followed" in refused.value.message
    assert elsewhere.seen == [("/status", None)], "only the direct, token-less call arrived"


def test_a_proxy_in_the_operators_environment_never_sees_the_admin_token():
    """``HTTP_PROXY`` is read when urllib builds an opener: the operator's is built at import, so
    a fresh interpreter with the variable set is what shows it (the process boundary is the point)."""
    script = ("import sys; from conveyor.control.client import DriverClient; "
              "DriverClient(sys.argv[1], timeout_s=5, token='admin-token-value').status()")
    with _serving(_Recorder) as (proxy, proxy_url), _serving(_Recorder) as (driver, driver_url):
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "http_proxy", "all_proxy")}
        env.update({"HTTP_PROXY": proxy_url, "http_proxy": proxy_url})
        ran = subprocess.run([sys.executable, "-c", script, driver_url], env=env, capture_output=True, text=True,
                             timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert proxy.seen == [], "the proxy got the call"
    assert driver.seen == [("/status", "Bearer admin-token-value")]
