"""Records that flow through connectors, and the coordinates that name them.

Offsets follow Kafka's commit convention: a committed or "current" offset for a
:class:`TopicPartition` is the offset of the *next* record to consume, that is the
last processed record's offset plus one.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conveyor.api.schema import Schema


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A Kafka topic partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Header:
    """A record header (Kafka Connect's ``Header``).

    Attributes:
        key: the header's name.
        value: without a ``header.converter``, the raw ``bytes`` (``None`` for a null
            header); with one, the value it read (e.g. ``int``, ``str``, ``list``), shaped
            as ``schema`` says, as keys and values are.
        schema: the value's Connect schema, or ``None`` (always ``None`` for raw bytes).
    """

    key: str
    value: Any
    schema: Schema | None = None


class TimestampType(str, enum.Enum):
    """Where a record's timestamp came from, as Kafka's ``TimestampType``."""

    NO_TIMESTAMP_TYPE = "NoTimestampType"
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclass(slots=True)
class SinkRecord:
    """A record read from Kafka, converted and transformed, handed to ``SinkTask.put``.

    Attributes:
        topic: the topic (after any routing transformation).
        kafka_partition: the partition.
        key / value: converted data; see :mod:`conveyor.api.schema` for their shapes.
        kafka_offset: the record's offset in its original partition.
        timestamp: milliseconds since the epoch, or ``None``.
        timestamp_type: the timestamp's origin.
        headers: the record's headers, in order.
        key_schema / value_schema: the schemas, or ``None`` when schemaless.
        original_topic / original_kafka_partition / original_kafka_offset: where the
            record was read, before transformations (use these for offset bookkeeping,
            as Kafka Connect 3.6 / KIP-793 does).
    """

    topic: str
    kafka_partition: int
    key: Any
    value: Any
    kafka_offset: int
    timestamp: int | None = None
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    headers: tuple[Header, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    original_topic: str | None = None
    original_kafka_partition: int | None = None
    original_kafka_offset: int | None = None

    def __post_init__(self) -> None:
        if self.original_topic is None:
            self.original_topic = self.topic
        if self.original_kafka_partition is None:
            self.original_kafka_partition = self.kafka_partition
        if self.original_kafka_offset is None:
            self.original_kafka_offset = self.kafka_offset

    @property
    def original_topic_partition(self) -> TopicPartition:
        """The partition the record was consumed from."""
        return TopicPartition(self.original_topic, self.original_kafka_partition)  # type: ignore[arg-type]

    def new_record(self, **changes: Any) -> SinkRecord:
        """A copy with ``changes`` applied (the way transformations make new records)."""
        return dataclasses.replace(self, **changes)


@dataclass(slots=True)
class SourceRecord:
    """A record a ``SourceTask.poll`` returns, to be written to Kafka.

    Attributes:
        source_partition: identifies the stream in the external system (e.g.
            ``{"table": "public.orders"}``); JSON-serialisable.
        source_offset: the position within that stream once this record is written
            (e.g. ``{"id": 42}``); JSON-serialisable. Stored in the offsets topic in
            Kafka Connect's format, keyed ``["<connector>", source_partition]``.
        topic: destination topic.
        kafka_partition: destination partition, or ``None`` to let the producer choose.
        key / value, key_schema / value_schema: the data and its schemas.
        timestamp: milliseconds since the epoch, or ``None`` for the producer's time.
        headers: headers to write.
    """

    source_partition: Mapping[str, Any]
    source_offset: Mapping[str, Any]
    topic: str
    value: Any
    key: Any = None
    kafka_partition: int | None = None
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    timestamp: int | None = None
    headers: tuple[Header, ...] = ()

    def new_record(self, **changes: Any) -> SourceRecord:
        """A copy with ``changes`` applied (the way transformations make new records)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """The broker's acknowledgement of a written record (KIP-416).

    Attributes:
        topic / partition / offset: where the record was written.
        timestamp: the record's timestamp in the log, milliseconds since the epoch, or
            ``None`` when the broker reported none.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int | None
