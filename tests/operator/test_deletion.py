"""What a driver's stop report must show before the finalizer may go."""

from conveyor_operator.handlers.deletion import not_carried_out, stop_problem

DELETED = {"name": "c", "connector_deleted": True, "tasks": [], "removed": ["table audit"],
           "offsets_deleted": None, "offsets_error": None}


def test_a_connector_deleted_stop_is_carried_out():
    assert not_carried_out(DELETED, cleanup=True, delete_offsets=False) == ""
    assert stop_problem(DELETED) == ""


def test_the_report_of_an_earlier_plain_stop_is_not_a_cleanup():
    plain = {**DELETED, "connector_deleted": False}
    assert not_carried_out(plain, cleanup=True, delete_offsets=False) == "the connector-deleted stop path"
    assert not_carried_out(plain, cleanup=False, delete_offsets=False) == ""


def test_offsets_to_delete_must_be_reported_deleted_or_failed():
    assert not_carried_out(DELETED, cleanup=True, delete_offsets=True) == "deleting the offsets"
    deleted = {**DELETED, "offsets_deleted": {"consumer_group": "connect-c", "existed": True}}
    assert not_carried_out(deleted, cleanup=True, delete_offsets=True) == ""
    failed = {**DELETED, "offsets_error": "broker down"}
    assert not_carried_out(failed, cleanup=True, delete_offsets=True) == ""
    assert stop_problem(failed) == "deleting offsets failed: broker down"
    stopped_early = {"name": "c", "stopped": True}  # what a driver returns while its first stop finishes
    assert not_carried_out(stopped_early, cleanup=True, delete_offsets=True) == \
        "the connector-deleted stop path and deleting the offsets"


TRACE = "Traceback (most recent call last):\n  ...\nToleranceExceeded: stage VALUE_CONVERTER failed\n"


def test_a_task_that_failed_before_the_deletion_is_no_problem_once_the_driver_ran_its_deleted_stop():
    cleaned = {**DELETED, "tasks": [{"id": 0, "state": "FAILED", "trace": TRACE, "cleaned_up": True,
                                     "cleanup_error": None}]}
    assert stop_problem(cleaned) == ""


def test_a_failed_task_without_its_deleted_stop_is_a_problem_as_from_a_driver_before_cleaned_up():
    older_driver = {**DELETED, "tasks": [{"id": 0, "state": "FAILED", "trace": TRACE}]}
    assert stop_problem(older_driver) == "task 0 failed: ToleranceExceeded: stage VALUE_CONVERTER failed"
    failing = {**DELETED, "tasks": [{"id": 1, "state": "FAILED", "trace": TRACE, "cleaned_up": False,
                                     "cleanup_error": "Traceback ...\nOperationalError: connection refused\n"}]}
    assert stop_problem(failing) == "task 1's connector-deleted stop failed: OperationalError: connection refused"


def test_a_connector_refused_before_anything_was_applied_has_nothing_to_clean_up():
    from conveyor_operator.handlers.deletion import never_ran

    def not_asked() -> bool:
        raise AssertionError("the Deployment is looked up only for a Connector refused before it ran")

    refused = [{"type": "Degraded", "status": "True", "reason": "InvalidConfig", "message": "batch.size"}]
    assert "never ran" in never_ran(refused, driver_deployment_exists=lambda: False)
    assert never_ran(refused, driver_deployment_exists=lambda: True) == "", "an earlier valid generation ran"
    failed = [{"type": "Degraded", "status": "True", "reason": "Failed", "message": "task FAILED"}]
    assert never_ran(failed, driver_deployment_exists=not_asked) == ""
    assert never_ran([], driver_deployment_exists=not_asked) == ""


def test_only_a_connector_with_something_to_clean_up_carries_the_finalizer():
    """kopf adds the finalizer only when the delete handler's filter matches (and removes it when
    it stops matching): a spec with ``cleanup: false`` and its offsets retained has nothing to do
    outside Kubernetes at deletion."""
    from conveyor_operator.handlers.deletion import cleanup_at_deletion

    assert cleanup_at_deletion({}) is True, "cleanup defaults to true"
    assert cleanup_at_deletion({"deletionPolicy": {"cleanup": True}}) is True
    assert cleanup_at_deletion({"deletionPolicy": {"offsets": "delete"}}) is True
    assert cleanup_at_deletion({"deletionPolicy": {"cleanup": False, "offsets": "delete"}}) is True
    assert cleanup_at_deletion({"deletionPolicy": {"cleanup": False}}) is False
    assert cleanup_at_deletion({"deletionPolicy": {"cleanup": False, "offsets": "retain"}}) is False
    assert cleanup_at_deletion({"deletionPolicy": "bogus"}) is True, "an unreadable policy keeps the finalizer"
