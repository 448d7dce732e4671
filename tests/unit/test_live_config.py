"""What ``PUT /config`` takes live, and what would move credentials (issue 13 §2)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conveyor.manifest import ConnectorSpec
from conveyor.runtime.rest.live_config import is_connection_key, live_change_refusal, uses_credentials


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
    assert "holds credentials" in live_change_refusal(running, written, resolved)
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

    from conveyor.control.auth import ControlTokens
    from conveyor.runtime.rest.server import ControlServer

    monkeypatch.setenv("CONVEYOR_MOUNT_DIR", str(tmp_path))
    calls: list[ConnectorSpec] = []
    driver = SimpleNamespace(manifest=SimpleNamespace(spec=spec()), metrics_registry=None,
                             reconfigure=lambda s, written=None: calls.append(s) or {"name": "x"})
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


# ---------------------------------------------------------------- issue 28: nothing that reaches credentials

SASL = {"bootstrapServers": "kafka:9093", "authentication": {
    "type": "scram-sha-512", "username": "conveyor", "passwordSecret": {"name": "kafka-user", "key": "password"}}}
TLS = {"bootstrapServers": "kafka:9093", "tls": {"trustedCertificate": {"name": "kafka-ca", "key": "ca.crt"}}}
PLAIN_CONFIG = {"topics": "orders", "connection.url": "postgresql://db/app"}
CONNECTION_KEYS = ["consumer.override.bootstrap.servers", "producer.override.bootstrap.servers",
                   "admin.override.bootstrap.servers", "bootstrap.servers", "consumer.override.security.protocol",
                   "producer.override.sasl.mechanism", "consumer.override.sasl.jaas.config",
                   "producer.override.ssl.ca.location", "consumer.override.ssl.endpoint.identification.algorithm",
                   "consumer.override.metadata.broker.list",
                   "producer.override.enable.ssl.certificate.verification"]


@pytest.mark.parametrize("key", CONNECTION_KEYS)
def test_kafka_connection_keys_decide_where_credentials_go(key):
    assert is_connection_key(key)


@pytest.mark.parametrize("key", ["consumer.override.max.poll.records", "producer.override.linger.ms",
                                 "connection.url", "topics", "errors.deadletterqueue.topic.name",
                                 "consumer.override.client.id", "value.converter.schema.registry.url"])
def test_other_keys_are_not_connection_keys(key):
    assert not is_connection_key(key)


class ControlApi:
    """A real control server (uvicorn on 127.0.0.1) in front of a stand-in driver that records
    what reaches ``reconfigure``."""

    def __init__(self, running: ConnectorSpec) -> None:
        from conveyor.control.auth import ControlTokens
        from conveyor.runtime.rest.server import ControlServer

        self.calls: list[ConnectorSpec] = []
        self.driver = SimpleNamespace(manifest=SimpleNamespace(spec=running), metrics_registry=None,
                                      reconfigure=lambda s, written=None: self.calls.append(s) or {"name": "x"})
        self.tokens = ControlTokens.generate()
        self.server = ControlServer(self.driver, "127.0.0.1", 0, self.tokens)  # type: ignore[arg-type]

    def put(self, body: dict) -> tuple[int, dict]:
        import http.client
        import json

        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        conn.request("PUT", "/config", body=json.dumps(body),
                     headers={"Authorization": f"Bearer {self.tokens.admin}"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())


@pytest.fixture
def control_api(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVEYOR_MOUNT_DIR", str(tmp_path))
    started: list[ControlApi] = []

    def start(running: ConnectorSpec) -> ControlApi:
        api = ControlApi(running)
        api.server.start()
        started.append(api)
        return api

    yield start
    for api in started:
        api.server.stop()


def _dump(s: ConnectorSpec) -> dict:
    return s.model_dump(by_alias=True, mode="json", exclude_none=True)


@pytest.mark.parametrize("key", CONNECTION_KEYS)
def test_put_config_refuses_a_kafka_connection_key_and_says_to_roll(control_api, key):
    """A plain connector (no credentials of its own) still may not point its clients elsewhere:
    they carry spec.kafka's settings."""
    api = control_api(spec(config=PLAIN_CONFIG))
    status, body = api.put(_dump(spec(config={**PLAIN_CONFIG, key: "evil:9092"})))
    assert status == 409 and f"spec.config.{key}" in body["message"] and "roll the driver" in body["message"]
    assert "evil" not in body["message"] and api.calls == []


def test_put_config_refuses_removing_a_kafka_connection_key(control_api):
    key = "consumer.override.security.protocol"
    api = control_api(spec(config={**PLAIN_CONFIG, key: "SSL"}))
    status, body = api.put(_dump(spec(config=PLAIN_CONFIG)))
    assert status == 409 and key in body["message"] and api.calls == []


@pytest.mark.parametrize("kafka", [SASL, TLS], ids=["authentication", "tls"])
def test_put_config_refuses_any_config_change_of_a_connector_with_kafka_credentials(control_api, kafka):
    api = control_api(spec(kafka=kafka, config=PLAIN_CONFIG))
    status, body = api.put(_dump(spec(kafka=kafka, config={**PLAIN_CONFIG, "batch.size": 10})))
    assert status == 409 and "holds credentials" in body["message"] and "roll the driver" in body["message"]
    assert api.calls == []
    # what is not config (tasksMax, state) stays live
    status, _ = api.put(_dump(spec(kafka=kafka, config=PLAIN_CONFIG, tasksMax=3)))
    assert status == 200 and [c.tasks_max for c in api.calls] == [3]


def test_put_config_takes_a_harmless_change_of_a_connector_without_credentials_live(control_api):
    api = control_api(spec(config=PLAIN_CONFIG))
    new = {**PLAIN_CONFIG, "topics": "orders,returns", "consumer.override.max.poll.records": 100}
    status, _ = api.put(_dump(spec(config=new)))
    assert status == 200 and [c.config for c in api.calls] == [new]


def test_put_config_re_resolves_env_references_and_takes_an_unchanged_config(control_api, monkeypatch):
    """The operator sends the Connector's spec as written: ${env:...} resolved again equals the
    running value, so a tasksMax change is live and the driver gets the resolved value."""
    monkeypatch.setenv("CONVEYOR_TEST_PG_URL", "postgresql://db/app")
    api = control_api(spec(config=PLAIN_CONFIG))
    written = {**PLAIN_CONFIG, "connection.url": "${env:CONVEYOR_TEST_PG_URL}"}
    status, body = api.put(_dump(spec(config=written, tasksMax=2)))
    assert status == 200, body
    assert [(c.tasks_max, c.config) for c in api.calls] == [(2, PLAIN_CONFIG)]


def test_the_operator_gets_the_409_that_makes_it_roll_the_driver(control_api):
    """conveyor_operator.reconcile.push.push_config rolls the Deployment on DriverRefused(409)."""
    from conveyor_operator.reconcile.render import spec_dict

    from conveyor.control.client import DriverClient, DriverRefused

    api = control_api(spec(kafka=SASL, config=PLAIN_CONFIG))
    client = DriverClient(f"http://127.0.0.1:{api.server.port}", token=api.tokens.admin)
    connector = SimpleNamespace(spec=spec(kafka=SASL, config={**PLAIN_CONFIG, "topics": "returns"}))
    with pytest.raises(DriverRefused) as refused:
        client.put_config(spec_dict(connector))  # type: ignore[arg-type]
    assert refused.value.status == 409 and "roll the driver" in refused.value.message
