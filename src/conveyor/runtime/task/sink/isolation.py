"""Write failures of single records: the runtime finds the records of a ``put`` that the
external system refuses, for any sink task. Runs on the task's thread.

A ``put(records)`` or ``put_batch(batch)`` that raises a *record error* (:class:`DataError`,
or one of the task's ``SinkTask.poison_errors``) says that a record of the call cannot be
written, and that the task kept none of the call's records (as after a
:class:`RetriableError`). The runtime then writes the call's records again in halves, each
``put`` followed by a ``pre_commit`` (so that a task that buffers writes them at once; what it
returns is not committed here): a half that fails with a record error is halved again, down
to one record, which then follows ``errors.tolerance`` at stage ``TASK_PUT`` (the dead-letter
queue with Kafka Connect's context headers under ``all``; the task fails naming the record
under ``none``). Every other record is written once, and the offsets move past both.

A :class:`RetriableError` meanwhile leaves the records not yet written for the runtime's
usual redelivery (:class:`PartlyWritten`); any other error fails the task. ``k`` refused
records among ``n`` take about ``2 k log2(n)`` calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from conveyor.api import DataError, RetriableError, SinkRecord
from conveyor.api.batches import OFFSET, PARTITION, original_topics, sink_records
from conveyor.runtime.task.sink.context import InternalSinkRecord

Part = list[InternalSinkRecord] | list[pa.RecordBatch]
"""Records of the record path, or record batches of the batch path."""


class PartlyWritten(RetriableError):
    """A retriable error met while isolating: ``remainder`` (in order) is not written yet."""

    def __init__(self, error: RetriableError, remainder: Part) -> None:
        super().__init__(str(error), delay=error.delay)
        self.remainder = remainder


def record_error(error: BaseException, poison_errors: tuple[type[BaseException], ...]) -> bool:
    """Whether ``error`` blames a record rather than the external system: a
    :class:`DataError` or an instance of ``poison_errors``, never a :class:`RetriableError`."""
    if isinstance(error, RetriableError):
        return False
    return isinstance(error, DataError) or (bool(poison_errors) and isinstance(error, poison_errors))


def size(part: Part) -> int:
    """Records in ``part``."""
    if part and isinstance(part[0], pa.RecordBatch):
        return sum(batch.num_rows for batch in part)  # type: ignore[union-attr]
    return len(part)


def split(part: Part, n: int) -> tuple[Part, Part]:
    """The first ``n`` records of ``part`` and the rest, in order."""
    if not part or not isinstance(part[0], pa.RecordBatch):
        return part[:n], part[n:]  # type: ignore[return-value]
    head: list[pa.RecordBatch] = []
    tail: list[pa.RecordBatch] = []
    left = n
    for batch in part:  # type: pa.RecordBatch
        if left >= batch.num_rows:
            head.append(batch)
            left -= batch.num_rows
        elif left > 0:
            head.append(batch.slice(0, left))
            tail.append(batch.slice(left))
            left = 0
        else:
            tail.append(batch)
    return head, tail


def only_record(part: Part) -> SinkRecord:
    """The record of a one-record ``part``, as the task was given it."""
    first = part[0]
    if isinstance(first, pa.RecordBatch):
        batch = next(b for b in part if b.num_rows)  # type: ignore[union-attr]
        return sink_records(batch)[0]
    return first


def _coordinates(part: Part) -> list[tuple[tuple[str, int], int]]:
    out: list[tuple[tuple[str, int], int]] = []
    for item in part:
        if isinstance(item, pa.RecordBatch):
            out.extend(((topic, partition), offset) for topic, partition, offset in
                       zip(original_topics(item).to_pylist(), item.column(PARTITION).to_pylist(),
                           item.column(OFFSET).to_pylist(), strict=True))
        else:
            out.append(((item.original_topic, item.original_kafka_partition), item.original_kafka_offset))  # type: ignore[arg-type]
    return out


def next_offsets(part: Part) -> dict[tuple[str, int], int]:
    """Per ``(topic, partition)`` read from, the offset after the last record of ``part``."""
    out: dict[tuple[str, int], int] = {}
    for key, offset in _coordinates(part):
        out[key] = max(out.get(key, -1), offset + 1)
    return out


def first_offsets(part: Part) -> dict[tuple[str, int], int]:
    """Per ``(topic, partition)`` read from, the offset of the first record of ``part``."""
    out: dict[tuple[str, int], int] = {}
    for key, offset in _coordinates(part):
        out[key] = min(out.get(key, offset), offset)
    return out


@dataclass
class Isolation:
    """One isolation run over a part whose ``put`` failed with a record error.

    ``put`` hands a part to the task; ``probe(offsets)`` asks it to write what it holds
    (``pre_commit`` of the offsets up to what was put); ``report(record, error)`` hands a
    refused record to ``errors.tolerance`` and raises when the task must fail.
    """

    put: Callable[[Part], None]
    probe: Callable[[dict[tuple[str, int], int]], None]
    report: Callable[[SinkRecord, BaseException], None]
    poison_errors: tuple[type[BaseException], ...] = ()
    written: int = 0
    refused: int = 0
    calls: int = 0
    remainder: Part | None = None
    """After :meth:`run` raised: the records not written nor tolerated, in order (nothing may
    be committed past the first of each partition)."""
    _current: Part = field(default_factory=list, repr=False)  # type: ignore[assignment]

    def run(self, part: Part, first_error: BaseException | None) -> None:
        """Write ``part`` but for the records it refuses; ``first_error`` is the record error
        its whole write raised (``None``: not tried yet).

        Raises:
            PartlyWritten: a retriable error; its ``remainder`` is not written yet.
            BaseException: ``first_error`` when ``part`` has no record.
            BaseException: what ``report`` raises for a refused record, or any error that is
                neither a record error nor retriable (the task fails).
        """
        if first_error is not None and size(part) == 0:
            raise first_error  # no record to blame: the error stands
        pending: list[tuple[Part, BaseException | None]] = [(part, first_error)]
        try:
            self._run(pending)
        except BaseException:
            self.remainder = _join(self._current, [p for p, _ in reversed(pending)])
            raise

    def _run(self, pending: list[tuple[Part, BaseException | None]]) -> None:
        while pending:
            current, known = pending.pop()
            self._current = current
            n = size(current)
            if n == 0:
                continue
            if known is None:
                try:
                    self._write(current)
                    self.written += n
                    continue
                except RetriableError as exc:
                    raise PartlyWritten(exc, _join(current, [p for p, _ in reversed(pending)])) from exc
                except Exception as exc:
                    if not record_error(exc, self.poison_errors):
                        raise
                    known = exc
            if n == 1:
                self.refused += 1
                self.report(only_record(current), known)
                continue
            head, tail = split(current, n // 2)
            pending.append((tail, None))
            pending.append((head, None))

    def _write(self, part: Part) -> None:
        self.calls += 1
        self.put(part)
        self.probe(next_offsets(part))


def _join(first: Part, rest: Sequence[Part]) -> Part:
    joined = list(first)
    for part in rest:
        joined.extend(part)  # type: ignore[arg-type]
    return joined  # type: ignore[return-value]

