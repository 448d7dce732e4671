"""``POST /restart?include_tasks=&only_failed=`` (Kafka Connect's connector restart,
KIP-745) and ``conveyor restart``, against a real broker and Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from conveyor.manifest import ConnectorState
from conveyor.testing.recording import read_journal
from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    control_request,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"


def _config(topic, journal, **extra):
    return {"topics": topic, "journal.path": str(journal), "value.converter.schemas.enable": "false",
            "consumer.override.session.timeout.ms": "6000", "consumer.override.heartbeat.interval.ms": "500",
            **extra}


def _values(n, start=0):
    return [(f"k{i}".encode(), json.dumps({"id": i}).encode()) for i in range(start, start + n)]


def _events(journal, *names):
    return [e for e in read_journal(journal) if e["event"] in names]


def _put_ids(journal):
    return [r["value"]["id"] for e in _events(journal, "put") for r in e["records"]]


def _post(driver, path: str) -> tuple[int, dict]:
    return control_request(driver.control_url, path, "POST", driver.control_tokens.admin)


def _attempts(driver) -> list[int]:
    return [t["attempt"] for t in driver.status()["tasks"]]


def _all_running(driver, attempt) -> bool:
    return all(t["state"] == "RUNNING" and t["attempt"] == attempt for t in driver.status()["tasks"])


def test_restart_with_tasks_restarts_connector_and_every_task_with_closing_commits(
    kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=2)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, _values(10))
    name = f"rst-{uuid.uuid4().hex[:8]}"
    with running_connector(connector_manifest(name, RECORDING, kafka_bootstrap, _config(topic, journal), tasks_max=2),
                           spark) as d:
        wait_until(lambda: len(_put_ids(journal)) >= 10 and _all_running(d, 1), message="records, tasks running")
        status, body = _post(d, "/restart?include_tasks=true&only_failed=false")
        assert status == 202
        assert body["restarted"] == {"connector": True, "tasks": [0, 1]}
        assert body["connector"]["state"] == "RESTARTING" and body["name"] == name
        assert [t["state"] for t in body["tasks"]] == ["RESTARTING", "RESTARTING"]
        wait_until(lambda: _all_running(d, 2), message="both tasks running again")
        assert d.status()["connector"]["state"] == "RUNNING"
        assert sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2).values()) == 10
        produce(kafka_bootstrap, topic, _values(5, start=10))
        wait_until(lambda: len(_put_ids(journal)) >= 15, message="records after the restart")
    assert sorted(_put_ids(journal)) == list(range(15)), "resumed from the closing commits: nothing twice"
    assert len(_events(journal, "connector_start")) == 2
    assert [e["connector_deleted"] for e in _events(journal, "connector_stop")] == [False, False]
    closing = [e for e in _events(journal, "pre_commit") if e["closing"]]
    assert len(closing) >= 2, "every running task made a closing commit before its restart"


def test_restart_without_tasks_restarts_only_the_connector_instance(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    with running_connector(connector_manifest(f"rst-{uuid.uuid4().hex[:8]}", RECORDING, kafka_bootstrap,
                                              _config(topic, journal)), spark) as d:
        wait_until(lambda: _all_running(d, 1), message="running")
        status, body = _post(d, "/restart")
        assert status == 202 and body["restarted"] == {"connector": True, "tasks": []}
        assert len(_events(journal, "connector_start")) == 2
        assert _attempts(d) == [1], "same task configurations: the task keeps running"
        status, body = _post(d, "/restart?only_failed=true&include_tasks=true")
        assert status == 202 and body["restarted"] == {"connector": False, "tasks": []}, "nothing failed"
        status, body = _post(d, "/restart?include_tasks=maybe")
        assert status == 400 and "include_tasks must be true or false" in body["message"]
        d.set_state(ConnectorState.STOPPED)
        status, body = _post(d, "/restart?include_tasks=true")
        assert status == 409 and "is stopped" in body["message"]


def test_only_failed_restarts_the_failed_task_and_the_cli_drives_it(kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=1)
    journal = tmp_path / "j.jsonl"
    produce(kafka_bootstrap, topic, _values(5))
    config = _config(topic, journal, **{"fail.put.at.offset": "3"})
    with running_connector(connector_manifest(f"rst-{uuid.uuid4().hex[:8]}", RECORDING, kafka_bootstrap, config),
                           spark) as d:
        wait_until(lambda: d.status()["tasks"][0]["state"] == "FAILED", message="task FAILED")
        token_file = tmp_path / "admin-token"
        token_file.write_text(d.control_tokens.admin)
        result = subprocess.run([sys.executable, "-m", "conveyor.cli", "restart", "--only-failed", "--url",
                                 d.control_url, "--token-file", str(token_file)],
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        body = json.loads(result.stdout)
        assert body["restarted"] == {"connector": False, "tasks": [0]}
        assert body["tasks"][0]["state"] == "RESTARTING"
        wait_until(lambda: _attempts(d) == [2] and d.status()["tasks"][0]["state"] == "FAILED",
                   message="the task ran again (and failed again at the same record)")
        result = subprocess.run([sys.executable, "-m", "conveyor.cli", "restart", "--all", "--url", d.control_url],
                                capture_output=True, text=True, timeout=120, check=False,
                                env={**os.environ, "CONVEYOR_CONTROL_TOKEN_FILE": str(token_file)})
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["restarted"] == {"connector": True, "tasks": [0]}
        wait_until(lambda: _attempts(d) == [3], message="restarted by --all")
    assert len(_events(journal, "start")) == 3
