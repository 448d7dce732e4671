"""What runs inside the Spark task: pick the runner for the connector's kind and run it.

The Spark job of a task has one partition holding one :class:`TaskSpec`; the function
below is its ``mapPartitions`` body and yields the task's final report as JSON.
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import os
import signal
from collections.abc import Iterable, Iterator
from typing import Any

from conveyor.api import SinkConnector, SourceConnector
from conveyor.api.redaction import RedactSecrets, remember_all
from conveyor.control.protocol import TaskReport, TaskSpec
from conveyor.runtime.config.plugins import load_connector_class


def configure_worker_logging() -> None:
    """Log to the Python worker's stderr (Spark's executor log) once per process."""
    root = logging.getLogger()
    if not any(getattr(h, "_conveyor", False) for h in root.handlers):
        handler = logging.StreamHandler()
        handler._conveyor = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(name)s] %(message)s"))
        handler.addFilter(RedactSecrets())
        root.addHandler(handler)
        root.setLevel(os.environ.get("CONVEYOR_LOG_LEVEL", "INFO"))
        logging.getLogger("py4j").setLevel(logging.WARNING)
        # `kill -USR1 <python worker>` prints every thread's stack to the executor log.
        faulthandler.register(signal.SIGUSR1, all_threads=True)


GC_GEN0_THRESHOLD = 50_000
"""CPython's default (700) collects several times per batch of ``max.poll.records``
records while the batch is still alive, scanning and promoting every record (measured: a
fifth of a no-op sink's cost per record); at 50,000 the records of a batch are mostly freed
before a collection sees them."""


def tune_gc() -> None:
    """Collector settings for a Python worker that runs one long-lived task: the gen-0
    threshold above, and everything allocated so far (modules, the connector's classes)
    frozen out of later full collections."""
    _gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(_gen0, GC_GEN0_THRESHOLD), gen1, gen2)
    gc.freeze()


def run_task(spec: TaskSpec) -> TaskReport:
    """Run one task to its end and return its final report."""
    remember_all(spec.resolved_values)
    tune_gc()
    connector_cls = load_connector_class(spec.connector_class)
    if issubclass(connector_cls, SinkConnector):
        from conveyor.runtime.task.sink.runner import SinkTaskRunner  # only the runner of the connector's kind

        return SinkTaskRunner(spec).run()
    if issubclass(connector_cls, SourceConnector):
        from conveyor.runtime.task.source.runner import SourceTaskRunner  # (and its Kafka clients) loads

        return SourceTaskRunner(spec).run()
    raise TypeError(f"{spec.connector_class} is neither a sink nor a source connector")


def run_task_partition(specs: Iterable[TaskSpec]) -> Iterator[dict[str, Any]]:
    """``mapPartitions`` body of a task's Spark job."""
    configure_worker_logging()
    for spec in specs:
        yield run_task(spec).to_json()
