"""The runtime's search for the records a put refuses (conveyor.runtime.task.sink.isolation),
on both paths' parts; end to end on PostgreSQL and a broker: tests/integration/test_write_isolation.py
(this file has a name of its own: pytest collects both trees, which are not packages)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from conveyor.api import ConnectError, DataError, RetriableError
from conveyor.api.batches import OFFSET, PARTITION, TOPIC
from conveyor.runtime.task.sink.context import InternalSinkRecord
from conveyor.runtime.task.sink.isolation import (
    Isolation,
    PartlyWritten,
    first_offsets,
    next_offsets,
    record_error,
    size,
    split,
)


class Refused(Exception):
    pass


def _records(n: int) -> list[InternalSinkRecord]:
    return [InternalSinkRecord(topic="t", kafka_partition=0, key=None, value=i, kafka_offset=i) for i in range(n)]


def _batches(*sizes: int) -> list[pa.RecordBatch]:
    out, start = [], 0
    for n in sizes:
        out.append(pa.RecordBatch.from_pydict({TOPIC: ["t"] * n, PARTITION: pa.array([0] * n, pa.int32()),
                                               OFFSET: pa.array(range(start, start + n), pa.int64())}))
        start += n
    return out


def _offsets(part) -> list[int]:
    if part and isinstance(part[0], pa.RecordBatch):
        return [o for b in part for o in b.column(OFFSET).to_pylist()]
    return [r.kafka_offset for r in part]


class _Sink:
    """Buffers what put gives and writes it at the probe: refusing the whole write when it
    holds a bad offset, as a sink writing in pre_commit does."""

    def __init__(self, bad: set[int], error: type[BaseException] = DataError) -> None:
        self.bad, self.error = bad, error
        self.buffer: list[int] = []
        self.written: list[int] = []
        self.reported: list[int] = []

    def put(self, part) -> None:
        self.buffer = _offsets(part)

    def probe(self, _offsets_) -> None:
        held, self.buffer = self.buffer, []
        if self.bad & set(held):
            raise self.error("refused")
        self.written.extend(held)

    def report(self, record, error) -> None:
        self.reported.append(record.kafka_offset)


@pytest.mark.parametrize("part", [_records(100), _batches(30, 1, 69)], ids=["records", "batches"])
def test_only_the_refused_records_are_reported_and_every_other_is_written_once_in_order(part):
    sink = _Sink({0, 37, 38, 99})
    isolation = Isolation(sink.put, sink.probe, sink.report)
    isolation.run(part, DataError("the whole put"))
    assert sink.reported == [0, 37, 38, 99]
    assert sink.written == [o for o in range(100) if o not in {0, 37, 38, 99}]
    assert (isolation.written, isolation.refused) == (96, 4)
    assert isolation.calls < 2 * 4 * 7 + 2, "about 2 k log2(n) calls"


def test_a_declared_poison_class_is_a_record_error_and_a_retriable_one_never_is():
    assert record_error(Refused(), (Refused,)) and record_error(DataError(), ())
    assert not record_error(Refused(), ()) and not record_error(ConnectError(), (Refused,))
    assert not record_error(RetriableError(), (RetriableError,))
    sink = _Sink({5}, error=Refused)
    Isolation(sink.put, sink.probe, sink.report, (Refused,)).run(_records(10), Refused())
    assert sink.reported == [5]
    with pytest.raises(Refused):  # not declared: the task fails
        Isolation(sink.put, sink.probe, sink.report).run(_records(10), DataError())


def test_a_retriable_error_leaves_the_records_not_yet_written_in_order():
    sink = _Sink({3})
    calls = []

    def probe(offsets):
        calls.append(offsets)
        if len(calls) == 3:
            raise RetriableError("database restarting")
        sink.probe(offsets)

    with pytest.raises(PartlyWritten) as caught:
        Isolation(sink.put, probe, sink.report).run(_records(8), DataError())
    written = sink.written
    assert _offsets(caught.value.remainder) == [o for o in range(8) if o not in written and o not in sink.reported]
    assert sorted(written + sink.reported + _offsets(caught.value.remainder)) == list(range(8))


def test_a_tolerance_none_report_stops_the_isolation_at_that_record():
    sink = _Sink({4})

    def report(record, error):
        raise ConnectError(f"Tolerance exceeded at offset {record.kafka_offset}")

    with pytest.raises(ConnectError, match="offset 4"):
        Isolation(sink.put, sink.probe, report).run(_records(10), DataError())
    assert sink.written == [0, 1, 2, 3], "what comes before it is written, nothing after it"


def test_split_and_offsets_of_batches():
    head, tail = split(_batches(3, 4), 5)
    assert (_offsets(head), _offsets(tail)) == ([0, 1, 2, 3, 4], [5, 6])
    assert size(head) == 5 and size([]) == 0
    assert next_offsets(tail) == {("t", 0): 7} and next_offsets(_records(3)) == {("t", 0): 3}


def test_after_a_failure_the_remainder_is_every_record_neither_written_nor_tolerated():
    sink = _Sink({6})

    def report(record, error):
        raise ConnectError("tolerance none")

    isolation = Isolation(sink.put, sink.probe, report)
    with pytest.raises(ConnectError):
        isolation.run(_batches(4, 6), DataError())
    assert sink.written == [0, 1, 2, 3, 4, 5]
    assert _offsets(isolation.remainder) == [6, 7, 8, 9], "from the refused record on: nothing past it is committed"
    assert first_offsets(isolation.remainder) == {("t", 0): 6}


def test_a_write_error_with_no_record_to_blame_stands():
    with pytest.raises(DataError, match="deferred"):
        Isolation(lambda part: None, lambda offsets: None, lambda r, e: None).run([], DataError("deferred"))
