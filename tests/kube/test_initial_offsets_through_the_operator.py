"""``spec.initialOffsets`` through the operator against a real kube-apiserver (issue 35, item 2):
the driver writes them before its first task, the operator records the outcome in
``status.startingOffsets`` with an Event and takes them out of the driver's ConfigMap, so a
restarted driver resumes from its committed offsets (``existing: replace`` would rewind it); the
CRD refuses a change after creation; a Connector re-created under the name of one whose offsets
were retained says in an Event which it found."""

from __future__ import annotations

import pytest
import yaml
from _drivers import LocalDriver
from _objects import GROUP, PLURAL, VERSION, connector, eventually, unique_name
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes.client.exceptions import ApiException

from conveyor.testing.ports import free_port
from conveyor.testing.recording import read_journal
from conveyor.testing.runs import committed_offsets, produce

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"
SETTINGS = {"CONVEYOR_OPERATOR_STATUS_INTERVAL_SECONDS": "1", "CONVEYOR_OPERATOR_STATUS_MAX_BACKOFF_SECONDS": "4"}


def _driver_manifest(api, namespace: str, name: str) -> dict:
    return yaml.safe_load(api.core.read_namespaced_config_map(f"{name}-connector", namespace).data["connector.yaml"])


def _started(api, namespace: str, name: str) -> dict | None:
    return ((api.get_connector(namespace, name) or {}).get("status") or {}).get("startingOffsets")


def _applied(api, namespace: str, name: str) -> None:
    eventually(lambda: (api.get_connector(namespace, name).get("status") or {}).get("observedGeneration") is not None,
               timeout_s=60, message=f"{name} applied")


def _deleted(api, namespace: str, name: str) -> None:
    """Delete the Connector and wait until the operator has removed its finalizer."""
    api.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    eventually(lambda: not api.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"],
               timeout_s=60, message=f"{name} deleted")


def _collect_garbage(api, namespace: str, name: str) -> None:
    """What a cluster's garbage collector does with a deleted Connector's objects (this harness
    runs none): without it the successor waits for them (reconcile.succession)."""
    api.apps.delete_namespaced_deployment(f"{name}-driver", namespace)
    api.core.delete_namespaced_service(f"{name}-driver", namespace)
    api.core.delete_namespaced_config_map(f"{name}-connector", namespace)
    api.core.delete_namespaced_secret(f"{name}-control", namespace)


def test_initial_offsets_are_written_once_recorded_and_never_again_by_a_restarted_driver(
        kube_namespace, operator, api, kafka_bootstrap, tmp_path, spark):
    name, topic = unique_name("initial"), unique_name("initial-topic")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(kafka_bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(10)], partition=0)
    journal, port = tmp_path / "journal.jsonl", free_port()
    at_six = [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 6}}]
    config = {"topics": topic, "journal.path": str(journal), "key.converter": "string",
              "value.converter": "string", "offset.flush.interval.ms": "300"}
    driver = None
    try:
        with operator(port, env=SETTINGS):
            api.create_connector(connector(name, kube_namespace, RECORDING, kafka_bootstrap, config,
                                           deletionPolicy={"cleanup": False},
                                           initialOffsets={"offsets": at_six, "existing": "replace"}))
            _applied(api, kube_namespace, name)
            assert _driver_manifest(api, kube_namespace, name)["spec"]["initialOffsets"]["offsets"] == at_six
            driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)
            driver.wait_running()
            started = eventually(lambda: _started(api, kube_namespace, name), timeout_s=60,
                                 message="status.startingOffsets recorded")
            assert (started["initial"], started["found"], started["written"]) == ("Applied", 0, 1)
            assert "spec.initialOffsets written: 1 partition(s)" in started["message"]
            eventually(lambda: api.events(kube_namespace, name, "InitialOffsetsApplied"), timeout_s=30,
                       message="an InitialOffsetsApplied Event")
            assert "initialOffsets" not in _driver_manifest(api, kube_namespace, name)["spec"], \
                "out of what a restarted driver runs"
            eventually(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 10},
                       timeout_s=60, message="committed to the end")

            with pytest.raises(ApiException) as refused:
                api.custom.patch_namespaced_custom_object(GROUP, VERSION, kube_namespace, PLURAL, name, {
                    "spec": {"initialOffsets": {"offsets": [{**at_six[0], "offset": {"kafka_offset": 0}}]}}})
            assert refused.value.status == 422
            assert "spec.initialOffsets is where a new connector starts" in refused.value.body

            driver.stop()  # as a driver pod that restarts: it reads the ConfigMap again
            driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)
            driver.wait_running()
            again = driver.status()["starting_offsets"]
            assert (again["initial"], again["found"]) == ("NotGiven", 1)
            produce(kafka_bootstrap, topic, [("k10", "v10")], partition=0)
            eventually(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 11},
                       timeout_s=60, message="the new record committed")
            puts = [r["offset"] for e in read_journal(journal) if e["event"] == "put" for r in e["records"]]
            assert puts == [6, 7, 8, 9, 10], "read from 6 once; the restarted driver did not rewind"
            assert _started(api, kube_namespace, name) == started, "recorded once, from the first start"

            _deleted(api, kube_namespace, name)  # its offsets retained: deletionPolicy.offsets retain
            driver.stop()
            driver = None
            _collect_garbage(api, kube_namespace, name)

            api.create_connector(connector(name, kube_namespace, RECORDING, kafka_bootstrap, config,
                                           deletionPolicy={"cleanup": False},
                                           initialOffsets={"offsets": at_six}))  # existing: keep
            _applied(api, kube_namespace, name)
            driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)
            driver.wait_running()
            kept = eventually(lambda: _started(api, kube_namespace, name), timeout_s=60,
                              message="the re-created Connector's status.startingOffsets")
            assert (kept["initial"], kept["found"], kept["written"]) == ("Kept", 1, 0)
            found = eventually(lambda: api.events(kube_namespace, name, "OffsetsFound"), timeout_s=30,
                               message="an OffsetsFound Event")
            assert f"{topic}-0@11" in found[0].message
            assert api.events(kube_namespace, name, "InitialOffsetsKept")
            assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 11}
            _deleted(api, kube_namespace, name)
    finally:
        if driver is not None:
            driver.stop()
