"""Predicates (KIP-585): conditions that decide whether a transformation applies.

==================================================================  ==================  =============================
Kafka Connect class                                                 alias               configuration
==================================================================  ==================  =============================
``org.apache.kafka.connect.transforms.predicates.TopicNameMatches``   TopicNameMatches    ``pattern`` (Java regex,
                                                                                        required; the whole topic
                                                                                        must match)
``org.apache.kafka.connect.transforms.predicates.HasHeaderKey``       HasHeaderKey        ``name`` (string, required,
                                                                                        non-empty)
``org.apache.kafka.connect.transforms.predicates.RecordIsTombstone``  RecordIsTombstone   none
==================================================================  ==================  =============================

``RecordIsTombstone`` is true when the record's *value* is null.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.batches import HEADERS, TOPIC, VALUE
from conveyor.api.errors import ConfigError
from conveyor.api.transforms import Predicate
from conveyor.converters._config import get_string, invalid
from conveyor.java_text.regex import compile_java_regex


class TopicNameMatches(Predicate):  # type: ignore[type-arg]
    """True when the whole topic name matches ``pattern``."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"

    def configure(self, config: Mapping[str, Any]) -> None:
        pattern = get_string(config, "pattern")
        if not pattern:
            raise ConfigError({"pattern": "Invalid value for configuration pattern: String must be non-empty"})
        try:
            self.pattern = compile_java_regex(pattern)
        except re.error as exc:
            raise invalid("pattern", pattern, f"entry must be a Java-compatible regular expression: {exc}") from None
        self._results: dict[str, bool] = {}

    def test(self, record: Any) -> bool:
        return self._matches(record.topic)

    def test_batch(self, batch: pa.RecordBatch) -> pa.BooleanArray:
        """:meth:`test` of every row of a record batch (``conveyor.api.batches``)."""
        topics = batch.column(TOPIC)
        uniques = pc.unique(topics)
        matching = pa.array([self._matches(t) for t in uniques.to_pylist()], pa.bool_())
        return pc.take(matching, pc.index_in(topics, value_set=uniques))

    def _matches(self, topic: str | None) -> bool:
        if topic is None:
            return False
        result = self._results.get(topic)
        if result is None:
            result = self.pattern.fullmatch(topic) is not None
            if len(self._results) >= 4096:
                self._results.clear()
            self._results[topic] = result
        return result


class HasHeaderKey(Predicate):  # type: ignore[type-arg]
    """True when the record has at least one header called ``name``."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"

    def configure(self, config: Mapping[str, Any]) -> None:
        name = get_string(config, "name")
        if not name:
            raise ConfigError({"name": "Invalid value for configuration name: String must be non-empty"})
        self.name = name

    def test(self, record: Any) -> bool:
        name = self.name
        return any(header.key == name for header in record.headers or ())

    def test_batch(self, batch: pa.RecordBatch) -> pa.BooleanArray:
        """:meth:`test` of every row of a record batch (``conveyor.api.batches``)."""
        headers = batch.column(HEADERS)
        mask = [False] * batch.num_rows
        if headers.null_count < len(headers):
            hits = pc.equal(pc.struct_field(pc.list_flatten(headers), "key"), self.name)
            for row in pc.filter(pc.list_parent_indices(headers), hits).to_pylist():
                mask[row] = True
        return pa.array(mask, pa.bool_())


class RecordIsTombstone(Predicate):  # type: ignore[type-arg]
    """True when the record's value is null."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"

    def test(self, record: Any) -> bool:
        return record.value is None

    def test_batch(self, batch: pa.RecordBatch) -> pa.BooleanArray:
        """:meth:`test` of every row of a record batch (``conveyor.api.batches``)."""
        return pc.is_null(batch.column(VALUE))
