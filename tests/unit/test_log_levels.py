"""Log levels at run time (conveyor.runtime.config.log_levels) and their way from the driver to a
task's process in its directive; the REST side, against a real Kafka Connect worker:
tests/integration/test_connect_rest_parity.py."""

from __future__ import annotations

import logging
import uuid

import pytest

from conveyor.control.protocol import Action, Directive, TaskReport, TaskState
from conveyor.runtime.config import log_levels
from conveyor.runtime.herder.task_handles import TaskHandle
from conveyor.runtime.task.control_link import ControlLink


@pytest.fixture
def family():
    base = f"cvytest{uuid.uuid4().hex[:6]}"
    loggers = [logging.getLogger(n) for n in (base, f"{base}.a", f"{base}.a.b", f"{base}x")]
    yield base
    for logger in loggers:
        logger.setLevel(logging.NOTSET)


def test_a_level_set_on_a_logger_reaches_every_logger_below_it_and_only_those(family):
    assert log_levels.set_level(f"{family}.a", "debug") == [f"{family}.a", f"{family}.a.b"]
    assert logging.getLogger(f"{family}.a.b").level == logging.DEBUG
    assert logging.getLogger(family).level == logging.NOTSET and logging.getLogger(f"{family}x").level == 0
    assert log_levels.level(f"{family}.a.b")["level"] == "DEBUG"
    assert log_levels.level(f"{family}.a")["last_modified"] > 0
    assert log_levels.all_levels()[f"{family}.a"]["level"] == "DEBUG"
    assert log_levels.set_level(f"{family}.a", "DEBUG") == [], "none changed: none named, as Connect"
    assert log_levels.set_level(family, "TRACE") == sorted([family, f"{family}.a", f"{family}.a.b"])
    assert logging.getLogger(f"{family}.a").level == log_levels.TRACE
    assert log_levels.level(family)["level"] == "TRACE"


def test_log4j_names_map_to_python_levels_and_back(family):
    for name, number in (("WARN", logging.WARNING), ("FATAL", logging.CRITICAL), ("OFF", logging.CRITICAL + 10)):
        log_levels.set_level(family, name)
        assert logging.getLogger(family).level == number and log_levels.level(family)["level"] == name
    with pytest.raises(log_levels.InvalidLevel):
        log_levels.set_level(family, "LOUD")
    with pytest.raises(log_levels.UnknownLogger):
        log_levels.level(f"{family}.never.made")


def test_the_levels_travel_in_the_directive_and_the_task_process_applies_them(family):
    log_levels.set_level(f"{family}.a", "ERROR")
    levels = log_levels.directive()
    assert (f"{family}.a", "ERROR") in levels
    assert Directive.from_json(Directive(Action.RUN, 3, log_levels=levels).to_json()).log_levels == levels

    handle = TaskHandle(0, {}, directive=Directive(Action.RUN, 1))
    handle.direct_log_levels(levels)
    assert (handle.directive.version, handle.directive.log_levels) == (2, levels)
    handle.direct_log_levels(levels)
    assert handle.directive.version == 2, "the same levels: no new directive"
    handle.direct(Action.PAUSE)
    assert handle.directive.log_levels == levels, "a new action keeps the levels"

    logging.getLogger(f"{family}.a").setLevel(logging.NOTSET)  # as in a task's own process
    link = ControlLink("http://127.0.0.1:9", 0, lambda: TaskReport(task_id=0, attempt=0, worker_id="w", state=TaskState.RUNNING))

    class Driver:
        def sync_task(self, task_id, report, version, wait_ms):
            return handle.directive

    link._client = Driver()
    link._sync(0)
    assert logging.getLogger(f"{family}.a").level == logging.ERROR
    assert link.directive.action is Action.PAUSE
