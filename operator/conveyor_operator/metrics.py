"""The operator's own Prometheus metrics, served by ``conveyor-operator`` on
``CONVEYOR_OPERATOR_METRICS_PORT`` (``GET /metrics``; the chart's ``metrics.operator.port``,
8081: kopf's liveness probe has 8080).

=================================================  ==========================================
``conveyor_operator_reconciles_total{result}``     reconciliations of a Connector (create,
                                                   update, resume), by result: ``applied``,
                                                   ``rejected`` (an invalid or not permitted
                                                   spec: reported in its conditions, not
                                                   retried), ``retry`` (kopf retries later,
                                                   e.g. a missing Secret), ``error`` (an
                                                   unexpected exception; kopf retries too)
``conveyor_operator_reconcile_failures_total``     reconciliations that raised (``retry`` and
                                                   ``error``)
``conveyor_operator_reconcile_duration_seconds``   histogram of their duration
``conveyor_operator_status_reads_total{outcome}``  reads of a driver's status, by outcome:
                                                   ``answered``, ``unreachable`` (no answer,
                                                   or an error status)
``conveyor_operator_status_writes_total{result}``  what each read led to: ``written`` (the
                                                   Connector's status changed), ``unchanged``
                                                   (no request sent)
=================================================  ==========================================

plus prometheus_client's process and Python collectors. The families live in :data:`REGISTRY`,
not prometheus_client's global one, so that importing the operator in a test process twice
(or next to a driver) never registers a name twice.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import kopf
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    gc_collector,
    platform_collector,
    process_collector,
    start_http_server,
)

REGISTRY = CollectorRegistry()
process_collector.ProcessCollector(registry=REGISTRY)
platform_collector.PlatformCollector(registry=REGISTRY)
gc_collector.GCCollector(registry=REGISTRY)

RESULTS = ("applied", "rejected", "retry", "error")
RECONCILES = Counter("conveyor_operator_reconciles", "Reconciliations of a Connector, by result.", ["result"],
                     registry=REGISTRY)
FAILURES = Counter("conveyor_operator_reconcile_failures",
                   "Reconciliations of a Connector that raised (kopf retries them).", registry=REGISTRY)
DURATION = Histogram("conveyor_operator_reconcile_duration_seconds", "Duration of a reconciliation of a Connector.",
                     buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60), registry=REGISTRY)
STATUS_READS = Counter("conveyor_operator_status_reads", "Reads of a driver's status, by outcome.", ["outcome"],
                       registry=REGISTRY)
STATUS_WRITES = Counter("conveyor_operator_status_writes",
                        "Status reads that changed the Connector's status (written) or not (unchanged).", ["result"],
                        registry=REGISTRY)
# every label from the start: rate() needs the series before its first increment
for _result in RESULTS:
    RECONCILES.labels(_result)
for _outcome_name in ("answered", "unreachable"):
    STATUS_READS.labels(_outcome_name)
for _result in ("written", "unchanged"):
    STATUS_WRITES.labels(_result)

_outcome = threading.local()

F = TypeVar("F", bound=Callable[..., Any])


def reject() -> None:
    """Mark the running reconciliation ``rejected`` (the spec is reported invalid, not retried)."""
    _outcome.result = "rejected"


def observe_reconcile(handler: F) -> F:
    """Count and time each call of a reconcile ``handler`` (see the module's table)."""

    @functools.wraps(handler)
    def observed(*args: Any, **kwargs: Any) -> Any:
        _outcome.result = "applied"
        with DURATION.time():
            try:
                return handler(*args, **kwargs)
            except kopf.TemporaryError:
                _outcome.result = "retry"
                raise
            except BaseException:
                _outcome.result = "error"
                raise
            finally:
                RECONCILES.labels(_outcome.result).inc()
                if _outcome.result in ("retry", "error"):
                    FAILURES.inc()

    return observed  # type: ignore[return-value]


def serve(port: int, address: str = "0.0.0.0") -> Any:
    """Serve :data:`REGISTRY` on ``http://<address>:<port>/metrics`` from a daemon thread;
    returns the server (``shutdown()`` stops it). Port 0 picks a free one (``server.server_port``)."""
    server, _thread = start_http_server(port, addr=address, registry=REGISTRY)
    return server
