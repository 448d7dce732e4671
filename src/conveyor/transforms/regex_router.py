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
        topic = record.topic
        routes = self._routes
        if topic in routes:
            routed = routes[topic]
        else:
            match = self.regex.fullmatch(topic) if topic is not None else None
            routed = None if match is None else self.replacement.expand(match)
            if len(routes) >= _MAX_CACHED_TOPICS:
                routes.clear()
            routes[topic] = routed
        if routed is None:
            return record
        return record.new_record(topic=routed)
