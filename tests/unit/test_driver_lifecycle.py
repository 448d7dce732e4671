"""The driver's lifecycle transitions (conveyor.runtime.herder.lifecycle), each trigger from each phase."""

import threading

import pytest

from conveyor.runtime.herder.lifecycle import Lifecycle, LifecycleError, Phase


def _new() -> Lifecycle:
    return Lifecycle(threading.Condition())


def test_start_then_stop_walks_every_phase_once():
    life = _new()
    assert life.phase is Phase.CREATED and not life.stopping
    life.begin_start()
    assert life.may_start_connector()
    life.started()
    assert life.phase is Phase.RUNNING
    assert life.begin_stop() is True and life.phase is Phase.STOPPING and life.stopping
    assert life.begin_stop() is False, "a second stop waits for the first"
    assert not life.stopped.is_set()
    life.finish_stop()
    assert life.phase is Phase.STOPPED and life.stopped.is_set()
    assert life.begin_stop() is False
    with pytest.raises(LifecycleError, match="cannot start a driver that is STOPPED"):
        life.begin_start()


def test_a_stop_during_start_up_wins_over_the_start():
    life = _new()
    life.begin_start()
    assert life.begin_stop() is True
    assert not life.may_start_connector()
    life.started()  # the start finishing later does not undo the stop
    assert life.phase is Phase.STOPPING
    life.finish_stop()
    assert life.phase is Phase.STOPPED


def test_a_cancelled_start_does_not_start_the_connector_and_the_stop_still_runs():
    life = _new()
    life.begin_start()
    life.cancel_start()
    assert not life.may_start_connector()
    life.started()
    assert life.begin_stop() is True, "the caller's stop after a cancelled start runs the stop path"


def test_a_failed_start_is_stopped_with_nothing_to_stop():
    life = _new()
    life.begin_start()
    life.start_failed()
    assert life.phase is Phase.STOPPED and life.stopped.is_set()
    assert life.begin_stop() is False


def test_a_driver_starts_once():
    life = _new()
    life.begin_start()
    with pytest.raises(LifecycleError, match="STARTING"):
        life.begin_start()


def test_a_stop_wakes_the_threads_waiting_on_the_drivers_condition():
    lock = threading.Condition()
    life = Lifecycle(lock)
    life.begin_start()
    life.started()
    woke = threading.Event()

    def waiter():
        with lock:
            while not life.stopping:
                lock.wait(5)
            woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    life.begin_stop()
    thread.join(5)
    assert woke.is_set()


def _driver():
    from conveyor.manifest import ConnectorManifest
    from conveyor.runtime.driver.driver import Driver

    manifest = ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "failing"},
        "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "127.0.0.1:9"}, "config": {"topics": "t"}}})
    return Driver(manifest, spark=object())


def test_a_connector_failure_stops_its_tasks_only_once_no_operation_runs_and_not_after_a_restart():
    """``ConnectorContext.raise_error`` stops the tasks in the order of the driver's operations
    (issue 11 §6): not beside a restart holding the operations lock, and not at all when that
    restart has started the connector again."""
    from conveyor.control.protocol import TaskState

    driver = _driver()
    stopped: list[bool] = []
    driver._stop_tasks = lambda connector_deleted, timeout_s=None: stopped.append(connector_deleted)  # type: ignore
    with driver.operations:  # an operation in progress, e.g. a restart
        driver.fail_connector(RuntimeError("boom"))
        threading.Event().wait(0.3)
        assert stopped == [], "tasks stopped while another operation held the lock"
        driver.connector_state = TaskState.RUNNING  # the restart started it again
    threading.Event().wait(0.3)
    assert stopped == [], "a restarted connector's tasks were stopped by the earlier failure"

    driver.fail_connector(RuntimeError("boom again"))
    assert _eventually(lambda: stopped == [False]), stopped
    assert driver.status()["connector"]["state"] == "FAILED"


def _eventually(probe, timeout_s: float = 5.0) -> bool:
    deadline = threading.Event()
    for _ in range(int(timeout_s / 0.05)):
        if probe():
            return True
        deadline.wait(0.05)
    return probe()


def test_a_later_stop_is_counted_until_it_ends():
    life = _new()
    assert life.begin_stop()
    assert not life.begin_stop()  # a later stop: counted from here
    assert not life.wait_later_stops(0.1)
    with life.later_stop():
        pass
    assert life.wait_later_stops(0.1)


def test_close_waits_for_a_connector_deleted_stop_that_came_during_a_sigterm_stop():
    """The SIGTERM stop returns and the CLI closes the driver while the operator's
    connector-deleted stop (a namespace being deleted) still runs its cleanup: the close
    waits for it, so the process does not exit half-way through the cleanup."""
    driver = _driver()
    cleanup_started, cleanup_may_end, order = threading.Event(), threading.Event(), []
    driver._stop_tasks = lambda connector_deleted, timeout_s=None: None  # type: ignore[method-assign]

    def slow_cleanup() -> list[str]:
        cleanup_started.set()
        cleanup_may_end.wait(5)
        order.append("cleanup done")
        return ["audit table"]

    driver._cleanup_stopped_connector = slow_cleanup  # type: ignore[method-assign]
    driver._stop_control_api = lambda: order.append("control API closed")  # type: ignore[method-assign]
    first = driver.stop()  # the SIGTERM stop
    assert first["connector_deleted"] is False
    later = threading.Thread(target=lambda: order.append(driver.stop(connector_deleted=True)["removed"]))
    later.start()
    assert cleanup_started.wait(5)
    closing = threading.Thread(target=driver.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive(), "the driver closed while the connector-deleted stop was still cleaning up"
    cleanup_may_end.set()
    later.join(5)
    closing.join(5)
    assert order == ["cleanup done", ["audit table"], "control API closed"], order
