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

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.transforms import Transformation


class Filter(Transformation):  # type: ignore[type-arg]
    """``org.apache.kafka.connect.transforms.Filter``."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.Filter"

    def apply(self, record: Any) -> None:
        return None

    def apply_batch(self, batch: pa.RecordBatch, where: pa.BooleanArray | None) -> pa.RecordBatch:
        """The batch form (:meth:`~conveyor.transforms.chain.TransformationChain.apply_batch`):
        the rows ``where`` is false for (none without ``where``)."""
        return batch.slice(0, 0) if where is None else batch.filter(pc.invert(where))
