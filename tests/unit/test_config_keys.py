"""Keys no component reads are reported with the closest known key (issue 11, "first hour" §4)."""

import logging

import pytest

from conveyor.connectors.archive.config import ArchiveSinkConfig
from conveyor.connectors.postgres.config import PostgresSinkConfig
from conveyor.runtime.config import keys as config_keys
from conveyor.runtime.config.settings import SinkSettings
from conveyor.runtime.config.validation import PreflightError, connector_class, validate_config

KNOWN = config_keys.model_keys(PostgresSinkConfig) | config_keys.model_keys(SinkSettings)


def test_misspelt_keys_get_the_closest_known_one():
    assert config_keys.unknown_keys({"conection.url": "x", "topic": "t", "zzz": 1}, KNOWN) == {
        "conection.url": "connection.url", "topic": "topics", "zzz": None}


def test_keys_under_a_known_key_or_a_runtime_prefix_are_known():
    config = {"topics": "t", "value.converter.schemas.enable": "false", "transforms": "a",
              "transforms.a.type": "x", "consumer.override.fetch.min.bytes": "1", "errors.tolerance": "all",
              "name": "c", "tasks.max": "2"}
    assert config_keys.unknown_keys(config, KNOWN) == {}
    archive = config_keys.model_keys(ArchiveSinkConfig)
    assert config_keys.unknown_keys({"archive.storage.client_kwargs.verify": "false"}, archive) == {}


def test_validation_warns_about_unknown_keys_and_lists_them_with_errors(caplog):
    cls, kind = connector_class("postgres-sink")
    config = {"topic": "orders", "connection.url": "postgresql://u:p@db/x"}
    with caplog.at_level(logging.WARNING), pytest.raises(PreflightError) as refused:
        validate_config(cls(), kind, config, "c")
    assert "spec.config.topic is not a known key (did you mean 'topics'?)" in str(refused.value)
    assert "did you mean 'topics'" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        validate_config(cls(), kind, {"topics": "orders", "connection.url": "postgresql://db/x", "bacth.size": "5"}, "c")
    assert "spec.config.bacth.size is not a known key (did you mean 'batch.size'?); it is ignored" in caplog.text


@pytest.mark.parametrize("connector, base", [
    ("postgres-sink", {"topics": "orders", "connection.url": "postgresql://db/x"}),
    ("noop-sink", {"topics": "orders"}),  # no config model: the runtime's own keys are checked still
])
def test_an_unknown_errors_key_is_refused_with_the_closest_one(connector, base):
    """Kafka Connect accepts and ignores ``errors.tolerence=all`` (issue 35 item 4)."""
    cls, kind = connector_class(connector)
    with pytest.raises(PreflightError) as refused:
        validate_config(cls(), kind, {**base, "errors.tolerence": "all"}, "c")
    assert refused.value.errors == {"errors.tolerence": "not a known key (did you mean 'errors.tolerance'?)"}
    validate_config(cls(), kind, {**base, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
                                  "errors.deadletterqueue.context.headers.enable": "true"}, "c")


@pytest.mark.parametrize("key, instead", [
    ("consumer.override.key.deserializer", "key.converter"),
    ("consumer.override.value.deserializer", "value.converter"),
])
def test_a_key_the_runtime_would_drop_is_refused_with_the_reason(key, instead):
    cls, kind = connector_class("noop-sink")
    with pytest.raises(PreflightError) as refused:
        validate_config(cls(), kind, {"topics": "t", key: "org.apache.kafka.common.serialization.StringDeserializer"},
                        "c")
    assert set(refused.value.errors) == {key} and f"set {instead} instead" in refused.value.errors[key]
    assert config_keys.framework_key_errors({"producer.override.value.serializer": "x"}, ()) == {
        "producer.override.value.serializer": "refused: a source task's records are serialized by value.converter: "
                                              "set value.converter instead"}


def test_a_key_under_a_plugins_prefix_that_the_plugin_never_reads_is_named(caplog):
    cls, kind = connector_class("noop-sink")
    config = {"topics": "orders", "value.converter.schemas.enabel": "false",
              "transforms": "add,route", "transforms.add.type": "InsertField$Value",
              "transforms.add.static.field": "origin", "transforms.add.static.valu": "eu",
              "transforms.add.static.value": "us",
              "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)",
              "transforms.route.replacement": "$1-copy", "predicates": "p",
              "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "o.*", "predicates.p.patern": "x"}
    with caplog.at_level(logging.WARNING):
        validate_config(cls(), kind, config, "c")
    for unread, closest in (("value.converter.schemas.enabel", "value.converter.schemas.enable"),
                            ("transforms.add.static.valu", "transforms.add.static.value"),
                            ("predicates.p.patern", "predicates.p.pattern")):
        assert f"spec.config.{unread} is not a known key (did you mean '{closest}'?); it is ignored" in caplog.text
    assert "transforms.route" not in caplog.text and "transforms.add.type" not in caplog.text
