"""A real Kubernetes control plane for tests, envtest-style: ``etcd`` + ``kube-apiserver``.

The binaries (``kube-apiserver``, ``etcd``, ``kubectl``, ``helm``) are built from the Go module
proxy by ``tools/kube/build.sh`` into ``${CONVEYOR_CACHE_DIR:-~/.cache/conveyor}/kube/<version>/bin``
(``$CONVEYOR_KUBE_BIN`` points elsewhere); :func:`kube_binaries` finds them. This is the Python
port of ``tools/kube/smoke.sh``.

Typical use::

    from conveyor.testing.kube import KubeAPIServer

    with KubeAPIServer() as kube:                       # etcd + apiserver on free ports, ~3 s
        kube.server                                     # https://127.0.0.1:PORT
        kube.kubectl("apply", "-f", "crds/")            # admin (system:masters)
        kube.helm("install", "conveyor", "charts/conveyor", "-n", "ops")
        token = kube.service_account_token("ops", "conveyor-operator")
        operator_kubeconfig = kube.kubeconfig_for_token(token, "operator")
        # ... run the operator with KUBECONFIG=operator_kubeconfig: it is *that* ServiceAccount,
        # so the chart's RBAC is what the test exercises

What you get is an API server, not a cluster. Like controller-runtime's envtest there is no
kube-controller-manager, scheduler or kubelet, so:

* no ``default`` ServiceAccount appears in new namespaces (create ServiceAccounts yourself, or
  let the Helm chart do it), and no legacy token Secrets are populated; the ``ServiceAccount``
  admission plugin is disabled so Pods naming a ServiceAccount that does not exist are accepted;
* no garbage collector: ``ownerReferences`` never cascade, deleting an owner leaves its
  dependents in place;
* namespaces never finish terminating (no namespace controller): a deleted namespace stays
  ``Terminating`` with everything in it, and new objects cannot be created in it;
* Deployments/StatefulSets/Jobs create no ReplicaSets or Pods, and nothing ever runs: their
  ``status`` stays empty unless a test writes it, so ``helm install --wait`` and
  ``kubectl rollout status`` on a chart with a Deployment only end at their timeout (the
  operator under test runs as a local process instead, with the chart's ServiceAccount token);
* what the API server does by itself works: validation, defaulting, CRDs (incl. CEL rules and
  the status subresource), RBAC (bootstrap ClusterRoles such as ``view``/``edit``/``admin``
  exist), admission (minus ``ServiceAccount``), TokenRequest, SelfSubjectReview, watches.

Credentials: a static bearer token in ``system:masters`` (:attr:`KubeAPIServer.admin_token`,
:attr:`~KubeEndpoint.admin_kubeconfig`), and ServiceAccount tokens issued through the
TokenRequest API (:meth:`~KubeEndpoint.service_account_token`), signed with a key pair generated
per start. TLS is verified: the kubeconfigs trust (``certificate-authority-data``) the
self-signed CA the apiserver generates at start for its 127.0.0.1 serving certificate.

:func:`start_or_reuse` returns an :class:`ExternalKube` for the kubeconfig in
``$CONVEYOR_KUBECONFIG`` when that is set (``python -m conveyor.testing up --kube`` prints one),
else a started :class:`KubeAPIServer`. Failures to find, start or reach the control plane raise
:class:`~conveyor.testing.errors.ComponentUnavailable` (component ``"kubernetes"``).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable, reuse_or_start
from conveyor.testing.kube_binaries import (  # re-exported: the harness and tests import them from here
    COMPONENT,
    ENV_BIN,
    ENV_KUBECONFIG,
    KubeBinaries,
    ensure_kube_binaries,
    kube_binaries,
    wanted_kube_version,
)
from conveyor.testing.kube_client import (
    ExternalKube,
    KubeCommandError,
    KubeEndpoint,
    kubeconfig_document,
    write_private,
)

if TYPE_CHECKING:  # pragma: no cover
    pass

__all__ = [
    "ENV_BIN",
    "ENV_KUBECONFIG",
    "ExternalKube",
    "KubeAPIServer",
    "KubeBinaries",
    "KubeCommandError",
    "KubeEndpoint",
    "ensure_kube_binaries",
    "kube_binaries",
    "start_or_reuse",
    "wanted_kube_version",
]


# --------------------------------------------------------------------------------------------
# binaries (built by conveyor.testing.kube_binaries)

@functools.lru_cache(maxsize=8)
def _etcd_supports_no_fsync(etcd: str) -> bool:
    try:
        out = subprocess.run([etcd, "--help"], check=False, capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--unsafe-no-fsync" in out.stdout + out.stderr


# --------------------------------------------------------------------------------------------
# kubeconfigs, keys, commands


def _write_signing_keys(key: Path, pub: Path) -> None:
    """RSA key pair for signing ServiceAccount tokens: ``cryptography`` if importable, else openssl."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError:
        serialization = None
    if serialization is not None:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        write_private(key, private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ))
        write_private(pub, private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo,
        ))
        return
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ComponentUnavailable(
            COMPONENT, "cannot generate the service-account signing key: neither the `cryptography` "
            "package nor `openssl` is available", hint="pip install cryptography, or apt-get install openssl",
        )
    for cmd in ([openssl, "genrsa", "-out", str(key), "2048"],
                [openssl, "rsa", "-in", str(key), "-pubout", "-out", str(pub)]):
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            raise ComponentUnavailable(COMPONENT, f"`{' '.join(cmd[:2])}` failed: {out.stderr.strip()}")


# --------------------------------------------------------------------------------------------
# endpoints


class KubeAPIServer(KubeEndpoint):
    """etcd + kube-apiserver on 127.0.0.1:<free ports>, state in a fresh temp dir.

    apiserver flags (as tools/kube/smoke.sh, like envtest): ``--authorization-mode=RBAC``, a
    ``--token-auth-file`` with :attr:`admin_token` for user ``admin`` in ``system:masters``,
    ServiceAccount token issuer ``https://kubernetes.default.svc.cluster.local`` with a key pair
    generated per start, ``--disable-admission-plugins=ServiceAccount``,
    ``--service-cluster-ip-range=10.0.0.0/24``, ``--allow-privileged``. etcd runs with
    ``--unsafe-no-fsync`` where supported (etcd >= 3.5).

    Args:
        binaries: the binaries to use (default :func:`kube_binaries`).
        startup_timeout: seconds to wait for ``/readyz``.
        apiserver_args: extra kube-apiserver flags (appended, so they override the defaults).

    Raises (from :meth:`start`):
        ComponentUnavailable: binaries missing, a process exited during startup, or no ready
            ``/readyz`` within ``startup_timeout`` (with the tail of both logs).
    """

    def __init__(self, *, binaries: KubeBinaries | None = None, startup_timeout: float = 90.0,
                 apiserver_args: Sequence[str] = ()) -> None:
        self._binaries = binaries
        self.startup_timeout = startup_timeout
        self.apiserver_args = list(apiserver_args)
        self.workdir: Path | None = None
        self.port: int | None = None
        self.etcd_port: int | None = None
        #: seconds from launching etcd to the first 200 from /readyz (set by start()).
        self.ready_seconds: float | None = None
        self._token: str | None = None
        self._ca_data: str | None = None
        self._procs: list[tuple[str, subprocess.Popen, Path | None]] = []

    @property
    def admin_token(self) -> str:
        """Static bearer token of user ``admin`` (group ``system:masters``: bypasses RBAC)."""
        if self._token is None:
            raise RuntimeError("KubeAPIServer is not started")
        return self._token

    @property
    def log_paths(self) -> dict[str, Path]:
        """``{"etcd": ..., "kube-apiserver": ...}`` logs while running."""
        if self.workdir is None:
            return {}
        return {"etcd": self.workdir / "etcd.log", "kube-apiserver": self.workdir / "apiserver.log"}

    def is_running(self) -> bool:
        return bool(self._procs) and all(p.poll() is None for _, p, _ in self._procs)

    def start(self) -> KubeAPIServer:
        """Start etcd and kube-apiserver and wait for ``/readyz``; retries with new ports (up to 3
        attempts) when a port was taken in between. Returns self.

        Raises:
            ComponentUnavailable: see the class docstring.
        """
        if self._procs:
            return self
        _support.reap_stale()
        self._binaries = self.binaries  # resolve now: a missing binary fails here, not later
        _support.start_with_port_retries(self._start_once, self.stop, "address already in use", "kubernetes")
        return self

    def stop(self) -> None:
        """Stop kube-apiserver, then etcd (SIGTERM, SIGKILL after 5 s) and remove all state. Idempotent."""
        procs, self._procs = self._procs, []
        for _name, proc, record in reversed(procs):
            _support.stop_process(proc, first_signal=signal.SIGTERM, grace=5.0)
            _support.unregister_child(record)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        self._remove_scratch()
        self._admin_kubeconfig = None
        self._token = None
        self._ca_data = None
        _support.untrack(self)

    def __enter__(self) -> KubeAPIServer:  # noqa: PYI034 - returns self, started
        return self.start()

    def __repr__(self) -> str:
        return f"KubeAPIServer(port={self.port}, workdir={str(self.workdir)!r})"

    # -- internals ------------------------------------------------------------------------------

    @property
    def server(self) -> str:
        if self.port is None:
            raise RuntimeError("KubeAPIServer is not started")
        return f"https://{_support.LOOPBACK}:{self.port}"

    def _cluster(self) -> dict[str, Any]:
        # The apiserver generates a serving cert for 127.0.0.1 plus the CA that signed it into
        # --cert-dir on start; trusting that bundle gives verified TLS (and no urllib3
        # InsecureRequestWarning from the Python client). It exists once the server is ready.
        if self._ca_data is None:
            if self.workdir is None:
                raise RuntimeError("KubeAPIServer is not started")
            bundle = self.workdir / "certs" / "apiserver.crt"
            try:
                self._ca_data = base64.b64encode(bundle.read_bytes()).decode()
            except OSError as e:
                raise RuntimeError(f"the apiserver has not written its serving certificate yet: {e}") from None
        return {"server": self.server, "certificate-authority-data": self._ca_data}

    def _scratch_dir(self) -> Path:
        if self.workdir is None:
            raise RuntimeError("KubeAPIServer is not started")
        return self.workdir / "client"

    def _remove_scratch(self) -> None:  # lives in workdir
        pass

    def _spawn(self, name: str, cmd: list[str], log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "KUBE"))}
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*_support.pdeathsig_prefix("KILL"), *cmd], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, cwd=self.workdir, env=env, start_new_session=True,
            )
        assert self.workdir is not None
        self._procs.append((name, proc, _support.register_child(name, proc.pid, self.workdir)))

    def _start_once(self) -> None:
        bins = self.binaries
        work = self.workdir = Path(tempfile.mkdtemp(prefix="conveyor-kube-"))
        self.port, self.etcd_port, peer_port = (_support.free_port() for _ in range(3))
        (work / "certs").mkdir()
        _write_signing_keys(work / "sa.key", work / "sa.pub")
        self._token = secrets.token_hex(16)
        write_private(work / "tokens.csv", f"{self._token},admin,admin,system:masters\n")

        etcd_url = f"http://{_support.LOOPBACK}:{self.etcd_port}"
        peer_url = f"http://{_support.LOOPBACK}:{peer_port}"
        etcd = [
            str(bins.etcd), "--name=conveyor", f"--data-dir={work / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=conveyor={peer_url}", "--log-level=warn",
        ]
        if _etcd_supports_no_fsync(str(bins.etcd)):
            etcd.append("--unsafe-no-fsync")
        apiserver = [
            str(bins.kube_apiserver),
            f"--etcd-servers={etcd_url}",
            f"--cert-dir={work / 'certs'}",
            f"--bind-address={_support.LOOPBACK}",
            f"--advertise-address={_support.LOOPBACK}",
            f"--secure-port={self.port}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={work / 'sa.pub'}",
            f"--service-account-signing-key-file={work / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC",
            f"--token-auth-file={work / 'tokens.csv'}",
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            *self.apiserver_args,
        ]
        t0 = time.monotonic()
        self._spawn("kube-etcd", etcd, work / "etcd.log")
        self._spawn("kube-apiserver", apiserver, work / "apiserver.log")
        _support.track(self)
        self.wait_ready(self.startup_timeout)
        self.ready_seconds = time.monotonic() - t0
        admin = kubeconfig_document(self._cluster(), "admin", {"token": self._token})
        self._admin_kubeconfig = write_private(work / "admin.kubeconfig", json.dumps(admin, indent=2))

    def _probe(self) -> str | None:
        # urllib rather than an ApiClient per poll: cheaper, and no urllib3 TLS warnings
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"})
        try:
            with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
                return None if resp.status == 200 else f"HTTP {resp.status}"
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")
            failed = [ln.strip() for ln in body.splitlines() if "failed" in ln]
            return f"HTTP {e.code}" + (f" ({'; '.join(failed[:3])})" if failed else "")
        except (OSError, ValueError) as e:
            return str(getattr(e, "reason", e))

    def _check_alive(self) -> None:
        for name, proc, _ in self._procs:
            if proc.poll() is not None:
                raise self._unavailable(f"{name} exited with code {proc.returncode} during startup")

    def _unavailable(self, reason: str) -> ComponentUnavailable:
        kept = [str(k) for kind, path in self.log_paths.items()
                if (k := _support.preserve_log(path, kind if kind.startswith("kube") else f"kube-{kind}"))]
        tails = []
        for kind, path in self.log_paths.items():
            text = _support.tail(path, 20)
            if text.strip():
                tails.append(f"--- {kind} ---\n{text}")
        return ComponentUnavailable(
            COMPONENT, f"kube-apiserver on {_support.LOOPBACK}:{self.port} (etcd :{self.etcd_port}): {reason}",
            hint=f"full logs: {', '.join(kept)}" if kept else "",
            log_tail="\n".join(tails),
        )


def start_or_reuse(*, env: Mapping[str, str] | None = None, **server_kwargs: Any) -> KubeEndpoint:
    """The control plane for a test session: reuse ``$CONVEYOR_KUBECONFIG`` if set, else start one.

    Args:
        env: environment to read (default ``os.environ``).
        **server_kwargs: passed to :class:`KubeAPIServer` when one is started.

    Returns:
        A reachable :class:`ExternalKube` or a started :class:`KubeAPIServer` (call ``stop()``
        when done).

    Raises:
        ComponentUnavailable: the reused server does not answer within 30 s, or starting failed.
    """
    return reuse_or_start(env, ENV_KUBECONFIG, ExternalKube, lambda: KubeAPIServer(**server_kwargs).start())
