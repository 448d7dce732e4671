"""A source connector that emits numbered records, for tests and benchmarks of the source
runtime.

Each task owns ``streams.per.task`` source partitions ``{"stream": "s<N>"}``; record ``n``
of stream ``s`` has key ``"s-n"``, value ``{"stream": s, "seq": n}`` and source offset
``{"seq": n}``, and goes to ``topic``. A task resumes after the offset the offsets topic
holds. Config keys:

* ``topic`` (required), ``streams.per.task`` (default 1), ``records.per.stream``
  (default unbounded), ``batch.size`` (records per ``poll``, default 500);
* ``journal.path``: when set, ``commit_record`` and ``commit`` calls are journaled as
  JSON lines (``{"event": "commit_record", "key": ..., "metadata": {...} | null}``);
* ``poll.delay.ms``: sleep before each poll (a slow source);
* ``transaction.commit.every``: with ``transaction.boundary=connector``, ask for a commit
  after every N records through the transaction context;
* ``timing.path``: when set, the task appends ``{"first_poll": t, "last_done": t,
  "records": n}`` at ``stop`` (wall-clock seconds): its first ``poll`` and the
  ``commit_record`` with metadata of its last record (with exactly-once delivery: once
  its transaction committed). For benchmarks;
* ``record.headers``: ``typed`` gives each record the headers ``seq`` (its number, an
  ``int32`` schema), ``note`` (``"n=<seq>"``, no schema) and ``raw`` (``b"\\x00<seq % 256>"``,
  no schema): what a ``header.converter`` writes.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping
from typing import Any

from conveyor.api import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    Header,
    RecordMetadata,
    Schema,
    SchemaType,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)


class SequenceSourceTask(SourceTask):
    def start(self, config: Mapping[str, Any]) -> None:
        self.topic = config["topic"]
        task_id = int(config["task.id"])
        per_task = int(config.get("streams.per.task", 1))
        self.limit = int(config["records.per.stream"]) if "records.per.stream" in config else None
        self.batch_size = int(config.get("batch.size", 500))
        self.delay_s = float(config.get("poll.delay.ms", 0)) / 1000
        self.commit_every = int(config.get("transaction.commit.every", 0))
        self.journal = config.get("journal.path")
        self.streams = [f"s{task_id * per_task + i}" for i in range(per_task)]
        reader = self.context.offset_storage_reader()
        self.next_seq = {}
        for stream in self.streams:
            offset = reader.offset({"stream": stream})
            self.next_seq[stream] = (offset["seq"] + 1) if offset else 0
        self._cycle = itertools.cycle(self.streams)
        self._sent = 0
        self.timing = config.get("timing.path")
        self.first_poll: float | None = None
        self.last_done: float | None = None
        self.done_records = 0
        self.typed_headers = config.get("record.headers") == "typed"

    def poll(self) -> list[SourceRecord]:
        if self.timing and self.first_poll is None:
            self.first_poll = time.time()
        if self.delay_s:
            time.sleep(self.delay_s)
        out: list[SourceRecord] = []
        for _ in range(len(self.streams)):
            stream = next(self._cycle)
            start = self.next_seq[stream]
            end = start + max(1, self.batch_size // len(self.streams))
            if self.limit is not None:
                end = min(end, self.limit)
            for seq in range(start, end):
                out.append(SourceRecord(
                    source_partition={"stream": stream}, source_offset={"seq": seq}, topic=self.topic,
                    key=f"{stream}-{seq}", value={"stream": stream, "seq": seq},
                    headers=_typed_headers(seq) if self.typed_headers else (),
                ))
            self.next_seq[stream] = max(start, end)
        if not out:
            time.sleep(0.05)
        transaction = self.context.transaction_context()
        if transaction is not None and self.commit_every:
            for record in out:
                self._sent += 1
                if self._sent % self.commit_every == 0:
                    transaction.commit_transaction(record)
        return out

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        if self.timing and metadata is not None:
            self.done_records += 1
            self.last_done = time.time()
        if self.journal:
            meta = None if metadata is None else {
                "topic": metadata.topic, "partition": metadata.partition, "offset": metadata.offset,
                "timestamp": metadata.timestamp,
            }
            self._write({"event": "commit_record", "key": record.key, "metadata": meta})

    def commit(self) -> None:
        if self.journal:
            self._write({"event": "commit"})

    def stop(self, connector_deleted: bool = False) -> None:
        if getattr(self, "timing", None):
            with open(self.timing, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"first_poll": self.first_poll, "last_done": self.last_done,
                                     "records": self.done_records}) + "\n")

    def _write(self, event: dict[str, Any]) -> None:
        with open(self.journal, "a", encoding="utf-8") as fh:  # type: ignore[arg-type]
            fh.write(json.dumps(event) + "\n")


_INT32 = Schema(SchemaType.INT32)


def _typed_headers(seq: int) -> tuple[Header, ...]:
    return Header("seq", seq, _INT32), Header("note", f"n={seq}"), Header("raw", bytes([0, seq % 256]))


class SequenceSourceConnector(SourceConnector):
    """Declares exactly-once support and connector-defined transaction boundaries."""

    def start(self, config: Mapping[str, Any]) -> None:
        if "topic" not in config:
            from conveyor.api import ConfigError

            raise ConfigError({"topic": "Field required"})
        self.config = dict(config)

    def task_class(self) -> type[Task]:
        return SequenceSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        return [{**self.config, "task.id": str(i)} for i in range(max_tasks)]

    def exactly_once_support(self, config: Mapping[str, Any]) -> ExactlyOnceSupport:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, Any]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class UndeclaredSourceConnector(SequenceSourceConnector):
    """Does not say whether it supports exactly-once delivery (the API default)."""

    def exactly_once_support(self, config: Mapping[str, Any]) -> ExactlyOnceSupport | None:  # type: ignore[override]
        return None
