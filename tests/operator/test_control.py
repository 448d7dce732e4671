"""The driver client tells a driver that is gone from one that is busy (issue 11 §3)."""

import socket
import threading

import pytest

from conveyor_operator.control import DriverClient, DriverTimedOut, DriverUnreachable


def test_a_closed_port_is_unreachable_not_timed_out():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends
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
