"""Operator settings made at start-up."""

import kopf
from conveyor_operator import GROUP, PLURAL, VERSION, names
from conveyor_operator.handlers import activities as handlers
from kopf._cogs.structs.references import Resource

from conveyor_operator.context import RUNTIME


def _start(settings: kopf.OperatorSettings) -> None:
    """The startup handler, as kopf calls it (with the indices, empty here); its status poller
    stopped again."""
    handlers.startup(settings=settings, connector_bodies={}, connector_pods={})
    RUNTIME.status_poller.stop()
    RUNTIME.status_poller = None
    if RUNTIME.memory_trimming is not None:
        RUNTIME.memory_trimming.set()


def test_the_api_server_filters_pods_by_the_connector_label(monkeypatch):
    """The pod watch asks the API server for connector pods only (a label selector on the
    watch request), instead of receiving every pod of the cluster and filtering in kopf."""
    monkeypatch.setattr(handlers, "_api_client", lambda pool_size: None)
    settings = kopf.OperatorSettings()
    _start(settings)
    pods = Resource("", "v1", "pods", kind="Pod", singular="pod", namespaced=True)
    assert list(settings.watching.label_selectors.collect(pods)) == [names.LABEL_CONNECTOR]
    connectors = Resource(GROUP, VERSION, PLURAL, kind="Connector", namespaced=True)
    assert list(settings.watching.label_selectors.collect(connectors)) == []


def test_watching_named_namespaces_kopf_scans_neither_namespaces_nor_crds(monkeypatch):
    """The chart's namespaced mode grants no ClusterRole: kopf must not list namespaces or watch
    CRDs (it finds the Connector resource through discovery, open to every authenticated user)."""
    monkeypatch.setattr(handlers, "_api_client", lambda pool_size: None)
    for watched, disabled in (("", False), ("team-a", True)):
        monkeypatch.setenv("CONVEYOR_OPERATOR_WATCH_NAMESPACES", watched)
        settings = kopf.OperatorSettings()
        _start(settings)
        assert settings.scanning.disabled is disabled


def test_the_operator_can_give_freed_memory_back_on_this_c_library():
    """glibc (the operator's image is Debian's): malloc_trim is there, and the trimming thread
    runs and stops."""
    from conveyor_operator import memory

    assert memory._malloc_trim() is not None
    stop = memory.start_trimming(interval_s=0.01)
    assert stop is not None
    stop.set()


def test_kopf_connections_are_bounded_with_one_more_for_each_watch():
    """kopf's own session has no bound on its connections (aiohttp's ``limit=0``): a thousand
    Connectors created at once opened 829 TLS connections, a third of a MiB each. The operator's
    bound is ``kopf_connections`` for requests plus one for each watch, which holds its own."""
    from conveyor_operator.settings import OperatorSettings

    assert handlers.kopf_connection_limit(OperatorSettings()) == 32 + 4, "cluster-wide: 4 watches"
    named = OperatorSettings.from_env({"CONVEYOR_OPERATOR_WATCH_NAMESPACES": "a,b,c",
                                       "CONVEYOR_OPERATOR_KOPF_CONNECTIONS": "8"})
    assert handlers.kopf_connection_limit(named) == 8 + 2 * 3, "Connectors and pods in each namespace"
    assert handlers.kopf_connection_limit(OperatorSettings.from_env({"CONVEYOR_OPERATOR_KOPF_CONNECTIONS": "0"})) == 0


def test_the_login_gives_kopf_a_session_with_that_bound_and_the_credentials(monkeypatch, tmp_path):
    import asyncio

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t0ken}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u, namespace: team-a}}]\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("CONVEYOR_OPERATOR_WATCH_NAMESPACES", "team-a")

    async def login() -> tuple:
        context = await handlers.login()
        try:
            return (context.server, context.aiohttp_session.connector.limit,
                    context.aiohttp_session.headers.get("Authorization"))
        finally:
            await context.aiohttp_session.close()

    server, limit, authorization = asyncio.run(login())
    assert server == "https://127.0.0.1:6443"
    assert limit == 32 + 2
    assert authorization == "Bearer t0ken"
