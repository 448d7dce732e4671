"""A source task's per-partition bookkeeping stays bounded by what is in flight (issue 11 §6):
a source that moves over 50,000 source partitions, one record each, ends holding none of them
but the recently committed ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conveyor.runtime.kafka.offsets_topic import partition_id
from conveyor.runtime.task.source import partitions as source_partitions
from conveyor.runtime.task.source.partitions import SourcePartitions


@dataclass
class Sent:
    partition: dict[str, Any]
    offset: dict[str, Any]
    partition_id: str = ""
    done: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def send(partitions: SourcePartitions, partition: dict[str, Any], position: int) -> Sent:
    record = Sent(partition, {"position": position})
    record.partition_id = partitions.id_of(partition)
    partitions.sent(record)
    return record


def flush(partitions: SourcePartitions) -> dict[str, Any]:
    batch = partitions.committable()
    partitions.committed(batch)
    return batch


def test_ids_are_the_canonical_partition_ids_cached_or_not():
    partitions = SourcePartitions()
    assert partitions.id_of({"table": "t", "shard": 1}) == partition_id({"shard": 1, "table": "t"})
    assert partitions.id_of({"tags": ["a", "b"]}) == partition_id({"tags": ["a", "b"]})  # unhashable: not cached


def test_a_partition_object_reused_and_then_changed_in_place_gets_its_new_id():
    partitions = SourcePartitions()
    partition = {"schema": "public", "table": "orders"}
    assert partitions.id_of(partition) == partitions.id_of(partition) == partition_id(partition)
    partition["table"] = "customers"  # the same object, changed: the identity shortcut must not answer
    assert partitions.id_of(partition) == partition_id({"schema": "public", "table": "customers"})
    tags = {"tags": ["a"]}
    partitions.id_of(tags)
    tags["tags"].append("b")  # mutable values are never cached, by identity or otherwise
    assert partitions.id_of(tags) == partition_id({"tags": ["a", "b"]})


def test_only_the_acknowledged_prefix_of_a_partition_is_committable():
    partitions = SourcePartitions()
    first, second, third = (send(partitions, {"file": "a"}, i) for i in range(3))
    second.done = True
    partitions.advance()
    assert partitions.committable() == {}
    first.done = True
    partitions.advance()
    assert {pid: offset for pid, (_p, offset) in partitions.committable().items()} == {first.partition_id: {"position": 1}}
    third.done = True
    partitions.advance()
    assert list(partitions.committable().values()) == [({"file": "a"}, {"position": 2})]


def test_an_offset_that_became_committable_during_a_flush_is_flushed_next_time():
    partitions = SourcePartitions()
    send(partitions, {"file": "a"}, 0).done = True
    partitions.advance()
    in_flight_flush = partitions.committable()
    send(partitions, {"file": "a"}, 1).done = True
    partitions.advance()
    partitions.committed(in_flight_flush)
    assert [offset for _p, offset in partitions.committable().values()] == [{"position": 1}]
    assert partitions.recently_committed() == {partition_id({"file": "a"}): {"position": 0}}
    flush(partitions)
    assert partitions.committable() == {}
    assert partitions.recently_committed() == {partition_id({"file": "a"}): {"position": 1}}


def test_fifty_thousand_partitions_leave_nothing_behind_but_the_recently_committed():
    partitions = SourcePartitions()
    total = 50_000
    for i in range(total):
        send(partitions, {"file": f"f-{i}"}, i).done = True
        if i % 500 == 499:
            partitions.advance()
            flush(partitions)
    partitions.advance()
    flushed = flush(partitions)
    assert flushed == {}  # the last batch of 500 went at i = 49,999
    sizes = partitions.sizes()
    assert sizes["in_flight"] == 0 and sizes["committable"] == 0
    assert sizes["recently_committed"] == source_partitions.RECENTLY_COMMITTED
    assert sizes["ids"] <= source_partitions.PARTITION_ID_CACHE
    newest = partitions.recently_committed()
    assert list(newest)[-1] == partition_id({"file": f"f-{total - 1}"})
    assert partition_id({"file": "f-0"}) not in newest


def test_records_in_flight_keep_their_partition_until_acknowledged():
    partitions = SourcePartitions()
    waiting = send(partitions, {"file": "slow"}, 0)
    for i in range(100):
        send(partitions, {"file": f"fast-{i}"}, i).done = True
    partitions.advance()
    flush(partitions)
    assert partitions.sizes()["in_flight"] == 1
    waiting.done = True
    partitions.advance()
    assert [p for p, _o in flush(partitions).values()] == [{"file": "slow"}]
    assert partitions.sizes()["in_flight"] == 0


def test_dropping_what_is_in_flight_after_a_transaction():
    partitions = SourcePartitions()
    send(partitions, {"file": "a"}, 0)
    partitions.drop_in_flight()
    partitions.advance()
    assert partitions.sizes()["in_flight"] == 0 and partitions.committable() == {}
