"""The operator's read-modify-write of a Connector's status lists against a real
kube-apiserver: concurrent writers (two evictions translated at once, by two threads of
one operator or by an old and a new operator) must not overwrite each other's entries."""

from __future__ import annotations

import threading
import uuid

import pytest
from _objects import Api, connector
from conveyor_operator.kube import Kube

pytestmark = pytest.mark.integration

WRITERS = 8


def test_concurrent_appends_to_status_evictions_keep_every_entry(kube_api, kube_namespace, chart):
    name = f"appends-{uuid.uuid4().hex[:6]}"
    with kube_api.api_client() as api_client:
        api = Api(api_client)
        api.create_connector(connector(name, kube_namespace, "noop-sink", "127.0.0.1:9", {"topics": "t"}))
        kube = Kube(api_client, "conveyor-test")
        start = threading.Barrier(WRITERS)
        errors: list[BaseException] = []

        def append(i: int) -> None:
            try:
                start.wait(10)
                kube.append_to_connector_status(kube_namespace, name, "evictions",
                                                {"pod": f"pod-{i}", "time": "2026-01-01T00:00:00Z",
                                                 "trigger": "DisruptionTarget", "tasks": [], "committed": [],
                                                 "complete": True}, keep=WRITERS)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=append, args=(i,)) for i in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        pods = sorted(e["pod"] for e in api.get_connector(kube_namespace, name)["status"]["evictions"])
        assert pods == sorted(f"pod-{i}" for i in range(WRITERS)), f"entries lost by concurrent writers: {pods}"

        kube.append_to_connector_status(kube_namespace, name, "evictions",
                                        {"pod": "newest", "time": "2026-01-01T00:00:01Z", "trigger": "DisruptionTarget",
                                         "tasks": [], "committed": [], "complete": True}, keep=3)
        kept = [e["pod"] for e in api.get_connector(kube_namespace, name)["status"]["evictions"]]
        assert len(kept) == 3 and kept[-1] == "newest", kept
        kube.append_to_connector_status(kube_namespace, "no-such-connector", "evictions", {"pod": "x"}, keep=3)
