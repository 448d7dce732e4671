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

from conveyor.api.errors import DataError
from conveyor.api.transforms import Transformation
from conveyor.converters._config import get_string, invalid
from conveyor.java_text.date_format import JavaDateFormat


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
        formatted = self.timestamp_format.format(timestamp)
        topic = self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", formatted)
        return record.new_record(topic=topic)
