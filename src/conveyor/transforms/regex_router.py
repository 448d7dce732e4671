"""``RegexRouter``: rename the topic with a regular expression.

Kafka Connect: ``org.apache.kafka.connect.transforms.RegexRouter`` (alias ``RegexRouter``).

Configuration:

``regex`` (string, required)         a Java regular expression; it must match the
                                     *whole* topic (``Matcher.matches()``).
``replacement`` (string, required)   the new topic; ``$1``, ``${name}`` refer to groups,
                                     ``\\`` escapes (``Matcher.replaceFirst`` syntax).

A topic that does not match is left as it is. The regex and the replacement are checked
when configured (Kafka Connect reports a bad group reference only on the first matching
record). See :mod:`._java_regex` for the dialect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.batches import ORIGINAL_TOPIC, TOPIC
from conveyor.api.transforms import Transformation
from conveyor.converters._config import get_string, invalid
from conveyor.java_text.regex import JavaReplacement, compile_java_regex

_MAX_CACHED_TOPICS = 4096


def compile_config_regex(key: str, pattern: str) -> re.Pattern[str]:
    """Compile a regex config value, as a ``ConfigError`` naming ``key`` when invalid."""
    try:
        return compile_java_regex(pattern)
    except re.error as exc:
        raise invalid(key, pattern, f"Invalid regex: {exc}") from None


class RegexRouter(Transformation):  # type: ignore[type-arg]
    """``org.apache.kafka.connect.transforms.RegexRouter``."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.RegexRouter"

    def configure(self, config: Mapping[str, Any]) -> None:
        self.regex = compile_config_regex("regex", get_string(config, "regex"))
        replacement = get_string(config, "replacement")
        try:
            self.replacement = JavaReplacement(replacement, self.regex)
        except ValueError as exc:
            raise invalid("replacement", replacement, str(exc)) from None
        self._routes: dict[str, str | None] = {}

    def apply(self, record: Any) -> Any:
        routed = self._route(record.topic)
        if routed is None:
            return record
        return record.new_record(topic=routed)

    def apply_batch(self, batch: pa.RecordBatch, where: pa.BooleanArray | None) -> pa.RecordBatch:
        """The batch form (:meth:`~conveyor.transforms.chain.TransformationChain.apply_batch`):
        the topics of the rows ``where`` is true for (every row without ``where``) routed,
        each distinct topic once; the topics read from are kept in ``original_topic``
        (:mod:`conveyor.api.batches`)."""
        topics = batch.column(TOPIC)
        uniques = pc.unique(topics)
        routes = pa.array([self._route(t) for t in uniques.to_pylist()], pa.string())
        routed = pc.coalesce(pc.take(routes, pc.index_in(topics, value_set=uniques)), topics)
        if where is not None:
            routed = pc.if_else(where, routed, topics)
        return with_topics(batch, routed)

    def _route(self, topic: str | None) -> str | None:
        """The routed topic, or ``None`` when the regex does not match ``topic``."""
        routes = self._routes
        if topic in routes:
            return routes[topic]
        match = self.regex.fullmatch(topic) if topic is not None else None
        routed = None if match is None else self.replacement.expand(match)
        if len(routes) >= _MAX_CACHED_TOPICS:
            routes.clear()
        routes[topic] = routed  # type: ignore[index]
        return routed


def with_topics(batch: pa.RecordBatch, topics: pa.Array) -> pa.RecordBatch:
    """``batch`` with ``topics`` as its ``topic`` column, the topics read from kept in
    ``original_topic`` (added on the first change)."""
    if ORIGINAL_TOPIC not in batch.schema.names:
        batch = batch.append_column(pa.field(ORIGINAL_TOPIC, pa.string()), batch.column(TOPIC))
    return batch.set_column(batch.schema.get_field_index(TOPIC), batch.schema.field(TOPIC), topics)
