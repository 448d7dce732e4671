"""A PostgreSQL sink with a ceiling on each task's rate, as a slow external system would put
one: for tests and benchmarks of the autoscaler, whose decisions come from the tasks' rate and
busy time. Spec class ``conveyor.testing.throttled:ThrottledPostgresSinkConnector``.

``throttle.records.per.second`` (per task; required, above 0): after each ``put`` or
``put_batch`` the task sleeps until its records so far would have taken that long at that rate.
The sleep is inside the hook, so the runtime counts it as busy time. Everything else is the
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
        super().put(records)
        self._take(len(records))

    def put_batch(self, batch: pa.RecordBatch) -> None:
        super().put_batch(batch)
        self._take(batch.num_rows)

    def _take(self, records: int) -> None:
        now = time.monotonic()
        self._free_at = max(self._free_at, now) + records / self._rate
        time.sleep(max(0.0, self._free_at - now))


class ThrottledPostgresSinkConnector(PostgresSinkConnector):
    """:class:`PostgresSinkConnector` whose tasks are :class:`ThrottledPostgresSinkTask`."""

    def start(self, config: Mapping[str, Any]) -> None:
        _rate(config)
        super().start(config)

    def task_class(self) -> type[PostgresSinkTask]:
        return ThrottledPostgresSinkTask
