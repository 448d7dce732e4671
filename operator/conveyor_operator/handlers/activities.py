"""kopf's activities: the operator's start (settings, API client, control secrets, the status
poller, kopf's own settings), its login to the API server, and its cleanup."""

from __future__ import annotations

import importlib.metadata
import logging
import os
from typing import Any

import aiohttp
import kopf
from kubernetes import client
from kubernetes import config as kube_config

from conveyor_operator import memory, names
from conveyor_operator.context import RUNTIME
from conveyor_operator.diffbase import StatusDiffBase
from conveyor_operator.handlers.status import read_status, tracked_keys
from conveyor_operator.kube import Kube
from conveyor_operator.logs import redact_handlers
from conveyor_operator.observe.status_poller import StatusPoller
from conveyor_operator.observe.status_schedule import StatusSchedule
from conveyor_operator.reconcile.control_key import OperatorKey
from conveyor_operator.reconcile.control_secret import ControlSecrets
from conveyor_operator.reconcile.shared_objects import SharedObjects
from conveyor_operator.settings import OperatorSettings


def _configuration() -> client.Configuration:
    """In-cluster credentials, else ``$KUBECONFIG`` (read at call time: the client reads
    the variable only when it is imported)."""
    configuration = client.Configuration()
    try:
        kube_config.load_incluster_config(client_configuration=configuration)
    except kube_config.ConfigException:
        kube_config.load_kube_config(config_file=os.environ.get("KUBECONFIG"), client_configuration=configuration)
    return configuration


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _api_client(pool_size: int) -> client.ApiClient:
    configuration = _configuration()
    configuration.connection_pool_maxsize = pool_size
    return client.ApiClient(configuration)


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, connector_bodies: kopf.Index, connector_pods: kopf.Index,
            **_: Any) -> None:
    redact_handlers()  # also those installed since main() (kopf run configures its own)
    ours = OperatorSettings.from_env()
    RUNTIME.settings = ours
    # a connection for each thread that calls: the handlers' and the status poller's
    RUNTIME.kube = Kube(_api_client(ours.max_workers + ours.status_workers), ours.field_manager,
                        request_timeout_s=(5.0, ours.kube_request_timeout_seconds))
    RUNTIME.drained_pods = set()
    RUNTIME.status_schedule = StatusSchedule(ours.status_interval_seconds, ours.status_max_backoff_seconds)
    RUNTIME.shared_objects = SharedObjects()
    RUNTIME.control_secrets = ControlSecrets(OperatorKey.load(ours.key_file))
    # kopf fills the indices before any resource handler runs; these are live views of them
    RUNTIME.status_poller = StatusPoller(
        RUNTIME.status_schedule, lambda key: read_status(key, connector_bodies, connector_pods), ours.status_workers,
        keys=lambda: tracked_keys(connector_bodies))
    RUNTIME.status_poller.start()
    RUNTIME.memory_trimming = memory.start_trimming()
    settings.persistence.finalizer = names.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="kopf.conveyor.dev")
    settings.persistence.diffbase_storage = StatusDiffBase()
    settings.posting.level = logging.WARNING
    # After patching a Connector kopf waits for its watch to deliver that version before it
    # handles the object again; past the wait it handles the older events it holds, which lack its
    # own last-handled annotation, as a new creation. At a thousand Connectors created at once the
    # watch lags by more than kopf's default 5 s: 828 duplicate reconciles (issue 33).
    settings.persistence.consistency_timeout = 60.0
    settings.execution.max_workers = ours.max_workers
    settings.peering.standalone = True
    settings.watching.server_timeout = 600
    settings.watching.client_timeout = 660
    # Watching named namespaces, kopf needs neither to list namespaces nor to watch CRDs (it
    # finds the Connector resource through discovery), so the chart's namespaced mode has no
    # ClusterRole at all; a CRD installed after the operator then needs an operator restart.
    settings.scanning.disabled = bool(ours.watch_namespaces)
    # Only the pods of connectors reach the operator: the API server filters, not kopf.
    settings.watching.label_selectors["v1", "pods"] = names.LABEL_CONNECTOR


def kopf_connection_limit(settings: OperatorSettings) -> int:
    """How many connections kopf's session may open (aiohttp's ``limit``, 0 for no bound):
    ``kopf_connections`` for its requests, and one for each of its watches (Connectors and pods
    in each watched namespace, or cluster-wide with those of namespaces and CRDs), which hold
    theirs for as long as they last."""
    if settings.kopf_connections == 0:
        return 0
    watches = 2 * len(settings.watch_namespaces) if settings.watch_namespaces else 4
    return settings.kopf_connections + watches


@kopf.on.login()
async def login(**_: Any) -> kopf.AiohttpSession:
    """kopf's own connection, from the same credentials as the handlers' client, in a session
    whose connections are bounded (:func:`kopf_connection_limit`; kopf's own has no bound)."""
    cfg = _configuration()
    token = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    scheme, _, token = (token or "").partition(" ") if token and " " in token else ("Bearer", "", token)
    info = kopf.ConnectionInfo(
        server=cfg.host, ca_path=cfg.ssl_ca_cert, insecure=not cfg.verify_ssl,
        username=cfg.username or None, password=cfg.password or None,
        scheme=scheme if token else None, token=token or None,
        certificate_path=cfg.cert_file, private_key_path=cfg.key_file,
    )
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=kopf_connection_limit(OperatorSettings.from_env()),
                                       ssl=info.as_ssl_context()),
        headers={**info.as_http_headers(), "User-Agent": f"kopf/{_version('kopf')} conveyor-operator"},
    )
    return kopf.AiohttpSession(aiohttp_session=session, server=info.server, default_namespace=info.default_namespace)


@kopf.on.cleanup()
def shutdown(**_: Any) -> None:
    if RUNTIME.status_poller is not None:
        RUNTIME.status_poller.stop()
        RUNTIME.status_poller = None
    if RUNTIME.memory_trimming is not None:
        RUNTIME.memory_trimming.set()
        RUNTIME.memory_trimming = None
    if RUNTIME.kube is not None:
        RUNTIME.kube.api.close()
