"""KIP-158 topic creation settings of a source connector's config (``topic.creation.*``)."""

from __future__ import annotations

import pytest

from conveyor.api import ConfigError
from conveyor.runtime.config.topic_creation import topic_groups

BASE = {"topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "3"}


def test_without_the_default_group_topic_creation_is_off():
    assert topic_groups({"topic": "t"}) is None


def test_groups_are_matched_in_order_with_the_default_last():
    groups = topic_groups({**BASE, "topic.creation.groups": "compacted, logs",
                           "topic.creation.compacted.include": "orders-.*, state",
                           "topic.creation.compacted.exclude": "orders-tmp",
                           "topic.creation.compacted.cleanup.policy": "compact",
                           "topic.creation.logs.include": "log.*", "topic.creation.logs.partitions": "12",
                           "topic.creation.default.retention.ms": "1000"})
    assert [g.name for g in groups] == ["compacted", "logs", "default"]

    def group_of(topic):
        return next(g for g in groups if g.matches(topic))

    compacted = group_of("orders-1")
    assert (compacted.name, compacted.partitions, compacted.replication_factor) == ("compacted", 3, 1)
    assert compacted.configs == {"cleanup.policy": "compact"}
    assert group_of("state").name == "compacted"
    assert group_of("orders-tmp").name == "default"          # excluded
    assert group_of("x-orders-1").name == "default"          # regexes match the whole name
    assert group_of("logging").partitions == 12
    assert group_of("other").configs == {"retention.ms": "1000"}


@pytest.mark.parametrize(("extra", "key"), [
    ({"topic.creation.default.partitions": "0"}, "topic.creation.default.partitions"),
    ({"topic.creation.default.replication.factor": "x"}, "topic.creation.default.replication.factor"),
    ({"topic.creation.groups": "g"}, "topic.creation.g.include"),
    ({"topic.creation.groups": "g", "topic.creation.g.include": "("}, "topic.creation.g.include"),
])
def test_invalid_settings_name_the_key(extra, key):
    with pytest.raises(ConfigError) as info:
        topic_groups({**BASE, **extra})
    assert key in info.value.errors


@pytest.mark.parametrize("extra, key", [
    ({"topic.creation.groups": "compacted", "topic.creation.compacted.include": "c.*",
      "topic.creation.compactd.cleanup.policy": "compact"}, "topic.creation.compactd.cleanup.policy"),
    ({"topic.creation.defualt.partitions": "3"}, "topic.creation.defualt.partitions"),
])
def test_a_key_of_a_group_not_listed_is_refused_naming_it(extra, key):
    with pytest.raises(ConfigError) as info:
        topic_groups({**BASE, **extra})
    assert set(info.value.errors) == {key} and "not in topic.creation.groups" in info.value.errors[key]


def test_group_keys_without_topic_creation_on_are_refused_and_the_worker_keys_pass():
    with pytest.raises(ConfigError) as info:
        topic_groups({"topic.creation.logs.include": "l.*", "topic.creation.groups": "logs"})
    assert set(info.value.errors) == {"topic.creation.logs.include"}
    assert "topic creation is off" in info.value.errors["topic.creation.logs.include"]
    assert topic_groups({"topic.creation.enable": "true", "topic.creation.groups": ""}) is None


def test_only_one_of_the_two_default_keys_is_refused():
    with pytest.raises(ConfigError) as info:
        topic_groups({"topic.creation.default.partitions": "3"})
    assert "topic.creation.default.replication.factor" in info.value.errors
