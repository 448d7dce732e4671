"""A PostgreSQL sink with a ceiling on each task's rate, as a slow external system would put
one: for tests and benchmarks of the autoscaler, whose decisions come from the tasks' rate and
busy time. Spec class ``conveyor.testing.throttled:ThrottledPostgresSinkConnector``.

``throttle.records.per.second`` (per task; required, above 0): each ``put`` or ``put_batch``
takes at least its records' share of a second at that rate (the write's own time included: it
sleeps for the rest). The sleep is inside the hook, so the runtime counts it as busy time. Everything else is the
PostgreSQL sink's (:mod:`conveyor.connectors.postgres.sink`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from conveyor.api import ConfigError, SinkRecord
from conveyor.connectors.postgres.sink import PostgresSinkConnector, PostgresSinkTask

RATE = "throttle.records.per.second"


def _rate(config: Mapping[str, Any]) -> float:
    try:
        rate = float(config[RATE])
    except (KeyError, TypeError, ValueError):
        raise ConfigError({RATE: "a number of records a second above 0 is required"}) from None
    if rate <= 0:
        raise ConfigError({RATE: "a number of records a second above 0 is required"})
    return rate


class ThrottledPostgresSinkTask(PostgresSinkTask):
    """:class:`PostgresSinkTask` taking at most ``throttle.records.per.second`` records a second."""

    def start(self, config: Mapping[str, Any]) -> None:
        self._rate = _rate(config)
        self._free_at = time.monotonic()
        super().start(config)

    def put(self, records: Sequence[SinkRecord]) -> None:
        began = time.monotonic()
        super().put(records)
        self._take(len(records), began)

    def put_batch(self, batch: pa.RecordBatch) -> None:
        began = time.monotonic()
        super().put_batch(batch)
        self._take(batch.num_rows, began)

    def _take(self, records: int, began: float) -> None:
        self._free_at = max(self._free_at, began) + records / self._rate
        time.sleep(max(0.0, self._free_at - time.monotonic()))


class ThrottledPostgresSinkConnector(PostgresSinkConnector):
    """:class:`PostgresSinkConnector` whose tasks are :class:`ThrottledPostgresSinkTask`."""

    def start(self, config: Mapping[str, Any]) -> None:
        _rate(config)
        super().start(config)

    def task_class(self) -> type[PostgresSinkTask]:
        return ThrottledPostgresSinkTask
