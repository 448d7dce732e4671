"""``DropHeaders`` and ``InsertHeader`` (KIP-145).

Kafka Connect: ``org.apache.kafka.connect.transforms.DropHeaders`` (alias
``DropHeaders``) and ``org.apache.kafka.connect.transforms.InsertHeader`` (alias
``InsertHeader``).

``DropHeaders`` configuration:

``headers`` (list, required, non-empty)   names of the headers to remove (every occurrence).

``InsertHeader`` configuration:

``header`` (string, required)         the header name.
``value.literal`` (string, required)  the header value, appended as its UTF-8 text (what
                                      Kafka Connect's default ``SimpleHeaderConverter``
                                      writes for a literal).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from conveyor.api.errors import ConfigError
from conveyor.api.records import Header
from conveyor.api.transforms import Transformation
from conveyor.converters._config import get_list, get_string


class DropHeaders(Transformation):  # type: ignore[type-arg]
    """``org.apache.kafka.connect.transforms.DropHeaders``."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.DropHeaders"

    def configure(self, config: Mapping[str, Any]) -> None:
        names = get_list(config, "headers")
        if not names:
            raise ConfigError({"headers": "Invalid value [] for configuration headers: Empty list"})
        self.names = frozenset(names)

    def apply(self, record: Any) -> Any:
        headers = record.headers
        if not headers:
            return record
        names = self.names
        kept = tuple(h for h in headers if h.key not in names)
        if len(kept) == len(headers):
            return record
        return record.new_record(headers=kept)


class InsertHeader(Transformation):  # type: ignore[type-arg]
    """``org.apache.kafka.connect.transforms.InsertHeader``."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.InsertHeader"

    def configure(self, config: Mapping[str, Any]) -> None:
        self.header = Header(get_string(config, "header"), get_string(config, "value.literal").encode("utf-8"))

    def apply(self, record: Any) -> Any:
        return record.new_record(headers=(*record.headers, self.header))
