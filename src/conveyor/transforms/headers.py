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

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.batches import HEADERS
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

    def apply_batch(self, batch: pa.RecordBatch, where: pa.BooleanArray | None) -> pa.RecordBatch:
        """The batch form (:meth:`~conveyor.transforms.chain.TransformationChain.apply_batch`):
        the headers of these names leave the rows ``where`` is true for (every row without
        ``where``), by Arrow kernels."""
        headers = batch.column(HEADERS)
        if headers.null_count == len(headers):
            return batch
        flat = headers.flatten()
        drop = pc.is_in(pc.struct_field(flat, "key"), value_set=pa.array(sorted(self.names), pa.string()))
        if where is not None:
            drop = pc.and_(drop, pc.take(where, pc.list_parent_indices(headers)))
        if not pc.any(drop).as_py():
            return batch
        keep = pc.invert(drop)
        kept_before = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(keep.cast(pa.int64()))])
        offsets = pc.take(kept_before, _rebased_offsets(headers)).cast(pa.int32())
        column = pa.ListArray.from_arrays(offsets, flat.filter(keep), type=headers.type, mask=headers.is_null())
        return batch.set_column(batch.schema.get_field_index(HEADERS), HEADERS, column)


class InsertHeader(Transformation):  # type: ignore[type-arg]
    """``org.apache.kafka.connect.transforms.InsertHeader``."""

    kafka_class_name: ClassVar[str] = "org.apache.kafka.connect.transforms.InsertHeader"

    def configure(self, config: Mapping[str, Any]) -> None:
        self.header = Header(get_string(config, "header"), get_string(config, "value.literal").encode("utf-8"))

    def apply(self, record: Any) -> Any:
        return record.new_record(headers=(*record.headers, self.header))

    def apply_batch(self, batch: pa.RecordBatch, where: pa.BooleanArray | None) -> pa.RecordBatch:
        """The batch form (:meth:`~conveyor.transforms.chain.TransformationChain.apply_batch`):
        the header appended to the rows ``where`` is true for (every row without ``where``),
        by Arrow kernels."""
        headers = batch.column(HEADERS)
        n = len(headers)
        if not n:
            return batch
        lengths = pc.fill_null(pc.list_value_length(headers), 0).cast(pa.int64())
        added = pa.repeat(pa.scalar(1, pa.int64()), n) if where is None else where.cast(pa.int64())
        offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(pc.add(lengths, added))])
        total = offsets[-1].as_py()
        # output position p is in row r; its first positions are r's old headers, its last the new one
        rows = pc.list_parent_indices(pa.ListArray.from_arrays(offsets, pa.nulls(total, pa.int8())))
        positions = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), total)), 1)
        within = pc.subtract(positions, pc.take(offsets, rows))
        old = pc.add(pc.take(_rebased_offsets(headers).cast(pa.int64()), rows), within)
        flat = headers.flatten()
        entry = pa.array([{"key": self.header.key, "value": self.header.value}], flat.type)
        values = pa.concat_arrays([flat, entry]).take(
            pc.if_else(pc.less(within, pc.take(lengths, rows)), old, len(flat)))
        mask = pc.and_(headers.is_null(), pc.equal(added, 0))
        column = pa.ListArray.from_arrays(offsets.cast(pa.int32()), values, type=headers.type, mask=mask)
        return batch.set_column(batch.schema.get_field_index(HEADERS), HEADERS, column)


def _rebased_offsets(lists: pa.ListArray) -> pa.Array:
    """``lists``' offsets (one more than its length) counted from its first value, as
    ``flatten()`` gives the values of a slice."""
    offsets = lists.offsets
    return pc.subtract(offsets, offsets[0])
