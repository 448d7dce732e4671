"""The single-node cluster itself (conveyor.testing.node): pods run as containers on the CNI
bridge, cluster DNS answers Service names and nothing else, the API server is reachable through
its Service from a pod, services on the node IP are reachable from pods, nothing can leave the
machine, and stop + start leaves nothing behind."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time

import pytest
from _connectors import run_pod

from conveyor.testing import node_host

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_a_pod_on_the_pod_network_uses_cluster_dns_services_and_the_node_ip(kube_node, node_namespace):
    with socket.socket() as listener:  # a service on the host, as Kafka and PostgreSQL are for pods
        listener.bind((kube_node.node_ip, 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        accepted: list[str] = []
        threading.Thread(target=lambda: accepted.append(listener.accept()[1][0]), daemon=True).start()
        phase, logs = run_pod(kube_node, node_namespace, "probe", f"""
            ip -4 addr show eth0 | grep -o 'inet [0-9.]*'
            nslookup kubernetes.default.svc.cluster.local && echo DNS-SERVICE-OK
            nslookup example.com || echo DNS-OUTSIDE-REFUSED
            echo | nc -w 5 kubernetes.default.svc 443 && echo API-SERVICE-OK
            echo hi | nc -w 5 {kube_node.node_ip} {port} && echo NODE-IP-OK
        """)
        time.sleep(0.5)
    assert phase == "Succeeded", logs
    assert "inet 10.88." in logs, logs
    assert "DNS-SERVICE-OK" in logs and kube_node.network.service_ip in logs, logs
    assert "NXDOMAIN" in logs and "DNS-OUTSIDE-REFUSED" in logs, logs
    assert "API-SERVICE-OK" in logs, logs
    assert "NODE-IP-OK" in logs, logs
    assert accepted and accepted[0].startswith("10.88."), accepted


def test_nothing_is_forwarded_off_the_pod_bridge(kube_node, node_namespace):
    """A target beyond the pod bridge that the test creates itself (a network namespace behind
    a veth pair): the host can reach it, a pod must not."""
    ns, host_if = "cvy-egress-test", "cvy-egress0"
    sh = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "addr", "add", "10.90.0.1/30", "dev", host_if)
        sh("ip", "link", "set", host_if, "up")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", "10.90.0.2/30", "dev", "eth0")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        sh("ip", "netns", "exec", ns, "ip", "route", "add", "default", "via", "10.90.0.1")  # replies to pods
        server = subprocess.Popen(["ip", "netns", "exec", ns, "python3", "-c",
                                   ("import socket; s = socket.create_server(('10.90.0.2', 7777)); "
                                   "[s.accept()[0].close() for _ in range(10)]")])
        try:
            deadline = time.monotonic() + 10
            while True:  # the host reaches it: the target is real
                try:
                    socket.create_connection(("10.90.0.2", 7777), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the test's own target did not come up"
                    time.sleep(0.1)
            phase, logs = run_pod(kube_node, node_namespace, "egress",
                                  "echo | nc -w 3 10.90.0.2 7777 && echo EGRESS-OPEN || echo EGRESS-REFUSED")
        finally:
            server.kill()
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
    assert phase == "Succeeded", logs
    assert "EGRESS-REFUSED" in logs and "EGRESS-OPEN" not in logs, logs


@pytest.mark.restarts_node
def test_stop_leaves_nothing_behind_and_the_node_starts_again(kube_node):
    """Restarts the session's node (the same object): runs before every other e2e test
    (tests/e2e/conftest.py), so no session fixture built on the node is lost."""
    phase, _ = run_pod(kube_node, "default", "before", "echo up")
    assert phase == "Succeeded"
    marker = str(kube_node.workdir)
    kube_node.stop()

    leftovers = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if marker in _cmdline(pid)]
    assert leftovers == [], f"processes left: {[_cmdline(p) for p in leftovers]}"
    assert node_host._mounts_under(kube_node.workdir) == []
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    net = kube_node.network
    assert not [b for b in (net.pod_bridge, net.second_pod_bridge, net.node_bridge) if f" {b}:" in links], links
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    assert "cni-" not in netns
    for table in ("filter", "nat", "mangle"):
        chains = subprocess.run(["iptables", "-t", table, "-S"], capture_output=True, text=True, check=True).stdout
        assert not [ln for ln in chains.splitlines() if ln.startswith(("-N KUBE-", "-N CNI-", "-N CONVEYOR-"))], \
            f"{table}: {chains}"
    assert not kube_node.workdir.exists()

    kube_node.start()
    phase, logs = run_pod(kube_node, "default", "after", "echo up again")
    assert phase == "Succeeded" and "up again" in logs


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""
