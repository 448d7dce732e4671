"""A sink connector that journals every hook call, for tests of the runtime's contracts.

Tasks run in Spark's Python workers, so the journal is a JSON-lines file
(``journal.path``) that tests read back with :func:`read_journal`. Each line is one
event: ``{"task": 0, "at": <time.time()>, "event": "pre_commit", "closing": true, "offsets": {...}, ...}``.

Behaviour knobs (all optional, in the connector config):

* ``fail.put.at.offset``: ``put`` raises ``ConnectError`` when a batch holds this offset.
* ``retriable.puts``: the first N non-empty ``put`` calls raise ``RetriableError``.
* ``retry.timeout.ms``: with ``retriable.puts``, call ``context.timeout()`` with this.
* ``pre_commit``: ``default`` (commit what is offered), ``empty`` (commit nothing),
  ``beyond`` (ask for offsets past what was consumed and for an unassigned partition).
* ``rewind.on.open``: ``"topic:partition:offset,..."`` rewinds applied from ``open``.
* ``pause.on.open``: ``true``: ``open`` pauses its partitions (``context.pause``).
* ``resume.at.pre_commit``: the Nth ``pre_commit`` resumes every assigned partition
  (``context.resume``) and journals ``resumed``.
* ``report.errant.values``: comma-separated values that ``put`` reports as errant.
* ``request.commit.every``: call ``context.request_commit()`` every N records.
* ``slow.put.seconds``: the first non-empty ``put`` sleeps this long (to exceed
  ``max.poll.interval.ms`` and lose the partitions).
* ``slow.closing.pre_commit.seconds``: a closing ``pre_commit`` journals
  ``closing_pre_commit_started`` and sleeps this long first (to kill the driver in it).
* ``start.failures``: the connector's ``start`` raises ``ConnectError`` this many times
  (counted in ``<journal.path>.starts``) before it succeeds, as a flaky external system.

``stop(connector_deleted=True)`` of the connector reports one removed item,
``"journal marker for <name>"``, through ``cleanup_report()``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from conveyor.api import ConnectError, RetriableError, SinkConnector, SinkRecord, SinkTask, Task, TopicPartition
from conveyor.api.batches import sink_records


def _tp(tp: TopicPartition) -> str:
    return f"{tp.topic}:{tp.partition}"


class _Journal:
    _lock = threading.Lock()

    def __init__(self, path: str, task_id: int | None) -> None:
        self._path = path
        self._task = task_id

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps({"task": self._task, "pid": os.getpid(), "at": time.time(), "event": event, **fields},
                          default=str)
        with self._lock, open(self._path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def read_journal(path: str | Path) -> list[dict[str, Any]]:
    """All events written so far, in order."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


class RecordingSinkTask(SinkTask):
    def start(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.journal = _Journal(config["journal.path"], int(config["task.id"]))
        self.fail_at = int(config["fail.put.at.offset"]) if "fail.put.at.offset" in config else None
        self.retriable_left = int(config.get("retriable.puts", 0))
        self.retry_timeout_ms = int(config["retry.timeout.ms"]) if "retry.timeout.ms" in config else None
        self.mode = config.get("pre_commit", "default")
        self.errant = {v for v in str(config.get("report.errant.values", "")).split(",") if v}
        self.commit_every = int(config.get("request.commit.every", 0))
        self.seen = 0
        self.slow_put_s = float(config.get("slow.put.seconds", 0))
        self.resume_at = int(config.get("resume.at.pre_commit", 0))
        self.pre_commits = 0
        self.journal.write("start", config={k: v for k, v in config.items() if k != "journal.path"})

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        self.journal.write("open", partitions=[_tp(tp) for tp in partitions], closing=self.context.is_closing())
        rewinds = {}
        for item in str(self.config.get("rewind.on.open", "")).split(","):
            if item:
                topic, partition, offset = item.rsplit(":", 2)
                tp = TopicPartition(topic, int(partition))
                if tp in partitions:
                    rewinds[tp] = int(offset)
        if rewinds:
            self.context.offset(rewinds)
        if str(self.config.get("pause.on.open", "false")).lower() == "true":
            self.context.pause(*partitions)

    def put(self, records: Sequence[SinkRecord]) -> None:
        if records and self.slow_put_s:
            self.journal.write("put_slow", seconds=self.slow_put_s)
            time.sleep(self.slow_put_s)
            self.slow_put_s = 0
        if records and self.retriable_left > 0:
            self.retriable_left -= 1
            self.journal.write("put_retriable", offsets=[r.kafka_offset for r in records])
            if self.retry_timeout_ms is not None:
                from datetime import timedelta

                self.context.timeout(timedelta(milliseconds=self.retry_timeout_ms))
            raise RetriableError("asked to retry")
        if self.fail_at is not None and any(r.kafka_offset == self.fail_at for r in records):
            self.journal.write("put_failed", offsets=[r.kafka_offset for r in records])
            raise ConnectError(f"asked to fail at offset {self.fail_at}")
        reporter = self.context.errant_record_reporter()
        kept = []
        for r in records:
            if reporter is not None and str(r.value) in self.errant:
                reporter.report(r, ValueError(f"errant value {r.value!r}")).result(timeout=30)
            else:
                kept.append(r)
        if records:
            self.journal.write(
                "put",
                records=[
                    {"topic": r.topic, "partition": r.kafka_partition, "offset": r.kafka_offset, "key": r.key,
                     "value": r.value, "original_topic": r.original_topic, **_headers(r)}
                    for r in kept
                ],
                closing=self.context.is_closing(),
            )
        self.seen += len(records)
        if self.commit_every and self.seen >= self.commit_every:
            self.seen = 0
            self.context.request_commit()

    def pre_commit(self, offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        closing = self.context.is_closing()
        self.pre_commits += 1
        if self.pre_commits == self.resume_at:
            self.context.resume(*self.context.assignment())
            self.journal.write("resumed", partitions=sorted(_tp(tp) for tp in self.context.assignment()))
        slow = float(self.config.get("slow.closing.pre_commit.seconds", 0))
        if closing and slow:
            self.journal.write("closing_pre_commit_started", offsets={_tp(tp): off for tp, off in offsets.items()})
            time.sleep(slow)
        if self.mode == "empty":
            result: dict[TopicPartition, int] = {}
        elif self.mode == "beyond":
            result = {tp: off + 1000 for tp, off in offsets.items()}
            result[TopicPartition("not-assigned-topic", 0)] = 5
        else:
            result = dict(offsets)
        self.journal.write(
            "pre_commit",
            closing=closing,
            offsets={_tp(tp): off for tp, off in offsets.items()},
            returned={_tp(tp): off for tp, off in result.items()},
            assignment=sorted(_tp(tp) for tp in self.context.assignment()),
        )
        return result

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        self.journal.write("close", partitions=[_tp(tp) for tp in partitions], closing=self.context.is_closing())

    def stop(self, connector_deleted: bool = False) -> None:
        self.journal.write("stop", connector_deleted=connector_deleted)


class RecordingBatchSinkTask(RecordingSinkTask):
    """Takes record batches (``put_batch``): journals ``put_batch`` with the row count, then
    handles the rows as :meth:`RecordingSinkTask.put` does (every knob applies)."""

    def put_batch(self, batch: pa.RecordBatch) -> None:
        self.journal.write("put_batch", rows=batch.num_rows, value_type=str(batch.schema.field("value").type))
        self.put(sink_records(batch))


class RecordingSinkConnector(SinkConnector):
    """Hands every task the connector's config plus ``task.id``."""

    def start(self, config: Mapping[str, Any]) -> None:
        if "journal.path" not in config:
            from conveyor.api import ConfigError

            raise ConfigError({"journal.path": "required: where the journal is written"})
        self.config = dict(config)
        failures = int(self.config.get("start.failures", 0))
        if failures:
            counter = Path(f"{self.config['journal.path']}.starts")
            starts = int(counter.read_text()) if counter.exists() else 0
            counter.write_text(str(starts + 1))
            if starts < failures:
                _Journal(self.config["journal.path"], None).write("connector_start_failed", attempt=starts + 1)
                raise ConnectError(f"external system unavailable (attempt {starts + 1})")
        self.deleted = False
        _Journal(self.config["journal.path"], None).write("connector_start", config=self.config)

    def validate(self, config: Mapping[str, Any]) -> None:
        if "journal.path" not in config:
            from conveyor.api import ConfigError

            raise ConfigError({"journal.path": "Field required"})
        return None

    def task_class(self) -> type[Task]:
        return RecordingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        return [{**self.config, "task.id": str(i)} for i in range(max_tasks)]

    def stop(self, connector_deleted: bool = False) -> None:
        self.deleted = connector_deleted
        _Journal(self.config["journal.path"], None).write("connector_stop", connector_deleted=connector_deleted)

    def cleanup_report(self) -> list[str]:
        return [f"journal marker for {self.config.get('name', 'connector')}"] if self.deleted else []


class OffsetsRefusingSinkConnector(RecordingSinkConnector):
    """A recording sink whose ``alter_offsets`` refuses every change (KIP-875 tests)."""

    def alter_offsets(self, config: Mapping[str, Any], offsets: Mapping[Any, int | None]) -> bool:
        raise ValueError("offsets are immutable here")


def _headers(record: SinkRecord) -> dict[str, Any]:
    """``{"headers": [[key, value, schema type or None], ...]}`` when the record has headers."""
    if not record.headers:
        return {}
    return {"headers": [[h.key, h.value, None if h.schema is None else h.schema.type.value] for h in record.headers]}


class RecordingBatchSinkConnector(RecordingSinkConnector):
    """:class:`RecordingSinkConnector` whose tasks take record batches."""

    def task_class(self) -> type[Task]:
        return RecordingBatchSinkTask
