"""TransformationChain: Kafka Connect's ``transforms`` / ``predicates`` keys."""

from __future__ import annotations

import timeit
from collections.abc import Mapping
from typing import Any

import pytest

from conveyor.api import (
    ConfigError,
    DataError,
    Header,
    Predicate,
    RetriableError,
    SinkRecord,
    SourceRecord,
    Transformation,
)
from conveyor.transforms import (
    PREDICATES,
    TRANSFORMATIONS,
    InsertFieldValue,
    RegexRouter,
    TransformationChain,
    TransformationError,
)

EVENTS: list[str] = []


def sink(value: Any = None, topic: str = "orders", headers: tuple[Header, ...] = ()) -> SinkRecord:
    return SinkRecord(topic, 0, None, value, 7, timestamp=1_483_425_001_864, headers=headers)


class Recorder(Transformation):  # type: ignore[type-arg]
    """A user transformation, loaded by dotted path."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.tag = config.get("tag", "x")
        EVENTS.append(f"configure {self.tag}")

    def apply(self, record: Any) -> Any:
        EVENTS.append(f"apply {self.tag}")
        return record.new_record(value=[*(record.value or []), self.tag])

    def close(self) -> None:
        EVENTS.append(f"close {self.tag}")


class Boom(Transformation):  # type: ignore[type-arg]
    def apply(self, record: Any) -> Any:
        raise ValueError("kaboom")


class Flaky(Transformation):  # type: ignore[type-arg]
    def apply(self, record: Any) -> Any:
        raise RetriableError("try later")


class BadConfigure(Transformation):  # type: ignore[type-arg]
    def configure(self, config: Mapping[str, Any]) -> None:
        raise KeyError("needed")

    def apply(self, record: Any) -> Any:
        return record


class ValueIsOdd(Predicate):  # type: ignore[type-arg]
    def configure(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)

    def test(self, record: Any) -> bool:
        return bool(record.value[0] % 2)

    def close(self) -> None:
        EVENTS.append("close predicate")


HERE = __name__


@pytest.fixture(autouse=True)
def _clear_events() -> None:
    EVENTS.clear()


def test_empty_chain_is_a_passthrough() -> None:
    for config in ({}, {"transforms": ""}, {"transforms": " "}, {"transforms": []}, {"other.key": 1}):
        chain = TransformationChain.from_config(config)
        assert chain.is_empty and len(chain) == 0
        record = sink({"a": 1})
        assert chain.apply(record) is record
    chain = TransformationChain.from_config({})
    record = sink({"a": 1})
    seconds = min(timeit.repeat(lambda: chain.apply(record), number=20_000, repeat=3)) / 20_000
    assert seconds < 5e-6
    chain.close()


def test_chain_applies_in_order_with_kafka_connect_config() -> None:
    config = {
        "transforms": "insert, route",
        "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.insert.static.field": "source",
        "transforms.insert.static.value": "kafka",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "(.*)s",
        "transforms.route.replacement": "$1_table",
    }
    chain = TransformationChain.from_config(config)
    assert [s.alias for s in chain.stages] == ["insert", "route"]
    assert isinstance(chain.stages[0].transformation, InsertFieldValue)
    assert isinstance(chain.stages[1].transformation, RegexRouter)
    out = chain.apply(sink({"a": 1}))
    assert out.value == {"a": 1, "source": "kafka"}
    assert out.topic == "order_table"
    assert out.original_topic == "orders"


def test_types_by_alias_and_dotted_path_get_their_sub_keys() -> None:
    config = {
        "transforms": ["one", "two", "three"],
        "transforms.one.type": f"{HERE}.Recorder",
        "transforms.one.tag": "1",
        "transforms.two.type": f"{HERE}:Recorder",
        "transforms.two.tag": "2",
        "transforms.two.nested.key": True,
        "transforms.three.type": "HoistField$Value",
        "transforms.three.field": "h",
    }
    chain = TransformationChain.from_config(config)
    first, second = chain.stages[0].transformation, chain.stages[1].transformation
    assert first.config == {"type": f"{HERE}.Recorder", "tag": "1"}  # as Kafka Connect: type included
    assert second.config == {"type": f"{HERE}:Recorder", "tag": "2", "nested.key": True}
    assert chain.apply(sink(None)).value == {"h": ["1", "2"]}
    assert EVENTS == ["configure 1", "configure 2", "apply 1", "apply 2"]
    chain.close()
    chain.close()  # idempotent
    assert EVENTS[-2:] == ["close 1", "close 2"]


def test_filter_stops_the_chain() -> None:
    chain = TransformationChain.from_config(
        {
            "transforms": "drop,after",
            "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.after.type": f"{HERE}.Recorder",
        }
    )
    assert chain.apply(sink([1])) is None
    assert "apply x" not in EVENTS


def tombstone_filter(negate: Any = None) -> dict[str, Any]:
    config = {
        "transforms": "dropTombstones",
        "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.dropTombstones.predicate": "isTombstone",
        "predicates": "isTombstone",
        "predicates.isTombstone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    }
    if negate is not None:
        config["transforms.dropTombstones.negate"] = negate
    return config


def test_predicate_gates_the_transformation() -> None:
    chain = TransformationChain.from_config(tombstone_filter())
    assert chain.apply(sink(None)) is None
    kept = sink({"a": 1})
    assert chain.apply(kept) is kept
    assert chain.stages[0].predicate_alias == "isTombstone"


@pytest.mark.parametrize("negate", [True, "true", "TRUE"])
def test_negate_inverts_the_predicate(negate: Any) -> None:
    chain = TransformationChain.from_config(tombstone_filter(negate))
    tomb = sink(None)
    assert chain.apply(tomb) is tomb
    assert chain.apply(sink({"a": 1})) is None


@pytest.mark.parametrize("negate", [False, "false"])
def test_negate_false(negate: Any) -> None:
    chain = TransformationChain.from_config(tombstone_filter(negate))
    assert chain.apply(sink(None)) is None


def test_predicates_by_short_name_with_config_and_one_instance_per_use() -> None:
    config = {
        "transforms": "a,b",
        "transforms.a.type": f"{HERE}.Recorder",
        "transforms.a.tag": "A",
        "transforms.a.predicate": "odd",
        "transforms.b.type": f"{HERE}.Recorder",
        "transforms.b.tag": "B",
        "transforms.b.predicate": "odd",
        "transforms.b.negate": "true",
        "predicates": "odd,eu",
        "predicates.odd.type": f"{HERE}.ValueIsOdd",
        "predicates.odd.some.key": "v",
        "predicates.eu.type": "TopicNameMatches",
        "predicates.eu.pattern": ".*-eu",
    }
    chain = TransformationChain.from_config(config)
    a, b = chain.stages
    assert a.predicate is not b.predicate
    assert a.predicate.config == {"type": f"{HERE}.ValueIsOdd", "some.key": "v"}
    assert "predicate" not in a.transformation.config and "negate" not in b.transformation.config
    assert chain.apply(sink([1])).value == [1, "A"]
    assert chain.apply(sink([2])).value == [2, "B"]
    chain.close()
    assert EVENTS.count("close predicate") == 2


def test_works_on_source_records() -> None:
    chain = TransformationChain.from_config(
        {
            "transforms": "hoist,route",
            "transforms.hoist.type": "HoistField$Value",
            "transforms.hoist.field": "line",
            "transforms.route.type": "TimestampRouter",
            "transforms.route.topic.format": "${topic}_${timestamp}",
            "transforms.route.timestamp.format": "yyyy",
        }
    )
    record = SourceRecord({"file": "f"}, {"pos": 1}, "logs", "hello", timestamp=1_483_425_001_864)
    out = chain.apply(record)
    assert isinstance(out, SourceRecord)
    assert (out.topic, out.value, out.source_offset) == ("logs_2017", {"line": "hello"}, {"pos": 1})


# --- errors while applying ------------------------------------------------------------------


def test_failure_is_wrapped_with_alias_and_class() -> None:
    chain = TransformationChain.from_config(
        {
            "transforms": "ok,insert",
            "transforms.ok.type": f"{HERE}.Recorder",
            "transforms.insert.type": "InsertField$Value",
            "transforms.insert.topic.field": "t",
        }
    )
    with pytest.raises(TransformationError) as err:
        chain.apply(sink("not a map"))
    error = err.value
    assert isinstance(error, DataError)
    assert error.alias == "insert"
    assert error.transformation_class == "org.apache.kafka.connect.transforms.InsertField$Value"
    assert error.stage == "TRANSFORMATION"
    assert isinstance(error.__cause__, DataError)
    assert "transformation 'insert'" in str(error)


def test_failure_of_a_user_class_names_the_python_class() -> None:
    chain = TransformationChain.from_config({"transforms": "b", "transforms.b.type": f"{HERE}.Boom"})
    with pytest.raises(TransformationError) as err:
        chain.apply(sink({}))
    assert err.value.transformation_class == f"{HERE}.Boom"
    assert "ValueError: kaboom" in str(err.value)
    assert isinstance(err.value.original, ValueError)


def test_retriable_errors_pass_through_for_retry() -> None:
    chain = TransformationChain.from_config({"transforms": "f", "transforms.f.type": f"{HERE}.Flaky"})
    with pytest.raises(RetriableError) as err:
        chain.apply(sink({}))
    assert err.value.transformation_alias == "f"  # type: ignore[attr-defined]
    assert err.value.transformation_class == f"{HERE}.Flaky"  # type: ignore[attr-defined]


def test_predicate_failure_is_reported_as_the_transformation() -> None:
    chain = TransformationChain.from_config(
        {
            "transforms": "t",
            "transforms.t.type": "Filter",
            "transforms.t.predicate": "odd",
            "predicates": "odd",
            "predicates.odd.type": f"{HERE}.ValueIsOdd",
        }
    )
    with pytest.raises(TransformationError) as err:
        chain.apply(sink(None))
    assert err.value.transformation_class == "org.apache.kafka.connect.transforms.Filter"


# --- configuration errors ---------------------------------------------------------------------


def config_errors(config: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as err:
        TransformationChain.from_config(config)
    return err.value.errors


def test_missing_type() -> None:
    assert config_errors({"transforms": "route"}) == {
        "transforms.route.type": 'Missing required configuration "transforms.route.type" which has no default value.'
    }


def test_unknown_type_lists_known_names() -> None:
    errors = config_errors({"transforms": "route", "transforms.route.type": "Nope"})
    message = errors["transforms.route.type"]
    assert message.startswith("unknown transformation 'Nope'; known: ")
    assert "InsertField$Value" in message and "RegexRouter" in message


def test_kafka_transformation_not_available() -> None:
    errors = config_errors(
        {"transforms": "f", "transforms.f.type": "org.apache.kafka.connect.transforms.ExtractTopic$Value"}
    )
    assert "is not available in Conveyor" in errors["transforms.f.type"]


def test_not_a_transformation() -> None:
    errors = config_errors({"transforms": "x", "transforms.x.type": f"{HERE}.ValueIsOdd"})
    assert "is not a transformation" in errors["transforms.x.type"]


def test_transformation_config_errors_are_prefixed() -> None:
    errors = config_errors(
        {
            "transforms": "route,ins",
            "transforms.route.type": "RegexRouter",
            "transforms.route.regex": "(",
            "transforms.route.replacement": "x",
            "transforms.ins.type": "InsertField$Value",
        }
    )
    assert set(errors) == {"transforms.route.regex", "transforms.ins.topic.field"}
    assert errors["transforms.route.regex"].startswith("Invalid value ( for configuration transforms.route.regex:")


def test_missing_required_sub_key_names_full_key() -> None:
    errors = config_errors(
        {"transforms": "route", "transforms.route.type": "RegexRouter", "transforms.route.regex": "a"}
    )
    assert errors == {
        "transforms.route.replacement": 'Missing required configuration "transforms.route.replacement" which has no '
        "default value."
    }


def test_configure_raising_anything_else() -> None:
    errors = config_errors({"transforms": "b", "transforms.b.type": f"{HERE}.BadConfigure"})
    assert errors == {"transforms.b": f"{HERE}.BadConfigure could not be configured: KeyError: 'needed'"}


def test_duplicate_and_empty_aliases() -> None:
    assert (
        "Duplicate alias provided." in config_errors({"transforms": "a,a", "transforms.a.type": "Filter"})["transforms"]
    )
    assert (
        "empty alias"
        in config_errors({"transforms": "a,,b", "transforms.a.type": "Filter", "transforms.b.type": "Filter"})[
            "transforms"
        ]
    )
    assert (
        "Duplicate alias"
        in config_errors({"predicates": "p,p", "predicates.p.type": "RecordIsTombstone"})["predicates"]
    )


def test_predicate_errors() -> None:
    undeclared = tombstone_filter()
    undeclared["predicates"] = ""
    assert "is not listed in 'predicates'" in config_errors(undeclared)["transforms.dropTombstones.predicate"]

    no_type = tombstone_filter()
    del no_type["predicates.isTombstone.type"]
    assert list(config_errors(no_type)) == ["predicates.isTombstone.type"]

    bad_negate = tombstone_filter("sometimes")
    assert config_errors(bad_negate) == {
        "transforms.dropTombstones.negate": "Invalid value sometimes for configuration "
        "transforms.dropTombstones.negate: Expected value to be either true or false"
    }

    bad_pattern = {
        "transforms": "f",
        "transforms.f.type": "Filter",
        "transforms.f.predicate": "p",
        "predicates": "p",
        "predicates.p.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.p.pattern": "[",
    }
    assert list(config_errors(bad_pattern)) == ["predicates.p.pattern"]

    not_a_predicate = {"predicates": "p", "predicates.p.type": f"{HERE}.Boom"}
    assert "is not a predicate" in config_errors(not_a_predicate)["predicates.p.type"]


def test_unused_predicate_is_validated_and_closed() -> None:
    assert list(config_errors({"predicates": "p", "predicates.p.type": "TopicNameMatches"})) == ["predicates.p.pattern"]
    chain = TransformationChain.from_config({"predicates": "p", "predicates.p.type": f"{HERE}.ValueIsOdd"})
    assert chain.is_empty
    assert EVENTS == ["close predicate"]


def test_errors_are_collected_and_created_objects_closed() -> None:
    errors = config_errors(
        {
            "transforms": "ok,bad1,bad2",
            "transforms.ok.type": f"{HERE}.Recorder",
            "transforms.bad1.type": "nope",
            "transforms.bad2.type": "RegexRouter",
        }
    )
    assert set(errors) == {"transforms.bad1.type", "transforms.bad2.regex", "transforms.bad2.replacement"} or set(
        errors
    ) == {"transforms.bad1.type", "transforms.bad2.regex"}
    assert "close x" in EVENTS


def test_negate_without_predicate_is_ignored() -> None:
    chain = TransformationChain.from_config(
        {"transforms": "f", "transforms.f.type": "Filter", "transforms.f.negate": "true"}
    )
    assert chain.apply(sink({})) is None


def test_registries_cover_class_names_and_aliases() -> None:
    for short in [
        "InsertField$Key",
        "InsertField$Value",
        "ReplaceField$Key",
        "ReplaceField$Value",
        "ExtractField$Key",
        "ExtractField$Value",
        "HoistField$Key",
        "HoistField$Value",
        "Cast$Key",
        "Cast$Value",
        "ValueToKey",
        "TimestampRouter",
        "RegexRouter",
        "Filter",
    ]:
        assert TRANSFORMATIONS[short] is TRANSFORMATIONS["org.apache.kafka.connect.transforms." + short]
        assert TRANSFORMATIONS[short].kafka_class_name == "org.apache.kafka.connect.transforms." + short
    for short in ["TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"]:
        assert PREDICATES[short] is PREDICATES["org.apache.kafka.connect.transforms.predicates." + short]


@pytest.mark.parametrize(
    "type_name",
    [
        "conveyor.transforms.InsertField$Value",
        "conveyor.transforms.InsertField.Value",
        "conveyor.transforms:InsertField.Value",
        "conveyor.transforms.insert_field.InsertFieldValue",
    ],
)
def test_dotted_paths_to_nested_classes(type_name: str) -> None:
    chain = TransformationChain.from_config(
        {"transforms": "i", "transforms.i.type": type_name, "transforms.i.topic.field": "t"}
    )
    assert isinstance(chain.stages[0].transformation, InsertFieldValue)
    assert chain.stages[0].transformation_class == "org.apache.kafka.connect.transforms.InsertField$Value"


class MyInsert(InsertFieldValue):
    """A user subclass reports its own class name."""


def test_user_subclass_reports_its_own_name() -> None:
    chain = TransformationChain.from_config(
        {"transforms": "i", "transforms.i.type": f"{HERE}.MyInsert", "transforms.i.topic.field": "t"}
    )
    assert chain.stages[0].transformation_class == f"{HERE}.MyInsert"


@pytest.mark.parametrize("extra, key, message", [
    ({"transforms.rout.regex": "x"}, "transforms.rout.regex", "transformation 'rout' is not listed in 'transforms' (route)"),
    ({"predicates.isTomb.type": "RecordIsTombstone"}, "predicates.isTomb.type",
     "predicate 'isTomb' is not listed in 'predicates' (empty)"),
])
def test_a_key_of_an_alias_not_listed_is_refused_naming_it(extra: dict, key: str, message: str) -> None:
    """Kafka Connect ignores ``transforms.<alias>.*`` of an alias ``transforms`` does not list (issue 35 item 4)."""
    config = {"transforms": "route", "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)",
              "transforms.route.replacement": "x-$1"}
    assert len(TransformationChain.from_config(config)) == 1
    with pytest.raises(ConfigError) as refused:
        TransformationChain.from_config({**config, **extra})
    assert set(refused.value.errors) == {key} and refused.value.errors[key].startswith(message)
