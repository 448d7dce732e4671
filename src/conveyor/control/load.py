"""A sink connector's load as its driver's ``GET /status`` gives it (``"load"``): the counters
the operator's autoscaler takes rates of between two reads (:mod:`conveyor.manifest.autoscaler`).

Every field is a total at the time of the read, so a rate is the difference of two reads over
the time between them; a total that went down (a task restarted, the driver restarted) starts
the measuring again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from conveyor.control.protocol import TaskReport


@dataclass(frozen=True)
class SinkLoad:
    tasks: int
    """Tasks RUNNING."""
    records_put: int
    """Records the running tasks gave to ``put`` / ``put_batch`` since each began."""
    busy_time_ms: int
    """Milliseconds the running tasks spent not waiting for records, summed."""
    running_time_ms: int
    """Milliseconds the running tasks' loops have run, summed."""
    partitions: int
    """Partitions of the subscribed topics."""
    lag: int
    """Records behind over all of them: log end less the group's committed offset."""
    log_end: int
    """Sum of their log end offsets (it grows by the records produced)."""

    @classmethod
    def of(cls, reports: Iterable[TaskReport], group: Mapping[str, int]) -> SinkLoad:
        """From the running tasks' latest reports and the group's totals
        (:meth:`conveyor.runtime.kafka.group_lag.GroupLag.totals`)."""
        reports = list(reports)
        return cls(tasks=len(reports), records_put=sum(r.records_put for r in reports),
                   busy_time_ms=sum(r.busy_time_ms for r in reports),
                   running_time_ms=sum(r.running_time_ms for r in reports),
                   partitions=int(group["partitions"]), lag=int(group["lag"]), log_end=int(group["log_end"]))

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SinkLoad:
        """Raises:
            KeyError, TypeError, ValueError: ``data`` is not a load document."""
        return cls(**{name: int(data[name]) for name in cls.__dataclass_fields__})
