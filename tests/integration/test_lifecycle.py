"""Closing-aware commits for every trigger, drains, states, reconfiguration, and the
connector-deleted stop path (KIP-275, KAFKA-14651), against a real broker and Spark."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
import yaml
from confluent_kafka import Consumer

from conveyor.control.protocol import current_pod
from conveyor.manifest import ConnectorManifest, ConnectorState
from conveyor.testing.recording import read_journal
from conveyor.testing.runs import (
    GROUP_PROTOCOLS,
    SteadyLoad,
    committed_offsets,
    connector_manifest,
    control_request,
    group_protocol_config,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"


def _name() -> str:
    return f"life-{uuid.uuid4().hex[:8]}"


def _config(topic, journal, protocol="classic", **extra):
    return {
        "topics": topic,
        "journal.path": str(journal),
        "value.converter": "json",
        "value.converter.schemas.enable": "false",
        **group_protocol_config(protocol),
        **extra,
    }


BOTH_PROTOCOLS = pytest.mark.parametrize("protocol", GROUP_PROTOCOLS)
"""Drains and a kill -9 resume as they should on both consumer group protocols (KIP-848's too)."""


def _values(n, start=0):
    return [(f"k{i}".encode(), json.dumps({"id": i}).encode()) for i in range(start, start + n)]


def _events(journal, *names):
    return [e for e in read_journal(journal) if e["event"] in names]


def _put_ids(journal):
    return [r["value"]["id"] for e in _events(journal, "put") for r in e["records"]]


def _assert_is_closing_only_in_closing_commits(journal, expected_closing: int):
    """is_closing() is true in exactly the pre_commit calls that precede a close, and
    never in open, put or close."""
    events = read_journal(journal)
    closing = [e for e in events if e["event"] == "pre_commit" and e["closing"]]
    assert len(closing) == expected_closing, [(e["task"], e["event"], e.get("closing")) for e in events]
    for e in events:
        if e["event"] in ("open", "put", "close"):
            assert e["closing"] is False, e
    for i, e in enumerate(events):
        if e["event"] == "pre_commit" and e["closing"]:
            following = [x for x in events[i + 1:] if x["task"] == e["task"]]
            assert following and following[0]["event"] in ("close", "closing_pre_commit_started"), following[:2]


def _http(driver, path: str, method: str = "POST") -> tuple[int, dict]:
    return control_request(driver.control_url, path, method, driver.control_tokens.admin)


@BOTH_PROTOCOLS
def test_drain_of_one_task_commits_closes_and_resumes_from_there(kafka_bootstrap, topic_factory, spark, tmp_path,
                                                                 protocol):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, _values(10))
    name = _name()
    manifest = connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal, protocol))
    with running_connector(manifest, spark) as d:
        wait_until(lambda: len(_put_ids(journal)) >= 10, message="first records")
        status, result = _http(d, "/drain?task=0")
        assert status == 200 and result["complete"] is True
        assert result["tasks"][0]["committed"] == {f"{topic}:0": 10}, "what the closing commit committed"
        assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 10}
        wait_until(lambda: d.status()["tasks"][0]["state"] == "RUNNING" and d.status()["tasks"][0]["attempt"] == 2,
                   message="task re-placed")
        produce(kafka_bootstrap, topic, _values(5, start=10))
        wait_until(lambda: len(_put_ids(journal)) >= 15, message="records after the drain")
    assert _put_ids(journal) == list(range(15)), "resumed from the drained commit: nothing twice, nothing lost"
    stops = _events(journal, "stop")
    assert [s["connector_deleted"] for s in stops] == [False, False]
    assert len(_events(journal, "start")) == 2
    _assert_is_closing_only_in_closing_commits(journal, expected_closing=2)


@BOTH_PROTOCOLS
def test_drain_by_pod_drains_every_task_on_it(kafka_bootstrap, topic_factory, spark, tmp_path, protocol):
    """What an eviction of an executor pod becomes (the operator's POST /drain?pod=)."""
    topic = topic_factory(partitions=2)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, _values(20))
    with running_connector(connector_manifest(_name(), RECORDING, kafka_bootstrap, _config(topic, journal, protocol),
                                              tasks_max=2), spark) as d:
        wait_until(lambda: all(t.get("pod") for t in d.status()["tasks"]), message="tasks report their pod")
        wait_until(lambda: len(_put_ids(journal)) >= 20, message="first records")
        status, result = _http(d, f"/drain?pod={current_pod()}")
        assert status == 200 and result["complete"] and sorted(t["id"] for t in result["tasks"]) == [0, 1]
        assert {t["pod"] for t in result["tasks"]} == {current_pod()}
        produce(kafka_bootstrap, topic, _values(20, start=20))
        wait_until(lambda: len(_put_ids(journal)) >= 40, message="records after the drain")
    assert len(_events(journal, "start")) == 4, "both tasks ran again after the drain"
    assert sorted(_put_ids(journal)) == list(range(40)), "nothing read twice, nothing lost"


def test_drain_of_a_pod_without_tasks_succeeds_and_of_an_unknown_task_is_404(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    with running_connector(connector_manifest(_name(), RECORDING, kafka_bootstrap, _config(topic, journal)),
                           spark) as d:
        wait_until(lambda: d.status()["tasks"][0]["state"] == "RUNNING", message="task running")
        status, body = _http(d, "/drain?pod=idle-executor-pod")
        assert (status, body["tasks"], body["complete"]) == (200, [], True), "an idle pod's preStop must not fail"
        assert d.status()["tasks"][0]["attempt"] == 1, "no task was drained"
        status, body = _http(d, "/drain?task=7")
        assert status == 404 and "no task 7" in body["message"]
        status, body = _http(d, "/drain")
        assert status == 400


def test_paused_tasks_put_nothing_and_resume_where_they_were(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, _values(5))
    config = _config(topic, journal, **{"offset.flush.interval.ms": "300"})
    with running_connector(connector_manifest(_name(), RECORDING, kafka_bootstrap, config), spark) as d:
        wait_until(lambda: len(_put_ids(journal)) >= 5, message="records before pausing")
        d.pause()
        wait_until(lambda: d.status()["tasks"][0]["state"] == "PAUSED", message="task PAUSED")
        produce(kafka_bootstrap, topic, _values(5, start=5))
        commits_before = len(_events(journal, "pre_commit"))
        wait_until(lambda: len(_events(journal, "pre_commit")) >= commits_before + 3,
                   message="offsets still committed while paused")
        assert len(_put_ids(journal)) == 5, "no put while paused"
        d.resume()
        wait_until(lambda: len(_put_ids(journal)) >= 10, message="records after resuming")
    assert _put_ids(journal) == list(range(10))
    assert not any(e["closing"] for e in _events(journal, "pre_commit")[:-1]), "pausing is not closing"


def test_connector_created_paused_puts_nothing_until_resumed(kafka_bootstrap, topic_factory, spark, tmp_path):
    """The task learns the driver's directive before its first poll: records already in
    the topic are not put (nor committed) by a connector created with ``state: paused``."""
    topic = topic_factory(partitions=2)
    journal = tmp_path / "j.jsonl"
    name = _name()
    produce(kafka_bootstrap, topic, _values(20))
    config = _config(topic, journal, **{"offset.flush.interval.ms": "300"})
    with running_connector(connector_manifest(name, RECORDING, kafka_bootstrap, config, state="paused"), spark) as d:
        wait_until(lambda: len(d.status()["tasks"][0].get("assignment") or ()) == 2, message="partitions assigned")
        wait_until(lambda: len(_events(journal, "pre_commit")) >= 3, message="periodic commits while paused")
        assert d.status()["tasks"][0]["state"] == "PAUSED"
        # Kafka Connect's PAUSED: the operator compares it with spec.state to push a resume
        assert d.status()["connector"]["state"] == "PAUSED"
        assert _put_ids(journal) == [], "a paused connector put records"
        assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2) == {}
        d.resume()
        wait_until(lambda: len(_put_ids(journal)) >= 20, message="records after resuming")
        assert d.status()["connector"]["state"] == "RUNNING"
    assert sorted(_put_ids(journal)) == list(range(20))


def test_a_partition_revoked_while_paused_is_read_again_when_it_comes_back(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    """librdkafka keeps a partition paused after it is unassigned: a partition taken away
    while the connector is paused and given back after it resumed must be fetched again,
    and the records held back while paused are put once."""
    topic = topic_factory(partitions=2)
    journal = tmp_path / "j.jsonl"
    name = _name()
    produce(kafka_bootstrap, topic, _values(10))
    config = _config(topic, journal, **{"offset.flush.interval.ms": "300"})
    with running_connector(connector_manifest(name, RECORDING, kafka_bootstrap, config), spark) as d:
        wait_until(lambda: len(_put_ids(journal)) >= 10, message="records before pausing")
        d.pause()
        wait_until(lambda: d.status()["tasks"][0]["state"] == "PAUSED", message="task PAUSED")
        produce(kafka_bootstrap, topic, _values(10, start=10))  # fetched while paused, so held back
        commits = len(_events(journal, "pre_commit"))
        wait_until(lambda: len(_events(journal, "pre_commit")) >= commits + 3, message="commits while paused")
        outsider = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"connect-{name}",
                             "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": False,
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        try:
            outsider.subscribe([topic])

            def outsider_holds_one() -> bool:
                outsider.consume(10, 0.2)
                return len(outsider.assignment()) == 1 and len(d.status()["tasks"][0]["assignment"]) == 1

            wait_until(outsider_holds_one, message="a second group member took a partition")
            d.resume()
            wait_until(lambda: d.status()["tasks"][0]["state"] == "RUNNING", message="task RUNNING")
        finally:
            outsider.unsubscribe()
            outsider.close()
        wait_until(lambda: len(d.status()["tasks"][0]["assignment"]) == 2, message="both partitions back")
        produce(kafka_bootstrap, topic, _values(10, start=20))
        wait_until(lambda: len(set(_put_ids(journal))) >= 30, timeout_s=30, message="every record after the resume")
    assert sorted(_put_ids(journal)) == list(range(30)), "each record put once"


def test_partitions_a_task_pauses_in_open_put_nothing_until_it_resumes_them(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    """``SinkTaskContext.pause`` from ``open``, right as the partitions are assigned, then
    ``resume`` from a later ``pre_commit`` (Kafka Connect's ``WorkerSinkTask``)."""
    topic = topic_factory(partitions=2)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, _values(20))
    config = _config(topic, journal, **{"offset.flush.interval.ms": "300", "pause.on.open": "true",
                                        "resume.at.pre_commit": "5"})
    with running_connector(connector_manifest(_name(), RECORDING, kafka_bootstrap, config), spark):
        wait_until(lambda: _events(journal, "resumed"), message="the task resumes its partitions")
        wait_until(lambda: len(_put_ids(journal)) >= 20, message="records after the task resumed")
    events = [e["event"] for e in read_journal(journal) if e["event"] in ("put", "resumed")]
    assert events[0] == "resumed", events
    assert sorted(_put_ids(journal)) == list(range(20))


def test_stopped_state_closes_tasks_keeps_connector_and_resumes(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    name = _name()
    produce(kafka_bootstrap, topic, _values(8))
    with running_connector(connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal)), spark) as d:
        wait_until(lambda: len(_put_ids(journal)) >= 8, message="records")
        result = d.set_state(ConnectorState.STOPPED)
        assert result["state"] == "STOPPED"
        assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 8}
        assert [e["connector_deleted"] for e in _events(journal, "stop", "connector_stop")] == [False, False]
        assert d.status()["connector"]["state"] == "STOPPED"
        produce(kafka_bootstrap, topic, _values(2, start=8))
        d.set_state(ConnectorState.RUNNING)
        wait_until(lambda: len(_put_ids(journal)) >= 10, message="records after restarting")
    assert _put_ids(journal) == list(range(10))
    assert len(_events(journal, "connector_start")) == 2


def test_reconfiguration_closes_tasks_and_starts_them_with_the_new_config(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=2)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, _values(6))
    manifest = connector_manifest(_name(), RECORDING, kafka_bootstrap, _config(topic, journal))
    with running_connector(manifest, spark) as d:
        wait_until(lambda: len(_put_ids(journal)) >= 6, message="records")
        new_spec = manifest.spec.model_copy(update={"tasks_max": 2,
                                                    "config": {**manifest.spec.config, "marker": "v2"}})
        result = d.reconfigure(new_spec)
        assert result["tasks"] == 2
        wait_until(lambda: len(_events(journal, "start")) >= 3, message="two new tasks")
        produce(kafka_bootstrap, topic, _values(4, start=6))
        wait_until(lambda: len(_put_ids(journal)) >= 10, message="records after reconfiguration")
    starts = _events(journal, "start")
    assert [s["config"].get("marker") for s in starts] == [None, "v2", "v2"]
    assert sorted(_put_ids(journal)) == list(range(10)), "no record twice across the reconfiguration"
    stops = _events(journal, "stop", "connector_stop")
    assert all(s["connector_deleted"] is False for s in stops)


@BOTH_PROTOCOLS
def test_a_task_count_change_starts_and_stops_only_the_difference_under_load(kafka_bootstrap, topic_factory, spark,
                                                                            tmp_path, protocol):
    """Issue 34, live task changes: tasksMax 1 -> 3 -> 1 on a running driver with records
    arriving throughout. Task 0 runs on through both changes (one start, never stopped);
    tasks 1 and 2 start, take partitions that task 0 gave up with a closing commit, and stop
    with their own; every record is put exactly once."""
    topic = topic_factory(partitions=6)
    journal = tmp_path / "j.jsonl"
    manifest = connector_manifest(_name(), RECORDING, kafka_bootstrap, _config(topic, journal, protocol))

    def opened_by(task):
        return [p for e in _events(journal, "open") if e["task"] == task for p in e["partitions"]]

    with running_connector(manifest, spark) as d:
        with SteadyLoad(kafka_bootstrap, topic) as load:
            wait_until(lambda: len(_put_ids(journal)) >= 100, message="task 0 under load")
            assert d.reconfigure(manifest.spec.model_copy(update={"tasks_max": 3}))["tasks"] == 3
            wait_until(lambda: opened_by(1) and opened_by(2), message="tasks 1 and 2 given partitions")
            seen = len(_put_ids(journal))
            wait_until(lambda: len(_put_ids(journal)) >= seen + 200, message="records put by three tasks")
            assert d.reconfigure(manifest.spec.model_copy(update={"tasks_max": 1}))["tasks"] == 1
            assert [t["id"] for t in d.status()["tasks"]] == [0]
            seen = len(_put_ids(journal))
            wait_until(lambda: len(_put_ids(journal)) >= seen + 200, message="records put by task 0 alone")
        wait_until(lambda: len(_put_ids(journal)) >= load.produced, message="every record put")
    starts = [e["task"] for e in _events(journal, "start")]
    assert starts[0] == 0 and sorted(starts) == [0, 1, 2], "task 0 was never restarted; 1 and 2 started once"
    stops = [e["task"] for e in _events(journal, "stop")]
    assert sorted(stops[:2]) == [1, 2] and stops[2:] == [0], "tasks 1 and 2 stopped by the rescale, 0 at the end"
    assert {e["task"] for e in _events(journal, "put")} == {0, 1, 2}
    puts = _put_ids(journal)
    assert sorted(puts) == list(range(load.produced)), "every record put exactly once across both rescales"
    _assert_is_closing_only_in_closing_commits(journal, expected_closing=len(_events(journal, "close")))


def test_stop_with_connector_deleted_reaches_tasks_and_connector(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, _values(3))
    name = _name()
    with running_connector(connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal)), spark) as d:
        wait_until(lambda: len(_put_ids(journal)) >= 3, message="records")
        status, result = _http(d, "/stop?connector_deleted=true")
    assert status == 200
    assert result["connector_deleted"] is True
    assert result["removed"] == [f"journal marker for {name}"]
    assert result["tasks"][0]["last_closing_commit"] == {f"{topic}:0": 3}
    tail = [e["event"] for e in read_journal(journal)][-4:]
    assert tail == ["pre_commit", "close", "stop", "connector_stop"]
    assert [e["connector_deleted"] for e in _events(journal, "stop", "connector_stop")] == [True, True]


def test_a_task_that_had_failed_gets_its_connector_deleted_stop_on_the_driver(kafka_bootstrap, topic_factory, spark,
                                                                            tmp_path):
    """Its run ended with ``stop(False)`` at the failure; deleting the connector still runs the
    task's connector-deleted path, on an idle context, so the operator needs no cleanup Job."""
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, _values(3))
    config = _config(topic, journal, **{"fail.put.at.offset": "1"})
    with running_connector(connector_manifest(_name(), RECORDING, kafka_bootstrap, config), spark) as d:
        wait_until(lambda: d.status()["tasks"][0]["state"] == "FAILED", message="the task FAILED")
        status, result = _http(d, "/stop?connector_deleted=true")
    assert status == 200, result
    (task,) = result["tasks"]
    assert task["state"] == "FAILED" and "asked to fail" in task["trace"], task
    assert task["cleaned_up"] is True and task["cleanup_error"] is None, task
    assert [e["connector_deleted"] for e in _events(journal, "stop")] == [False, True], "at the failure, then deleted"
    assert _events(journal, "connector_stop")[-1]["connector_deleted"] is True


def _manifest_file(tmp_path, name, bootstrap, config) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name},
        "spec": {"class": RECORDING, "tasksMax": 2, "kafka": {"bootstrapServers": bootstrap}, "config": config},
    }))
    return str(path)


def test_cleanup_command_runs_the_deleted_path_without_moving_data(kafka_bootstrap, tmp_path):
    journal = tmp_path / "j.jsonl"
    name = _name()
    manifest = _manifest_file(tmp_path, name, kafka_bootstrap, {"topics": "t", "journal.path": str(journal)})
    for _ in range(2):  # idempotent
        result = subprocess.run([sys.executable, "-m", "conveyor.cli", "cleanup", manifest],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["removed"] == [f"journal marker for {name}"] and report["tasks"] == 2
    events = read_journal(journal)
    assert not [e for e in events if e["event"] in ("open", "put", "pre_commit")], "no data moved"
    assert [e["connector_deleted"] for e in events if e["event"] in ("stop", "connector_stop")] == [True] * 6


def test_cleanup_retries_transient_failures_with_backoff(kafka_bootstrap, tmp_path):
    journal = tmp_path / "j.jsonl"
    manifest = _manifest_file(tmp_path, _name(), kafka_bootstrap,
                              {"topics": "t", "journal.path": str(journal), "start.failures": "2"})
    result = subprocess.run([sys.executable, "-m", "conveyor.cli", "cleanup", manifest, "--timeout", "60"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["attempts"] == 3
    assert len(_events(journal, "connector_start_failed")) == 2


def test_cleanup_that_cannot_finish_exits_nonzero_with_the_reason(kafka_bootstrap, tmp_path):
    journal = tmp_path / "j.jsonl"
    manifest = _manifest_file(tmp_path, _name(), kafka_bootstrap,
                              {"topics": "t", "journal.path": str(journal), "start.failures": "100"})
    result = subprocess.run([sys.executable, "-m", "conveyor.cli", "cleanup", manifest, "--timeout", "4"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "did not finish" in result.stderr and "external system unavailable" in result.stderr
    assert not _events(journal, "connector_stop"), "nothing half-removed"


@pytest.mark.process_boundary("SIGTERM, then SIGKILL during the closing commit, as the kubelet does to a pod")
@BOTH_PROTOCOLS
def test_kill_9_during_a_closing_commit_resumes_from_the_last_commit(kafka_bootstrap, topic_factory, tmp_path,
                                                                     spark, protocol):
    """The killed run is a process; the restart, which only resumes from the last commit, runs on
    the session's SparkSession."""
    import os
    import signal

    topic = topic_factory(partitions=1)
    name = _name()
    first_journal, second_journal = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    base = _config(topic, first_journal, protocol,
                   **{"request.commit.every": "50", "slow.closing.pre_commit.seconds": "60"})
    manifest = _manifest_file(tmp_path, name, kafka_bootstrap, base)
    log = open(tmp_path / "driver.log", "ab")
    driver = subprocess.Popen([sys.executable, "-m", "conveyor.cli", "run", manifest, "--control-port", "0",
                               "--no-progress"], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: _events(first_journal, "open"), timeout_s=120, message="partition assigned")
        produce(kafka_bootstrap, topic, _values(50))
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 50},
                   message="commit requested after 50 records")
        produce(kafka_bootstrap, topic, _values(30, start=50))
        wait_until(lambda: len(_put_ids(first_journal)) >= 80, message="80 records put")
        driver.send_signal(signal.SIGTERM)
        wait_until(lambda: _events(first_journal, "closing_pre_commit_started"), message="closing commit begun")
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 50}, "the closing commit never ran"

    second = ConnectorManifest.load(_manifest_file(tmp_path, name, kafka_bootstrap,
                                                   _config(topic, second_journal, protocol)))
    with running_connector(second, spark) as restarted:
        wait_until(lambda: len(_put_ids(second_journal)) >= 30, timeout_s=120, message="redelivery after restart")
        assert all(t["state"] == "STOPPED" for t in restarted.stop()["tasks"])
    assert _put_ids(second_journal) == list(range(50, 80)), "resumed from the last committed offset: nothing lost"
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 1) == {0: 80}
