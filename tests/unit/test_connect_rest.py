"""Kafka Connect's REST API on the control port, against a stand-in driver: paths, status
codes, document shapes and Connect's error messages (the side-by-side comparison with a real
Connect worker is tests/integration/test_connect_rest_parity.py)."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any

import pytest

from conveyor.control.auth import ControlTokens
from conveyor.control.protocol import TaskState
from conveyor.manifest import ConnectorManifest, ConnectorState
from conveyor.runtime.herder.lifecycle import Lifecycle
from conveyor.runtime.herder.task_handles import TaskHandle
from conveyor.runtime.rest.server import ControlServer

TOKENS = ControlTokens.generate()


class _Connector:
    def version(self) -> str:
        return "1.2.3"

    def task_class(self) -> type:
        return TaskHandle  # any class: only its name is shown


class FakeDriver:
    """The part of :class:`~conveyor.runtime.driver.driver.Driver` the Connect endpoints use."""

    metrics_registry = None

    def __init__(self, written_config: dict[str, Any] | None = None, resolved_config: dict[str, Any] | None = None
                 ) -> None:
        written_config = written_config or {"topics": ["t1", "t2"], "batch.size": 10, "errors.log.enable": True}
        self.manifest = ConnectorManifest.model_validate({
            "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "c1"},
            "spec": {"class": "noop-sink", "tasksMax": 2, "kafka": {"bootstrapServers": "127.0.0.1:1"},
                     "config": resolved_config or written_config}})
        self.written_spec = self.manifest.spec.model_copy(update={"config": written_config})
        self.name = "c1"
        self.connector_type = "sink"
        self.connector_state = TaskState.RUNNING
        self.connector = _Connector()
        self.tasks = {0: TaskHandle(0, {"topics": "t1,t2", "name": "c1"}),
                      1: TaskHandle(1, {"topics": "t1,t2", "name": "c1"})}
        self.tasks[0].state = TaskState.RUNNING
        self.tasks[1].state = TaskState.FAILED
        self.tasks[1].trace = "boom"
        self.lifecycle = Lifecycle(threading.Condition())
        self.calls: list[tuple[str, Any]] = []
        self.reconfigured: Any = None

    def status(self) -> dict[str, Any]:
        return {"name": "c1", "connector": {"state": self.connector_state.value, "worker_id": "w:8083"},
                "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w:8083", "attempt": 0,
                           "consumed": {"t1:0": 5, "t2:1": 3}, "lag": {}},
                          {"id": 1, "state": "FAILED", "worker_id": "w:8083", "trace": "boom", "attempt": 0}],
                "type": "sink", "spark": {"app_id": "x"}, "unassigned_lag": {}}

    def set_state(self, target: ConnectorState) -> dict[str, Any]:
        self.calls.append(("set_state", target))
        if target is ConnectorState.STOPPED:
            self.connector_state = TaskState.STOPPED
        return {}

    def restart(self, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any]:
        self.calls.append(("restart", (include_tasks, only_failed)))
        status = self.status()
        status["tasks"][1]["state"] = "RESTARTING"
        status["restarted"] = {"connector": False, "tasks": [1]}
        return status

    def restart_task(self, task_id: int) -> dict[str, Any]:
        self.calls.append(("restart_task", task_id))
        return {}

    def reconfigure(self, spec: Any, written: Any = None) -> dict[str, Any]:
        self.reconfigured = spec
        self.manifest = self.manifest.model_copy(update={"spec": spec})
        self.written_spec = written or spec
        return {}


@pytest.fixture
def driver():
    return FakeDriver()


@pytest.fixture
def call(driver):
    server = ControlServer(driver=driver, host="127.0.0.1", port=0, tokens=TOKENS)  # type: ignore[arg-type]
    server.start()
    yield client_of(server)
    server.stop()


def client_of(server: ControlServer) -> Any:
    def request(method: str, path: str, body: Any = None, raw: bytes | None = None,
                token: str | None = TOKENS.admin) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        conn.close()
        return response.status, json.loads(payload) if payload else None

    return request


def test_the_connector_list_and_its_expansions(call):
    assert call("GET", "/connectors") == (200, ["c1"])
    status, both = call("GET", "/connectors?expand=status&expand=info")
    assert status == 200 and set(both) == {"c1"} and set(both["c1"]) == {"status", "info"}
    assert call("GET", "/connectors?expand=nonsense") == (200, ["c1"])


def test_status_is_connects_document_without_conveyors_extras(call):
    status, doc = call("GET", "/connectors/c1/status")
    assert status == 200
    assert doc == {"name": "c1", "connector": {"state": "RUNNING", "worker_id": "w:8083", "version": "1.2.3"},
                   "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w:8083", "version": "1.2.3"},
                             {"id": 1, "state": "FAILED", "worker_id": "w:8083", "version": "1.2.3",
                              "trace": "boom"}],
                   "type": "sink"}
    assert call("GET", "/connectors/c1/tasks/1/status") == (200, doc["tasks"][1])


def test_info_config_and_tasks_are_strings_as_connect_stores_them(call):
    status, info = call("GET", "/connectors/c1")
    assert status == 200 and info["tasks"] == [{"connector": "c1", "task": 0}, {"connector": "c1", "task": 1}]
    assert info["type"] == "sink"
    assert info["config"] == {"topics": "t1,t2", "batch.size": "10", "errors.log.enable": "true",
                              "connector.class": "noop-sink", "tasks.max": "2", "name": "c1"}
    assert call("GET", "/connectors/c1/config") == (200, info["config"])
    status, tasks = call("GET", "/connectors/c1/tasks")
    assert status == 200 and [t["id"] for t in tasks] == [{"connector": "c1", "task": 0}, {"connector": "c1", "task": 1}]
    assert tasks[0]["config"]["task.class"].endswith("TaskHandle")
    assert call("GET", "/connectors/c1/topics") == (200, {"c1": {"topics": ["t1", "t2"]}})


@pytest.mark.parametrize(("method", "path", "message"), [
    ("GET", "/connectors/nope", "Connector nope not found"),
    ("GET", "/connectors/nope/config", "Connector nope not found"),
    ("GET", "/connectors/nope/status", "No status found for connector nope"),
    ("GET", "/connectors/nope/tasks/0/status", "No status found for task nope-0"),
    ("GET", "/connectors/c1/tasks/99/status", "No status found for task c1-99"),
    ("PUT", "/connectors/nope/pause", "Unknown connector nope"),
    ("PUT", "/connectors/nope/resume", "Unknown connector nope"),
    ("PUT", "/connectors/nope/stop", "Unknown connector nope"),
    ("POST", "/connectors/nope/restart", "Unknown connector: nope"),
    ("POST", "/connectors/nope/restart?includeTasks=true", "Unknown connector: nope"),
    ("POST", "/connectors/nope/tasks/0/restart", "Unknown connector: nope"),
    ("POST", "/connectors/c1/tasks/99/restart", "Unknown task: c1-99"),
    ("GET", "/connector-plugins/Nope/config", "Unknown plugin Nope."),
])
def test_unknown_connectors_and_tasks_answer_404_with_connects_message(call, driver, method, path, message):
    assert call(method, path) == (404, {"error_code": 404, "message": message})
    assert driver.calls == []


def test_state_changes_answer_202_and_204_without_a_body(call, driver):
    assert call("PUT", "/connectors/c1/pause") == (202, None)
    assert call("PUT", "/connectors/c1/resume") == (202, None)
    assert call("POST", "/connectors/c1/tasks/1/restart") == (204, None)
    assert call("POST", "/connectors/c1/restart") == (204, None)
    assert driver.calls == [("set_state", ConnectorState.PAUSED), ("set_state", ConnectorState.RUNNING),
                            ("restart_task", 1), ("restart", (False, False))]
    assert call("PUT", "/connectors/c1/stop") == (204, None)
    status, doc = call("GET", "/connectors/c1/status")
    assert status == 200 and doc["connector"]["state"] == "STOPPED" and doc["tasks"] == []


def test_restart_with_flags_answers_202_with_the_restarting_marks(call, driver):
    status, doc = call("POST", "/connectors/c1/restart?includeTasks=true&onlyFailed=true")
    assert status == 202 and doc["tasks"][1] == {"id": 1, "state": "RESTARTING", "worker_id": "w:8083",
                                                 "version": "1.2.3", "trace": "boom"}
    assert "restarted" not in doc and driver.calls == [("restart", (True, True))]


def test_put_config_takes_tasks_max_and_the_class_from_a_connect_config(call, driver):
    status, info = call("PUT", "/connectors/c1/config",
                        {"connector.class": "noop-sink", "tasks.max": "3", "topics": "t9", "name": "c1"})
    assert status == 200, info
    spec = driver.reconfigured
    assert spec.tasks_max == 3 and spec.connector_class == "noop-sink" and spec.config == {"topics": "t9"}
    assert info["config"]["tasks.max"] == "3"


def test_patch_config_merges_and_null_removes_a_key(call, driver):
    status, info = call("PATCH", "/connectors/c1/config", {"batch.size": "20", "errors.log.enable": None})
    assert status == 200, info
    assert driver.reconfigured.config == {"topics": "t1,t2", "batch.size": "20"}


ENV_CANARY = "patch-env-canary-5b1e"


@pytest.fixture
def env_driver(monkeypatch):
    """A driver started from a config with a ${env:...} reference: the manifest holds the
    resolved value, the written spec the reference."""
    monkeypatch.setenv("CONVEYOR_TEST_TABLE", ENV_CANARY)
    written = {"topics": "t1", "table.name.format": "${env:CONVEYOR_TEST_TABLE}"}
    driver = FakeDriver(written, {**written, "table.name.format": ENV_CANARY})
    server = ControlServer(driver=driver, host="127.0.0.1", port=0, tokens=TOKENS)  # type: ignore[arg-type]
    server.start()
    yield driver, client_of(server)
    server.stop()


def test_patch_config_merges_into_the_written_config_and_the_driver_gets_the_reference_resolved(env_driver):
    driver, call = env_driver
    status, info = call("PATCH", "/connectors/c1/config", {"tasks.max": "3"})
    assert status == 200, info
    assert driver.reconfigured.tasks_max == 3
    assert driver.reconfigured.config == {"topics": "t1", "table.name.format": ENV_CANARY}
    assert driver.written_spec.config == {"topics": "t1", "table.name.format": "${env:CONVEYOR_TEST_TABLE}"}
    assert ENV_CANARY not in json.dumps(driver.written_spec.model_dump(mode="json"))
    status, config = call("GET", "/connectors/c1/config")
    assert config["table.name.format"] == "${env:CONVEYOR_TEST_TABLE}"


def test_patch_config_of_a_config_with_references_cannot_change_it_live(env_driver):
    driver, call = env_driver
    status, doc = call("PATCH", "/connectors/c1/config", {"topics": "t2"})
    assert status == 409 and "holds credentials" in doc["message"] and "roll the driver" in doc["message"], doc
    assert driver.reconfigured is None


def test_task_configs_show_the_keys_written_as_references_as_written():
    """Kafka Connect's reverseTransform: a short resolved value (not searched for in text) too."""
    driver = FakeDriver({"topics": "t1", "table.suffix": "${env:CONVEYOR_TEST_SUFFIX}"},
                        {"topics": "t1", "table.suffix": "q7"})
    driver.tasks = {0: TaskHandle(0, {"topics": "t1", "table.suffix": "q7", "name": "c1"})}
    server = ControlServer(driver=driver, host="127.0.0.1", port=0, tokens=TOKENS)  # type: ignore[arg-type]
    server.start()
    try:
        status, tasks = client_of(server)("GET", "/connectors/c1/tasks")
    finally:
        server.stop()
    assert status == 200 and tasks[0]["config"]["table.suffix"] == "${env:CONVEYOR_TEST_SUFFIX}"
    assert tasks[0]["config"]["topics"] == "t1"


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_connect_config_cannot_point_a_kafka_client_elsewhere(call, driver, method):
    body = {"topics": "t1,t2", "consumer.override.bootstrap.servers": "evil:9092"}
    status, doc = call(method, "/connectors/c1/config", body)
    assert status == 409 and "spec.config.consumer.override.bootstrap.servers" in doc["message"], doc
    assert driver.reconfigured is None


@pytest.mark.parametrize(("method", "path", "body", "status", "fragment"), [
    ("PUT", "/connectors/c1/config", {"name": "other", "topics": "t"}, 400,
     "Connector name configuration (other) doesn't match connector name in the URL (c1)"),
    ("PUT", "/connectors/c1/config", {"tasks.max": "many"}, 400, "tasks.max"),
    ("PUT", "/connectors/c2/config", {"topics": "t"}, 409, "Connector resource"),
    ("POST", "/connectors", {"name": "c2", "config": {}}, 409, "Connector resource"),
    ("DELETE", "/connectors/c1", None, 409, "kubectl delete"),
])
def test_what_the_connector_resource_owns_is_refused_with_a_message(call, driver, method, path, body, status,
                                                                     fragment):
    got, doc = call(method, path, body)
    assert got == status and doc["error_code"] == status and fragment in doc["message"], doc
    assert driver.reconfigured is None


def test_every_connect_endpoint_but_health_needs_the_admin_token(call):
    assert call("GET", "/connectors", token=None)[0] == 401
    assert call("GET", "/connectors", token=TOKENS.task)[0] == 403
    assert call("GET", "/health", token=None)[0] == 503  # the stand-in never started


def test_plugins_their_config_keys_and_validation(call):
    status, plugins = call("GET", "/connector-plugins")
    assert status == 200
    noop = next(p for p in plugins if p["class"] == "conveyor.connectors.noop.NoopSinkConnector")
    assert noop == {"class": "conveyor.connectors.noop.NoopSinkConnector", "type": "sink", "version": "0.0.0"}
    status, keys = call("GET", "/connector-plugins/NoopSink/config")
    assert status == 200 and {"topics", "errors.tolerance"} <= {k["name"] for k in keys}
    assert set(keys[0]) == {"name", "type", "required", "default_value", "importance", "documentation", "group",
                            "order", "width", "display_name", "dependents"}
    status, infos = call("PUT", "/connector-plugins/noop-sink/config/validate",
                         {"connector.class": "noop-sink", "topics": "t", "errors.tolerance": "sometimes"})
    assert status == 200 and infos["error_count"] == 1, infos
    assert set(infos) == {"name", "error_count", "groups", "configs"}
    bad = next(c for c in infos["configs"] if c["value"]["name"] == "errors.tolerance")
    assert bad["value"]["errors"] and bad["value"]["value"] == "sometimes"
    status, doc = call("PUT", "/connector-plugins/noop-sink/config/validate", {"connector.class": "archive-sink"})
    assert status == 400 and "does not match request type noop-sink" in doc["message"]
    status, doc = call("PUT", "/connector-plugins/Nope/config/validate", {"name": "v"})
    assert status == 500 and "Failed to find any class that implements Connector and which name matches Nope" \
        in doc["message"]


def test_malformed_json_is_a_500_on_connects_paths_as_connect_answers_and_a_400_on_conveyors(call):
    status, doc = call("PUT", "/connectors/c1/config", raw=b"{not json")
    assert status == 500 and doc["error_code"] == 500 and "malformed JSON" in doc["message"]
    status, doc = call("PUT", "/config", raw=b"{not json")
    assert status == 400 and "malformed JSON" in doc["message"]


def test_unknown_paths_and_methods_answer_in_jerseys_words(call):
    assert call("GET", "/no/such/path") == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert call("DELETE", "/") == (405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
    assert call("POST", "/connectors/c1") == (405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
