"""Pods that cannot run are named in the Connector's conditions (pure: pods as the API returns them)."""

from conveyor_operator.observe.pod_health import POD_PROBLEM_REASONS, component, pod_problem, pod_summary


def pod(name, conditions=(), containers=(), deleting=False):
    meta = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": list(conditions), "containerStatuses": list(containers)}}


def waiting(reason, message="", **extra):
    return {"name": "driver", "image": "conveyor:9.9", "state": {"waiting": {"reason": reason, "message": message}},
            **extra}


def test_running_and_starting_pods_are_no_problem():
    running = pod("a-driver-1", containers=[{"name": "driver", "state": {"running": {}}}])
    creating = pod("a-exec-1", containers=[waiting("ContainerCreating")])
    pending = pod("a-exec-2", conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}])
    assert pod_problem([running, creating, pending]) is None


def test_an_unschedulable_pod_names_itself_and_the_schedulers_reason():
    problem = pod_problem([pod("a-exec-3", conditions=[{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 Insufficient cpu."}])])
    assert problem.reason == "Unschedulable" and problem.pod == "a-exec-3"
    assert "a-exec-3" in problem.message and "Insufficient cpu" in problem.message


def test_image_problems_name_the_image():
    problem = pod_problem([pod("a-driver-1", containers=[waiting("ErrImageNeverPull", "image not present")])])
    assert problem.reason == "ErrImageNeverPull"
    assert "conveyor:9.9" in problem.message and "image not present" in problem.message


def test_a_crash_loop_says_how_the_container_last_ended():
    problem = pod_problem([pod("a-driver-1", containers=[waiting(
        "CrashLoopBackOff", "back-off 40s", restartCount=4,
        lastState={"terminated": {"exitCode": 2, "reason": "Error"}})])])
    assert problem.reason == "CrashLoopBackOff"
    assert "restarted 4 times" in problem.message and "exit code 2" in problem.message


def test_terminating_pods_are_ignored_and_the_first_by_name_wins():
    gone = pod("a-aaa", containers=[waiting("CrashLoopBackOff")], deleting=True)
    b = pod("a-bbb", containers=[waiting("ImagePullBackOff")])
    c = pod("a-ccc", containers=[waiting("CrashLoopBackOff")])
    assert pod_problem([c, gone, b]).pod == "a-bbb"
    assert {"Unschedulable", "CrashLoopBackOff", "ImagePullBackOff"} <= POD_PROBLEM_REASONS


def test_the_pod_index_keeps_what_pod_problem_reads_and_finds_the_same_problems():
    crash = waiting("CrashLoopBackOff", restartCount=4, lastState={"terminated": {"exitCode": 1, "reason": "Error"}})
    pods = [pod("a-exec-3", conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                         "message": "0/1 nodes are available"}]),
            pod("a-driver-1", containers=[crash]),
            pod("a-bbb", containers=[waiting("ErrImagePull")], deleting=True)]
    for full in pods:
        full["metadata"].update({"uid": "u", "labels": {"conveyor.dev/connector": "a"}, "managedFields": [{}] * 9})
        full["spec"] = {"containers": [{"name": "driver", "image": "conveyor:9.9", "env": [{"name": "X"}] * 50}]}
        full["status"]["initContainerStatuses"] = [waiting("PodInitializing")]
    kept = [pod_summary(p) for p in pods]
    assert pod_problem(kept) == pod_problem(pods) and pod_problem(kept).pod == "a-driver-1"
    assert pod_problem(kept[::2]) == pod_problem(pods[::2]) and pod_problem(kept[::2]).reason == "Unschedulable"
    assert all(set(k) == {"metadata", "status"} and set(k["metadata"]) <= {"name", "deletionTimestamp"} for k in kept)
    cleanup = pod("a-cleanup-x")
    cleanup["metadata"]["labels"] = {"conveyor.dev/connector": "a", "conveyor.dev/component": "cleanup", "x": "y"}
    assert pod_summary(cleanup)["metadata"]["labels"] == {"conveyor.dev/component": "cleanup"}
    assert component(pod_summary(cleanup)) == "cleanup" and component(kept[0]) == ""
    assert pod_summary({}) == {"metadata": {}, "status": {}}
