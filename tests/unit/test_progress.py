"""The progress line of `conveyor run`: task counts by state."""

from conveyor.runtime.driver.progress import task_states


def test_task_states_count_running_tasks_and_name_the_others():
    assert task_states([{"state": "RUNNING"}, {"state": "RUNNING"}]) == "tasks 2/2 running"
    assert task_states([{"state": "UNASSIGNED"}, {"state": "RUNNING"}]) == "tasks 1/2 running, 1 starting"
    assert task_states([{"state": "FAILED"}, {"state": "PAUSED"}, {"state": "PAUSED"}]) == \
        "tasks 0/3 running, 1 FAILED, 2 PAUSED"
    assert task_states([]) == "tasks 0/0 running"
