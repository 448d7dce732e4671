"""What the single-node cluster (:mod:`conveyor.testing.node`) changes on the host, and how all
of it is taken back.

Network (all of it on interfaces created here; never the machine's outward address):

* ``cvy-node``: an empty bridge holding the node IP (``10.89.0.1/32``). These machines have no
  ``dummy`` link type; a bridge with no ports does the same job. The API server, the kubelet,
  CoreDNS, and Kafka/PostgreSQL started for pods listen on it.
* ``cvy0``: the pods' bridge (CNI ``bridge`` plugin, pods ``10.88.0.0/17``), created by
  the plugin on the first pod; no IP masquerading. A second node
  (:meth:`conveyor.testing.node.KubeNode.add_node`) has its own, ``cvy1`` (``10.88.128.0/17``),
  and its node IP ``10.89.0.2`` on ``cvy-node``; the host routes between the two bridges.
* the ``CONVEYOR-NODE-EGRESS`` chain in ``filter/FORWARD`` rejects any packet from a pod that
  would be forwarded off the pods' bridges: pods reach the node IPs (local delivery) and each
  other, on either node, nothing beyond this machine.

Also changed, and restored by :func:`cleanup_host`: the sysctls ``net.ipv4.ip_forward`` (the
bridge plugin sets it) and ``net.ipv4.conf.all.route_localnet`` (kube-proxy), kube-proxy's and
the kubelet's iptables chains, the kubelets' cgroups (``kubepods``, and the second node's
cgroup root :data:`SECOND_CGROUP_ROOT`) and the mounts and network namespaces under the node's
run directory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("conveyor.testing")

EGRESS_CHAIN = "CONVEYOR-NODE-EGRESS"
SECOND_CGROUP_ROOT = "conveyor-node-2"
"""The second node's kubelet's ``cgroupRoot`` (under each cgroup v1 controller): its pods'
cgroups never meet the first kubelet's ``/kubepods``."""
_SYSCTLS = ("net.ipv4.ip_forward", "net.ipv4.conf.all.route_localnet")
#: iptables chains the kubelet creates for itself (kube-proxy --cleanup removes its own).
_KUBELET_CHAINS = (("filter", "KUBE-FIREWALL"), ("filter", "KUBE-KUBELET-CANARY"), ("nat", "KUBE-KUBELET-CANARY"),
                   ("mangle", "KUBE-KUBELET-CANARY"), ("mangle", "KUBE-IPTABLES-HINT"),
                   ("nat", "KUBE-MARK-MASQ"), ("nat", "KUBE-POSTROUTING"))


@dataclass(frozen=True)
class NodeNetwork:
    """Addresses of the node; the defaults are private ranges nothing else on these machines uses."""

    node_ip: str = "10.89.0.1"
    node_bridge: str = "cvy-node"
    pod_bridge: str = "cvy0"
    #: every pod of the cluster, both nodes' (kube-proxy's cluster CIDR; PostgreSQL's clients)
    pod_cidr: str = "10.88.0.0/16"
    #: the first node's pods
    pod_range: str = "10.88.0.0/17"
    second_node_ip: str = "10.89.0.2"
    second_pod_bridge: str = "cvy1"
    second_pod_range: str = "10.88.128.0/17"
    service_cidr: str = "10.96.0.0/16"
    #: ClusterIP of the ``kubernetes`` Service (the first address of the service CIDR).
    service_ip: str = "10.96.0.1"


def _run(*cmd: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def _iptables(*args: str) -> bool:
    return _run("iptables", "-w", "5", *args).returncode == 0


def setup_host(net: NodeNetwork, state_dir: Path) -> None:
    """Create the node IP's bridge, the egress guard, and record the sysctls to restore.

    Raises:
        subprocess.CalledProcessError: ``ip``/``iptables`` refused (not root, no bridge support).
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    saved = state_dir / "sysctl.json"
    if not saved.exists():
        values = {}
        for key in _SYSCTLS:
            out = _run("sysctl", "-n", key)
            if out.returncode == 0:
                values[key] = out.stdout.strip()
        saved.write_text(json.dumps(values))
    if _run("ip", "link", "show", net.node_bridge).returncode != 0:
        _run("ip", "link", "add", net.node_bridge, "type", "bridge", check=True)
    _run("ip", "addr", "replace", f"{net.node_ip}/32", "dev", net.node_bridge, check=True)
    _run("ip", "link", "set", net.node_bridge, "up", check=True)
    _iptables("-N", EGRESS_CHAIN)
    _iptables("-F", EGRESS_CHAIN)
    bridges = (net.pod_bridge, net.second_pod_bridge)
    rules = [["-i", a, "-o", b, "-j", "RETURN"] for a in bridges for b in bridges if a != b]
    rules += [["-i", a, "!", "-o", a, "-j", "REJECT"] for a in bridges]
    for rule in rules:
        subprocess.run(["iptables", "-w", "5", "-A", EGRESS_CHAIN, *rule], check=True, capture_output=True,
                       text=True, timeout=60)
    if not _iptables("-C", "FORWARD", "-j", EGRESS_CHAIN):
        subprocess.run(["iptables", "-w", "5", "-I", "FORWARD", "1", "-j", EGRESS_CHAIN], check=True,
                       capture_output=True, text=True, timeout=60)


def _mounts_under(*roots: Path) -> list[str]:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    prefixes = tuple(str(r).rstrip("/") + "/" for r in roots)
    points = [line.split()[1].replace("\\040", " ") for line in lines if len(line.split()) > 1]
    return sorted({p for p in points if p.startswith(prefixes) or p in {str(r) for r in roots}}, reverse=True)


def unmount_under(*roots: Path) -> None:
    """Lazily unmount everything mounted at or below ``roots`` (deepest first). Never raises."""
    for point in _mounts_under(*roots):
        _run("umount", "-l", point)


def make_cgroup_root(name: str) -> None:
    """Create the cgroup ``/<name>`` under every cgroup v1 controller (a kubelet refuses a
    ``cgroupRoot`` that does not exist); a cpuset one gets its parent's CPUs and memory nodes.

    Raises:
        OSError: the cgroup filesystem refused (not root).
    """
    base = Path("/sys/fs/cgroup")
    for controller in sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()):
        path = controller / name
        path.mkdir(exist_ok=True)
        for inherited in ("cpuset.cpus", "cpuset.mems"):
            if (controller / inherited).exists() and not (path / inherited).read_text().strip():
                (path / inherited).write_text((controller / inherited).read_text())


def _remove_kubepods_cgroups(only: str | None = None) -> None:
    base = Path("/sys/fs/cgroup")
    tops = (only,) if only else ("kubepods", SECOND_CGROUP_ROOT)
    candidates = [base / top for top in tops] + [p / top for p in base.iterdir() if p.is_dir() for top in tops] \
        if base.is_dir() else []
    for top in candidates:
        if not top.is_dir():
            continue
        for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                path.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def cleanup_host(net: NodeNetwork, state_dir: Path, *, run_dir: Path, kube_proxy: Path | None) -> list[str]:
    """Undo :func:`setup_host` and whatever the node's components left: mounts and network
    namespaces under ``run_dir``, both bridges, iptables chains, CNI IPAM state, kubepods
    cgroups, the recorded sysctls. Idempotent; never raises. Returns what was found left over
    (empty when there was nothing to clean)."""
    found: list[str] = []
    mounts = _mounts_under(run_dir)
    if mounts:
        found.append(f"{len(mounts)} mounts under {run_dir}")
    unmount_under(run_dir)
    for bridge in (net.pod_bridge, net.second_pod_bridge, net.node_bridge):
        if _run("ip", "link", "show", bridge).returncode == 0:
            found.append(f"bridge {bridge}")
            _run("ip", "link", "del", bridge)
    if kube_proxy is not None and kube_proxy.exists():
        _run(str(kube_proxy), "--cleanup")
    for table, chain in _KUBELET_CHAINS:
        for parent in ("INPUT", "OUTPUT", "FORWARD", "POSTROUTING", "PREROUTING"):
            while _iptables("-t", table, "-D", parent, "-j", chain):
                pass
        if _iptables("-t", table, "-F", chain):
            _iptables("-t", table, "-X", chain)
    while _iptables("-D", "FORWARD", "-j", EGRESS_CHAIN):
        pass
    if _iptables("-F", EGRESS_CHAIN):
        _iptables("-X", EGRESS_CHAIN)
    for table in ("nat", "filter"):  # the portmap plugin's chains
        out = _run("iptables", "-w", "5", "-t", table, "-S")
        for line in out.stdout.splitlines():
            if line.startswith("-N CNI-"):
                chain = line.split()[1]
                found.append(f"iptables chain {table}/{chain}")
                for parent in ("PREROUTING", "OUTPUT", "POSTROUTING", "FORWARD"):
                    while _iptables("-t", table, "-D", parent, "-j", chain):
                        pass
                _iptables("-t", table, "-F", chain)
                _iptables("-t", table, "-X", chain)
    _remove_kubepods_cgroups()
    saved = state_dir / "sysctl.json"
    with contextlib.suppress(OSError, ValueError):
        for key, value in json.loads(saved.read_text()).items():
            _run("sysctl", "-qw", f"{key}={value}")
        saved.unlink()
    if run_dir.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
    return found


def remove_second_node_host(net: NodeNetwork) -> None:
    """Undo what :meth:`conveyor.testing.node.KubeNode.add_node` changed on the host: the second
    pod bridge, the second node IP and the second kubelet's cgroups. Never raises."""
    _run("ip", "link", "del", net.second_pod_bridge)
    _run("ip", "addr", "del", f"{net.second_node_ip}/32", "dev", net.node_bridge)
    _remove_kubepods_cgroups(only=SECOND_CGROUP_ROOT)


def missing_host_tools() -> list[str]:
    """Debian packages the node needs that are not installed (empty when all are there)."""
    need = {"containerd": "containerd", "runc": "runc", "iptables": "iptables", "ip": "iproute2",
            "conntrack": "conntrack", "gcc": "gcc"}
    missing = sorted({pkg for tool, pkg in need.items() if shutil.which(tool) is None})
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("containernetworking-plugins")
    if not Path("/bin/busybox").exists():
        missing.append("busybox-static")
    return missing


def is_root() -> bool:
    return os.geteuid() == 0
