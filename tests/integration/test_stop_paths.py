"""The connector-deleted stop path runs exactly when asked, whatever happened before (issue 11
§2): a delete after a plain stop, and a stop that arrives while the driver is still starting."""

from __future__ import annotations

import threading
import uuid

import pytest

from conveyor.runtime.driver.driver import Driver
from conveyor.testing.recording import read_journal
from conveyor.testing.runs import connector_manifest, wait_until

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"


def _manifest(bootstrap: str, journal) -> tuple[str, object]:
    name = f"stops-{uuid.uuid4().hex[:8]}"
    config = {"topics": f"{name}-t", "journal.path": str(journal), "value.converter": "json",
              "value.converter.schemas.enable": "false"}
    return name, connector_manifest(name, RECORDING, bootstrap, config, tasks_max=2)


def _deleted_flags(journal) -> list[tuple[str, bool]]:
    return [(e["event"], e["connector_deleted"]) for e in read_journal(journal)
            if e["event"] in ("stop", "connector_stop")]


def test_a_delete_after_a_plain_stop_still_runs_the_connector_deleted_path(kafka_bootstrap, spark, tmp_path):
    journal = tmp_path / "j.jsonl"
    name, manifest = _manifest(kafka_bootstrap, journal)
    driver = Driver(manifest, spark=spark, control_port=0)
    driver.start()
    try:
        wait_until(lambda: sum(e["event"] == "start" for e in read_journal(journal)) == 2, message="two tasks")
        plain = driver.stop()
        assert plain["connector_deleted"] is False and plain["removed"] == []
        deleted = driver.stop(connector_deleted=True)  # e.g. kubectl delete after a SIGTERM or `conveyor stop`
    finally:
        driver.close()
    assert deleted["connector_deleted"] is True, deleted
    assert deleted["removed"] == [f"journal marker for {name}"], deleted
    assert deleted["connector_trace"] is None
    flags = _deleted_flags(journal)
    assert flags[:3] == [("stop", False), ("stop", False), ("connector_stop", False)], flags
    assert sorted(flags[3:]) == [("connector_stop", True), ("stop", True), ("stop", True)], flags


def test_a_stop_during_start_up_keeps_the_connector_from_starting_and_cleans_up_when_deleted(
        kafka_bootstrap, spark, tmp_path, monkeypatch):
    journal = tmp_path / "j.jsonl"
    name, manifest = _manifest(kafka_bootstrap, journal)
    spark_starting, release = threading.Event(), threading.Event()
    original = Driver._ensure_spark

    def slow_spark(self, tasks_max):
        spark_starting.set()
        assert release.wait(60)
        return original(self, tasks_max)

    monkeypatch.setattr(Driver, "_ensure_spark", slow_spark)
    driver = Driver(manifest, spark=spark, control_port=0)
    starting = threading.Thread(target=driver.start, daemon=True)
    starting.start()
    try:
        assert spark_starting.wait(60)
        report = driver.stop(connector_deleted=True)  # the operator's delete while Spark starts
        release.set()
        starting.join(60)
        assert not starting.is_alive()
        assert driver.tasks == {} and driver.connector is None, "the connector started after its stop"
    finally:
        release.set()
        driver.close()
    assert report["connector_deleted"] is True and report["removed"] == [f"journal marker for {name}"], report
    events = [e["event"] for e in read_journal(journal)]
    assert not {"open", "put", "pre_commit"} & set(events), events  # no task ever consumed
    assert sorted(_deleted_flags(journal)) == [("connector_stop", True), ("stop", True), ("stop", True)]
