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
