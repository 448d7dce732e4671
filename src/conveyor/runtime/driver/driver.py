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
                            ``stop(False)``, then ``start`` with the new configuration
task reconfiguration        (the connector calls ``context.request_task_reconfiguration()``)
                            when ``task_configs`` changed: every task as for ``reconfigure``
==========================  ===================================================================
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from prometheus_client import CollectorRegistry

from conveyor.api import Connector, ConnectorContext
from conveyor.control.auth import ControlTokens
from conveyor.control.errors import OperationError
from conveyor.control.protocol import Action, Directive, TaskReport, TaskSpec, TaskState, trace_of
from conveyor.manifest import ConnectorManifest, ConnectorSpec, ConnectorState, ManifestError
from conveyor.runtime.config.validation import PreflightError, connector_class, validate_config
from conveyor.runtime.deletion.offsets import delete_offsets_reported
from conveyor.runtime.driver.spark_session import (
    decommission_executor,
    executor_id_of_pod,
    spark_properties,
    start_spark_session,
)
from conveyor.runtime.driver.task_launcher import TaskLauncher
from conveyor.runtime.herder.lifecycle import Lifecycle
from conveyor.runtime.herder.task_handles import TaskHandle
from conveyor.runtime.kafka.preflight import check_kafka, check_transactions, prepare_sink_topics, prepare_source_topics
from conveyor.runtime.rest.metrics import register_collectors

log = logging.getLogger(__name__)

DriverError = PreflightError
"""Raised by :meth:`Driver.start` when the connector cannot start; nothing is left running."""


def kafka_properties(spec: ConnectorSpec) -> dict[str, str]:
    """The base Kafka client properties of a connector: ``spec.kafka.client_properties()``
    (TLS and SASL from the Secrets mounted under ``$CONVEYOR_MOUNT_DIR``).

    Raises:
        DriverError: a Secret key it needs is not mounted (names the field).
    """
    try:
        return spec.kafka.client_properties()
    except ManifestError as exc:
        raise DriverError(str(exc)) from None


class _Context(ConnectorContext):
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def request_task_reconfiguration(self) -> None:
        self._driver.reconfiguration_requested.set()

    def raise_error(self, error: BaseException) -> None:
        self._driver.fail_connector(error)


class Driver:
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
        self._task_count_writer: Any = None
        self._unlaunched: list[dict[str, Any]] = []  # task configs of a started connector, before Spark is up
        self._group_lag: Any = None
        self.generation = 0
        self._herder = threading.Thread(target=self._herd, name="herder", daemon=True)

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Validate, start the connector, start Spark (when the driver makes its own session)
        and launch the tasks (unless ``spec.state`` is ``stopped``). The connector starts
        before Spark, so a connector that cannot start fails in seconds, without a JVM.

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
        log.info("starting connector %s (%s)", self.name, spec.connector_class)
        cls, self.connector_type = connector_class(spec.connector_class)
        connector = self._new_connector(cls)
        validate_config(connector, self.connector_type, dict(spec.config), self.name, spec.tasks_max)
        self.kafka = kafka_properties(spec)
        check_kafka(self.kafka)
        self._prepare_kafka()
        self._start_control_api()
        try:
            # The connector starts before Spark: one that cannot (an unreachable database, a
            # refused login) fails before the driver pays for a JVM.
            configs = None
            with self.operations:  # ordered against a stop that comes during start-up
                if self.target_state is ConnectorState.STOPPED or not self.lifecycle.may_start_connector():
                    self.connector_state = TaskState.STOPPED
                else:
                    configs = self._unlaunched = self._begin_connector(connector)
            self._ensure_spark(spec.tasks_max)
            self._launcher = TaskLauncher(self._spark, self._spec_for, self._lock, lambda: self.lifecycle.stopping,
                                          self._resume_action, self.name)
            with self.operations:  # a stop that came while Spark started has stopped the connector
                if configs is not None and self.connector is not None and self.lifecycle.may_start_connector():
                    self._run_tasks(configs)
        except BaseException:
            with self.operations:
                self._stop_connector(False)
            self._stop_control_api()
            raise

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
        from conveyor.runtime.config.settings import parse_source_settings

        settings = parse_source_settings(config)
        if settings.exactly_once:
            check_transactions(self.kafka, settings)
        prepare_source_topics(self.kafka, settings)
        if settings.exactly_once:
            from conveyor.runtime.kafka.fencing import TaskCountWriter

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
        from conveyor.runtime.config.settings import parse_sink_settings
        from conveyor.runtime.deletion.offsets import sink_group
        from conveyor.runtime.kafka.group_lag import GroupLag

        if self._group_lag is not None:
            self._group_lag.close()
        subscription = parse_sink_settings(dict(self.manifest.spec.config)).subscription
        self._group_lag = GroupLag(self.kafka, sink_group(self.name), subscription).start()

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
            from conveyor.runtime.config.settings import parse_source_settings
            from conveyor.runtime.kafka.fencing import start_generation

            settings = parse_source_settings(self.manifest.spec.config)
            self.generation = start_generation(
                self.kafka, settings.config_storage_topic,
                self.manifest.metadata.namespace, self.name, len(configs), self._task_count_writer,
            ).generation
        initial = self._resume_action()
        log.info("launching %d task(s) of connector %s", len(configs), self.name)
        with self._lock:
            self.tasks = {i: TaskHandle(i, c, directive=Directive(initial, 1)) for i, c in enumerate(configs)}
        for handle in self.tasks.values():
            self._launcher.launch(handle)

    def _resume_action(self) -> Action:
        return Action.PAUSE if self.target_state is ConnectorState.PAUSED else Action.RUN

    def _start_control_api(self) -> None:
        from conveyor.runtime.rest.server import ControlServer

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

    def _ensure_spark(self, task_count: int) -> None:
        """Raises:
            DriverError: Spark did not start (its first line says why, e.g. executor pods refused)."""
        if self._spark is None:
            properties = spark_properties(self.name, task_count, self._master, self.manifest.spec.spark.spark_conf,
                                          self._spark_conf)
            try:
                self._spark = start_spark_session(properties)
            except Exception as exc:
                reason = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
                raise DriverError(f"connector {self.name}: Spark did not start: {reason}") from exc
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

    def _direct(self, action: Action, connector_deleted: bool = False, task_ids: list[int] | None = None) -> None:
        with self._lock:
            for handle in self.tasks.values():
                if (task_ids is None or handle.task_id in task_ids) and not handle.done.is_set():
                    handle.direct(action, connector_deleted)
            self._lock.notify_all()

    # ------------------------------------------------------------------ operations

    def set_state(self, target: ConnectorState) -> dict[str, Any]:
        """Move to ``running``, ``paused`` or ``stopped`` (see the module table)."""
        with self.operations:
            self._check_not_stopping()
            previous, self.target_state = self.target_state, target
            if target is ConnectorState.STOPPED:
                if previous is not ConnectorState.STOPPED:
                    self._stop_tasks(connector_deleted=False)
                    self._stop_connector(False)
                    self.connector_state = TaskState.STOPPED
            elif previous is ConnectorState.STOPPED:
                cls, _ = connector_class(self.manifest.spec.connector_class)
                self._start_connector(self._new_connector(cls))
            else:
                self._direct(self._resume_action())
                self.connector_state = TaskState.PAUSED if target is ConnectorState.PAUSED else TaskState.RUNNING
            return {"name": self.name, "state": self.connector_state.value}

    def pause(self) -> dict[str, Any]:
        return self.set_state(ConnectorState.PAUSED)

    def resume(self) -> dict[str, Any]:
        return self.set_state(ConnectorState.RUNNING)

    def drain(self, pod: str | None = None, task_id: int | None = None, timeout_s: float | None = None
              ) -> dict[str, Any]:
        """Closing commit of the tasks on ``pod`` (or task ``task_id``), which then run again;
        an executor pod being drained is decommissioned first, so they run again elsewhere.

        Blocks until every drained task has made its closing commit or ``timeout_s``
        (default ``shutdown.gracePeriodSeconds``) passed. A pod that runs no task (an idle
        executor, a pod whose tasks already moved) is drained at once: ``"tasks": []``,
        ``"complete": true`` (a pod's ``preStop`` hook must not fail for it).

        Raises:
            OperationError: 404 for an unknown ``task_id``; 400 with neither argument; 409
                while stopping.
        """
        with self.operations:
            self._check_not_stopping()
            with self._lock:
                if task_id is not None:
                    if task_id not in self.tasks:
                        raise OperationError(HTTPStatus.NOT_FOUND, f"connector {self.name} has no task {task_id}")
                    chosen = [self.tasks[task_id]]
                elif pod is not None:
                    self._decommission_pod(pod)
                    chosen = [h for h in self.tasks.values() if h.pod == pod and not h.done.is_set()]
                    if not chosen:
                        log.info("drain of pod %s: no task of connector %s runs there", pod, self.name)
                        return {"name": self.name, "tasks": [], "complete": True}
                else:
                    raise OperationError(HTTPStatus.BAD_REQUEST, "drain needs ?pod=<pod> or ?task=<id>")
                running = [h for h in chosen if not h.done.is_set()]
                before = {h.task_id: h.drains for h in running}
                for handle in running:
                    handle.direct(Action.DRAIN)
                self._lock.notify_all()
                timeout = timeout_s if timeout_s is not None else float(self.manifest.spec.shutdown.grace_period_seconds)
                deadline = time.monotonic() + timeout
                while not all(h.drains > before[h.task_id] or h.done.is_set() for h in running):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._lock.wait(remaining)
                results = []
                for h in chosen:
                    drained = h.task_id in before and h.drains > before[h.task_id]
                    results.append({
                        "id": h.task_id,
                        "pod": (h.last_drain.pod if drained and h.last_drain else h.pod),
                        "drained": drained,
                        "state": h.state.value,
                        "committed": (h.last_drain.last_closing_commit or {}) if drained and h.last_drain else {},
                        "closing_commit_error": h.last_drain.closing_commit_error if drained and h.last_drain
                        else None,
                    })
            return {"name": self.name, "tasks": results, "complete": all(r["drained"] for r in results)}

    def _decommission_pod(self, pod: str) -> None:
        """No new task goes to the executor of a pod being drained (it is going away): its
        tasks relaunch on other executors, or wait for the executor Spark starts in its place."""
        executor_id = executor_id_of_pod(pod)
        if executor_id is not None and self._spark is not None:
            decommission_executor(self._spark, executor_id, f"pod {pod} is drained")

    def restart_task(self, task_id: int) -> dict[str, Any]:
        """Restart one task: a closing commit and a new run (a failed task just runs again).

        Returns at once (the restart is asynchronous): ``{"id": task_id, "state": "RESTARTING"}``.

        Raises:
            OperationError: 404 for an unknown task; 409 while stopping.
        """
        with self.operations:
            self._check_not_stopping()
            handle = self.tasks.get(task_id)
            if handle is None:
                raise OperationError(HTTPStatus.NOT_FOUND, f"connector {self.name} has no task {task_id}")
            self._restart_task(handle)
            return {"id": task_id, "state": "RESTARTING"}

    def _restart_task(self, handle: TaskHandle) -> None:
        """A running task drains (closing commit; the launcher runs it again); a task whose
        run ended is launched again. Called with ``operations`` held."""
        assert self._launcher is not None
        if handle.done.is_set():
            with self._lock:
                handle.direct(self._resume_action())
                handle.state = TaskState.RESTARTING
            self._launcher.launch(handle)
        else:
            with self._lock:
                handle.direct(Action.DRAIN)
                handle.state = TaskState.RESTARTING
                self._lock.notify_all()

    def restart(self, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any]:
        """Kafka Connect's ``POST /connectors/<name>/restart?includeTasks=&onlyFailed=`` (KIP-745).

        * The connector instance restarts (``stop(connector_deleted=False)``, a new
          instance, ``start``, ``task_configs``) unless ``only_failed`` and it is not FAILED.
          When its task configurations differ from the running ones, or it had FAILED (its
          tasks were stopped), every task makes a closing commit and starts again with the
          new configurations.
        * With ``include_tasks``, the tasks restart too (all of them, or only the FAILED ones
          with ``only_failed``): a running task makes a closing commit and runs again, a
          task whose run ended runs again.

        Returns at once; tasks restart asynchronously. Returns the connector's status
        document with ``RESTARTING`` for what restarts, plus
        ``"restarted": {"connector": bool, "tasks": [ids]}``. A connector that fails to
        start again shows ``FAILED`` with its trace (the tasks are left as they were).

        Raises:
            OperationError: 409 while stopping or in the ``stopped`` state.
        """
        with self.operations:
            self._check_not_stopping()
            if self.target_state is ConnectorState.STOPPED:
                raise OperationError(HTTPStatus.CONFLICT,
                                     f"connector {self.name} is stopped: set its state to running to restart it")
            with self._lock:
                chosen = [h for h in self.tasks.values()
                          if include_tasks and (not only_failed or h.state is TaskState.FAILED)]
            restart_connector = not only_failed or self.connector_state is TaskState.FAILED
            restarted_tasks: list[int] = []
            connector_restarted = False
            if restart_connector:
                log.info("restarting connector %s", self.name)
                relaunch = self._restart_connector()
                connector_restarted = relaunch is not None
                if relaunch is not None and relaunch is not False:
                    log.info("connector %s restarted with new task configurations: restarting every task", self.name)
                    self._stop_tasks(connector_deleted=False)
                    self._launch_tasks(relaunch)
                    restarted_tasks = sorted(self.tasks)
                    chosen = []
            for handle in chosen:
                self._restart_task(handle)
                restarted_tasks.append(handle.task_id)
            result = self.status()
            if connector_restarted:
                result["connector"]["state"] = TaskState.RESTARTING.value if \
                    self.connector_state is not TaskState.FAILED else self.connector_state.value
            for entry in result["tasks"]:
                if entry["id"] in restarted_tasks:
                    entry["state"] = TaskState.RESTARTING.value
            result["restarted"] = {"connector": connector_restarted, "tasks": sorted(restarted_tasks)}
            return result

    def _restart_connector(self) -> list[dict[str, Any]] | bool | None:
        """Stop the connector instance and start a new one. Returns the new task
        configurations when the tasks must be relaunched with them, ``False`` when the
        running tasks can stay, ``None`` when the new instance failed (then FAILED)."""
        had_failed = self.connector_state is TaskState.FAILED
        self._stop_connector(False)
        self.connector_trace = None
        cls, _ = connector_class(self.manifest.spec.connector_class)
        connector = self._new_connector(cls)
        try:
            connector.start(self.manifest.spec.connect_config(self.name))
            self.connector = connector
            configs = self._task_configs()
        except Exception as exc:  # noqa: BLE001 - reported as the connector's FAILED state
            log.error("connector %s failed to start again: %s", self.name, exc)
            self._stop_connector(False)
            self.connector_state = TaskState.FAILED
            self.connector_trace = trace_of(exc)
            return None
        self.connector_state = TaskState.PAUSED if self.target_state is ConnectorState.PAUSED else TaskState.RUNNING
        with self._lock:
            current = [h.config for h in self.tasks.values()]
            any_ended = any(h.done.is_set() for h in self.tasks.values())
        if configs != current or (had_failed and any_ended):
            return configs
        return False

    def reconfigure(self, spec: ConnectorSpec, written: ConnectorSpec | None = None) -> dict[str, Any]:
        """Apply a new ``spec`` (configuration, ``tasksMax``, ``state``; references resolved):
        every task makes a closing commit and stops, the connector restarts with the new
        configuration. ``written`` (default ``spec``) becomes :attr:`written_spec`.

        Raises:
            OperationError: 400 with the invalid keys, or 409 when the class changed.
        """
        with self.operations:
            self._check_not_stopping()
            if spec.connector_class != self.manifest.spec.connector_class:
                raise OperationError(HTTPStatus.CONFLICT, "spec.class cannot change on a running driver")
            cls, connector_type = connector_class(spec.connector_class)
            candidate = self._new_connector(cls)
            try:
                validate_config(candidate, connector_type, dict(spec.config), self.name)
                kafka = kafka_properties(spec)
            except PreflightError as exc:
                raise OperationError(HTTPStatus.BAD_REQUEST, str(exc)) from None
            if kafka != self.kafka:
                try:
                    check_kafka(kafka)
                except PreflightError as exc:
                    raise OperationError(HTTPStatus.BAD_REQUEST, str(exc)) from None
            log.info("reconfiguring connector %s", self.name)
            if self.connector_state is not TaskState.STOPPED:
                self._stop_tasks(connector_deleted=False)
                self._stop_connector(False)
            self.manifest = self.manifest.model_copy(update={"spec": spec})
            self.written_spec = written or spec
            self.kafka = kafka
            self.target_state = spec.state
            if spec.state is ConnectorState.STOPPED:
                self.connector_state = TaskState.STOPPED
            else:
                self._start_connector(candidate)
            return {"name": self.name, "state": self.connector_state.value, "tasks": len(self.tasks)}

    def _herd(self) -> None:
        """Background loop: act on the connector's requests for task reconfiguration."""
        while not self.lifecycle.stopping:
            if not self.reconfiguration_requested.wait(1.0):
                continue
            self.reconfiguration_requested.clear()
            with self.operations:
                if self.lifecycle.stopping or self.connector is None or self.connector_state is TaskState.STOPPED:
                    continue
                try:
                    configs = self._task_configs()
                except DriverError as exc:
                    self.fail_connector(exc)
                    continue
                if configs == [h.config for h in self.tasks.values()]:
                    continue
                log.info("connector %s asked for task reconfiguration: %d task(s)", self.name, len(configs))
                self._stop_tasks(connector_deleted=False)
                self._launch_tasks(configs)

    def _check_not_stopping(self) -> None:
        if self.lifecycle.stopping:
            raise OperationError(HTTPStatus.CONFLICT, f"connector {self.name} is stopping")

    # ------------------------------------------------------------------ stop

    def _stop_tasks(self, connector_deleted: bool, timeout_s: float | None = None) -> None:
        """STOP every task and wait for their closing commits; cancel the Spark job of a
        task that does not finish within the grace period."""
        grace = timeout_s if timeout_s is not None else float(self.manifest.spec.shutdown.grace_period_seconds)
        self._direct(Action.STOP, connector_deleted)
        deadline = time.monotonic() + grace
        for handle in list(self.tasks.values()):
            if not handle.done.wait(max(0.0, deadline - time.monotonic())):
                log.error("task %s-%d did not stop within %.0fs; cancelling its Spark job", self.name,
                          handle.task_id, grace)
                if self._launcher is not None:
                    self._launcher.cancel(handle)
                handle.done.wait(10)

    def stop(self, connector_deleted: bool = False, timeout_s: float | None = None,
             delete_offsets: bool = False) -> dict[str, Any]:
        """Stop for good: every task makes a closing commit and gets
        ``stop(connector_deleted)``, then the connector does; with ``delete_offsets`` the
        connector's offsets are deleted once the tasks are gone (see
        :mod:`conveyor.runtime.deletion.offsets`). Blocks until done. A second call waits
        for the first, then does what it asks and the first did not (the connector-deleted
        path, deleting the offsets) and returns the first's report so completed. A stop
        during :meth:`start` keeps the connector from starting; with ``connector_deleted``
        a connector that never started here is started only to be stopped
        (:mod:`conveyor.runtime.deletion.cleanup`), as a previous run may have provisioned it.

        Args:
            connector_deleted: the connector is being deleted: tasks and connector clean up
                what they provisioned outside Kafka (KAFKA-14651). A task whose run had
                ended without it (a failed task) gets it here, on an idle context
                (``cleaned_up`` / ``cleanup_error`` in its entry).
            timeout_s: grace period of the tasks' closing commits (default
                ``shutdown.gracePeriodSeconds``); a task still running then is cancelled.
            delete_offsets: ``spec.deletionPolicy.offsets: delete``: delete the sink consumer
                group ``connect-<name>`` / tombstone the source offsets and task-count record.

        Returns:
            ``{"name", "connector_deleted", "tasks": [{"id", "state", "committed",
            "last_closing_commit", "closing_commit_error", "trace", "cleaned_up", "cleanup_error"}],
            "removed": [what the connector reported
            removing], "connector_trace", "offsets_deleted", "offsets_error"}``.
            ``offsets_deleted`` is ``None`` unless offsets were deleted, else
            ``{"consumer_group": "connect-<name>", "existed": bool}`` (sink) or
            ``{"offsets_topic", "source_partitions", "tombstones", "task_count_record"}``
            (source); ``offsets_error`` is ``None`` or why the deletion failed (then
            ``offsets_deleted`` is ``None``). Failures are reported, never raised.
        """
        if not self.lifecycle.begin_stop():
            with self.lifecycle.later_stop():
                self.stopped.wait(timeout_s or self.manifest.spec.shutdown.grace_period_seconds + 30)
                if self.stop_result is None:
                    return {"name": self.name, "stopped": True}
                return self._finish_deletion(connector_deleted, delete_offsets)
        with self.operations:
            log.info("stopping connector %s (connector_deleted=%s, delete_offsets=%s)", self.name,
                     connector_deleted, delete_offsets)
            running = self.connector is not None
            self._stop_tasks(connector_deleted, timeout_s)
            if connector_deleted:
                self._clean_up_ended_tasks()
            removed = self._stop_connector(connector_deleted)
            if connector_deleted and not running:  # never started here (stopped state, a failure, a stop
                removed = self._cleanup_stopped_connector()  # during start-up): an earlier run may have provisioned
            self.connector_state = TaskState.STOPPED
            offsets_deleted, offsets_error = self._delete_offsets() if delete_offsets else (None, None)
            self.stop_result = {
                "name": self.name,
                "connector_deleted": connector_deleted,
                "tasks": [h.stop_entry() for h in self.tasks.values()],
                "removed": removed,
                "connector_trace": self.connector_trace,
                "offsets_deleted": offsets_deleted,
                "offsets_error": offsets_error,
            }
        self.lifecycle.finish_stop()
        return self.stop_result

    def _finish_deletion(self, connector_deleted: bool, delete_offsets: bool) -> dict[str, Any]:
        """A stop after an earlier one (a plain stop, a SIGTERM): what this one asks for and the
        first did not do -- the connector-deleted path, the offsets' deletion -- runs now; the
        first stop's report, completed, is returned."""
        assert self.stop_result is not None
        with self.operations:
            result = self.stop_result
            if connector_deleted and not result["connector_deleted"]:
                log.info("connector %s: deleted after it stopped: running the connector-deleted stop path", self.name)
                result["removed"] = self._cleanup_stopped_connector()
                result["connector_trace"] = self.connector_trace
                result["connector_deleted"] = True
            if delete_offsets and result["offsets_deleted"] is None:
                result["offsets_deleted"], result["offsets_error"] = self._delete_offsets()
            return result

    def _delete_offsets(self) -> tuple[dict[str, Any] | None, str | None]:
        return delete_offsets_reported(self.kafka, self.name, self.connector_type, self.manifest.metadata.namespace,
                                       self.manifest.spec.config)

    def _clean_up_ended_tasks(self) -> None:
        """The connector-deleted stop path, here on the driver, for each task whose run ended
        without it (it had failed) and each task a stop during start-up kept from being launched:
        the task is started on an idle context only to be stopped
        (:func:`conveyor.runtime.deletion.cleanup.stop_idle_task`), as ``conveyor cleanup`` would."""
        from conveyor.runtime.deletion.cleanup import stop_idle_task

        ended = [h for h in self.tasks.values() if h.ended_without_deleted_stop]
        unlaunched, self._unlaunched = self._unlaunched, []
        if not ended and not unlaunched:
            return
        connector = self.connector
        if connector is None:
            cls, _ = connector_class(self.manifest.spec.connector_class)
            connector = self._new_connector(cls)
        task_class = connector.task_class()
        for task_id, config in enumerate(unlaunched):  # a stop while Spark started: never launched
            try:
                stop_idle_task(task_class, config)
            except Exception as exc:  # noqa: BLE001 - reported in the stop result
                log.exception("task %s-%d: the connector-deleted stop path failed", self.name, task_id)
                self.connector_trace = trace_of(exc)
        for handle in ended:
            try:
                stop_idle_task(task_class, handle.config)
                handle.cleaned_up, handle.cleanup_error = True, None
                log.info("task %s-%d: connector-deleted stop path run on the driver (its run had ended %s)",
                         self.name, handle.task_id, handle.state.value)
            except Exception as exc:  # noqa: BLE001 - reported in the stop result
                log.exception("task %s-%d: the connector-deleted stop path failed", self.name, handle.task_id)
                handle.cleanup_error = trace_of(exc)

    def _cleanup_stopped_connector(self) -> list[str]:
        """The connector-deleted path for a connector not running here (:mod:`conveyor.runtime.deletion.cleanup`)."""
        from conveyor.runtime.deletion.cleanup import cleanup_reported

        removed, trace = cleanup_reported(self.manifest)
        self.connector_trace = trace or self.connector_trace
        return removed

    def _stop_connector(self, connector_deleted: bool) -> list[str]:
        connector, self.connector = self.connector, None
        if connector is None:
            return []
        try:
            connector.stop(connector_deleted=connector_deleted)
            return list(connector.cleanup_report()) if connector_deleted else []
        except Exception as exc:  # noqa: BLE001 - reported in the stop result
            log.exception("connector %s: stop(connector_deleted=%s) failed", self.name, connector_deleted)
            self.connector_trace = trace_of(exc)
            return []

    def close(self) -> None:
        """Release the control API and, when the driver created it, the SparkSession, once no
        later stop runs (a connector-deleted stop that came during a SIGTERM stop finishes)."""
        self.lifecycle.wait_later_stops(self.manifest.spec.shutdown.grace_period_seconds + 60)
        self._stop_control_api()
        if self._group_lag is not None:
            self._group_lag.close()
        if self._own_spark and self._spark is not None:
            self._spark.stop()
            self._spark = None

    def fail_connector(self, error: BaseException) -> None:
        """The connector reported a fatal error: it shows FAILED and its tasks stop."""
        self.connector_state = TaskState.FAILED
        self.connector_trace = trace_of(error)
        log.error("connector %s failed: %s", self.name, error)
        threading.Thread(target=self._stop_tasks_of_failed_connector, name="connector-failed", daemon=True).start()

    def _stop_tasks_of_failed_connector(self) -> None:
        with self.operations:  # ordered with restarts, reconfigurations and stops
            if self.connector_state is TaskState.FAILED:  # not restarted in between
                self._stop_tasks(connector_deleted=False)

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """Kafka Connect's connector status document, with Conveyor's extras per task."""
        with self._lock:
            tasks = [h.status_entry(source=self.connector_type == "source") for h in self.tasks.values()]
        connector: dict[str, Any] = {"state": self.connector_state.value, "worker_id": self.worker_id}
        if self.connector_trace:
            connector["trace"] = self.connector_trace
        status = {"name": self.name, "connector": connector, "tasks": tasks, "type": self.connector_type,
                  "spark": dict(self.spark_info)}
        if self._group_lag is not None:  # partitions no task holds (rebalancing, a dead member's session)
            held = {tp for t in tasks if t["state"] in ("RUNNING", "PAUSED") for tp in t.get("assignment") or ()}
            status["unassigned_lag"] = self._group_lag.unassigned(held)
        return status
