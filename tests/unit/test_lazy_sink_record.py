"""The records the sink runner hands to ``put``: timestamp and original coordinates read
from the Kafka message on first use, and otherwise a plain ``SinkRecord``."""

from __future__ import annotations

import dataclasses

from confluent_kafka import Message

from conveyor.api import Header, SinkRecord, TimestampType
from conveyor.runtime.task.sink.context import InternalSinkRecord, LazySinkRecord


def _message() -> Message:
    return Message(topic="orders", partition=3, offset=41, key=b"k", value=b"v",
                   headers=[("h", b"1")], timestamp=(1, 1_700_000_000_000))


def _lazy(msg: Message) -> LazySinkRecord:
    """As the runner makes them (``SinkTaskRunner._convert``)."""
    record = object.__new__(LazySinkRecord)
    record.topic, record.kafka_partition, record.kafka_offset = msg.topic(), msg.partition(), msg.offset()
    record.key, record.key_schema, record.value, record.value_schema = "k", None, {"id": 1}, None
    record.raw = msg
    return record


def test_lazy_fields_come_from_the_message_and_the_record_becomes_eager() -> None:
    record = _lazy(_message())
    assert type(record) is LazySinkRecord
    assert record.timestamp == 1_700_000_000_000
    assert type(record) is InternalSinkRecord
    assert record.timestamp_type is TimestampType.CREATE_TIME
    assert (record.original_topic, record.original_kafka_partition, record.original_kafka_offset) == ("orders", 3, 41)
    assert record.headers == (Header("h", b"1"),)
    assert isinstance(record, SinkRecord)


def test_original_coordinates_survive_a_change_of_topic_before_first_use() -> None:
    record = _lazy(_message())
    record.topic = "routed"
    assert record.original_topic == "orders" and record.topic == "routed"


def test_setting_a_lazy_field_keeps_the_others() -> None:
    record = _lazy(_message())
    record.timestamp = 5
    assert record.timestamp == 5 and record.original_kafka_offset == 41


def test_new_record_and_replace_make_eager_copies_with_every_field() -> None:
    record = _lazy(_message())
    copy = record.new_record(value={"id": 2})
    assert type(copy) is InternalSinkRecord and copy.raw is record.raw
    assert (copy.value, copy.timestamp, copy.original_kafka_offset, copy.topic) == ({"id": 2}, 1_700_000_000_000, 41,
                                                                                   "orders")
    assert dataclasses.replace(_lazy(_message()), key="x").key == "x"


def test_equality_with_an_eager_record_of_the_same_fields() -> None:
    eager = InternalSinkRecord("orders", 3, "k", {"id": 1}, 41, 1_700_000_000_000, TimestampType.CREATE_TIME,
                               (Header("h", b"1"),), None, None, "orders", 3, 41)
    assert _lazy(_message()) == eager
    assert eager == _lazy(_message())
    assert _lazy(_message()) != dataclasses.replace(eager, kafka_offset=42)


def test_no_timestamp() -> None:
    msg = Message(topic="t", partition=0, offset=0, value=b"v", timestamp=(0, -1))
    record = _lazy(msg)
    assert record.timestamp is None and record.timestamp_type is TimestampType.NO_TIMESTAMP_TYPE
    assert record.headers == ()
