"""The Kubernetes binaries the harness runs: kube-apiserver, etcd, kubectl and helm, found in
``$CONVEYOR_KUBE_BIN`` or built by ``tools/kube/build.sh`` from the Go module proxy into
``${CONVEYOR_CACHE_DIR:-~/.cache/conveyor}/kube/<version>/bin`` on first use
(:func:`ensure_kube_binaries`). :mod:`conveyor.testing.kube` runs them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable

#: Directory with kube-apiserver, etcd, kubectl and helm (default: the build.sh output dir).
ENV_BIN = "CONVEYOR_KUBE_BIN"
#: Path of a kubeconfig (admin of some running cluster/control plane) to use instead of starting one.
ENV_KUBECONFIG = "CONVEYOR_KUBECONFIG"

COMPONENT = "kubernetes"
BUILD_STAGE = "[kube/build]"
"""Prefix of build.sh's own lines (which binary it is on); the rest of its log is ``go -v``'s."""
#: Repository root when running from a checkout (src/conveyor/testing/kube_binaries.py -> ../../..).
_REPO = Path(__file__).resolve().parents[3]
BUILD_TIMEOUT_S = 1800  # cold: about 8 min on two cores; a stalled module download fails the run, not pytest
_BUILD_HINT = (
    "run tools/kube/build.sh (builds kube-apiserver, kubectl, etcd and helm from the Go module proxy; "
    "needs Go >= 1.26, ~8 min cold) and/or export CONVEYOR_KUBE_BIN=$(tools/kube/build.sh)"
)


@dataclass(frozen=True)
class KubeBinaries:
    """Paths of the control-plane binaries (all executable when returned by :func:`kube_binaries`)."""

    kube_apiserver: Path
    etcd: Path
    kubectl: Path
    helm: Path


def _modver(gomod: Path, module: str) -> str | None:
    """Required version of ``module`` in ``gomod`` (one-line ``require`` or a block), like build.sh."""
    try:
        text = gomod.read_text()
    except OSError:
        return None
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    return m.group(1) if m else None


def wanted_kube_version() -> str | None:
    """The Kubernetes version tools/kube builds (from its go.mod), or None outside a checkout."""
    return _modver(_REPO / "tools" / "kube" / "apiserver" / "go.mod", "k8s.io/kubernetes")


def _version_key(p: Path) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", p.parent.name)) or (0,)


def kube_binaries(env: Mapping[str, str] | None = None) -> KubeBinaries:
    """Locate kube-apiserver, etcd, kubectl and helm.

    The directory is ``$CONVEYOR_KUBE_BIN`` if set, else ``<cache>/kube/<version>/bin`` (what
    ``tools/kube/build.sh`` prints; ``<cache>`` is ``$CONVEYOR_CACHE_DIR``, default
    ``${XDG_CACHE_HOME:-~/.cache}/conveyor``), where ``<version>`` is read from
    ``tools/kube/apiserver/go.mod`` in a checkout and otherwise is the newest ``kube/v*/bin``
    that has a kube-apiserver. ``etcd`` falls back to
    ``/usr/bin/etcd`` (Debian's 3.4 works, slower) when the directory has none.

    Args:
        env: environment to read (default ``os.environ``).

    Raises:
        ComponentUnavailable: the directory or one of the binaries is missing.
    """
    env = os.environ if env is None else env
    explicit = (env.get(ENV_BIN) or "").strip()
    if explicit:
        bindir = Path(explicit).expanduser()
        where = f"{ENV_BIN}={explicit}"
    else:
        # the cache root of build.sh and of the rest of the harness (_support.cache_root)
        cache = (env.get("CONVEYOR_CACHE_DIR") or "").strip()
        xdg = (env.get("XDG_CACHE_HOME") or "").strip()
        root = Path(cache or Path(xdg or Path.home() / ".cache") / "conveyor").expanduser()
        version = wanted_kube_version()
        if version:
            bindir = root / "kube" / version / "bin"
            where = f"the build.sh output dir for Kubernetes {version}"
        else:
            built = [p for p in (root / "kube").glob("v*/bin") if (p / "kube-apiserver").exists()]
            if not built:
                raise ComponentUnavailable(
                    COMPONENT, f"no control-plane binaries under {root / 'kube'} and {ENV_BIN} is not set",
                    hint=_BUILD_HINT,
                )
            bindir = max(built, key=_version_key)
            where = "the newest build in the cache"

    def exe(path: Path) -> bool:
        return path.is_file() and os.access(path, os.X_OK)

    found: dict[str, Path] = {}
    missing: list[str] = []
    for name in ("kube-apiserver", "kubectl", "helm", "etcd"):
        path = bindir / name
        if not exe(path) and name == "etcd" and exe(Path("/usr/bin/etcd")):
            path = Path("/usr/bin/etcd")
        if exe(path):
            found[name] = path
        else:
            missing.append(name)
    if missing:
        raise ComponentUnavailable(
            COMPONENT, f"{', '.join(missing)} not found in {bindir} ({where})", hint=_BUILD_HINT
        )
    return KubeBinaries(
        kube_apiserver=found["kube-apiserver"], etcd=found["etcd"], kubectl=found["kubectl"], helm=found["helm"]
    )


def ensure_kube_binaries(env: Mapping[str, str] | None = None) -> KubeBinaries:
    """:func:`kube_binaries`, building them first with ``tools/kube/build.sh`` when they are
    missing from the cache (a checkout's first test run: ~8 min on 2 cores, then cached).
    Progress goes to the terminal (``sys.__stderr__``) and the build's own output to
    ``<cache>/kube/build.log``. Never builds for an explicit ``$CONVEYOR_KUBE_BIN``.

    Raises:
        ComponentUnavailable: the binaries are missing and cannot be built here (not a
            checkout, no Go >= 1.26, the Go module proxy unreachable); says why, with the
            log's tail.
    """
    env = os.environ if env is None else env
    try:
        return kube_binaries(env)
    except ComponentUnavailable:
        script = _REPO / "tools" / "kube" / "build.sh"
        if (env.get(ENV_BIN) or "").strip() or not script.is_file():
            raise
    root = _support.cache_root()
    log_path = root / "kube" / "build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    terminal = sys.__stderr__ or sys.stderr
    print(f"\nconveyor.testing: building the Kubernetes binaries (kube-apiserver, kubectl, etcd, helm) with "
          f"{script} (first use only, ~8 min; log: {log_path}) ...", file=terminal, flush=True)
    started = time.monotonic()
    log_path.write_bytes(b"")
    _support.run_build(["bash", str(script)], log_path, env={**env, "CONVEYOR_CACHE_DIR": str(root)},
                       timeout_s=BUILD_TIMEOUT_S, what=f"tools/kube/build.sh (log {log_path})",
                       component=COMPONENT, hint=_BUILD_HINT,
                       progress="building the Kubernetes binaries", stage=BUILD_STAGE)
    print(f"conveyor.testing: Kubernetes binaries built in {time.monotonic() - started:.0f}s",
          file=terminal, flush=True)
    return kube_binaries(env)


NODE_COMPONENT = "kubernetes-node"
_NODE_TOOLS = ("kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy", "coredns")


@dataclass(frozen=True)
class NodeBinaries:
    """The control plane's binaries plus the node's own (all from the same build.sh bin dir)."""

    control_plane: KubeBinaries
    kubelet: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kube_proxy: Path
    coredns: Path


def ensure_node_binaries() -> NodeBinaries:
    """Find the node's binaries, building them with ``tools/kube/build.sh node`` when missing
    (first use: ~4 min on 2 cores after the control plane's ~8, then cached; progress on the terminal, output in
    ``<cache>/kube/build-node.log``).

    Raises:
        ComponentUnavailable: they are missing and cannot be built here.
    """
    control = ensure_kube_binaries()
    bindir = control.kubectl.parent

    def found() -> dict[str, Path] | None:
        paths = {name: bindir / name for name in _NODE_TOOLS}
        return paths if all(p.is_file() and os.access(p, os.X_OK) for p in paths.values()) else None

    paths = found()
    if paths is None:
        script = _REPO / "tools" / "kube" / "build.sh"
        if (os.environ.get(ENV_BIN) or "").strip() or not script.is_file():
            raise ComponentUnavailable(NODE_COMPONENT, f"{', '.join(_NODE_TOOLS)} are not all in {bindir}",
                                       hint="run `tools/kube/build.sh node`")
        log_path = _support.cache_root() / "kube" / "build-node.log"
        terminal = sys.__stderr__ or sys.stderr
        print(f"\nconveyor.testing: building the node's Kubernetes binaries with `{script} node` "
              f"(first use only, ~4 min; log: {log_path}) ...", file=terminal, flush=True)
        started = time.monotonic()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_bytes(b"")
        _support.run_build(["bash", str(script), "node"], log_path,
                           env={**os.environ, "CONVEYOR_CACHE_DIR": str(_support.cache_root())},
                           timeout_s=BUILD_TIMEOUT_S * 2, what="`tools/kube/build.sh node`",
                           component=NODE_COMPONENT, hint=f"full log: {log_path}",
                           progress="building the node's Kubernetes binaries", stage=BUILD_STAGE)
        if (paths := found()) is None:
            raise ComponentUnavailable(NODE_COMPONENT, f"`tools/kube/build.sh node` left {', '.join(_NODE_TOOLS)} "
                                       f"not all in {bindir}", log_tail=_support.tail(log_path, 30),
                                       hint=f"full log: {log_path}")
        print(f"conveyor.testing: node binaries built in {time.monotonic() - started:.0f}s", file=terminal,
              flush=True)
    return NodeBinaries(control_plane=control, kubelet=paths["kubelet"],
                        kube_controller_manager=paths["kube-controller-manager"],
                        kube_scheduler=paths["kube-scheduler"], kube_proxy=paths["kube-proxy"],
                        coredns=paths["coredns"])


def pause_source() -> Path:
    """``build/pause/linux/pause.c`` of the k8s.io/kubernetes module build.sh compiled."""
    module = _REPO / "tools" / "kube" / "apiserver"
    out = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"], cwd=module, check=False,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PATH": f"{os.environ.get('PATH', '')}:/usr/local/go/bin"})
    source = Path(out.stdout.strip()) / "build" / "pause" / "linux" / "pause.c"
    if out.returncode != 0 or not source.is_file():
        raise ComponentUnavailable(NODE_COMPONENT, "cannot find pause.c in the k8s.io/kubernetes module",
                                   log_tail=out.stderr[-1500:], hint="run `tools/kube/build.sh node` first")
    return source
