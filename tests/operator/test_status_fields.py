"""Fields the operator copies from the driver's /status into the Connector's status."""


def test_a_tasks_lag_in_the_status_is_the_sum_over_its_partitions():
    from conveyor_operator.observe.driver_status import task_lag

    assert task_lag({"orders:0": 3, "orders:1": 0}) == 3
    assert task_lag({}) == 0
    assert task_lag(7) == 7
    assert task_lag(None) is None and task_lag("x") is None
