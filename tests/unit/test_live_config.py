"""What ``PUT /config`` takes live, and what would move credentials (issue 13 §2)."""

from __future__ import annotations

import pytest

from conveyor.manifest import ConnectorSpec
from conveyor.runtime.live_config import live_change_refusal, uses_credentials


def spec(**fields) -> ConnectorSpec:
    base = {"class": "postgres-sink", "tasksMax": 1, "kafka": {"bootstrapServers": "kafka:9092"},
            "config": {"topics": "orders", "connection.url": "postgresql://db/app"}}
    base.update(fields)
    return ConnectorSpec.model_validate(base)


def test_plain_config_tasks_and_state_change_live():
    running = spec()
    for new in (spec(config={"topics": "other", "connection.url": "postgresql://db/app"}), spec(tasksMax=3),
                spec(state="paused")):
        assert live_change_refusal(running, new, new) is None


@pytest.mark.parametrize(("field", "value", "named"), [
    ("kafka", {"bootstrapServers": "evil:9092"}, "spec.kafka"),
    ("kafka", {"bootstrapServers": "kafka:9092", "authentication": {
        "type": "scram-sha-512", "username": "u", "passwordSecret": {"name": "k", "key": "p"}}}, "spec.kafka"),
    ("configFrom", [{"secretRef": {"name": "pg"}}], "spec.configFrom"),
    ("spark", {"executor": {"instances": 3}}, "spec.spark"),
    ("shutdown", {"gracePeriodSeconds": 5}, "spec.shutdown"),
])
def test_what_only_a_new_driver_takes(field, value, named):
    new = spec(**{field: value})
    assert named in live_change_refusal(spec(), new, new)


def test_a_config_that_resolves_credentials_does_not_change_live():
    """The new URL would receive the password the other key resolves."""
    written = spec(config={"topics": "orders", "connection.url": "postgresql://evil/app",
                           "connection.password": "${secret:pg:password}"}, configFrom=[{"secretRef": {"name": "pg"}}])
    running = spec(config={"topics": "orders", "connection.url": "postgresql://db/app",
                           "connection.password": "hunter2hunter2"}, configFrom=[{"secretRef": {"name": "pg"}}])
    resolved = written.model_copy(update={"config": {**written.config, "connection.password": "hunter2hunter2"}})
    assert "resolves credentials" in live_change_refusal(running, written, resolved)
    # the same config with only tasksMax changed stays live
    same = running.model_copy(update={"tasks_max": 4})
    assert live_change_refusal(running, written.model_copy(update={"config": running.config, "tasks_max": 4}),
                               same) is None


def test_references_that_count_as_credentials():
    assert uses_credentials(spec(config={"a": "${secret:pg:password}"}))
    assert uses_credentials(spec(config={"a": "${env:PG_PASSWORD}"}))
    assert uses_credentials(spec(config={"a": "${configmap:c:k}"}))
    assert uses_credentials(spec(configFrom=[{"configMapRef": {"name": "c"}}]))
    assert not uses_credentials(spec(config={"a": "$100", "b": 3}))


def test_put_config_answers_409_and_reaches_no_driver_for_a_credential_move(tmp_path, monkeypatch):
    """Through the control API: the new Kafka endpoint is refused before the driver sees it."""
    import http.client
    import json
    from types import SimpleNamespace

    from conveyor.runtime.control_auth import ControlTokens
    from conveyor.runtime.control_server import ControlServer

    monkeypatch.setenv("CONVEYOR_MOUNT_DIR", str(tmp_path))
    calls: list[ConnectorSpec] = []
    driver = SimpleNamespace(manifest=SimpleNamespace(spec=spec()), metrics_registry=None,
                             reconfigure=lambda s: calls.append(s) or {"name": "x"})
    tokens = ControlTokens.generate()
    server = ControlServer(driver, "127.0.0.1", 0, tokens)  # type: ignore[arg-type]
    server.start()

    def put(body: dict) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("PUT", "/config", body=json.dumps(body), headers={"Authorization": f"Bearer {tokens.admin}"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())

    base = {"class": "postgres-sink", "tasksMax": 1, "kafka": {"bootstrapServers": "kafka:9092"},
            "config": {"topics": "orders", "connection.url": "postgresql://db/app"}}
    try:
        status, body = put({**base, "kafka": {"bootstrapServers": "evil:9092"}})
        assert status == 409 and "spec.kafka" in body["message"] and calls == []
        status, _ = put({**base, "tasksMax": 3})
        assert status == 200 and [c.tasks_max for c in calls] == [3]
    finally:
        server.stop()
