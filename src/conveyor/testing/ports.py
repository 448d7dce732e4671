"""Free TCP ports for harness components, chosen outside the kernel's ephemeral range.

A port the OS hands out for ``bind(0)`` comes from the ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, usually 32768-60999), the same range every outgoing
connection takes its local port from. A component that is stopped and started again on the same
port (a broker restart) then races every client connection made in between: one of them may be
given that port as its local end, and the restart fails with ``EADDRINUSE``. Ports chosen
below (or above) that range are never handed out implicitly, so only another explicit ``bind``
can take them, and :func:`free_port` checks that none holds the port when it is chosen.
"""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Iterator
from pathlib import Path

LOOPBACK = "127.0.0.1"
_LOWEST = 10000  # below this live the well-known and registered services a machine may run
_NODE_PORTS = range(30000, 32768)  # Kubernetes' default service-node-port-range (kube-proxy's rules)
_HIGHEST = 65535
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL = (32768, 60999)
_ATTEMPTS = 200
_random = random.SystemRandom()


def ephemeral_range(path: Path = _RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range ``(low, high)``, inclusive; Linux's default when the
    file cannot be read."""
    try:
        low, high = (int(part) for part in path.read_text().split()[:2])
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL
    return (low, high) if 0 < low <= high <= _HIGHEST else _DEFAULT_EPHEMERAL


def candidate_ranges(ephemeral: tuple[int, int]) -> list[range]:
    """The port ranges outside ``ephemeral``, above the registered services and below
    Kubernetes' node ports, to choose from, largest first; empty when there is no room."""
    low, high = ephemeral
    ranges = [range(_LOWEST, min(low, _NODE_PORTS.start)), range(max(high + 1, _NODE_PORTS.stop), _HIGHEST + 1)]
    return sorted((r for r in ranges if len(r) > 0), key=len, reverse=True)


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing holds right now and the kernel never hands out as the
    local end of an outgoing connection.

    It is free when chosen; whoever uses it must still handle losing a race to another explicit
    ``bind`` (see ``_support.start_with_port_retries``). When no port outside the ephemeral range
    is free after 200 tries, falls back to one the OS picks.
    """
    ranges = candidate_ranges(ephemeral_range())
    if ranges:
        ports = ranges[0]
        for _ in range(_ATTEMPTS):
            port = _random.choice(ports)
            if _bindable(host, port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def silent_server(host: str = LOOPBACK) -> Iterator[str]:
    """``http://<host>:<port>`` of a server that never answers: the kernel completes the TCP
    handshake (the listen backlog) and nobody reads. For tests of a client's behaviour when
    nothing comes back, which a real service does not do on demand."""
    with socket.socket() as listener:
        listener.bind((host, 0))
        listener.listen(16)
        yield f"http://{host}:{listener.getsockname()[1]}"
