"""A sink connector that wraps another one, journals what each task was given, and makes
one task fail: for benchmarks and tests of rebalances (the KIP-275 scenario).

Config: ``faulty.connector.class`` (the wrapped sink, entry point or dotted path),
``faulty.journal.path`` (JSON lines: per ``put``, per partition, the first and last offset
and the count, with the task id), ``faulty.fail.task`` and ``faulty.fail.after.records``
(that task's ``put`` raises ``ConnectError`` once it has been given this many records).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from conveyor.api import ConnectError, SinkConnector, SinkRecord, SinkTask, Task, TopicPartition


def _load(name: str) -> type[SinkConnector]:
    from conveyor.runtime.config.plugins import load_connector_class

    cls = load_connector_class(name)
    assert issubclass(cls, SinkConnector)
    return cls


class FaultySinkTask(SinkTask):
    def start(self, config: Mapping[str, Any]) -> None:
        self.task_id = int(config["faulty.task.id"])
        self.journal = config["faulty.journal.path"]
        fail_task = config.get("faulty.fail.task")
        self.fail_after = int(config["faulty.fail.after.records"]) if fail_task is not None and \
            int(fail_task) == self.task_id else None
        self.given = 0
        self.inner: SinkTask = _load(config["faulty.connector.class"])().task_class()()  # type: ignore[assignment]
        self.inner.initialize(self.context)
        self.inner.start(config)

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        self.inner.open(partitions)

    def put(self, records: Sequence[SinkRecord]) -> None:
        if self.fail_after is not None and self.given + len(records) > self.fail_after:
            raise ConnectError(f"task {self.task_id} fails after {self.fail_after} records, as configured")
        self.inner.put(records)
        self.given += len(records)
        if records:
            spans: dict[tuple[str, int], list[int]] = {}
            for r in records:
                span = spans.setdefault((r.original_topic, r.original_kafka_partition), [r.kafka_offset, 0, 0])
                span[1] = r.kafka_offset
                span[2] += 1
            with open(self.journal, "a", encoding="utf-8") as fh:
                for (topic, partition), (first, last, count) in spans.items():
                    fh.write(json.dumps({"task": self.task_id, "partition": partition, "first": first,
                                         "last": last, "count": count}) + "\n")

    def pre_commit(self, offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        return self.inner.pre_commit(offsets)

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        self.inner.close(partitions)

    def stop(self, connector_deleted: bool = False) -> None:
        self.inner.stop(connector_deleted=connector_deleted)


class FaultySinkConnector(SinkConnector):
    def start(self, config: Mapping[str, Any]) -> None:
        self.inner = _load(config["faulty.connector.class"])()
        self.inner.initialize(self.context)
        self.inner.start(config)

    def validate(self, config: Mapping[str, Any]) -> Any:
        return _load(config["faulty.connector.class"])().validate(config)

    def task_class(self) -> type[Task]:
        return FaultySinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        return [{**c, "faulty.task.id": str(i)} for i, c in enumerate(self.inner.task_configs(max_tasks))]

    def stop(self, connector_deleted: bool = False) -> None:
        self.inner.stop(connector_deleted=connector_deleted)


def reconsumed(journal_path: str, exclude_task: int | None = None) -> tuple[int, int]:
    """``(records given more than once, records given in all)``, counting only the puts
    of tasks other than ``exclude_task``; a record is (partition, offset)."""
    seen: dict[int, set[int]] = {}
    given = 0
    repeated = 0
    with open(journal_path, encoding="utf-8") as fh:
        entries = [json.loads(line) for line in fh if line.strip()]
    for e in entries:
        offsets = range(e["first"], e["last"] + 1)
        mine = seen.setdefault(e["partition"], set())
        if exclude_task is not None and e["task"] == exclude_task:
            mine.update(offsets)
            continue
        given += e["count"]
        repeated += sum(1 for o in offsets if o in mine)
        mine.update(offsets)
    return repeated, given


def unique_given(journal_path: str) -> int:
    """How many distinct records (partition, offset) the tasks were given so far."""
    seen: dict[int, set[int]] = {}
    try:
        with open(journal_path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    e = json.loads(line)
                    seen.setdefault(e["partition"], set()).update(range(e["first"], e["last"] + 1))
    except FileNotFoundError:
        return 0
    return sum(len(v) for v in seen.values())
