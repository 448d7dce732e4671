"""A sink that accepts every record and writes nothing: for benchmarks and smoke tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from conveyor.api import SinkConnector, SinkRecord, SinkTask, Task


class NoopSinkTask(SinkTask):
    """Counts records; commits whatever the runtime offers."""

    def __init__(self) -> None:
        self.count = 0

    def start(self, config: Mapping[str, Any]) -> None:
        self.count = 0

    def put(self, records: Sequence[SinkRecord]) -> None:
        self.count += len(records)

    def batch_columns(self) -> frozenset[str]:
        """None of the optional columns: it only counts rows."""
        return frozenset()

    def put_batch(self, batch: pa.RecordBatch) -> None:
        self.count += batch.num_rows


class NoopSinkConnector(SinkConnector):
    """Entry point ``noop-sink``. Every task gets the connector's configuration."""

    def start(self, config: Mapping[str, Any]) -> None:
        self._config = dict(config)

    def task_class(self) -> type[Task]:
        return NoopSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        return [dict(self._config) for _ in range(max_tasks)]
