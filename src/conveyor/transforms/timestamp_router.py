"""``TimestampRouter``: route to a topic named after the topic and the record timestamp.

Kafka Connect: ``org.apache.kafka.connect.transforms.TimestampRouter`` (alias
``TimestampRouter``).

Configuration:

``topic.format`` (string, default ``${topic}-${timestamp}``)
    The new topic; ``${topic}`` and ``${timestamp}`` are replaced (the topic first).
``timestamp.format`` (string, default ``yyyyMMdd``)
    A ``java.text.SimpleDateFormat`` pattern, applied in UTC
    (see :mod:`._java_date_format` for the letters).

A record without a timestamp fails with ``Timestamp missing on record: ...``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.batches import TIMESTAMP, TOPIC
from conveyor.api.errors import DataError
from conveyor.api.transforms import Transformation
from conveyor.converters._config import get_string, invalid
from conveyor.java_text.date_format import JavaDateFormat
from conveyor.transforms._batches import per_record
from conveyor.transforms.regex_router import with_topics


class TimestampRouter(Transformation):  # type: ignore[type-arg]
    """``org.apache.kafka.connect.transforms.TimestampRouter``."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.TimestampRouter"

    def configure(self, config: Mapping[str, Any]) -> None:
        self.topic_format = get_string(config, "topic.format", "${topic}-${timestamp}")
        pattern = get_string(config, "timestamp.format", "yyyyMMdd")
        try:
            self.timestamp_format = JavaDateFormat(pattern)
        except ValueError as exc:
            raise invalid("timestamp.format", pattern, str(exc)) from None

    def apply(self, record: Any) -> Any:
        timestamp = record.timestamp
        if timestamp is None:
            raise DataError(f"Timestamp missing on record: {record}")
        return record.new_record(topic=self._topic(record.topic, self.timestamp_format.format(timestamp)))

    def _topic(self, topic: str, formatted: str) -> str:
        return self.topic_format.replace("${topic}", topic).replace("${timestamp}", formatted)

    def apply_batch(self, batch: pa.RecordBatch, where: pa.BooleanArray | None) -> list[pa.RecordBatch]:
        """The batch form (:meth:`~conveyor.transforms.chain.TransformationChain.apply_batch`):
        each distinct topic and span of the format's finest unit (a day for ``yyyyMMdd``)
        formatted once; the topics read from kept in ``original_topic``. Rows without a
        timestamp fail alone, as on the record path."""
        stamps = batch.column(TIMESTAMP)
        if stamps.null_count:
            return per_record(batch, where, self.apply)
        granularity = self.timestamp_format.granularity
        slots = pc.floor(pc.divide(stamps.cast(pa.int64()).cast(pa.float64()), float(granularity)))
        topics = batch.column(TOPIC)
        unique_topics, unique_slots = pc.unique(topics), pc.unique(slots)
        texts = [self.timestamp_format.format(int(slot) * granularity) for slot in unique_slots.to_pylist()]
        table = pa.array([self._topic(topic, text) for topic in unique_topics.to_pylist() for text in texts],
                         pa.string())
        index = pc.add(pc.multiply(pc.index_in(topics, value_set=unique_topics).cast(pa.int64()), len(texts)),
                       pc.index_in(slots, value_set=unique_slots).cast(pa.int64()))
        routed = pc.take(table, index)
        if where is not None:
            routed = pc.if_else(where, routed, topics)
        return [with_topics(batch, routed)]
