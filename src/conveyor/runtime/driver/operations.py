"""The driver's operations on a running connector (:class:`DriverOperations`, a part of
:class:`~conveyor.runtime.driver.driver.Driver`): state changes, drains, task and connector
restarts, reconfiguration, and the herder thread that acts on the connector's reconfiguration
requests. The table of what each does to the tasks is :mod:`conveyor.runtime.driver.driver`'s.
"""

from __future__ import annotations

import logging
import time
from http import HTTPStatus
from typing import Any

from conveyor.control.errors import OperationError
from conveyor.control.protocol import Action, Directive, TaskState, trace_of
from conveyor.manifest import ConnectorSpec, ConnectorState
from conveyor.runtime.config import log_levels
from conveyor.runtime.config.validation import PreflightError, connector_class, validate_config
from conveyor.runtime.driver.spark_session import local_task_slots
from conveyor.runtime.herder.task_handles import TaskHandle
from conveyor.runtime.kafka.clients import kafka_properties
from conveyor.runtime.kafka.preflight import check_kafka

log = logging.getLogger("conveyor.runtime.driver.driver")


class DriverOperations:
    """The operations of :class:`~conveyor.runtime.driver.driver.Driver`, called on the control
    API's worker threads and serialised by ``operations``; they use the driver's state and its
    start and stop steps."""

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
        """Apply a new ``spec`` (configuration, ``tasksMax``, ``state``; references resolved).
        The spec it runs already changes nothing. A change of ``tasksMax`` alone (issue 34,
        live task changes) restarts the connector instance only: its new task configurations
        are taken as :meth:`_change_tasks` says, so a task whose configuration stays keeps
        running and only the difference starts or stops (with its closing commit). Any other
        change: every task makes a closing commit and stops, the connector restarts with the
        new configuration. ``written`` (default ``spec``) becomes :attr:`written_spec`.

        Raises:
            OperationError: 400 with the invalid keys; 409 when the class changed, or when a
                local Spark master has fewer task slots than the new ``tasksMax`` (only a new
                driver has more: the operator rolls it).
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
            if (spec.model_copy(update=_not_running(self.manifest.spec)) == self.manifest.spec
                    and kafka == self.kafka and spec.state is self.target_state):
                # the same again (an operator's retry), or only spec.autoscaler changed (the
                # operator's to act on) or spec.initialOffsets (applied at start only): nothing restarts
                self.manifest = self.manifest.model_copy(update={"spec": spec})
                self.written_spec = written or spec
                return {"name": self.name, "state": self.connector_state.value, "tasks": len(self.tasks)}
            self._check_task_slots(spec.tasks_max)
            if self._task_count_only(spec, kafka):
                return self._change_task_count(spec, written, candidate)
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

    def _task_count_only(self, spec: ConnectorSpec, kafka: dict[str, Any]) -> bool:
        """Whether ``spec`` changes only ``tasksMax`` (and perhaps ``autoscaler``) of a connector
        whose tasks run."""
        running = self.manifest.spec
        return (spec.tasks_max != running.tasks_max and kafka == self.kafka
                and spec.model_copy(update={"tasks_max": running.tasks_max, "state": running.state,
                                            **_not_running(running)}) == running
                and spec.state is self.target_state and spec.state is not ConnectorState.STOPPED
                and self.connector_state in (TaskState.RUNNING, TaskState.PAUSED))

    def _change_task_count(self, spec: ConnectorSpec, written: ConnectorSpec | None, candidate: Any
                           ) -> dict[str, Any]:
        """The connector instance restarts with the new ``tasks.max`` (Kafka Connect's
        ``Connector.reconfigure``: ``stop``, then ``start``) and the tasks follow its task
        configurations through :meth:`_change_tasks`. Called with ``operations`` held.

        Raises:
            DriverError: the connector's ``start`` or ``task_configs`` raised; every task has
                then stopped (as a failed reconfiguration leaves them).
        """
        log.info("connector %s: tasksMax %d -> %d, tasks changed live", self.name, self.manifest.spec.tasks_max,
                 spec.tasks_max)
        self._stop_connector(False)
        self.manifest = self.manifest.model_copy(update={"spec": spec})
        self.written_spec = written or spec
        try:
            configs = self._begin_connector(candidate)
        except BaseException:
            self._stop_tasks(connector_deleted=False)
            raise
        self._change_tasks(configs)
        return {"name": self.name, "state": self.connector_state.value, "tasks": len(self.tasks)}

    def _change_tasks(self, configs: list[dict[str, Any]]) -> None:
        """Run the tasks of ``configs`` (a task's id is its index), changing only what differs:
        a running task whose configuration is the same keeps running; the others of the
        running tasks make a closing commit and stop; then the new and changed ones start.
        A sink task's configuration is the same when only its ``tasks.max`` differs (connectors
        copy the connector's config into each task's, as Kafka Connect's do): which records a
        sink task gets is the consumer group's to decide, not its configuration. So on a
        rescale from N to M tasks of a sink the partitions that stay where they are keep
        flowing, and those that move get a closing commit first (the consumer group's
        cooperative, or KIP-848, rebalance). A source task's must be equal, ``tasks.max``
        included (a task may split its work by it). An exactly-once source restarts every task
        instead: a new task count is a new generation, which fences every producer of the
        last one (KIP-618 §zombie fencing). Called with ``operations`` held."""
        if self._task_count_writer is not None:
            self._stop_tasks(connector_deleted=False)
            self._launch_tasks(configs)
            return
        assert self._launcher is not None
        with self._lock:
            current = dict(self.tasks)
        kept = {i for i, h in current.items()
                if i < len(configs) and self._same_task(h.config, configs[i]) and not h.done.is_set()}
        leaving = sorted(set(current) - kept)
        if leaving:
            self._stop_tasks(connector_deleted=False, task_ids=leaving)
        self._follow_with_executors(len(configs), [current[i].pod for i in leaving if i >= len(configs)],
                                    [current[i].pod for i in kept])
        initial = self._resume_action()
        starting = [TaskHandle(i, c, directive=Directive(initial, 1, log_levels=log_levels.directive())) for i, c in enumerate(configs) if i not in kept]
        log.info("connector %s: %d task(s) kept, %d stopped, %d started", self.name, len(kept), len(leaving),
                 len(starting))
        with self._lock:
            self.tasks = dict(sorted(({i: current[i] for i in kept} | {h.task_id: h for h in starting}).items()))
        for handle in starting:
            self._launcher.launch(handle)

    def _follow_with_executors(self, task_count: int, freed_pods: list[str], busy_pods: list[str]) -> None:
        """Executors for ``task_count`` tasks: the idle ones of ``freed_pods`` go while there
        are more than they need, and more are asked for when there are fewer
        (:mod:`conveyor.runtime.driver.executors`)."""
        if self._executors is not None:
            self._executors.shrink(task_count, freed_pods, busy_pods)
            self._executors.grow(task_count)

    def _same_task(self, running: dict[str, Any], wanted: dict[str, Any]) -> bool:
        if self.connector_type == "sink":
            running, wanted = ({k: v for k, v in c.items() if k != "tasks.max"} for c in (running, wanted))
        return running == wanted

    def _check_task_slots(self, tasks_max: int) -> None:
        """Raises:
            OperationError: 409, a local master with fewer slots than ``tasks_max`` (a task is
                a Spark job that never ends: one without a slot would never be scheduled)."""
        master = self.spark_info.get("master", "")
        slots = local_task_slots(master)
        if slots is not None and tasks_max > slots:
            raise OperationError(HTTPStatus.CONFLICT, f"tasksMax {tasks_max} needs {tasks_max} task slots and "
                                 f"this driver's Spark master {master} has {slots}: only a new driver takes it "
                                 "(the operator rolls it when the Connector changes)")

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
                except PreflightError as exc:
                    self.fail_connector(exc)
                    continue
                if configs == [h.config for h in self.tasks.values()]:
                    continue
                log.info("connector %s asked for task reconfiguration: %d task(s)", self.name, len(configs))
                self._change_tasks(configs)

    def _check_not_stopping(self) -> None:
        if self.lifecycle.stopping:
            raise OperationError(HTTPStatus.CONFLICT, f"connector {self.name} is stopping")


def _not_running(spec: ConnectorSpec) -> dict[str, Any]:
    """The fields of ``spec`` a running driver does not act on, for a ``model_copy`` that leaves
    them out of a comparison: the autoscaler (the operator's) and the initial offsets (written
    at start only; the operator leaves them out once written)."""
    return {"autoscaler": spec.autoscaler, "initial_offsets": spec.initial_offsets}
