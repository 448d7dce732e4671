"""A Kubernetes control plane as the tests talk to it: kubeconfigs for the admin and for
ServiceAccount tokens, the official client with timeouts, namespaces, ``kubectl`` and ``helm``
(:class:`KubeEndpoint`), and :class:`ExternalKube` for one someone else runs. The harness's own
control plane is :class:`conveyor.testing.kube.KubeAPIServer`."""

from __future__ import annotations

import abc
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.testing.errors import ComponentUnavailable, Endpoint
from conveyor.testing.kube_binaries import (  # re-exported: the harness and tests import them from here
    COMPONENT,
    ENV_KUBECONFIG,
    KubeBinaries,
    kube_binaries,
)

if TYPE_CHECKING:  # pragma: no cover
    import kubernetes.client


_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


_FILE_RE = re.compile(r"[^A-Za-z0-9_.-]+")


class KubeCommandError(subprocess.CalledProcessError):
    """``kubectl``/``helm`` exited non-zero; unlike CalledProcessError its message includes stderr."""

    def __str__(self) -> str:
        err = (self.stderr or self.output or "").strip()
        return f"{super().__str__()}\n{err}" if err else super().__str__()


def kubeconfig_document(cluster: Mapping[str, Any], user: str, credentials: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "conveyor", "cluster": dict(cluster)}],
        "users": [{"name": user, "user": dict(credentials)}],
        "contexts": [{"name": user, "context": {"cluster": "conveyor", "user": user}}],
        "current-context": user,
        "preferences": {},
    }


def write_private(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(text.encode() if isinstance(text, str) else text)
    return path


def _kubernetes_client() -> Any:
    try:
        import kubernetes
    except ImportError:
        raise ComponentUnavailable(
            COMPONENT, "the `kubernetes` Python client is not installed", hint="pip install -e '.[operator]'",
        ) from None
    return kubernetes


class KubeEndpoint(Endpoint, abc.ABC):
    """A reachable Kubernetes API server plus an admin kubeconfig for it.

    Usable as a context manager; ``__exit__`` calls :meth:`stop`. ``kubectl``/``helm`` come from
    :func:`kube_binaries` (looked up on first use).
    """

    component = COMPONENT

    _admin_kubeconfig: Path | None = None
    _scratch: Path | None = None  # kubeconfigs written for tokens, kubectl/helm caches
    _binaries: KubeBinaries | None = None

    # -- addresses and credentials ------------------------------------------------------------

    @property
    def server(self) -> str:
        """URL of the API server, e.g. ``https://127.0.0.1:40123``."""
        return str(self._cluster()["server"])

    @property
    def admin_kubeconfig(self) -> Path:
        """A kubeconfig whose current context is a cluster admin."""
        if self._admin_kubeconfig is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._admin_kubeconfig

    @property
    def binaries(self) -> KubeBinaries:
        if self._binaries is None:
            self._binaries = kube_binaries()
        return self._binaries

    def kubeconfig_for_token(self, token: str, name: str = "user") -> Path:
        """Write a kubeconfig that authenticates to this server with bearer ``token`` and
        return its path (``<scratch>/kubeconfigs/<name>.kubeconfig``, mode 0600, removed on stop).

        ``name`` is the kubeconfig's user/context name and the file's stem.
        """
        stem = _FILE_RE.sub("_", name).strip("._") or "user"
        cfg = kubeconfig_document(self._cluster(), name, {"token": token})
        return write_private(self._scratch_dir() / "kubeconfigs" / f"{stem}.kubeconfig", json.dumps(cfg, indent=2))

    def api_client(self, kubeconfig: Path | str | None = None,
                   request_timeout_s: tuple[float, float] = (5.0, 60.0)) -> kubernetes.client.ApiClient:
        """A new ``kubernetes.client.ApiClient`` for ``kubeconfig`` (default: the admin one)
        whose calls time out after ``request_timeout_s`` (connect, read) seconds unless a call
        passes its own ``_request_timeout``, so a test against a server that stopped answering
        fails with urllib3's timeout instead of hanging until pytest's limit.

        Close it when done (``with kube.api_client() as api: ...``).
        """
        k8s = _kubernetes_client()
        path = Path(kubeconfig) if kubeconfig is not None else self.admin_kubeconfig
        api = k8s.config.new_client_from_config(config_file=str(path), persist_config=False)
        call_api = api.call_api

        def call_api_with_timeout(*args: Any, **kwargs: Any) -> Any:
            kwargs["_request_timeout"] = kwargs.get("_request_timeout") or request_timeout_s
            return call_api(*args, **kwargs)

        api.call_api = call_api_with_timeout  # type: ignore[method-assign]
        return api

    def service_account_token(self, namespace: str, name: str, expiration_seconds: int = 3600,
                              bound_pod: tuple[str, str] | None = None) -> str:
        """A bound token for ServiceAccount ``namespace/name`` from the TokenRequest API (as admin).

        Use it with :meth:`kubeconfig_for_token` to act *as* that ServiceAccount (e.g. the
        operator's, created by the Helm chart) so that its RBAC is what is exercised. Its
        audience is the API server's own; the server refuses ``expiration_seconds`` < 600.
        ``bound_pod`` (name, uid) binds it to a pod of ``namespace``, as the kubelet binds the
        token it mounts: the server then names that pod in the request's user info
        (``authentication.kubernetes.io/pod-name``, ``pod-uid``).

        Raises:
            LookupError: the ServiceAccount does not exist (nothing creates ``default`` ones here).
            kubernetes.client.ApiException: the server refused otherwise.
        """
        k8s = _kubernetes_client()
        body = k8s.client.AuthenticationV1TokenRequest(
            spec=k8s.client.V1TokenRequestSpec(
                audiences=[], expiration_seconds=expiration_seconds,
                bound_object_ref=None if bound_pod is None else k8s.client.V1BoundObjectReference(
                    api_version="v1", kind="Pod", name=bound_pod[0], uid=bound_pod[1])),
        )
        with self.api_client() as api:
            try:
                resp = k8s.client.CoreV1Api(api).create_namespaced_service_account_token(name, namespace, body)
            except k8s.client.ApiException as e:
                if e.status == 404:
                    raise LookupError(
                        f"ServiceAccount {namespace}/{name} not found (there is no controller-manager: "
                        "create ServiceAccounts, even `default`, yourself)"
                    ) from e
                raise
        return resp.status.token

    # -- objects -------------------------------------------------------------------------------

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        """Create namespace ``name`` (a DNS-1123 label) as admin and return the name."""
        if len(name) > 63 or not _NAME_RE.match(name):
            raise ValueError(f"namespace name {name!r} is not a DNS-1123 label")
        k8s = _kubernetes_client()
        body = k8s.client.V1Namespace(metadata=k8s.client.V1ObjectMeta(name=name, labels=dict(labels or {})))
        with self.api_client() as api:
            k8s.client.CoreV1Api(api).create_namespace(body)
        return name

    def create_service_account(self, namespace: str, name: str) -> None:
        """Create ServiceAccount ``namespace/name`` as admin (no controller does it here)."""
        k8s = _kubernetes_client()
        body = k8s.client.V1ServiceAccount(metadata=k8s.client.V1ObjectMeta(name=name, namespace=namespace))
        with self.api_client() as api:
            k8s.client.CoreV1Api(api).create_namespaced_service_account(namespace, body)

    def delete_namespace(self, name: str) -> None:
        """Request deletion of namespace ``name``; does not wait (on a harness server it stays
        ``Terminating`` forever, see the module docstring). Missing namespaces are ignored."""
        k8s = _kubernetes_client()
        with self.api_client() as api:
            try:
                k8s.client.CoreV1Api(api).delete_namespace(name)
            except k8s.client.ApiException as e:
                if e.status != 404:
                    raise

    # -- command-line tools ---------------------------------------------------------------------

    def kubectl(self, *args: str, kubeconfig: Path | str | None = None, check: bool = True,
                input: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``kubectl *args`` against this server (as admin unless ``kubeconfig`` is given).

        Output is captured as text. ``$KUBECONFIG`` is set for the child (an explicit
        ``--kubeconfig`` in ``args`` wins); discovery cache and ``kuberc`` are kept out of ``~/.kube``.

        Raises:
            KubeCommandError: non-zero exit and ``check`` (message includes stderr).
            subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds.
        """
        return self._run([str(self.binaries.kubectl), *args], kubeconfig, check, input, timeout)

    def helm(self, *args: str, kubeconfig: Path | str | None = None, check: bool = True,
             input: str | None = None, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        """Run ``helm *args`` against this server; same contract as :meth:`kubectl`. Helm's
        cache/config/data homes are private to this endpoint (no repos configured)."""
        return self._run([str(self.binaries.helm), *args], kubeconfig, check, input, timeout)

    def _run(self, cmd: Sequence[str], kubeconfig: Path | str | None, check: bool, input: str | None,
             timeout: float) -> subprocess.CompletedProcess[str]:
        scratch = self._scratch_dir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
        env.update(
            KUBECONFIG=str(kubeconfig if kubeconfig is not None else self.admin_kubeconfig),
            KUBECACHEDIR=str(scratch / "kube-cache"),
            KUBERC="off",
            HELM_CACHE_HOME=str(scratch / "helm" / "cache"),
            HELM_CONFIG_HOME=str(scratch / "helm" / "config"),
            HELM_DATA_HOME=str(scratch / "helm" / "data"),
        )
        out = subprocess.run(
            list(cmd), check=False, capture_output=True, text=True, input=input, timeout=timeout, env=env,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        if check and out.returncode != 0:
            raise KubeCommandError(out.returncode, list(cmd), out.stdout, out.stderr)
        return out

    # -- readiness -----------------------------------------------------------------------------

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the server answers ``GET /readyz`` with 200 for the admin credentials.

        Raises:
            ComponentUnavailable: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            err = self._probe()
            if err is None:
                return
            if time.monotonic() >= deadline:
                raise self._unavailable(f"/readyz did not answer 200 within {timeout:.0f}s: {err}")
            time.sleep(0.1)

    def _probe(self) -> str | None:
        """None if /readyz is 200, else why not."""
        try:
            with self.api_client() as api:  # (a broken kubeconfig fails here: also "not usable")
                api.call_api("/readyz", "GET", auth_settings=["BearerToken"], _preload_content=False,
                             _request_timeout=5, _return_http_data_only=True)  # raises unless 2xx
        except ComponentUnavailable:
            raise
        except Exception as e:  # noqa: BLE001 - any failure means "not ready yet"
            return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None

    # -- internals ------------------------------------------------------------------------------

    @abc.abstractmethod
    def _cluster(self) -> dict[str, Any]:
        """The ``cluster`` stanza (server, TLS settings) of the admin kubeconfig's current context."""

    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="conveyor-kubectx-"))
        return self._scratch

    def _remove_scratch(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


class ExternalKube(KubeEndpoint):
    """An API server someone else runs, reached with the admin kubeconfig at ``kubeconfig``
    (its current context). Never stopped by us; :meth:`stop` only removes our scratch files.

    Its user must be allowed to create namespaces and TokenRequests (cluster-admin, in practice).
    """

    def __init__(self, kubeconfig: Path | str, *, binaries: KubeBinaries | None = None) -> None:
        path = Path(str(kubeconfig).strip()).expanduser()
        if not path.is_file():
            raise ComponentUnavailable(COMPONENT, f"{ENV_KUBECONFIG}={kubeconfig}: no such file")
        self._admin_kubeconfig = path.resolve()
        self._binaries = binaries
        self._cluster_cache: dict[str, Any] | None = None

    def _cluster(self) -> dict[str, Any]:
        if self._cluster_cache is None:
            import yaml

            cfg = yaml.safe_load(self.admin_kubeconfig.read_text()) or {}
            contexts = {e.get("name"): e.get("context") or {} for e in cfg.get("contexts") or []}
            clusters = {e.get("name"): e.get("cluster") or {} for e in cfg.get("clusters") or []}
            context = contexts.get(cfg.get("current-context"), {})
            cluster = dict(clusters.get(context.get("cluster"), {}))
            if not cluster.get("server"):
                raise ComponentUnavailable(COMPONENT, f"{self.admin_kubeconfig}: current context has no cluster server")
            ca = cluster.get("certificate-authority")
            if ca and not Path(ca).is_absolute():  # relative to the kubeconfig, not to our scratch dir
                cluster["certificate-authority"] = str(self.admin_kubeconfig.parent / ca)
            self._cluster_cache = cluster
        return self._cluster_cache

    def stop(self) -> None:
        self._remove_scratch()

    def _unavailable(self, reason: str) -> ComponentUnavailable:
        return ComponentUnavailable(
            COMPONENT, f"the reused API server {ENV_KUBECONFIG}={self._admin_kubeconfig} is not usable: {reason}",
            hint=f"unset {ENV_KUBECONFIG} to let the harness start one, or start one with "
                 "`python -m conveyor.testing up --kube`",
        )

    def __repr__(self) -> str:
        return f"ExternalKube({str(self._admin_kubeconfig)!r})"
