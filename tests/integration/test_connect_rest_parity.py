"""Kafka Connect's REST API, side by side: the same requests to a real Apache Kafka Connect 4.1.1
worker running ``FileStreamSinkConnector`` and to a Conveyor driver running ``file-sink``, on
the same broker and topic, in the same order; status codes, document shapes (keys and value
types, recursively), state names, ``error_code`` and error messages must agree.

What differs on purpose is listed in :data:`KNOWN_DIFFERENCES` (and in
docs/kafka-connect-compat.md); nothing else may.
"""

from __future__ import annotations

import http.client
import json
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest

from conveyor.testing.runs import connector_manifest, produce, running_connector, wait_until

pytestmark = pytest.mark.integration

#: (method, path) -> what is compared and why not more. "status": only the status code;
#: "shape": status and shape, not values or messages; "none": the request is sent to both
#: and the answers are printed, nothing compared.
KNOWN_DIFFERENCES: dict[tuple[str, str], tuple[str, str]] = {
    ("PUT", "/connectors/{c}/topics/reset"): (
        "none", ("Conveyor answers 403 as a worker with topic.tracking.allow.reset=false: its topics are the "
        "ones its tasks hold")),
    ("DELETE", "/connectors/{c}"): ("none", "deleting a connector is the Connector resource's (409 here)"),
    ("POST", "/connectors"): ("none", "creating a connector is the Connector resource's (409 here)"),
    ("PATCH", "/connectors/{c}/offsets#malformed"): (
        "status", "both 500 as Connect answers; the message is Jackson's there, Python's json here"),
    ("GET", "/connector-plugins/{plugin}/config"): (
        "shape", "each runtime documents its own keys; Connect's `group` may be null"),
    ("PUT", "/connector-plugins/{plugin}/config/validate"): ("shape", "as above: the keys are each runtime's own"),
    ("GET", "/connector-plugins"): ("shape", "each runtime lists its own plugins"),
    ("GET", "/connector-plugins?connectorsOnly=false"): ("shape", "as above, with converters, transformations, "
                                                                  "predicates"),
    ("GET", "/admin/loggers"): ("status", "each runtime has its own loggers (the root logger in both: checked apart)"),
}
LOGGERS = ("org.apache.kafka.connect.file", "conveyor.connectors.file")
"""A logger of each side's file connectors, whose level the test changes and sets back."""

CONNECT_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return None if value is None else type(value).__name__


def _shape_diffs(connect: Any, conveyor: Any, where: str = "$") -> list[str]:
    """Where two shapes differ; ``None`` (a JSON null) and an empty list match anything."""
    if connect is None or conveyor is None or connect == [] or conveyor == []:
        return []
    if isinstance(connect, dict) and isinstance(conveyor, dict):
        diffs = [(f"{where}: keys only in Connect {sorted(connect.keys() - conveyor.keys())}, "
                 f"only in Conveyor {sorted(conveyor.keys() - connect.keys())}")] if connect.keys() != conveyor.keys() \
            else []
        return diffs + [d for k in connect.keys() & conveyor.keys() for d in _shape_diffs(connect[k], conveyor[k],
                                                                                        f"{where}.{k}")]
    if isinstance(connect, list) and isinstance(conveyor, list):
        return _shape_diffs(connect[0], conveyor[0], f"{where}[0]")
    return [] if connect == conveyor else [f"{where}: {connect} in Connect, {conveyor} in Conveyor"]


def _states(doc: Any) -> Any:
    if isinstance(doc, dict) and "connector" in doc and isinstance(doc["connector"], dict):
        return doc["connector"].get("state"), [t.get("state") for t in doc.get("tasks", [])]
    return None


class Side:
    """One REST endpoint under test; answers normalised to ``{c}`` / ``{file}`` placeholders."""

    def __init__(self, base_url: str, name: str, file: str, token: str | None = None) -> None:
        self.url, self.name, self.file, self.token = urlsplit(base_url), name, file, token

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        path = path.replace("{c}", self.name)
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=120)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        text = text.replace(self.name, "{c}").replace(self.file, "{file}")
        try:
            return response.status, json.loads(text) if text else None
        except ValueError:
            return response.status, text

    def state(self) -> Any:
        return _states(self.request("GET", "/connectors/{c}/status")[1])


class Comparison:
    def __init__(self, connect: Side, conveyor: Side) -> None:
        self.connect, self.conveyor = connect, conveyor
        self.failures: list[str] = []
        self.compared = 0

    def check(self, method: str, path: str, body: Any = None, raw: bytes | None = None, key: str | None = None,
              plugin: tuple[str, str] | None = None) -> tuple[Any, Any]:
        """Send to both; record every disagreement that is not a known difference."""
        sides = []
        for side, plugin_name in ((self.connect, plugin and plugin[0]), (self.conveyor, plugin and plugin[1])):
            sent = path.replace("{plugin}", plugin_name) if plugin_name else path
            sides.append(side.request(method, sent, body, raw))
        (connect_status, connect_doc), (conveyor_status, conveyor_doc) = sides
        label = f"{method} {path}" + (f" [{key}]" if key else "")
        level = KNOWN_DIFFERENCES.get((method, path + (f"#{key}" if key else "")), ("all", ""))[0]
        print(f"{label}\n  Connect  {connect_status} {json.dumps(connect_doc)[:300]}\n"
              f"  Conveyor {conveyor_status} {json.dumps(conveyor_doc)[:300]}")
        self.compared += 1
        if level == "none":
            return connect_doc, conveyor_doc
        if connect_status != conveyor_status:
            self.failures.append(f"{label}: status {connect_status} (Connect) != {conveyor_status} (Conveyor)")
            return connect_doc, conveyor_doc
        if level == "status":
            return connect_doc, conveyor_doc
        self.failures += [f"{label}: {d}" for d in _shape_diffs(_shape(connect_doc), _shape(conveyor_doc))]
        if level == "shape":
            return connect_doc, conveyor_doc
        if _states(connect_doc) != _states(conveyor_doc):
            self.failures.append(f"{label}: states {_states(connect_doc)} != {_states(conveyor_doc)}")
        if isinstance(connect_doc, dict) and "error_code" in connect_doc:
            if connect_doc != conveyor_doc:
                self.failures.append(f"{label}: error {connect_doc} != {conveyor_doc}")
        elif isinstance(connect_doc, dict) and "message" in connect_doc and connect_doc != conveyor_doc:
            self.failures.append(f"{label}: message {connect_doc} != {conveyor_doc}")
        return connect_doc, conveyor_doc

    def settle(self, state: Any, timeout_s: float = 60.0) -> None:
        """Wait until both report ``state`` (``(connector state, [task states])``)."""
        for side in (self.connect, self.conveyor):
            wait_until(lambda side=side: side.state() == state, timeout_s=timeout_s,
                       message=f"{side.url.geturl()} reaching {state}")


def _connector_config(topic: str, file: str) -> dict[str, str]:
    return {"topics": topic, "file": file, "tasks.max": "1", "offset.flush.interval.ms": "1000",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false"}


def _line_count(path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


def test_the_same_requests_get_the_same_answers_from_kafka_connect_and_conveyor(
    connect_worker, kafka_bootstrap, topic_factory, spark, tmp_path
):
    topic = topic_factory(partitions=1)
    suffix = uuid.uuid4().hex[:6]
    connect_name, conveyor_name = f"parity-k{suffix}", f"parity-c{suffix}"
    connect_file, conveyor_file = tmp_path / "connect.txt", tmp_path / "conveyor.txt"
    produce(kafka_bootstrap, topic, [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(10)])

    connect_worker.put_connector(connect_name, {"connector.class": CONNECT_SINK,
                                                **_connector_config(topic, str(connect_file))})
    manifest = connector_manifest(conveyor_name, "file-sink", kafka_bootstrap,
                                  {k: v for k, v in _connector_config(topic, str(conveyor_file)).items()
                                   if k != "tasks.max"})
    try:
        with running_connector(manifest, spark) as driver:
            both = Comparison(Side(connect_worker.url, connect_name, str(connect_file)),
                              Side(driver.control_url, conveyor_name, str(conveyor_file), driver.control_tokens.admin))
            _converse(both, topic, connect_file, conveyor_file)
    finally:
        connect_worker.delete_connector(connect_name)
    assert both.compared >= 50
    assert not both.failures, "Kafka Connect and Conveyor disagree:\n" + "\n".join(both.failures)


def _converse(both: Comparison, topic: str, connect_file, conveyor_file) -> None:
    running = ("RUNNING", ["RUNNING"])
    both.settle(running)
    wait_until(lambda: _line_count(connect_file) == 10 and _line_count(conveyor_file) == 10, message="10 lines each")
    assert connect_file.read_text() == conveyor_file.read_text()
    # offsets are committed every second on both sides
    wait_until(lambda: all(side.request("GET", "/connectors/{c}/offsets")[1] ==
                           {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                                         "offset": {"kafka_offset": 10}}]}
                           for side in (both.connect, both.conveyor)), message="offset 10 committed by both")

    for path in ("/", "/health", "/connectors", "/connectors?expand=status", "/connectors?expand=info",
                 "/connectors?expand=status&expand=info", "/connectors/{c}", "/connectors/{c}/config",
                 "/connectors/{c}/status", "/connectors/{c}/tasks", "/connectors/{c}/tasks/0/status",
                 "/connectors/{c}/tasks/99/status", "/connectors/{c}/topics", "/connectors/{c}/offsets",
                 "/connectors/nope", "/connectors/nope/status", "/connectors/nope/config", "/connectors/nope/tasks",
                 "/connectors/nope/offsets", "/connectors/nope/tasks/0/status", "/no/such/path"):
        both.check("GET", path)
    both.check("GET", "/connector-plugins/{plugin}/config", plugin=("FileStreamSinkConnector", "file-sink"))
    both.check("GET", "/connector-plugins")
    connect_plugins, conveyor_plugins = both.check("GET", "/connector-plugins?connectorsOnly=false")
    assert {p["type"] for p in conveyor_plugins} == {p["type"] for p in connect_plugins} >= {
        "sink", "source", "converter", "header_converter", "transformation", "predicate"}
    _loggers(both)
    validate = {"topics": topic, "file": "/tmp/validate.txt", "name": "v"}
    both.check("PUT", "/connector-plugins/{plugin}/config/validate", plugin=("FileStreamSinkConnector", "file-sink"),
               body={**validate, "connector.class": CONNECT_SINK}, key="valid")

    change = {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]}
    both.check("PATCH", "/connectors/{c}/offsets", change, key="running")
    both.check("DELETE", "/connectors/{c}/offsets", key="running")
    both.check("PATCH", "/connectors/{c}/offsets", {})
    both.check("PATCH", "/connectors/{c}/offsets", {"offsets": []}, key="empty")
    both.check("PATCH", "/connectors/{c}/offsets", raw=b"{not json", key="malformed")
    both.check("PATCH", "/connectors/nope/offsets", {}, key="unknown")
    both.check("DELETE", "/", key="wrong method")
    both.check("POST", "/connectors/{c}", key="wrong method")
    both.check("POST", "/connectors", {"name": "x", "config": {}})

    both.check("PUT", "/connectors/{c}/pause")
    both.check("PUT", "/connectors/nope/pause")
    both.settle(("PAUSED", ["PAUSED"]))
    both.check("GET", "/connectors/{c}/status", key="paused")
    both.check("PUT", "/connectors/{c}/resume")
    both.settle(running)
    both.check("POST", "/connectors/{c}/restart")
    both.settle(running)
    both.check("POST", "/connectors/{c}/restart?includeTasks=true&onlyFailed=true")
    both.settle(running)
    both.check("POST", "/connectors/nope/restart")
    both.check("POST", "/connectors/nope/restart?includeTasks=true")
    both.check("POST", "/connectors/{c}/tasks/0/restart")
    both.settle(running)
    both.check("POST", "/connectors/{c}/tasks/99/restart")
    both.check("POST", "/connectors/nope/tasks/0/restart")
    both.check("PUT", "/connectors/{c}/topics/reset")

    both.check("PUT", "/connectors/{c}/stop")
    both.settle(("STOPPED", []))
    both.check("GET", "/connectors/{c}/status", key="stopped")
    both.check("GET", "/connectors/{c}", key="stopped")
    both.check("GET", "/connectors/{c}/tasks", key="stopped")
    both.check("PATCH", "/connectors/{c}/offsets", change, key="stopped")
    assert both.connect.request("GET", "/connectors/{c}/offsets")[1]["offsets"][0]["offset"] == {"kafka_offset": 5}
    for partition, key in (({"kafka_topic": topic}, "no kafka_partition"),
                           ({"kafka_topic": topic, "kafka_partition": "x"}, "partition x"),
                           (None, "null partition")):
        both.check("PATCH", "/connectors/{c}/offsets", {"offsets": [{"partition": partition, "offset": None}]}, key=key)
    both.check("PATCH", "/connectors/{c}/offsets",
               {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"foo": 1}}]},
               key="offset without kafka_offset")
    both.check("PATCH", "/connectors/{c}/offsets",
               {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                             "offset": {"kafka_offset": "y"}}]}, key="offset y")
    both.check("GET", "/connectors/{c}/offsets", key="altered")
    both.check("DELETE", "/connectors/{c}/offsets", key="stopped")
    both.check("GET", "/connectors/{c}/offsets", key="reset")
    both.check("PUT", "/connectors/{c}/resume", key="stopped")
    both.settle(running)
    time.sleep(1)
    both.check("GET", "/connectors/{c}/status", key="resumed")
    both.check("DELETE", "/connectors/{c}")


def _loggers(both: Comparison) -> None:
    """``/admin/loggers`` (KIP-495, KIP-976) on both: a level read, set, read back, refused."""
    connect_all, conveyor_all = both.check("GET", "/admin/loggers")
    for doc in (connect_all, conveyor_all):
        assert set(doc["root"]) == {"level", "last_modified"} and doc["root"]["level"] in ("INFO", "WARN"), doc
    both.check("GET", "/admin/loggers/{plugin}", plugin=("no.such.logger", "no.such.logger"), key="unknown")
    changed = both.check("PUT", "/admin/loggers/{plugin}", {"level": "DEBUG"}, plugin=LOGGERS)
    assert [LOGGERS[0] in changed[0], LOGGERS[1] in changed[1]] == [True, True], changed
    read = both.check("GET", "/admin/loggers/{plugin}", plugin=LOGGERS, key="debug")
    assert [doc["level"] for doc in read] == ["DEBUG", "DEBUG"] and all(doc["last_modified"] for doc in read), read
    listed = both.connect.request("GET", "/admin/loggers")[1], both.conveyor.request("GET", "/admin/loggers")[1]
    assert [doc[name]["level"] for doc, name in zip(listed, LOGGERS)] == ["DEBUG", "DEBUG"], listed
    both.check("PUT", "/admin/loggers/{plugin}", {"level": "LOUD"}, plugin=LOGGERS, key="invalid level")
    both.check("PUT", "/admin/loggers/{plugin}", {}, plugin=LOGGERS, key="no level")
    both.check("PUT", "/admin/loggers/{plugin}?scope=cluster", {"level": "INFO"}, plugin=LOGGERS)
    both.check("PUT", "/admin/loggers/{plugin}", {"level": "INFO"}, plugin=LOGGERS, key="back to INFO")
