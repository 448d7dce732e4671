"""The connector's driver (Kafka Connect's "herder" for one connector), a PySpark application.

``Driver.start()`` validates the configuration, starts the connector, asks it for task
configurations and launches each task as its own long-running Spark job. The driver
serves the control API; task runners report to it and take their directives from it.

Lifecycle operations and what each task sees (every "closing commit" is ``pre_commit``
with ``is_closing()`` true, a synchronous commit, then ``close``):

==========================  ===================================================================
operation                   tasks
==========================  ===================================================================
``stop()`` / SIGTERM        closing commit → ``stop(connector_deleted)``; then the connector's
                            ``stop(connector_deleted)``; with ``delete_offsets`` the sink
                            consumer group / the source offsets are deleted; the driver exits
``set_state(STOPPED)``      closing commit → ``stop(False)``; the connector's ``stop(False)``;
                            the driver keeps serving (Kafka Connect's ``STOPPED``)
``set_state(PAUSED)``       no ``put``; offsets still committed; resources kept
``drain(pod=…|task=…)``     closing commit → ``stop(False)``; the task is launched again and
                            resumes from the offsets it just committed
``restart_task(id)``        as a drain of that task (a failed task just runs again)
``restart(include_tasks,    Kafka Connect's ``POST /connectors/<name>/restart``: the connector
only_failed)``              instance stops and starts again (``stop(False)``, ``start``), then
                            the chosen tasks restart as ``restart_task``; when the restarted
                            connector's task configurations changed, or it had failed, every
                            task closes and starts again with them
``reconfigure(spec)``       closing commit → ``stop(False)`` for every task, the connector's
                            ``stop(False)``, then ``start`` with the new configuration; a change
                            of ``tasksMax`` alone restarts the connector only, and its tasks
                            change as for a task reconfiguration
task reconfiguration        (the connector calls ``context.request_task_reconfiguration()``)
                            when ``task_configs`` changed: the tasks whose configuration
                            changed, and those no longer wanted, make a closing commit and
                            ``stop(False)``; the changed and new ones start; the others run on
                            (an exactly-once source: every task, a new generation)
==========================  ===================================================================
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from conveyor.api import Connector, ConnectorContext
from conveyor.control.auth import ControlTokens
from conveyor.control.load import SinkLoad
from conveyor.control.protocol import Action, Directive, TaskReport, TaskSpec, TaskState
from conveyor.manifest import ConnectorManifest, ConnectorSpec, ConnectorState
from conveyor.runtime.config import log_levels
from conveyor.runtime.config.settings import parse_sink_settings, parse_source_settings
from conveyor.runtime.config.validation import PreflightError, connector_class, validate_config
from conveyor.runtime.deletion.offsets import sink_group
from conveyor.runtime.driver.class_data import ArchiveTraining, with_class_data_sharing
from conveyor.runtime.driver.executors import ExecutorTarget
from conveyor.runtime.driver.operations import DriverOperations
from conveyor.runtime.driver import starting_offsets
from conveyor.runtime.driver.spark_session import (
    decommission_executor,
    executor_id_of_pod,
    spark_properties,
    start_spark_session,
)
from conveyor.runtime.driver.startup import SparkStarter, StartupClock, spark_context_running
from conveyor.runtime.driver.stopping import DriverStopping
from conveyor.runtime.driver.task_launcher import TaskLauncher
from conveyor.runtime.herder.lifecycle import Lifecycle
from conveyor.runtime.herder.task_handles import TaskHandle
from conveyor.runtime.kafka import group_lag  # GroupLag looked up at each start
from conveyor.runtime.kafka.client_overrides import check_client_overrides
from conveyor.runtime.kafka.clients import kafka_properties
from conveyor.runtime.kafka.fencing import TaskCountWriter, start_generation
from conveyor.runtime.kafka.preflight import check_kafka, check_transactions, prepare_sink_topics, prepare_source_topics
from conveyor.runtime.rest.metrics import register_collectors

log = logging.getLogger(__name__)

DriverError = PreflightError
"""Raised by :meth:`Driver.start` when the connector cannot start; nothing is left running."""


class _Context(ConnectorContext):
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def request_task_reconfiguration(self) -> None:
        self._driver.reconfiguration_requested.set()

    def raise_error(self, error: BaseException) -> None:
        self._driver.fail_connector(error)


class Driver(DriverOperations, DriverStopping):
    """Runs one connector on a SparkSession.

    Threads: the control API's request threads call the operations (serialised by one
    lock, ``operations``); one driver thread per task runs its Spark job; the herder thread acts
    on the connector's reconfiguration requests.

    Args:
        manifest: the validated Connector manifest.
        spark: a SparkSession to use; when ``None`` one is created (see :func:`spark_properties`)
            and stopped by :meth:`close`.
        master: Spark master URL; wins over ``spark.master`` of ``spark_conf`` (``sparkConf``
            may not set it); default ``local[N]`` with a slot per task.
        control_host / control_port: where the control API listens (port 0 picks one).
        advertised_host: host name task runners use to reach the control API.
        spark_conf: Spark properties given on the command line (``conveyor run --conf``);
            they win over ``spec.spark.sparkConf``, which wins over the driver's defaults.
            Ignored when ``spark`` is given.
        control_tokens: the credentials the control API admits (default: fresh ones, see
            :attr:`control_tokens`).
        written_spec: ``manifest.spec`` as written, its references unresolved
            (:meth:`ConnectorManifest.load_as_written`); default ``manifest.spec``.

    Attributes:
        manifest: the manifest the driver runs, references resolved.
        written_spec: its spec as written: what Kafka Connect's ``GET
            /connectors/<name>/config`` shows and ``PATCH`` merges into, so that a resolved
            value never becomes part of a written config (:mod:`conveyor.runtime.rest.live_config`).
        starting_offsets: what this driver's start found of the stored offsets and did with
            ``spec.initialOffsets`` (:mod:`.starting_offsets`); ``None`` before it got that far.
    """

    def __init__(
        self,
        manifest: ConnectorManifest,
        spark: Any = None,
        master: str | None = None,
        control_host: str = "127.0.0.1",
        control_port: int = 8083,
        advertised_host: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
        control_tokens: ControlTokens | None = None,
        written_spec: ConnectorSpec | None = None,
    ) -> None:
        self.manifest = manifest
        self.written_spec = written_spec or manifest.spec
        self.control_tokens = control_tokens or ControlTokens.generate()
        self._spark_conf = dict(spark_conf or {})
        self.spark_info: dict[str, str] = {}
        self.kafka: dict[str, str] = {}
        self.name = manifest.name
        self._spark = spark
        self._own_spark = spark is None
        self._spark_starter: SparkStarter | None = None
        self._class_data: ArchiveTraining | None = None
        self._spark_seconds: float | None = None
        self._master = master
        self._control_host = control_host
        self._control_port = control_port
        self._advertised_host = advertised_host
        self.connector: Connector | None = None
        self.connector_state = TaskState.UNASSIGNED
        self.connector_trace: str | None = None
        self.connector_type = "unknown"
        self.target_state = manifest.spec.state
        self.tasks: dict[int, TaskHandle] = {}
        self._lock = threading.Condition()
        self.operations = threading.RLock()
        self.lifecycle = Lifecycle(self._lock)
        self.reconfiguration_requested = threading.Event()
        self.metrics_registry = CollectorRegistry()
        register_collectors(self.metrics_registry, self)  # conveyor_* and kafka_connect_*
        self.server: Any = None
        self.control_url = ""
        self.worker_id = ""
        self.stop_result: dict[str, Any] | None = None
        self._launcher: TaskLauncher | None = None
        self._executors: ExecutorTarget | None = None
        self._task_count_writer: Any = None
        self._unlaunched: list[dict[str, Any]] = []  # task configs of a started connector, before Spark is up
        self._group_lag: Any = None
        self.generation = 0
        self.starting_offsets: starting_offsets.StartingOffsets | None = None
        self._herder = threading.Thread(target=self._herd, name="herder", daemon=True)

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Validate, start the connector, start Spark (when the driver makes its own session)
        and launch the tasks (unless ``spec.state`` is ``stopped``). Spark's JVM starts on a
        thread beside validation, the Kafka checks and ``connector.start``
        (:mod:`.startup`), and the driver waits for it only then: a connector that cannot
        start fails in seconds, without waiting for a JVM. The phases' durations are logged
        at debug level.

        Raises:
            DriverError: unknown connector class, invalid configuration (names the key),
                a Kafka Secret that is not mounted, an unreachable broker or refused
                credentials, or a connector whose ``start`` raised. Nothing is left running.
        """
        self.lifecycle.begin_start()
        try:
            self._start()
        except BaseException:
            self.lifecycle.start_failed()
            raise
        self.lifecycle.started()
        self._herder.start()
        log.info("connector %s %s with %d task(s); control API at %s", self.name, self.connector_state.value,
                 len(self.tasks), self.control_url)

    def _start(self) -> None:
        spec = self.manifest.spec
        clock = StartupClock()
        log.info("starting connector %s (%s)", self.name, spec.connector_class)
        try:
            with clock.phase("connector class"):
                cls, self.connector_type = connector_class(spec.connector_class)
                connector = self._new_connector(cls)
            self._begin_spark(spec.most_tasks)  # its JVM starts beside what follows (see .startup)
            with clock.phase("validation"):
                validate_config(connector, self.connector_type, dict(spec.config), self.name, spec.tasks_max)
                check_client_overrides(spec.config, self.name)
                starting_offsets.check_initial_offsets(spec.initial_offsets, self.connector_type)
            with clock.phase("kafka checks and topics"):
                self.kafka = kafka_properties(spec)
                check_kafka(self.kafka)
                self._prepare_kafka()
            with clock.phase("starting offsets"):
                self.starting_offsets = starting_offsets.settle(
                    self.kafka, cls, self.connector_type, spec.connect_config(self.name),
                    self.manifest.metadata.namespace, spec.initial_offsets)
            self._start_control_api()
        except BaseException:
            self._abandon_spark()
            raise
        try:
            # The connector starts before the driver waits for Spark: one that cannot (an
            # unreachable database, a refused login) fails without waiting for a JVM.
            configs = None
            with clock.phase("connector start"), self.operations:  # ordered against a stop during start-up
                if self.target_state is ConnectorState.STOPPED or not self.lifecycle.may_start_connector():
                    self.connector_state = TaskState.STOPPED
                else:
                    configs = self._unlaunched = self._begin_connector(connector)
            with clock.phase("waiting for spark"):
                self._ensure_spark(spec.most_tasks)
            self._launcher = TaskLauncher(self._spark, self._spec_for, self._lock, lambda: self.lifecycle.stopping,
                                          self._resume_action, self.name)
            self._executors = ExecutorTarget(self._spark, {**spec.spark.spark_conf, **self._spark_conf})
            with clock.phase("task launch"), self.operations:  # a stop while Spark started has stopped the connector
                if configs is not None and self.connector is not None and self.lifecycle.may_start_connector():
                    self._run_tasks(configs)
        except BaseException:
            self._abandon_spark()
            with self.operations:
                self._stop_connector(False)
            self._stop_control_api()
            raise
        log.debug("connector %s start-up: %s (spark started in %s s, beside the phases before it waited)",
                  self.name, clock.summary(), f"{self._spark_seconds:.2f}" if self._spark_seconds is not None else "0")

    def cancel_start(self) -> None:
        """Do not start the connector if :meth:`start` has not got that far yet (a SIGTERM
        during start-up: the caller then calls :meth:`stop`). Safe from a signal handler."""
        self.lifecycle.cancel_start()

    @property
    def stopped(self) -> threading.Event:
        """Set once the driver has stopped for good (or failed to start)."""
        return self.lifecycle.stopped

    def _prepare_kafka(self) -> None:
        """Topics the runtime needs; with exactly-once sources, the transaction checks and
        this driver's task-count writer (which fences an older driver's)."""
        spec = self.manifest.spec
        config = dict(spec.config)
        if self.connector_type == "sink":
            prepare_sink_topics(self.kafka, config)
            return

        settings = parse_source_settings(config)
        if settings.exactly_once:
            check_transactions(self.kafka, settings)
        prepare_source_topics(self.kafka, settings)
        if settings.exactly_once:
            self._task_count_writer = TaskCountWriter(self.kafka, settings.config_storage_topic,
                                                      self.manifest.metadata.namespace, self.name)

    def _new_connector(self, cls: type[Connector]) -> Connector:
        connector = cls()
        connector.initialize(_Context(self))
        return connector

    def _start_connector(self, connector: Connector) -> None:
        """``start`` the connector and launch its tasks (Spark is up).

        Raises:
            DriverError: the connector's ``start`` or ``task_configs`` raised.
        """
        self._run_tasks(self._begin_connector(connector))

    def _begin_connector(self, connector: Connector) -> list[dict[str, Any]]:
        """``start`` the connector and return its task configurations; needs no Spark.

        Raises:
            DriverError: the connector's ``start`` or ``task_configs`` raised (it is stopped again).
        """
        spec = self.manifest.spec
        try:
            connector.start(spec.connect_config(self.name))
        except Exception as exc:
            raise DriverError(f"connector {self.name} failed to start: {exc}") from exc
        self.connector = connector
        try:
            configs = self._task_configs()
        except BaseException:
            self._stop_connector(False)
            raise
        self.connector_state = TaskState.PAUSED if self.target_state is ConnectorState.PAUSED else TaskState.RUNNING
        return configs

    def _run_tasks(self, configs: list[dict[str, Any]]) -> None:
        self._unlaunched = []
        self._launch_tasks(configs)
        if self.connector_type == "sink":
            self._watch_group_lag()

    def _watch_group_lag(self) -> None:
        """(Re)start the watch of the lag of every partition of the sink's topics (they may have changed)."""
        if self._group_lag is not None:
            self._group_lag.close()
        subscription = parse_sink_settings(dict(self.manifest.spec.config)).subscription
        self._group_lag = group_lag.GroupLag(self.kafka, sink_group(self.name), subscription).start()

    def _task_configs(self) -> list[dict[str, Any]]:
        assert self.connector is not None
        max_tasks = self.manifest.spec.tasks_max
        try:
            configs = self.connector.task_configs(max_tasks)
        except Exception as exc:
            raise DriverError(f"connector {self.name}: task_configs failed: {exc}") from exc
        if len(configs) > max_tasks:
            raise DriverError(f"connector {self.name}: task_configs returned {len(configs)} for tasksMax={max_tasks}")
        return [{**c, "name": self.name} for c in configs]

    def _launch_tasks(self, configs: list[dict[str, Any]]) -> None:
        assert self._launcher is not None
        if self._task_count_writer is not None:
            settings = parse_source_settings(self.manifest.spec.config)
            self.generation = start_generation(
                self.kafka, settings.config_storage_topic,
                self.manifest.metadata.namespace, self.name, len(configs), self._task_count_writer,
            ).generation
        initial = self._resume_action()
        log.info("launching %d task(s) of connector %s", len(configs), self.name)
        with self._lock:
            stopped = [h.pod for h in self.tasks.values()]  # every caller has stopped them
            self.tasks = {i: TaskHandle(i, c, directive=Directive(initial, 1, log_levels=log_levels.directive())) for i, c in enumerate(configs)}
        self._follow_with_executors(len(configs), stopped, [])
        for handle in self.tasks.values():
            self._launcher.launch(handle)

    def _resume_action(self) -> Action:
        return Action.PAUSE if self.target_state is ConnectorState.PAUSED else Action.RUN

    def _start_control_api(self) -> None:
        from conveyor.runtime.rest.server import ControlServer  # Starlette and uvicorn: when the driver serves

        try:
            self.server = ControlServer(self, self._control_host, self._control_port, self.control_tokens)
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

    @property
    def spark(self) -> Any:
        """The SparkSession the tasks run on (``None`` before :meth:`start` created it)."""
        return self._spark

    def _begin_spark(self, task_count: int, beside: bool = True) -> None:
        """Start the driver's own SparkSession on a thread (:class:`.startup.SparkStarter`),
        unless it was given one. ``beside``: only when no SparkContext runs in this process
        already (``getOrCreate`` would hand that one over, and a failed start-up must not
        stop it); :meth:`_ensure_spark` then gets it.

        Raises:
            DriverError: ``spec.spark.sparkConf`` asks for what Conveyor does not allow.
        """
        running = spark_context_running()
        if beside and running:
            return
        if self._spark is None and self._spark_starter is None:
            properties = spark_properties(self.name, task_count, self._master, self.manifest.spec.spark.spark_conf,
                                          self._spark_conf)
            if not running:  # getOrCreate would hand over the running one, its JVM started long ago
                properties, self._class_data = with_class_data_sharing(properties)
            self._spark_starter = SparkStarter(start_spark_session, properties)

    def _abandon_spark(self) -> None:
        """A failed start-up: the session being started is stopped once it is up."""
        if self._class_data is not None:
            self._class_data.lock.unlink(missing_ok=True)  # its JVM's archive stays a temporary file
            self._class_data = None
        if self._spark_starter is not None:
            self._spark_starter.abandon()
            self._spark_starter = None

    def _ensure_spark(self, task_count: int) -> None:
        """Raises:
            DriverError: Spark did not start (its first line says why, e.g. executor pods refused)."""
        if self._spark is None:
            self._begin_spark(task_count, beside=False)
            starter, self._spark_starter = self._spark_starter, None
            assert starter is not None
            try:
                self._spark = starter.session()
            except Exception as exc:
                reason = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
                raise DriverError(f"connector {self.name}: Spark did not start: {reason}") from exc
            finally:
                self._spark_seconds = starter.seconds
        sc = self._spark.sparkContext
        self.spark_info = {"master": sc.master, "app_name": sc.appName, "app_id": sc.applicationId}

    def _spec_for(self, handle: TaskHandle) -> TaskSpec:
        spec = self.manifest.spec
        return TaskSpec(
            connector=self.name,
            namespace=self.manifest.metadata.namespace,
            task_id=handle.task_id,
            attempt=handle.attempt,
            connector_class=spec.connector_class,
            connector_config=dict(spec.config),
            task_config=handle.config,
            kafka=dict(self.kafka),
            control_url=self.control_url,
            control_token=self.control_tokens.task,
            closing_timeout_s=float(spec.shutdown.grace_period_seconds),
            generation=self.generation,
        )

    # ------------------------------------------------------------------ runner sync

    def sync(self, task_id: int, report: TaskReport, known_version: int, wait_ms: int) -> Directive:
        """Take a runner's report; answer its directive, waiting up to ``wait_ms`` for a
        change when the runner already knows the current one.

        Raises:
            KeyError: no such task.
        """
        deadline = time.monotonic() + wait_ms / 1000
        with self._lock:
            handle = self.tasks[task_id]
            if handle.take_report(report):
                self._lock.notify_all()
            while handle.directive.version == known_version and not self.lifecycle.stopping:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._lock.wait(remaining)
            return handle.directive

    def push_log_levels(self) -> None:
        """Send the log levels set in this process (:mod:`~conveyor.runtime.config.log_levels`)
        to every running task, whose process follows them."""
        levels = log_levels.directive()
        with self._lock:
            for handle in self.tasks.values():
                if not handle.done.is_set():
                    handle.direct_log_levels(levels)
            self._lock.notify_all()

    def _direct(self, action: Action, connector_deleted: bool = False, task_ids: list[int] | None = None) -> None:
        with self._lock:
            for handle in self.tasks.values():
                if (task_ids is None or handle.task_id in task_ids) and not handle.done.is_set():
                    handle.direct(action, connector_deleted)
            self._lock.notify_all()

    def _decommission_pod(self, pod: str) -> None:
        """No new task goes to the executor of a pod being drained (it is going away): its
        tasks relaunch on other executors, or wait for the executor Spark starts in its place."""
        executor_id = executor_id_of_pod(pod)
        if executor_id is not None and self._spark is not None:
            decommission_executor(self._spark, executor_id, f"pod {pod} is drained")

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """Kafka Connect's connector status document, with Conveyor's extras per task."""
        with self._lock:
            tasks = [h.status_entry(source=self.connector_type == "source") for h in self.tasks.values()]
            reports = [h.report for h in self.tasks.values() if h.report is not None and h.state is TaskState.RUNNING]
        connector: dict[str, Any] = {"state": self.connector_state.value, "worker_id": self.worker_id}
        if self.connector_trace:
            connector["trace"] = self.connector_trace
        status = {"name": self.name, "connector": connector, "tasks": tasks, "type": self.connector_type,
                  "spark": dict(self.spark_info)}
        if self.starting_offsets is not None:
            status["starting_offsets"] = self.starting_offsets.to_json()
        if self._group_lag is not None:  # partitions no task holds (rebalancing, a dead member's session)
            held = {tp for t in tasks if t["state"] in ("RUNNING", "PAUSED") for tp in t.get("assignment") or ()}
            status["unassigned_lag"] = self._group_lag.unassigned(held)
            totals = self._group_lag.totals()
            if totals is not None:
                status["load"] = SinkLoad.of(reports, totals).to_json()
        return status
