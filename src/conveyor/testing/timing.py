"""A sink connector that wraps another and records when work happened, for benchmarks.

``timed.connector.class`` names the wrapped connector (entry point or dotted path);
``timed.path`` is a JSON-lines file where each task appends, when it stops, the wall-clock
times (``time.time()`` seconds) of its first ``put``, of the end of its last non-empty
``put`` and of the end of every ``pre_commit``, plus how many records it was given and its
process's CPU seconds (``time.process_time()``: the task's Python worker, librdkafka's
threads included) at its first ``put`` and at the end of its last (read at most every
:data:`CPU_READ_INTERVAL_S`, and exactly at the ``put`` that reaches ``timed.records`` when
that is set). A
benchmark computes steady-state throughput from these (Spark job launch and consumer-group
join are fixed costs, not throughput).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from conveyor.api import SinkConnector, SinkRecord, SinkTask, Task, TopicPartition

CPU_READ_INTERVAL_S = 0.01
"""The process's CPU time is read at the end of a ``put`` at most this often (and at the end
of the ``put`` that reaches ``timed.records``): reading it costs a system call that sums every
thread, a few percent of a fast sink's time if done per batch."""


def _load(name: str) -> type[SinkConnector]:
    from conveyor.runtime.config.plugins import load_connector_class

    cls = load_connector_class(name)
    assert issubclass(cls, SinkConnector)
    return cls


class TimedSinkTask(SinkTask):
    def start(self, config: Mapping[str, Any]) -> None:
        self.path = config["timed.path"]
        self.inner: SinkTask = _load(config["timed.connector.class"])().task_class()()  # type: ignore[assignment]
        self.inner.initialize(self.context)
        self.first_put: float | None = None
        self.last_put_end: float | None = None
        self.cpu_first_put: float | None = None
        self.cpu_last_put_end: float | None = None
        self.records = 0
        self.pre_commit_ends: list[tuple[float, int]] = []
        self._cpu_read_at = 0.0
        self._expected = int(config.get("timed.records", 1 << 62))
        self.inner.start(config)

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        self.inner.open(partitions)

    def put(self, records: Sequence[SinkRecord]) -> None:
        self._timed(len(records), self.inner.put, records)

    def takes_batches(self, key_type: pa.DataType | None, value_type: pa.DataType | None) -> bool:
        return self.inner.takes_batches(key_type, value_type)

    def batch_columns(self) -> Any:
        return self.inner.batch_columns()

    def put_batch(self, batch: pa.RecordBatch) -> None:
        """The wrapped task's ``put_batch`` (its default hands the rows to its ``put``)."""
        self._timed(batch.num_rows, self.inner.put_batch, batch)

    def _timed(self, rows: int, put: Any, argument: Any) -> None:
        if rows and self.first_put is None:
            self.first_put, self.cpu_first_put = time.time(), time.process_time()
        put(argument)
        if rows:
            self.records += rows
            self.last_put_end = now = time.time()
            if now - self._cpu_read_at >= CPU_READ_INTERVAL_S or self.records >= self._expected:
                self._cpu_read_at, self.cpu_last_put_end = now, time.process_time()

    def pre_commit(self, offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        result = self.inner.pre_commit(offsets)
        self.pre_commit_ends.append((time.time(), self.records))
        return result

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        self.inner.close(partitions)

    def stop(self, connector_deleted: bool = False) -> None:
        self.inner.stop(connector_deleted=connector_deleted)
        line = {
            "first_put": self.first_put,
            "last_put_end": self.last_put_end,
            "cpu_first_put": self.cpu_first_put,
            "cpu_last_put_end": self.cpu_last_put_end,
            "records": self.records,
            "pre_commit_ends": self.pre_commit_ends,
        }
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


class TimedSinkConnector(SinkConnector):
    def start(self, config: Mapping[str, Any]) -> None:
        self.inner = _load(config["timed.connector.class"])()
        self.inner.initialize(self.context)
        self.inner.start(config)

    def validate(self, config: Mapping[str, Any]) -> Any:
        return _load(config["timed.connector.class"])().validate(config)

    def task_class(self) -> type[Task]:
        return TimedSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        configs = self.inner.task_configs(max_tasks)
        for config in configs:
            missing = {"timed.path", "timed.connector.class"} - set(config)
            if missing:
                raise ValueError(f"the wrapped connector's task configs lack {sorted(missing)}")
        return configs

    def stop(self, connector_deleted: bool = False) -> None:
        self.inner.stop(connector_deleted=connector_deleted)


def read_timings(path: str) -> list[dict[str, Any]]:
    """One entry per task run, as written at ``stop``."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
