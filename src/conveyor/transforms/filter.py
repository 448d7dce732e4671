"""``Filter``: drop every record (use it with a predicate).

Kafka Connect: ``org.apache.kafka.connect.transforms.Filter`` (alias ``Filter``), from
KIP-585. No configuration. Typically::

    transforms: dropTombstones
    transforms.dropTombstones.type: org.apache.kafka.connect.transforms.Filter
    transforms.dropTombstones.predicate: isTombstone
    predicates: isTombstone
    predicates.isTombstone.type: org.apache.kafka.connect.transforms.predicates.RecordIsTombstone
"""

from __future__ import annotations

from typing import Any, ClassVar

from conveyor.api.transforms import Transformation


class Filter(Transformation):  # type: ignore[type-arg]
    """``org.apache.kafka.connect.transforms.Filter``."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.Filter"

    def apply(self, record: Any) -> None:
        return None
