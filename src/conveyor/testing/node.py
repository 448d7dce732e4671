"""A real single-node Kubernetes for tests: pods run as runc containers.

Where :class:`~conveyor.testing.kube.KubeAPIServer` is an API server alone, :class:`KubeNode` is
a cluster of one node: containerd + runc (Debian's packages) and the CNI ``bridge`` plugin,
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet, kube-proxy (iptables
mode) and CoreDNS, all at the version ``tools/kube/build.sh node`` builds from the Go module
proxy (:func:`ensure_node_binaries` builds them on first use, then they are cached).

Typical use::

    from conveyor.testing.node import KubeNode

    with KubeNode() as node:                  # ~15 s; needs root (iptables, bridges, mounts)
        node.import_image(archive)            # a `docker save` archive; kept across runs
        node.kubectl("apply", "-f", "pod.yaml")
        node.node_ip                          # 10.89.0.1: what pods reach the host on

:meth:`KubeNode.add_node` takes a second node into the cluster on the same machine (its own
kubelet, containerd, pod bridge and range, cgroup root and node IP), for the tests that are about
two nodes (a drain that moves tasks to the other node); :meth:`KubeNode.remove_node` takes it out.

The network never leaves the machine (see :mod:`conveyor.testing.node_host`): the node IP sits
on a bridge the harness creates; pods live on ``10.88.0.0/16`` and are refused any route off
their bridge; CoreDNS answers ``cluster.local`` from Services and everything else NXDOMAIN (it
forwards nothing). Services run on the host, e.g. Kafka and PostgreSQL for pods, must listen on
:attr:`KubeNode.node_ip`.

Two settings make this run on these machines (``../shared/realnode/README.md``): containerd's
``restrict_oom_score_adj = true`` (the VM lacks ``CAP_SYS_RESOURCE``) and the kubelet's
``failCgroupV1: false``. Only one node runs per machine at a time (the lock :data:`NODE_LOCK`:
its bridges, IPs and iptables chains are the machine's, whatever the cache).

State: everything lives in a fresh work directory removed on :meth:`KubeNode.stop`, except
containerd's content store (``<cache>/node/containerd``) so imported images survive runs.
:meth:`KubeNode.stop` deletes every pod (graceful, so ``preStop`` hooks run), stops the
components and leaves no process, mount, network namespace, bridge or iptables chain behind;
a node whose test session was killed is cleaned up by the next :meth:`KubeNode.start`.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from conveyor.testing import _support, kube_binaries, kube_client, node_host, node_images, node_pki
from conveyor.testing.errors import ComponentUnavailable
from conveyor.testing.kube_binaries import NodeBinaries, ensure_node_binaries, pause_source

__all__ = ["KubeNode", "NodeBinaries", "ensure_node_binaries"]

COMPONENT = kube_binaries.NODE_COMPONENT
NODE_NAME = "conveyor-node"
SECOND_NODE_NAME = "conveyor-node-2"
API_PORT = 6443
#: Labels of a namespace whose pods must meet Pod Security Standards "restricted": the API server's
#: PodSecurity admission refuses any other pod there (``enforce``) and warns of workloads whose
#: pod template would be refused (``warn``).
POD_SECURITY_RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted",
                           "pod-security.kubernetes.io/warn": "restricted"}
_WORKDIR = Path("/tmp/conveyor-node")
_CNI_BIN = Path("/usr/lib/cni")
_INSTALL_HINT = ("apt-get install containerd runc containernetworking-plugins iptables conntrack iproute2 "
                 "busybox-static gcc libc6-dev")


NODE_LOCK = Path("/run/conveyor/node.lock")
"""Held by the running node's process (its pid inside); one node per machine."""


@dataclass(frozen=True)
class _Member:
    """One node of the cluster: a kubelet and its own containerd, pod bridge and pod range."""

    name: str
    ip: str
    pod_bridge: str
    pod_range: str
    suffix: str
    """Of its processes', files' and directories' names: ``""`` for the first node."""
    cgroup_root: str | None = None


def _who_holds_the_node(owner: str) -> tuple[str, str]:
    """(reason, hint) for a node refused because the process ``owner`` (a pid) runs one."""
    if owner.isdigit() and "conveyor.testing up --node" in _support._cmdline(int(owner)):
        return (f"the Kubernetes quickstart's cluster runs on this machine (pid {owner})",
                "stop it with `bash examples/kubernetes/quickstart.sh --down`, then run again")
    return (f"another test node runs on this machine (pid {owner or '?'})", "wait for that test session to end")


class KubeNode(kube_client.KubeEndpoint):
    """A one-node cluster where pods run (see the module docstring).

    Args:
        binaries: what to run (default :func:`ensure_node_binaries`).
        network: addresses (default :class:`~conveyor.testing.node_host.NodeNetwork`).
        startup_timeout: seconds for the whole start, node Ready and DNS included.

    Raises (from :meth:`start`):
        ComponentUnavailable: not root, a package or binary missing, another node running on
            this machine, or a component that did not come up (with the tail of its log).
    """

    def __init__(self, *, binaries: NodeBinaries | None = None, network: node_host.NodeNetwork | None = None,
                 startup_timeout: float = 180.0) -> None:
        self.node_binaries = binaries
        self.network = network or node_host.NodeNetwork()
        self.startup_timeout = startup_timeout
        self.workdir = _WORKDIR
        #: seconds from the start of :meth:`start` to node Ready with DNS answering.
        self.ready_seconds: float | None = None
        self.pki: node_pki.NodePKI | None = None
        self._procs: list[tuple[str, subprocess.Popen, Path | None]] = []
        self._lock: IO[str] | None = None
        self._ready_port: int | None = None
        self._first = _Member(NODE_NAME, self.network.node_ip, self.network.pod_bridge, self.network.pod_range, "")
        self._second = _Member(SECOND_NODE_NAME, self.network.second_node_ip, self.network.second_pod_bridge,
                               self.network.second_pod_range, "-2", node_host.SECOND_CGROUP_ROOT)
        self._members = [self._first]
        self._imported: dict[str, Path] = {}  # ref -> archive: what a node added later imports too

    # -- addresses ----------------------------------------------------------------------------

    @property
    def node_ip(self) -> str:
        """The node's InternalIP: where pods reach services on the host."""
        return self.network.node_ip

    @property
    def node_name(self) -> str:
        return NODE_NAME

    @property
    def containerd_socket(self) -> Path:
        return self._socket(self._first)

    @property
    def node_names(self) -> list[str]:
        """The nodes running: the first, and the second once :meth:`add_node` started it."""
        return [m.name for m in self._members]

    def _socket(self, member: _Member) -> Path:
        return self.workdir / f"containerd{member.suffix}" / "containerd.sock"

    def _member(self, node: str | None) -> _Member:
        found = next((m for m in self._members if m.name == (node or NODE_NAME)), None)
        if found is None:
            raise ValueError(f"no node {node!r} runs (nodes: {self.node_names})")
        return found

    @property
    def log_paths(self) -> dict[str, Path]:
        return {name: self.workdir / "logs" / f"{name}.log" for name, _, _ in self._procs}

    def _cluster(self) -> dict[str, Any]:
        if self.pki is None:
            raise RuntimeError("KubeNode is not started")
        return {"server": f"https://{self.node_ip}:{API_PORT}",
                "certificate-authority-data": base64.b64encode(self.pki.ca_cert.read_bytes()).decode()}

    def _scratch_dir(self) -> Path:
        return self.workdir / "client"

    def _remove_scratch(self) -> None:
        pass

    @property
    def binaries(self) -> kube_binaries.KubeBinaries:
        if self.node_binaries is None:
            self.node_binaries = ensure_node_binaries()
        return self.node_binaries.control_plane

    # -- images -------------------------------------------------------------------------------

    def ctr(self, *args: str, timeout: float = 600.0, check: bool = True,
            node: str | None = None) -> subprocess.CompletedProcess[str]:
        """``ctr -n k8s.io *args`` against the containerd of ``node`` (default: the first)."""
        return self._ctr(self._member(node), *args, timeout=timeout, check=check)

    def _ctr(self, member: _Member, *args: str, timeout: float = 600.0,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = ["ctr", "--address", str(self._socket(member)), "--namespace", "k8s.io", *args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                             stdin=subprocess.DEVNULL)
        if check and out.returncode != 0:
            raise kube_client.KubeCommandError(out.returncode, cmd, out.stdout, out.stderr)
        return out

    def has_image(self, ref: str, node: str | None = None) -> bool:
        return ref in self.ctr("images", "list", "--quiet", node=node).stdout.split()

    def import_image(self, archive: Path, ref: str | None = None) -> bool:
        """Import a ``docker save``/``docker-archive`` tarball into every running node (unpacked
        for the kubelet), and into a node :meth:`add_node` starts later; skipped on a node that
        has ``ref`` (the archive's tag) already. Pods use such images with
        ``imagePullPolicy: Never`` or ``IfNotPresent``. Returns True if imported anywhere.

        Raises:
            KubeCommandError: ``ctr images import`` failed.
        """
        if ref is not None:
            self._imported[ref] = archive
        return any([self._import(member, archive, ref) for member in self._members])

    def _import(self, member: _Member, archive: Path, ref: str | None) -> bool:
        if ref is not None and ref in self._ctr(member, "images", "list", "--quiet").stdout.split():
            return False
        self._ctr(member, "images", "import", str(archive))
        return True

    # -- storage ------------------------------------------------------------------------------

    def host_directory_claim(self, namespace: str, name: str, path: str, size: str = "1Gi") -> str:
        """A PersistentVolumeClaim ``namespace/name`` bound to a ``hostPath`` PersistentVolume of
        the node's directory ``path``, statically (no storage class): pods under Pod Security
        "restricted" may mount a claim but not a ``hostPath``. The claim goes with its namespace;
        the volume (``<namespace>-<name>``, reclaim policy ``Retain``, the directory is kept) is
        the caller's to delete (:meth:`delete_host_directory_claim`). Returns the volume's name.

        Raises:
            KubeCommandError: ``kubectl apply`` failed.
        """
        volume = f"{namespace}-{name}"[:253]
        pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
              "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                       "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": path, "type": "Directory"},
                       "claimRef": {"namespace": namespace, "name": name}}}
        pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": volume,
                        "resources": {"requests": {"storage": size}}}}
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [pv, pvc]}))
        return volume

    def restricted_namespace(self, name: str) -> str:
        """Create (or label, when it exists) namespace ``name`` with :data:`POD_SECURITY_RESTRICTED`;
        returns the name.

        Raises:
            KubeCommandError: ``kubectl apply`` failed.
        """
        namespace = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": name, "labels": POD_SECURITY_RESTRICTED}}
        self.kubectl("apply", "-f", "-", input=json.dumps(namespace))
        return name

    def delete_host_directory_claim(self, volume: str) -> None:
        """Delete the PersistentVolume of :meth:`host_directory_claim` (it goes once its claim
        has: the claim's pods and namespace are deleted after)."""
        self.kubectl("delete", "persistentvolume", volume, "--ignore-not-found", "--wait=false")

    # -- lifecycle ----------------------------------------------------------------------------

    def is_running(self) -> bool:
        return bool(self._procs) and all(p.poll() is None for _, p, _ in self._procs)

    def start(self) -> KubeNode:
        """Start every component and wait for the node to be Ready, the ``default``
        ServiceAccount to exist and CoreDNS to answer. Returns self.

        Raises:
            ComponentUnavailable: see the class docstring.
        """
        if self._procs:
            return self
        if not node_host.is_root():
            raise ComponentUnavailable(COMPONENT, "a node with pods needs root (bridges, iptables, mounts, runc)",
                                       hint="run the tests as root (CI does)")
        missing = node_host.missing_host_tools()
        if missing:
            raise ComponentUnavailable(COMPONENT, f"missing packages: {' '.join(missing)}", hint=_INSTALL_HINT)
        bins = self.node_binaries = self.node_binaries or ensure_node_binaries()
        self._take_lock()
        started = time.monotonic()
        try:
            _support.reap_stale()
            self._clean_leftovers(bins)
            self._start_components(bins, started)
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - started
        _support.track(self)
        return self

    def stop(self) -> None:
        """Delete every pod (grace 10 s: ``preStop`` hooks run), stop all components, remove
        containers, mounts, bridges, iptables chains and the work directory. Idempotent."""
        procs = {name: (proc, record) for name, proc, record in self._procs}
        if procs and all(procs.get(n, (None,))[0] is not None and procs[n][0].poll() is None
                         for n in ("kube-apiserver", "kubelet")):
            with contextlib.suppress(Exception):
                self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=10", "--timeout=60s",
                             timeout=90, check=False)
        for group in (("coredns", "kube-proxy", "kubelet", "kubelet-2", "kube-scheduler", "kube-controller-manager"),
                      ("kube-apiserver",), ("etcd",)):
            self._stop_group([procs[n] for n in group if n in procs])
        for member in self._members:
            if f"containerd{member.suffix}" in procs:
                self._remove_containers(member)
                self._stop_group([procs[f"containerd{member.suffix}"]])
        self._procs = []
        self._members = [self._first]
        self._kill_shims()
        if self.node_binaries is not None or _WORKDIR.exists():
            node_host.cleanup_host(self.network, self._state_dir(), run_dir=self.workdir,
                                   kube_proxy=self.node_binaries.kube_proxy if self.node_binaries else None)
        self.pki = None
        self._admin_kubeconfig = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        _support.untrack(self)

    def add_node(self, timeout: float = 180.0) -> str:
        """Start a second node, ``conveyor-node-2``, on this machine: a kubelet with its own
        containerd (its own state, socket and content store), pod bridge ``cvy1`` and pod range
        (:class:`~conveyor.testing.node_host.NodeNetwork`), cgroup root
        (:data:`~conveyor.testing.node_host.SECOND_CGROUP_ROOT`) and node IP; every image the
        cluster imported is imported into it too. The scheduler then places pods on either node;
        kube-proxy and CoreDNS (the host's iptables, the first node IP) serve both. Waits for
        the node to be Ready; returns its name. Idempotent.

        Raises:
            ComponentUnavailable: its containerd or kubelet did not come up within ``timeout``
                seconds (the node is removed again).
        """
        second = self._second
        if second in self._members:
            return second.name
        if not self._procs or self.node_binaries is None:
            raise RuntimeError("KubeNode is not started")
        deadline = time.monotonic() + timeout
        subprocess.run(["ip", "addr", "replace", f"{second.ip}/32", "dev", self.network.node_bridge], check=True,
                       capture_output=True, timeout=60)
        node_host.make_cgroup_root(node_host.SECOND_CGROUP_ROOT)
        for sub in ("kubelet", "pod-logs"):
            (self.workdir / f"{sub}{second.suffix}").mkdir(parents=True, exist_ok=True)
        self._members.append(second)
        try:
            self._start_containerd(second, deadline)
            for ref, archive in list(self._imported.items()):
                self._import(second, archive, ref)
            self._start_kubelet(second, self.node_binaries)
            self._wait(f"node {second.name} Ready", deadline, lambda: self._node_ready(second.name))
        except BaseException:
            self.remove_node()
            raise
        return second.name

    def remove_node(self) -> None:
        """Take the second node out again: delete its pods (grace 10 s) and its Node, stop its
        kubelet and containerd, remove its containers, mounts, bridge, IP and cgroups. Idempotent."""
        second = self._second
        if second not in self._members:
            return
        with contextlib.suppress(Exception):
            self.kubectl("delete", "pods", "--all-namespaces", "--field-selector", f"spec.nodeName={second.name}",
                         "--grace-period=10", "--timeout=60s", timeout=90, check=False)
        procs = {name: (proc, record) for name, proc, record in self._procs}
        if "kubelet-2" in procs:
            self._stop_group([procs["kubelet-2"]])
        with contextlib.suppress(Exception):
            self.kubectl("delete", "node", second.name, "--ignore-not-found", timeout=60, check=False)
        if "containerd-2" in procs:
            self._remove_containers(second)
            self._stop_group([procs["containerd-2"]])
        self._procs = [entry for entry in self._procs if entry[0] not in ("kubelet-2", "containerd-2")]
        self._members.remove(second)
        self._kill_shims(only=second)
        node_host.unmount_under(self.workdir / "kubelet-2", self.workdir / "containerd-2")
        node_host.remove_second_node_host(self.network)

    def __enter__(self) -> KubeNode:  # noqa: PYI034 - returns self, started
        return self.start()

    def __repr__(self) -> str:
        return f"KubeNode(node_ip={self.node_ip!r}, running={self.is_running()})"

    # -- internals: start ---------------------------------------------------------------------

    def _state_dir(self) -> Path:
        return _support.cache_root() / "node"

    def _take_lock(self) -> None:
        NODE_LOCK.parent.mkdir(parents=True, exist_ok=True)
        lock = open(NODE_LOCK, "a+")  # noqa: SIM115 - held for the node's lifetime
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            owner = lock.read().strip()
            lock.close()
            reason, hint = _who_holds_the_node(owner)
            raise ComponentUnavailable(COMPONENT, reason, hint=hint) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock

    def _clean_leftovers(self, bins: NodeBinaries) -> None:
        self._kill_shims()
        found = node_host.cleanup_host(self.network, self._state_dir(), run_dir=self.workdir,
                                       kube_proxy=bins.kube_proxy)
        if found:
            _support.log.warning("cleaned up after a previous test node: %s", ", ".join(found))

    def _start_components(self, bins: NodeBinaries, started: float) -> None:
        net = self.network
        work = self.workdir
        for sub in ("logs", "containerd", "cni", "kubelet", "pod-logs", "etcd", "client"):
            (work / sub).mkdir(parents=True, exist_ok=True)
        node_host.setup_host(net, self._state_dir())
        pki = self.pki = node_pki.write_pki(work / "pki", node_name=NODE_NAME, node_ip=net.node_ip,
                                            service_ip=net.service_ip,
                                            server=f"https://{net.node_ip}:{API_PORT}",
                                            more_nodes=[SECOND_NODE_NAME])
        self._admin_kubeconfig = pki.kubeconfigs["admin"]
        deadline = started + self.startup_timeout

        self._start_containerd(self._first, deadline)

        etcd_port, peer_port = _support.free_port(), _support.free_port()
        etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
        self._spawn("etcd", [
            str(bins.control_plane.etcd), "--name=node", f"--data-dir={work / 'etcd' / 'data'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=node={peer_url}", "--log-level=warn", "--unsafe-no-fsync",
        ])
        self._spawn("kube-apiserver", [
            str(bins.control_plane.kube_apiserver), f"--etcd-servers={etcd_url}",
            f"--bind-address={net.node_ip}", f"--advertise-address={net.node_ip}", f"--secure-port={API_PORT}",
            f"--tls-cert-file={pki.apiserver_cert}", f"--tls-private-key-file={pki.apiserver_key}",
            f"--client-ca-file={pki.ca_cert}", f"--token-auth-file={pki.tokens_csv}",
            f"--kubelet-client-certificate={pki.kubelet_client_cert}",
            f"--kubelet-client-key={pki.kubelet_client_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={net.service_cidr}", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true",
            "--kubelet-preferred-address-types=InternalIP", f"--cert-dir={work / 'pki'}",
        ])
        self._wait("kube-apiserver /readyz", deadline, self._apiserver_ready)
        cm = str(pki.kubeconfigs["controller-manager"])
        self._spawn("kube-controller-manager", [
            str(bins.kube_controller_manager), f"--kubeconfig={cm}", f"--authentication-kubeconfig={cm}",
            f"--authorization-kubeconfig={cm}", "--bind-address=127.0.0.1", "--secure-port=0",
            "--leader-elect=false", "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}", f"--cluster-signing-key-file={pki.ca_key}",
            "--controllers=*,-cloud-node-lifecycle", "--node-monitor-grace-period=20s",
            f"--service-cluster-ip-range={net.service_cidr}",
        ])
        sched = str(pki.kubeconfigs["scheduler"])
        self._spawn("kube-scheduler", [
            str(bins.kube_scheduler), f"--kubeconfig={sched}", f"--authentication-kubeconfig={sched}",
            f"--authorization-kubeconfig={sched}", "--bind-address=127.0.0.1", "--secure-port=0",
            "--leader-elect=false",
        ])
        self._start_kubelet(self._first, bins)
        self._spawn("kube-proxy", [
            str(bins.kube_proxy), f"--kubeconfig={pki.kubeconfigs['kube-proxy']}",
            f"--hostname-override={NODE_NAME}", f"--cluster-cidr={net.pod_cidr}", "--proxy-mode=iptables",
            "--conntrack-max-per-core=0", "--nodeport-addresses=primary",
            f"--metrics-bind-address=127.0.0.1:{_support.free_port()}",
            f"--healthz-bind-address=127.0.0.1:{_support.free_port()}",
        ])
        self._ready_port = _support.free_port()
        self._spawn("coredns", [str(bins.coredns), "-conf", str(self._write_corefile())])
        self._wait(f"node {NODE_NAME} Ready", deadline, lambda: self._node_ready(NODE_NAME))
        self._wait("the default ServiceAccount", deadline, lambda: self.kubectl(
            "get", "serviceaccount", "default", "-n", "default", check=False, timeout=15).returncode == 0)
        self._wait("CoreDNS /ready", deadline, self._dns_ready)

    def _start_containerd(self, member: _Member, deadline: float) -> None:
        """Start ``member``'s containerd and import the pause and busybox images into it."""
        (self.workdir / f"containerd{member.suffix}").mkdir(parents=True, exist_ok=True)
        self._spawn(f"containerd{member.suffix}", ["containerd", "--config", str(self._write_containerd_config(member))])
        self._wait(f"containerd{member.suffix}", deadline,
                   lambda: self._ctr(member, "version", check=False, timeout=10).returncode == 0)
        for archive, ref in ((node_images.pause_archive(pause_source()), node_images.PAUSE_IMAGE),
                             (node_images.busybox_archive(), node_images.BUSYBOX_IMAGE)):
            self._imported[ref] = archive
            self._import(member, archive, ref)

    def _start_kubelet(self, member: _Member, bins: NodeBinaries) -> None:
        assert self.pki is not None
        stem = "kubelet" if member is self._first else f"kubelet-{member.name}"
        self._spawn(f"kubelet{member.suffix}", [
            str(bins.kubelet), f"--config={self._write_kubelet_config(member)}",
            f"--kubeconfig={self.pki.kubeconfigs[stem]}", f"--root-dir={self.workdir / f'kubelet{member.suffix}'}",
            f"--hostname-override={member.name}", f"--node-ip={member.ip}", "--v=0",
        ])

    def _write_containerd_config(self, member: _Member) -> Path:
        root = self._state_dir() / f"containerd{member.suffix}"
        root.mkdir(parents=True, exist_ok=True)
        cni_conf = self.workdir / f"cni{member.suffix}"
        cni_conf.mkdir(parents=True, exist_ok=True)
        (cni_conf / "10-conveyor.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "conveyor-node",
            "plugins": [
                {"type": "bridge", "bridge": member.pod_bridge, "isGateway": True, "ipMasq": False,
                 "hairpinMode": True,
                 "ipam": {"type": "host-local", "dataDir": str(self.workdir / f"cni-ipam{member.suffix}"),
                          "ranges": [[{"subnet": member.pod_range}]], "routes": [{"dst": "0.0.0.0/0"}]}},
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }, indent=2))
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        text = f"""version = 2
root = "{root}"
state = "{self.workdir / f'containerd{member.suffix}' / 'state'}"
[grpc]
  address = "{self._socket(member)}"
[{cri}]
  sandbox_image = "{node_images.PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "{_CNI_BIN}"
  conf_dir = "{cni_conf}"
"""
        path = self.workdir / f"containerd{member.suffix}.toml"
        path.write_text(text)
        return path

    def _write_kubelet_config(self, member: _Member) -> Path:
        assert self.pki is not None
        resolv = self.workdir / "resolv.conf"
        resolv.write_text(f"nameserver {self.node_ip}\n")  # never this machine's own resolver
        sock = f"unix://{self._socket(member)}"
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "failCgroupV1": False, "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": sock, "imageServiceEndpoint": sock,
            "address": member.ip, "port": 10250, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": 0,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(self.pki.ca_cert)}},
            "authorization": {"mode": "Webhook"},
            "clusterDNS": [self.node_ip], "clusterDomain": "cluster.local", "resolvConf": str(resolv),
            "failSwapOn": False, "podLogsDir": str(self.workdir / f"pod-logs{member.suffix}"),
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False, "maxPods": 50,
            "nodeStatusReportFrequency": "10s", "syncFrequency": "10s",
            **({"cgroupRoot": f"/{member.cgroup_root}"} if member.cgroup_root else {}),
        }
        path = self.workdir / f"kubelet-config{member.suffix}.json"
        path.write_text(json.dumps(config, indent=2))
        return path

    def _write_corefile(self) -> Path:
        assert self._admin_kubeconfig is not None
        ip = self.node_ip
        text = f"""cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {{
    bind {ip}
    errors
    ready 127.0.0.1:{self._ready_port}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {self._admin_kubeconfig} admin
        pods insecure
    }}
}}
.:53 {{
    bind {ip}
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
"""
        path = self.workdir / "Corefile"
        path.write_text(text)
        return path

    def _spawn(self, name: str, cmd: list[str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "KUBE", "CONTAINERD"))}
        log = self.workdir / "logs" / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([*_support.pdeathsig_prefix("KILL"), *cmd], stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir, env=env,
                                    start_new_session=True)
        self._procs.append((name, proc, _support.register_child(f"node-{name}", proc.pid, self.workdir)))

    def _wait(self, what: str, deadline: float, ready: Any) -> None:
        while True:
            for name, proc, _ in self._procs:
                if proc.poll() is not None:
                    raise self._unavailable(f"{name} exited with code {proc.returncode} while waiting for {what}",
                                            name)
            with contextlib.suppress(Exception):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise self._unavailable(f"no {what} within {self.startup_timeout:.0f}s of the start")
            time.sleep(0.25)

    def _https_get(self, url: str, token: str | None = None) -> int:
        assert self.pki is not None
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
                return resp.status
        except urllib.error.HTTPError as e:
            return e.code

    def _apiserver_ready(self) -> bool:
        token = json.loads(self.admin_kubeconfig.read_text())["users"][0]["user"]["token"]
        return self._https_get(f"https://{self.node_ip}:{API_PORT}/readyz", token) == 200

    def _node_ready(self, name: str) -> bool:
        out = self.kubectl("get", "node", name, "-o", "json", check=False, timeout=15)
        if out.returncode != 0:
            return False
        conditions = json.loads(out.stdout).get("status", {}).get("conditions", [])
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def _dns_ready(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self._ready_port}/ready", timeout=5) as resp:
            return resp.status == 200

    def _unavailable(self, reason: str, component: str | None = None) -> ComponentUnavailable:
        names = [component] if component else [n for n, _, _ in self._procs]
        tails, kept = [], []
        for name in names:
            path = self.workdir / "logs" / f"{name}.log"
            text = _support.tail(path, 15 if component else 6)
            if text.strip():
                tails.append(f"--- {name} ---\n{text}")
            if (saved := _support.preserve_log(path, f"node-{name}")) is not None:
                kept.append(str(saved))
        return ComponentUnavailable(COMPONENT, reason, log_tail="\n".join(tails),
                                    hint=f"full logs: {', '.join(kept)}" if kept else "")

    # -- internals: stop ----------------------------------------------------------------------

    def _stop_group(self, members: list[tuple[subprocess.Popen, Path | None]]) -> None:
        for proc, _ in members:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGTERM)
        for proc, record in members:
            _support.stop_process(proc, grace=10.0)
            _support.unregister_child(record)

    def _remove_containers(self, member: _Member) -> None:
        if self._ctr(member, "version", check=False, timeout=10).returncode != 0:
            return
        for task in self._ctr(member, "tasks", "list", "--quiet", check=False).stdout.split():
            self._ctr(member, "tasks", "kill", "--signal", "SIGKILL", task, check=False, timeout=30)
        for container in self._ctr(member, "containers", "list", "--quiet", check=False).stdout.split():
            self._ctr(member, "tasks", "delete", "--force", container, check=False, timeout=30)
            self._ctr(member, "containers", "delete", container, check=False, timeout=30)

    def _kill_shims(self, only: _Member | None = None) -> None:
        """SIGKILL containerd shims serving a socket of this cluster's nodes (``only``'s), and
        their containers (left by a killed session: shims outlive containerd by design)."""
        import psutil

        markers = [str(self._socket(m)) for m in ([only] if only else [self._first, self._second])]
        for shim in psutil.process_iter(["cmdline"]):
            cmdline = " ".join(shim.info["cmdline"] or ())
            if "containerd-shim" not in cmdline or not any(marker in cmdline for marker in markers):
                continue
            with contextlib.suppress(psutil.Error):
                for process in [*shim.children(recursive=True), shim]:
                    with contextlib.suppress(psutil.Error):
                        process.kill()
