"""The connector's driver (Kafka Connect's "herder" for one connector), a PySpark application.

``Driver.start()`` validates the configuration, starts the connector, asks it for task
configurations and launches each task as its own long-running Spark job (job group
``task-<id>``, one partition) from its own driver thread. The driver serves the control
API; task runners report to it and take their directives from it. ``Driver.stop()``
(SIGTERM, Ctrl-C, ``POST /stop``) gives every task a closing commit, then stops the
connector.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from conveyor.api import ConfigError, Connector, ConnectorContext, SinkConnector, SourceConnector
from conveyor.manifest import ConnectorManifest, ConnectorState
from conveyor.runtime.metrics import TaskMetricsCollector
from conveyor.runtime.plugins import PluginError, load_connector_class
from conveyor.runtime.protocol import Action, Directive, TaskReport, TaskSpec, TaskState

log = logging.getLogger(__name__)


class DriverError(RuntimeError):
    """The driver cannot start: bad configuration, unknown class, unreachable service.
    Nothing was left running when this is raised."""


@dataclass
class TaskHandle:
    """The driver's view of one task."""

    task_id: int
    config: dict[str, Any]
    attempt: int = 0
    directive: Directive = field(default_factory=Directive)
    report: TaskReport | None = None
    thread: threading.Thread | None = None
    done: threading.Event = field(default_factory=threading.Event)
    state: TaskState = TaskState.UNASSIGNED
    trace: str | None = None


class _Context(ConnectorContext):
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def request_task_reconfiguration(self) -> None:
        self._driver.reconfiguration_requested.set()

    def raise_error(self, error: BaseException) -> None:
        self._driver.fail_connector(error)


class Driver:
    """Runs one connector on a SparkSession.

    Args:
        manifest: the validated Connector manifest.
        spark: a SparkSession to use; when ``None`` one is created with ``master``.
        master: Spark master URL; default ``local[N]`` with a slot per task.
        control_host / control_port: where the control API listens (port 0 picks one).
        advertised_host: host name task runners use to reach the control API.
    """

    def __init__(
        self,
        manifest: ConnectorManifest,
        spark: Any = None,
        master: str | None = None,
        control_host: str = "127.0.0.1",
        control_port: int = 8083,
        advertised_host: str | None = None,
    ) -> None:
        self.manifest = manifest
        self.name = manifest.name
        self._spark = spark
        self._own_spark = spark is None
        self._master = master
        self._control_host = control_host
        self._control_port = control_port
        self._advertised_host = advertised_host
        self.connector: Connector | None = None
        self.connector_state = TaskState.UNASSIGNED
        self.connector_trace: str | None = None
        self.connector_type = "unknown"
        self.tasks: dict[int, TaskHandle] = {}
        self._lock = threading.Condition()
        self._stopping = False
        self.stopped = threading.Event()
        self.reconfiguration_requested = threading.Event()
        self.metrics_registry = CollectorRegistry()
        self.metrics_registry.register(TaskMetricsCollector(self))
        self.server: Any = None
        self.control_url = ""
        self.worker_id = ""
        self.started_at = time.time()
        self.stop_result: dict[str, Any] | None = None

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Validate, start the connector and launch its tasks.

        Raises:
            DriverError: unknown connector class, invalid configuration (names the key),
                unreachable broker, or a connector whose ``start`` raised. Nothing is
                left running.
        """
        spec = self.manifest.spec
        try:
            connector_cls = load_connector_class(spec.connector_class)
        except PluginError as exc:
            raise DriverError(str(exc)) from None
        if issubclass(connector_cls, SinkConnector):
            self.connector_type = "sink"
        elif issubclass(connector_cls, SourceConnector):
            raise DriverError(f"{spec.connector_class}: source connectors are not supported by this runtime yet")
        connector = connector_cls()
        connector.initialize(_Context(self))
        self._validate(connector)
        self._check_kafka()
        self._prepare_kafka()
        try:
            connector.start(dict(spec.config))
        except Exception as exc:
            raise DriverError(f"connector {self.name} failed to start: {exc}") from exc
        self.connector = connector
        try:
            task_configs = connector.task_configs(spec.tasks_max)
            if len(task_configs) > spec.tasks_max:
                raise DriverError(f"task_configs returned {len(task_configs)} configs for tasksMax={spec.tasks_max}")
            self._start_control_api()
            self._ensure_spark(len(task_configs))
        except BaseException:
            self._stop_connector(False)
            self._stop_control_api()
            raise
        self.connector_state = TaskState.RUNNING
        initial = Action.PAUSE if spec.state is ConnectorState.PAUSED else Action.RUN
        for task_id, config in enumerate(task_configs):
            handle = TaskHandle(task_id, {**config, "name": self.name}, directive=Directive(initial, 1))
            self.tasks[task_id] = handle
            self._launch(handle)
        log.info("connector %s started with %d task(s); control API at %s", self.name, len(self.tasks),
                 self.control_url)

    def _validate(self, connector: Connector) -> None:
        config = dict(self.manifest.spec.config)
        errors: dict[str, str] = {}
        try:
            connector.validate(config)
        except ConfigError as exc:
            errors.update(exc.errors)
        if self.connector_type == "sink":
            from conveyor.runtime.settings import parse_sink_settings

            try:
                settings = parse_sink_settings(config)
            except ConfigError as exc:
                errors.update(exc.errors)
            else:
                errors.update(_pipeline_errors(config, settings.key_converter, settings.value_converter))
        if errors:
            detail = "\n".join(f"  spec.config.{key}: {msg}" for key, msg in errors.items())
            raise DriverError(f"connector {self.name}: invalid configuration\n{detail}")

    def _check_kafka(self) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        servers = self.manifest.spec.kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": servers, "socket.connection.setup.timeout.ms": 5000})
        try:
            admin.list_topics(timeout=10)
        except KafkaException as exc:
            raise DriverError(f"cannot reach Kafka at {servers}: {exc.args[0].str()}") from None

    def _prepare_kafka(self) -> None:
        """Create the dead-letter queue topic when one is configured (as Kafka Connect does)."""
        if self.connector_type != "sink":
            return
        from confluent_kafka.admin import AdminClient

        from conveyor.runtime.dead_letter_queue import ensure_topic
        from conveyor.runtime.settings import parse_sink_settings

        settings = parse_sink_settings(self.manifest.spec.config)
        if settings.dlq_topic:
            admin = AdminClient({"bootstrap.servers": self.manifest.spec.kafka.bootstrap_servers})
            ensure_topic(admin, settings.dlq_topic, settings.dlq_replication_factor)

    def _start_control_api(self) -> None:
        from conveyor.runtime.control_server import ControlServer

        try:
            self.server = ControlServer(self, self._control_host, self._control_port)
        except OSError as exc:
            raise DriverError(f"cannot listen on {self._control_host}:{self._control_port}: {exc.strerror}") from None
        self.server.start()
        host = self._advertised_host or (
            "127.0.0.1" if self._control_host in ("0.0.0.0", "") else self._control_host  # noqa: S104
        )
        self.control_url = f"http://{host}:{self.server.port}"
        self.worker_id = f"{socket.gethostname()}:{self.server.port}"

    def _stop_control_api(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def _ensure_spark(self, task_count: int) -> None:
        if self._spark is not None:
            return
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        master = self._master or f"local[{max(task_count, 1)}]"
        builder = (
            SparkSession.builder.master(master)
            .appName(f"conveyor-{self.name}")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.task.maxFailures", "4" if not master.startswith("local") else "1")
        )
        with _jvm_ignoring_sigterm():
            self._spark = builder.getOrCreate()
        self._spark.sparkContext.setLogLevel("WARN")

    # ------------------------------------------------------------------ tasks

    def _spec(self, handle: TaskHandle) -> TaskSpec:
        spec = self.manifest.spec
        return TaskSpec(
            connector=self.name,
            namespace=self.manifest.metadata.namespace,
            task_id=handle.task_id,
            attempt=handle.attempt,
            connector_class=spec.connector_class,
            connector_config=dict(spec.config),
            task_config=handle.config,
            bootstrap_servers=spec.kafka.bootstrap_servers,
            control_url=self.control_url,
            closing_timeout_s=float(spec.shutdown.grace_period_seconds),
        )

    def _launch(self, handle: TaskHandle) -> None:
        from pyspark import InheritableThread

        handle.done.clear()
        handle.thread = InheritableThread(
            target=self._run_task, args=(handle,), name=f"task-{handle.task_id}", daemon=True
        )
        handle.thread.start()

    def _run_task(self, handle: TaskHandle) -> None:
        """Run the task's Spark job until it ends; relaunch it after a drain or restart."""
        from conveyor.runtime.executor import run_task_partition

        sc = self._spark.sparkContext
        while True:
            handle.attempt += 1
            spec = self._spec(handle)
            sc.setJobGroup(f"task-{handle.task_id}", f"{self.name} task {handle.task_id} attempt {handle.attempt}",
                           interruptOnCancel=True)
            try:
                result = sc.parallelize([spec], 1).mapPartitions(run_task_partition).collect()
                final = TaskReport.from_json(result[0])
            except Exception as exc:  # noqa: BLE001 - the job itself failed (executor lost, bug)
                final = TaskReport(handle.task_id, handle.attempt, TaskState.FAILED, "", trace=_trace(exc))
            with self._lock:
                handle.report = final
                handle.state = final.state
                handle.trace = final.trace
                relaunch = final.state is TaskState.DRAINED and not self._stopping
                if relaunch:
                    handle.directive = Directive(Action.RUN, handle.directive.version + 1)
                    handle.state = TaskState.RESTARTING
                self._lock.notify_all()
            if not relaunch:
                handle.done.set()
                log.info("task %s-%d ended %s", self.name, handle.task_id, final.state.value)
                return
            log.info("task %s-%d drained; relaunching", self.name, handle.task_id)

    def sync(self, task_id: int, report: TaskReport, known_version: int, wait_ms: int) -> Directive:
        """Take a runner's report; answer its directive, waiting up to ``wait_ms`` for a
        change when the runner already knows the current one.

        Raises:
            KeyError: no such task.
        """
        deadline = time.monotonic() + wait_ms / 1000
        with self._lock:
            handle = self.tasks[task_id]
            if report.attempt == handle.attempt:
                handle.report = report
                if not handle.state.is_final or report.state.is_final:
                    handle.state = report.state
                handle.trace = report.trace
                self._lock.notify_all()
            while handle.directive.version == known_version and not self._stopping:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._lock.wait(remaining)
            return handle.directive

    def _direct(self, action: Action, connector_deleted: bool = False, task_ids: list[int] | None = None) -> None:
        with self._lock:
            for handle in self.tasks.values():
                if task_ids is None or handle.task_id in task_ids:
                    handle.directive = Directive(action, handle.directive.version + 1, connector_deleted)
            self._lock.notify_all()

    def pause(self) -> dict[str, Any]:
        """Pause every task: no more ``put``, offsets still committed."""
        self._direct(Action.PAUSE)
        self.connector_state = TaskState.PAUSED
        return {"name": self.name, "state": "PAUSED"}

    def resume(self) -> dict[str, Any]:
        self._direct(Action.RUN)
        self.connector_state = TaskState.RUNNING
        return {"name": self.name, "state": "RUNNING"}

    def restart_task(self, task_id: int) -> dict[str, Any]:
        """Restart one task: a closing commit and a new run (a failed task just reruns).

        Raises:
            ControlError: 404 for an unknown task.
        """
        from http import HTTPStatus

        from conveyor.runtime.control_server import ControlError

        handle = self.tasks.get(task_id)
        if handle is None:
            raise ControlError(HTTPStatus.NOT_FOUND, f"connector {self.name} has no task {task_id}")
        if handle.done.is_set():
            handle.directive = Directive(Action.RUN, handle.directive.version + 1)
            handle.state = TaskState.RESTARTING
            self._launch(handle)
        else:
            self._direct(Action.DRAIN, task_ids=[task_id])
        return {"id": task_id, "state": "RESTARTING"}

    # ------------------------------------------------------------------ stop

    def stop(self, connector_deleted: bool = False, timeout_s: float | None = None) -> dict[str, Any]:
        """Stop every task (each makes a closing commit, then ``stop(connector_deleted)``),
        then the connector. Idempotent; returns what was committed and removed.
        """
        with self._lock:
            if self._stopping:
                already = True
            else:
                already = False
                self._stopping = True
        if already:
            self.stopped.wait(timeout_s or self.manifest.spec.shutdown.grace_period_seconds + 30)
            return self.stop_result or {"name": self.name, "stopped": True}
        grace = timeout_s if timeout_s is not None else float(self.manifest.spec.shutdown.grace_period_seconds)
        log.info("stopping connector %s (connector_deleted=%s)", self.name, connector_deleted)
        self._direct(Action.STOP, connector_deleted)
        deadline = time.monotonic() + grace
        for handle in self.tasks.values():
            if not handle.done.wait(max(0.0, deadline - time.monotonic())):
                log.error("task %s-%d did not stop within %.0fs; cancelling its Spark job", self.name,
                          handle.task_id, grace)
                try:
                    self._spark.sparkContext.cancelJobGroup(f"task-{handle.task_id}")
                except Exception:  # noqa: BLE001 - Spark itself may be gone
                    log.exception("could not cancel the Spark job of task %d", handle.task_id)
                handle.done.wait(10)
        removed = self._stop_connector(connector_deleted)
        self.connector_state = TaskState.STOPPED
        self.stop_result = {
            "name": self.name,
            "connector_deleted": connector_deleted,
            "tasks": [
                {
                    "id": h.task_id,
                    "state": h.state.value,
                    "committed": (h.report.committed if h.report else {}),
                    "last_closing_commit": (h.report.last_closing_commit if h.report else None),
                    "trace": h.trace,
                }
                for h in self.tasks.values()
            ],
            "removed": removed,
            "connector_trace": self.connector_trace,
        }
        self.stopped.set()
        return self.stop_result

    def _stop_connector(self, connector_deleted: bool) -> list[str]:
        if self.connector is None:
            return []
        try:
            self.connector.stop(connector_deleted=connector_deleted)
            return list(self.connector.cleanup_report()) if connector_deleted else []
        except Exception as exc:  # noqa: BLE001 - reported in the stop result
            log.exception("connector %s: stop(connector_deleted=%s) failed", self.name, connector_deleted)
            self.connector_trace = _trace(exc)
            return []

    def close(self) -> None:
        """Release the control API and, when the driver created it, the SparkSession."""
        self._stop_control_api()
        if self._own_spark and self._spark is not None:
            self._spark.stop()
            self._spark = None

    def fail_connector(self, error: BaseException) -> None:
        self.connector_state = TaskState.FAILED
        self.connector_trace = _trace(error)
        threading.Thread(target=self.stop, name="connector-failed-stop", daemon=True).start()

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """Kafka Connect's connector status document, with Conveyor's extras per task."""
        with self._lock:
            tasks = []
            for h in self.tasks.values():
                r = h.report
                entry: dict[str, Any] = {
                    "id": h.task_id,
                    "state": h.state.value,
                    "worker_id": r.worker_id if r else "",
                    "attempt": h.attempt,
                }
                if h.trace:
                    entry["trace"] = h.trace
                if r is not None:
                    entry.update(
                        assignment=r.assignment,
                        committed=r.committed,
                        lag=r.lag,
                        records_read=r.records_read,
                        records_put=r.records_put,
                        records_skipped=r.records_skipped,
                        dlq_records=r.dlq_records,
                        commits=r.commits,
                        closing_commits=r.closing_commits,
                    )
                tasks.append(entry)
        connector: dict[str, Any] = {"state": self.connector_state.value, "worker_id": self.worker_id}
        if self.connector_trace:
            connector["trace"] = self.connector_trace
        return {"name": self.name, "connector": connector, "tasks": tasks, "type": self.connector_type}


@contextmanager
def _jvm_ignoring_sigterm() -> Iterator[None]:
    """Start Spark's JVM with SIGTERM ignored (an ignored signal survives exec and the
    JVM then installs no handler for it), so a SIGTERM sent to the whole process group
    (``timeout``, systemd, a terminal) reaches only this driver, which stops the tasks
    gracefully; the JVM exits when the driver does (PySpark's gateway watches stdin)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _pipeline_errors(config: dict[str, Any], key_default: str, value_default: str) -> dict[str, str]:
    """Configuration errors of the converters and transformations, found on the driver
    so that a typo fails the start instead of every task."""
    from conveyor.converters import load_converter
    from conveyor.transforms.chain import TransformationChain

    errors: dict[str, str] = {}
    for side, default in (("key", key_default), ("value", value_default)):
        try:
            load_converter(config, side, default)  # type: ignore[arg-type]
        except ConfigError as exc:
            errors.update(exc.errors)
    try:
        TransformationChain.from_config(config).close()
    except ConfigError as exc:
        errors.update(exc.errors)
    return errors


def _trace(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
