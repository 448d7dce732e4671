"""Client overrides checked by librdkafka itself before any task makes its client (issue 35,
item 4): a typo or a Java-only property fails the driver's start naming the key, never a task
on its executor."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conveyor.runtime.driver.driver import Driver, DriverError
from conveyor.runtime.kafka.client_overrides import client_override_errors
from conveyor.testing.runs import connector_manifest


def test_librdkafka_refusals_are_named_with_the_librdkafka_setting_for_a_java_property():
    errors = client_override_errors({
        "consumer.override.fetch.max.wait.ms": "100",      # Java's name
        "consumer.override.fetch.wait.max.ms": "100",      # librdkafka's
        "consumer.override.max.poll.records": "50",        # read by the runtime
        "producer.override.buffer.memory": "33554432",
        "producer.override.acks": "sometimes",
        "producer.override.linger.ms": 5,
        "producer.override.enable.idempotence": True,
        "admin.override.request.timeout.ms": "3000",
        "admin.override.retries.backoff": "1",
        "topics": "t",
    })
    assert set(errors) == {"consumer.override.fetch.max.wait.ms", "producer.override.buffer.memory",
                           "producer.override.acks", "admin.override.retries.backoff"}
    assert errors["consumer.override.fetch.max.wait.ms"] == (
        'librdkafka refuses it: No such configuration property: "fetch.max.wait.ms" '
        "(librdkafka's name is fetch.wait.max.ms)")
    assert "queue.buffering.max.kbytes" in errors["producer.override.buffer.memory"]
    assert errors["producer.override.acks"].startswith("librdkafka refuses it: Invalid value for configuration")


def test_a_refused_value_is_not_repeated_in_the_message():
    message = client_override_errors({"consumer.override.auto.offset.reset": "hunter2-secret"})[
        "consumer.override.auto.offset.reset"]
    assert "hunter2" not in message and '"auto.offset.reset"' in message


def test_the_driver_refuses_to_start_before_it_reaches_kafka(monkeypatch):
    manifest = connector_manifest("overrides", "noop-sink", "127.0.0.1:9", {
        "topics": "t", "consumer.override.fetch.max.wait.ms": "100"})
    spark = SimpleNamespace(sparkContext=SimpleNamespace(master="local[1]", appName="a", applicationId="app-1"))
    with pytest.raises(DriverError) as raised:
        Driver(manifest, spark=spark, control_port=0).start()
    assert "spec.config.consumer.override.fetch.max.wait.ms: librdkafka refuses it" in str(raised.value)
