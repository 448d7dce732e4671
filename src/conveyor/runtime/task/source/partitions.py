"""What a source task's runner keeps per source partition, bounded by what is in flight.

A source may touch an unbounded number of source partitions over its life (a file per
partition, a table per partition, a partition per tenant). Kafka Connect's
``OffsetStorageWriter`` keeps a partition only from the record that changes its offset
until that offset is flushed; so does this:

* in flight: the records sent and not yet acknowledged, per partition, in send order; a
  partition leaves once its queue is empty;
* committable: the offset of each partition's acknowledged prefix, until it is flushed;
* recently committed: the last :data:`RECENTLY_COMMITTED` partitions' committed offsets,
  newest last, for the task's status (``source_offsets``), not for correctness;
* canonical partition ids: a cache of at most :data:`PARTITION_ID_CACHE` entries (a JSON
  dump per record is slow), emptied when full.

Every offset the task committed stays readable through its ``OffsetStorageReader``, which
holds all of them, as Kafka Connect's offset backing store does.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, Protocol

from conveyor.runtime.kafka.offsets_topic import partition_id

RECENTLY_COMMITTED = 1_000
PARTITION_ID_CACHE = 10_000

Offset = Mapping[str, Any]
PartitionOffset = tuple[Mapping[str, Any], Offset]  # (source partition, source offset)


class InFlight(Protocol):
    """A sent record as the runner tracks it."""

    partition_id: str
    partition: Mapping[str, Any]
    offset: Offset
    done: bool


class SourcePartitions:
    """Per-partition bookkeeping of one source task; used on the task's thread only."""

    def __init__(self) -> None:
        self._ids: dict[Any, str] = {}
        self._last: tuple[Any, dict[str, Any], str] | None = None  # (partition object, its items then, id)
        self._in_flight: dict[str, collections.deque[InFlight]] = {}
        self._committable: dict[str, PartitionOffset] = {}
        self._recently_committed: collections.OrderedDict[str, Offset] = collections.OrderedDict()

    def id_of(self, partition: Mapping[str, Any]) -> str:
        """The canonical id of ``partition`` (:func:`~conveyor.runtime.kafka.offsets_topic.partition_id`)."""
        last = self._last
        # Sources usually hand the same partition object to a run of records: an identity check
        # plus an equality check (it may have been changed in place) beats hashing its items.
        if last is not None and last[0] is partition and last[1] == partition:
            return last[2]
        try:
            cache_key: Any = frozenset(partition.items())
        except TypeError:  # unhashable (mutable) values: no cache
            return partition_id(partition)
        pid = self._ids.get(cache_key)
        if pid is None:
            if len(self._ids) >= PARTITION_ID_CACHE:
                self._ids.clear()
            pid = self._ids[cache_key] = partition_id(partition)
        if isinstance(partition, dict):
            self._last = (partition, dict(partition), pid)
        return pid

    def sent(self, record: InFlight) -> None:
        """``record`` was handed to the producer (or needs no write: ``done`` already)."""
        self._in_flight.setdefault(record.partition_id, collections.deque()).append(record)

    def advance(self) -> None:
        """Each partition's acknowledged prefix becomes committable; empty queues go."""
        emptied = []
        for pid, queue in self._in_flight.items():
            while queue and queue[0].done:
                record = queue.popleft()
                self._committable[pid] = (record.partition, record.offset)
            if not queue:
                emptied.append(pid)
        for pid in emptied:
            del self._in_flight[pid]

    def drop_in_flight(self) -> None:
        """Forget every record in flight (their transaction committed or aborted)."""
        self._in_flight.clear()

    def committable(self) -> dict[str, PartitionOffset]:
        """The offsets to write at the next flush: ``{partition id: (partition, offset)}``."""
        return dict(self._committable)

    def committed(self, offsets: Mapping[str, PartitionOffset]) -> None:
        """``offsets`` are in the offsets topic: each leaves the committable set unless a newer
        offset of its partition became committable meanwhile."""
        for pid, (_partition, offset) in offsets.items():
            current = self._committable.get(pid)
            if current is not None and current[1] is offset:
                del self._committable[pid]
            self._recently_committed[pid] = offset
            self._recently_committed.move_to_end(pid)
        while len(self._recently_committed) > RECENTLY_COMMITTED:
            self._recently_committed.popitem(last=False)

    def recently_committed(self) -> dict[str, dict[str, Any]]:
        """``{partition id: offset}`` of the last :data:`RECENTLY_COMMITTED` partitions committed."""
        return {pid: dict(offset) for pid, offset in self._recently_committed.items()}

    def sizes(self) -> dict[str, int]:
        """How many partitions each structure holds (for tests and debugging)."""
        return {"ids": len(self._ids), "in_flight": len(self._in_flight), "committable": len(self._committable),
                "recently_committed": len(self._recently_committed)}
