import pytest

from conveyor.api import ConfigError
from conveyor.runtime.config.settings import ErrorTolerance, parse_sink_settings, prefixed


def test_kafka_connect_defaults():
    s = parse_sink_settings({"topics": "a, b"})
    assert s.topics == ["a", "b"]
    assert s.offset_flush_interval_ms == 60_000
    assert s.errors_tolerance is ErrorTolerance.NONE
    assert s.subscription == ["a", "b"]


def test_string_values_are_coerced_like_configdef():
    s = parse_sink_settings({"topics": "a", "offset.flush.interval.ms": "500", "errors.tolerance": "all",
                             "errors.deadletterqueue.context.headers.enable": "true"})
    assert s.offset_flush_interval_ms == 500
    assert s.errors_tolerance is ErrorTolerance.ALL
    assert s.dlq_context_headers is True


def test_mistyped_key_names_key_and_type():
    with pytest.raises(ConfigError) as err:
        parse_sink_settings({"topics": "a", "offset.flush.interval.ms": "soon"})
    assert "offset.flush.interval.ms" in err.value.errors
    assert "integer" in err.value.errors["offset.flush.interval.ms"]


def test_tolerance_must_be_known():
    with pytest.raises(ConfigError) as err:
        parse_sink_settings({"topics": "a", "errors.tolerance": "some"})
    assert "errors.tolerance" in err.value.errors


def test_topics_xor_regex():
    with pytest.raises(ConfigError, match="exactly one of 'topics' and 'topics.regex'"):
        parse_sink_settings({})
    with pytest.raises(ConfigError, match="exactly one"):
        parse_sink_settings({"topics": "a", "topics.regex": "a.*"})
    assert parse_sink_settings({"topics.regex": "orders-.*"}).subscription == ["^orders-.*"]


def test_dlq_cannot_be_a_source_topic():
    with pytest.raises(ConfigError, match="must not be one of the consumed topics"):
        parse_sink_settings({"topics": "a", "errors.deadletterqueue.topic.name": "a"})


def test_prefixed_strips_prefix_and_stringifies_bools():
    assert prefixed({"consumer.override.session.timeout.ms": 6000, "consumer.override.check.crcs": True, "x": 1},
                    "consumer.override.") == {"session.timeout.ms": 6000, "check.crcs": "true"}
