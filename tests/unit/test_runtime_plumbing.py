"""How the driver's inputs reach what it creates, without Kafka or Spark: the connector's
Kafka client properties (TLS/SASL) in every client configuration, Spark properties from
the driver's defaults, ``spec.spark.sparkConf`` and ``--conf``, and the command line's
parsing of them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Consumer
from typer.testing import CliRunner

from conveyor import spark_security
from conveyor.api import ConfigError
from conveyor.cli import app, parse_conf
from conveyor.control.protocol import TaskSpec
from conveyor.runtime.config.settings import (
    CLASSIC_PROTOCOL_ONLY,
    GroupProtocol,
    parse_sink_settings,
    parse_source_settings,
)
from conveyor.runtime.driver import driver as driver_module
from conveyor.runtime.driver.driver import Driver, DriverError, kafka_properties
from conveyor.runtime.driver.spark_session import (
    SparkConfRefused,
    decommission_executor,
    executor_id_of_pod,
    spark_properties,
)
from conveyor.runtime.driver import starting_offsets
from conveyor.runtime.kafka import group_lag as group_lag_module
from conveyor.runtime.kafka.clients import base_properties, client_config, describe, redacted
from conveyor.runtime.task.sink.runner import consumer_config, producer_config
from conveyor.runtime.task.source.runner import SourceTaskRunner
from conveyor.testing.runs import connector_manifest

SASL = {
    "bootstrap.servers": "kafka:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "conveyor",
    "sasl.password": "s3cret",
    "ssl.ca.location": "/etc/conveyor/secrets/kafka-ca/ca.crt",
}


def _spec(connector_config: dict[str, Any], kafka: dict[str, str] = SASL) -> TaskSpec:
    return TaskSpec(connector="orders", namespace="data", task_id=1, attempt=1, connector_class="noop-sink",
                    connector_config=connector_config, task_config={}, kafka=dict(kafka),
                    control_url="http://127.0.0.1:1")


# ---------------------------------------------------------------------------- client properties


def test_client_config_layers_base_then_runtime_then_overrides():
    config = client_config(SASL, {"group.id": "g", "sasl.username": "runtime"}, {"group.id": "user"})
    assert config["security.protocol"] == "SASL_SSL" and config["ssl.ca.location"].endswith("ca.crt")
    assert config["sasl.username"] == "runtime", "the runtime's settings come after the base"
    assert config["group.id"] == "user", "overrides come last"
    assert base_properties("h:1") == {"bootstrap.servers": "h:1"}, "a bare bootstrap string"
    with pytest.raises(ValueError, match="bootstrap.servers"):
        base_properties({"security.protocol": "SSL"})


def test_descriptions_and_redaction_never_show_the_password():
    assert describe(SASL) == "kafka:9093 (SASL_SSL, SCRAM-SHA-512 as 'conveyor')"
    assert describe("h:1") == "h:1"
    assert describe({"bootstrap.servers": "h:1", "security.protocol": "SSL"}) == "h:1 (SSL)"
    assert redacted(SASL)["sasl.password"] == "[hidden]"
    assert "s3cret" not in repr(_spec({})), "TaskSpec's repr leaves the Kafka properties out"


def test_sink_task_consumer_and_dead_letter_producer_get_tls_and_sasl_with_overrides_last():
    spec = _spec({"topics": "t", "consumer.override.sasl.username": "other", "consumer.override.max.poll.records": 5,
                  "consumer.override.session.timeout.ms": "6000", "producer.override.linger.ms": "50"})
    consumer = consumer_config(spec)
    for key in ("bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.password", "ssl.ca.location"):
        assert consumer[key] == SASL[key]
    assert consumer["group.id"] == "connect-orders"
    assert consumer["sasl.username"] == "other", "consumer.override.* is applied last"
    assert consumer["session.timeout.ms"] == "6000"
    default = consumer_config(_spec({"topics": "t"}))
    assert default["session.timeout.ms"] == 6_000, "a crashed task's partitions move after 6 s, not 45"
    assert "group.instance.id" not in default, "no static membership: a static member never leaves"
    assert "max.poll.records" not in consumer, "Java-only keys are not passed to librdkafka"
    producer = producer_config(spec)
    assert {k: producer[k] for k in SASL} == SASL
    assert producer["linger.ms"] == "50" and producer["client.id"] == "connector-dlq-producer-orders-1"


def test_a_kip_848_consumer_gets_none_of_the_classic_protocols_keys_and_librdkafka_takes_it():
    config = {"topics": "t", "consumer.override.group.protocol": "consumer"}
    settings = parse_sink_settings(config)
    assert settings.group_protocol is GroupProtocol.CONSUMER
    consumer = consumer_config(_spec(config), settings.group_protocol)
    assert consumer["group.protocol"] == "consumer" and consumer["group.id"] == "connect-orders"
    assert not set(CLASSIC_PROTOCOL_ONLY) & set(consumer)
    local = {k: v for k, v in consumer.items() if not k.startswith(("sasl.", "ssl.", "security."))}
    Consumer({**local, "bootstrap.servers": "127.0.0.1:9"}).close()  # refused at creation if a key were left
    with pytest.raises(ConfigError) as refused:
        parse_sink_settings({**config, "consumer.override.session.timeout.ms": "6000",
                             "consumer.override.partition.assignment.strategy": "range"})
    assert set(refused.value.errors) == {"consumer.override.session.timeout.ms",
                                         "consumer.override.partition.assignment.strategy"}
    assert "KIP-848" in refused.value.errors["consumer.override.session.timeout.ms"]
    assert parse_sink_settings({"topics": "t", "consumer.override.session.timeout.ms": "6000"}).group_protocol \
        is GroupProtocol.CLASSIC, "classic is the default, and keeps its keys"
    with pytest.raises(ConfigError) as bad:
        parse_sink_settings({"topics": "t", "consumer.override.group.protocol": "generic"})
    assert "consumer.override.group.protocol" in bad.value.errors


def test_source_task_producer_gets_tls_and_sasl_and_its_transactional_id():
    config = {"topic": "t", "exactly.once.support": "requested", "producer.override.acks": "all",
              "producer.override.security.protocol": "SASL_PLAINTEXT"}
    runner = SourceTaskRunner(_spec(config))
    runner.settings = parse_source_settings(config)
    producer = runner._producer_config()
    assert producer["sasl.password"] == "s3cret" and producer["ssl.ca.location"] == SASL["ssl.ca.location"]
    assert producer["transactional.id"] == "conveyor-data-orders-1"
    assert producer["security.protocol"] == "SASL_PLAINTEXT", "producer.override.* is applied last"
    assert producer["acks"] == "all"


def _sasl_manifest(**kafka_extra: Any):
    kafka = {"bootstrapServers": "kafka:9092",
             "authentication": {"type": "plain", "username": "conveyor",
                                "passwordSecret": {"name": "kafka-credentials", "key": "password"}},
             **kafka_extra}
    return connector_manifest("orders", "noop-sink", "unused:1", {"topics": "t"}, kafka=kafka)


def test_kafka_properties_read_the_mounted_password(tmp_path, monkeypatch):
    secret = tmp_path / "secrets" / "kafka-credentials" / "password"
    secret.parent.mkdir(parents=True)
    secret.write_text("conveyor-secret\n")
    monkeypatch.setenv("CONVEYOR_MOUNT_DIR", str(tmp_path))
    assert kafka_properties(_sasl_manifest().spec) == {
        "bootstrap.servers": "kafka:9092", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "conveyor", "sasl.password": "conveyor-secret",
    }


def test_a_password_secret_that_is_not_mounted_is_a_driver_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVEYOR_MOUNT_DIR", str(tmp_path))
    with pytest.raises(DriverError, match=r"spec.kafka.authentication.passwordSecret: .* is not mounted"):
        kafka_properties(_sasl_manifest().spec)


class _Recorder:
    """Stands in for the driver's Kafka-facing helpers and its task launcher."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.specs: list[TaskSpec] = []
        recorder = self
        monkeypatch.setattr(driver_module, "check_kafka", lambda kafka: self.calls.append(("check_kafka", kafka)))
        monkeypatch.setattr(driver_module, "prepare_sink_topics",
                            lambda kafka, config: self.calls.append(("prepare_sink_topics", kafka)))
        monkeypatch.setattr(starting_offsets, "settle",
                            lambda kafka, *args: self.calls.append(("settle", kafka)))

        class Launcher:
            def __init__(self, spark, spec_for, *args):
                self.spec_for = spec_for

            def launch(self, handle):
                recorder.specs.append(self.spec_for(handle))

        monkeypatch.setattr(driver_module, "TaskLauncher", Launcher)

        class GroupLag:
            def __init__(self, kafka, group, subscription):
                recorder.calls.append(("group_lag", kafka))

            def start(self):
                return self

            def unassigned(self, held):
                return {}

            def totals(self):
                return None

        monkeypatch.setattr(group_lag_module, "GroupLag", GroupLag)


def test_the_driver_hands_every_kafka_helper_and_every_task_the_full_properties(tmp_path, monkeypatch):
    secret = tmp_path / "secrets" / "kafka-credentials" / "password"
    secret.parent.mkdir(parents=True)
    secret.write_text("conveyor-secret")
    monkeypatch.setenv("CONVEYOR_MOUNT_DIR", str(tmp_path))
    recorder = _Recorder(monkeypatch)
    manifest = _sasl_manifest().model_copy()
    manifest = manifest.model_copy(update={"spec": manifest.spec.model_copy(update={"tasks_max": 2})})
    spark = SimpleNamespace(sparkContext=SimpleNamespace(master="local[2]", appName="a", applicationId="app-1"))
    driver = Driver(manifest, spark=spark, control_port=0)
    driver.start()
    try:
        expected = kafka_properties(manifest.spec)
        assert expected["sasl.password"] == "conveyor-secret"
        assert recorder.calls == [("check_kafka", expected), ("prepare_sink_topics", expected),
                                  ("settle", expected), ("group_lag", expected)]
        assert [s.kafka for s in recorder.specs] == [expected, expected]
        assert [s.task_id for s in recorder.specs] == [0, 1]
        assert driver.status()["spark"] == {"master": "local[2]", "app_name": "a", "app_id": "app-1"}
    finally:
        driver._stop_control_api()


# ---------------------------------------------------------------------------- Spark properties


def test_spark_properties_defaults():
    props = spark_properties("orders", 3)
    assert props == {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                     "spark.app.name": "conveyor-orders", "spark.master": "local[3]", "spark.task.maxFailures": "1",
                     "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                     "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1", **spark_security.ENFORCED}


def test_a_local_driver_jvm_compiles_with_c1_unless_its_options_set_the_jit():
    assert spark_properties("o", 1, None, None, {"spark.driver.extraJavaOptions": "-Dx=1"})[
        "spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1 -Dx=1"
    kept = "-XX:-TieredCompilation"
    assert spark_properties("o", 1, None, None, {"spark.driver.extraJavaOptions": kept})[
        "spark.driver.extraJavaOptions"] == kept
    assert "spark.driver.extraJavaOptions" not in spark_properties("o", 1, "k8s://https://kubernetes.default.svc")


def test_spark_rpc_security_is_applied_last_and_cannot_be_changed():
    for master in ("local[2]", "k8s://https://kubernetes.default.svc"):
        props = spark_properties("o", 1, master, {"spark.custom": "1"}, {"spark.authenticate": "TRUE"})
        assert {k: props[k] for k in spark_security.ENFORCED} == spark_security.ENFORCED, "the same value passes"
    for key, value in (("spark.authenticate", "false"), ("spark.network.crypto.cipher", "AES/CTR/NoPadding"),
                       ("spark.network.crypto.authEngineVersion", "1"), ("spark.network.crypto.saslFallback", "true"),
                       ("spark.network.crypto.enabled", "false")):
        with pytest.raises(SparkConfRefused, match=f"--conf {key}={value}: refused"):
            spark_properties("o", 1, None, None, {key: value})
        with pytest.raises(SparkConfRefused, match=f"spec.spark.sparkConf {key}={value}: refused"):
            spark_properties("o", 1, None, {key: value})


def test_run_refuses_a_conf_that_turns_spark_rpc_security_off(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: conveyor.dev/v1alpha1\nkind: Connector\nmetadata: {name: a}\n"
                    "spec: {class: noop-sink, kafka: {bootstrapServers: 'k:1'}, config: {topics: t}}\n")
    result = CliRunner().invoke(app, ["run", str(path), "--conf", "spark.network.crypto.enabled=false"])
    assert result.exit_code == 2
    assert "--conf spark.network.crypto.enabled=false: refused" in result.output


def test_a_local_master_binds_to_loopback_unless_told_otherwise():
    for master in ("local", "local[2]", "local[*]", "local[2,3]"):
        props = spark_properties("orders", 1, master)
        assert (props["spark.driver.host"], props["spark.driver.bindAddress"]) == ("127.0.0.1", "127.0.0.1"), master
    chosen = spark_properties("orders", 1, None, {"spark.driver.bindAddress": "0.0.0.0"}, {"spark.driver.host": "h"})
    assert (chosen["spark.driver.host"], chosen["spark.driver.bindAddress"]) == ("h", "0.0.0.0")
    cluster = spark_properties("orders", 1, "k8s://https://kubernetes.default.svc")
    assert "spark.driver.host" not in cluster and "spark.driver.bindAddress" not in cluster
    assert "spark.driver.host" not in spark_properties("orders", 1, "localhost-cluster://x")


def test_executors_on_a_cluster_give_every_task_a_slot():
    k8s = "k8s://https://kubernetes.default.svc"
    assert spark_properties("o", 2, k8s, {"spark.executor.instances": "1"})["spark.executor.instances"] == "2"
    assert spark_properties("o", 3, k8s)["spark.executor.instances"] == "3", "Spark's default of 2 is too few"
    cores = {"spark.executor.instances": "1", "spark.executor.cores": "4"}
    assert spark_properties("o", 4, k8s, cores)["spark.executor.instances"] == "1"
    assert spark_properties("o", 5, k8s, cores)["spark.executor.instances"] == "2"
    cpus = {**cores, "spark.task.cpus": "2"}
    assert spark_properties("o", 5, k8s, cpus)["spark.executor.instances"] == "3"
    assert spark_properties("o", 1, k8s, {"spark.executor.instances": "4"})["spark.executor.instances"] == "4"
    dynamic = spark_properties("o", 9, k8s, {"spark.dynamicAllocation.enabled": "true"})
    assert "spark.executor.instances" not in dynamic
    assert "spark.executor.instances" not in spark_properties("o", 9, "local[2]")


def test_spark_conf_then_cli_conf_then_master_win_in_that_order():
    # (the manifest refuses spark.app.name and spark.master in sparkConf; spark_properties does not judge them)
    spark_conf = {"spark.app.name": "from-manifest", "spark.executor.memory": "2g", "spark.ui.enabled": "true",
                  "spark.master": "k8s://https://manifest"}
    cli = {"spark.app.name": "from-cli", "spark.kubernetes.namespace": "data",
           "spark.master": "k8s://https://kubernetes.default.svc"}
    props = spark_properties("orders", 2, None, spark_conf, cli)
    assert props["spark.app.name"] == "from-cli"
    assert props["spark.executor.memory"] == "2g" and props["spark.ui.enabled"] == "true"
    assert props["spark.kubernetes.namespace"] == "data"
    assert props["spark.master"] == "k8s://https://kubernetes.default.svc", "--conf spark.master without --master"
    assert props["spark.task.maxFailures"] == "4", "an executor lost on a cluster is retried"
    assert spark_properties("orders", 2, None, spark_conf)["spark.master"] == "k8s://https://manifest"
    assert spark_properties("orders", 2, "local[1]", spark_conf, cli)["spark.master"] == "local[1]", "--master wins"
    assert spark_properties("o", 1, None, {"spark.task.maxFailures": "8"})["spark.task.maxFailures"] == "8"


def test_the_driver_uses_spec_spark_conf_and_its_own_spark_conf(monkeypatch):
    manifest = connector_manifest("orders", "noop-sink", "k:1", {"topics": "t"},
                                  spark={"sparkConf": {"spark.ui.showConsoleProgress": "true", "spark.task.maxFailures": "2"}})
    seen: dict[str, str] = {}

    class Builder:
        def config(self, key, value):
            seen[key] = value
            return self

        def getOrCreate(self):
            context = SimpleNamespace(master=seen["spark.master"], appName=seen["spark.app.name"],
                                      applicationId="local-1", setLogLevel=lambda level: None)
            return SimpleNamespace(sparkContext=context)

    import pyspark.sql

    monkeypatch.setattr(pyspark.sql.SparkSession, "builder", Builder())
    driver = Driver(manifest, spark_conf={"spark.task.maxFailures": "3", "spark.master": "local[5]"})
    driver._ensure_spark(1)
    assert seen["spark.task.maxFailures"] == "3" and seen["spark.ui.showConsoleProgress"] == "true"
    assert seen["spark.authenticate"] == "true" and seen["spark.network.crypto.enabled"] == "true"
    assert driver.spark_info == {"master": "local[5]", "app_name": "conveyor-orders", "app_id": "local-1"}
    assert driver.spark is not None


def test_executor_ids_come_from_spark_executor_pod_names():
    assert executor_id_of_pod("orders-exec-12") == "12"
    assert executor_id_of_pod("orders-exec-exec-3") == "3"
    assert executor_id_of_pod("orders-driver-7d9f8b6c5-x2x8q") is None
    assert executor_id_of_pod("orders-exec-") is None


def test_a_drain_decommissions_the_pods_executor_before_its_tasks_relaunch(monkeypatch):
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(driver_module, "decommission_executor", lambda spark, eid, reason: calls.append((eid, reason)))
    d = object.__new__(Driver)
    d._spark = SimpleNamespace()
    d._decommission_pod("orders-exec-4")
    d._decommission_pod("orders-driver-abc-123")  # the driver's own pod: nothing to decommission
    assert calls == [("4", "pod orders-exec-4 is drained")]


def test_decommission_is_a_no_op_on_a_local_master():
    local = SimpleNamespace(sparkContext=SimpleNamespace(master="local[2]"))
    assert decommission_executor(local, "1", "test") is False


@pytest.mark.parametrize(("code", "body", "exit_code"), [
    (409, b'{"error": "connector is stopping"}', 0),   # the stop path commits every task
    (500, b'{"error": "boom"}', 1),
    (200, b'{"tasks": [], "complete": true}', 0),
    (200, b'{"tasks": [{"id": 0, "drained": false}], "complete": false}', 1),
])
def test_drain_command_exit_codes_for_a_prestop_hook(code, body, exit_code):
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = CliRunner().invoke(app, ["drain", "--url", f"http://127.0.0.1:{server.server_port}",
                                          "--pod", "orders-exec-1", "--timeout", "5"])
    finally:
        server.shutdown()
    assert result.exit_code == exit_code, result.output


def test_drain_command_fails_when_the_driver_is_unreachable():
    result = CliRunner().invoke(app, ["drain", "--url", "http://127.0.0.1:9", "--pod", "p", "--timeout", "1"])
    assert result.exit_code == 1 and "cannot reach the driver" in result.output


def test_conf_parsing():
    assert parse_conf(["a=1", "b=x=y", "a=2"]) == {"a": "2", "b": "x=y"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_conf(["novalue"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_conf(["=v"])


def test_run_rejects_a_malformed_conf(tmp_path):
    result = CliRunner().invoke(app, ["run", str(tmp_path / "m.yaml"), "--conf", "spark.master"])
    assert result.exit_code == 2 and "expected KEY=VALUE" in result.output


def test_restart_command_needs_a_target_and_rejects_mixtures():
    runner = CliRunner()
    assert runner.invoke(app, ["restart"]).exit_code == 2
    assert runner.invoke(app, ["restart", "2", "--all"]).exit_code == 2
    assert runner.invoke(app, ["restart", "--all", "--connector"]).exit_code == 2


def test_harness_broker_has_a_sasl_plain_listener(tmp_path):
    from conveyor.testing.kafka import SASL_PLAIN_USERS, KafkaBroker

    broker = KafkaBroker()
    broker.workdir, broker.port, broker.controller_port, broker.sasl_port = tmp_path, 9092, 9093, 9094
    props = broker.server_properties()
    assert props["listeners"].endswith(",SASL_PLAINTEXT://127.0.0.1:9094")
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    jaas = props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert all(f'user_{u}="{p}"' in jaas for u, p in SASL_PLAIN_USERS.items()) and jaas.endswith(";")
    broker._bootstrap = "127.0.0.1:9092"
    assert broker.sasl_plain().client_properties() == {
        "bootstrap.servers": "127.0.0.1:9094", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "conveyor", "sasl.password": SASL_PLAIN_USERS["conveyor"],
    }
    plain = KafkaBroker(sasl_plain=False)
    plain.workdir, plain.port, plain.controller_port = tmp_path, 9092, 9093
    assert "SASL" not in plain.server_properties()["listeners"]
