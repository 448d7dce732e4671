"""The autoscaler's decisions (conveyor_operator.observe.autoscaler): the Flink-style
recommendation from a window of load counters, the HPA-style stabilization windows, the
partitions ceiling, and measuring anew after a change."""

from __future__ import annotations

import pytest

from conveyor.control.load import SinkLoad
from conveyor.manifest import ConnectorManifest
from conveyor.manifest.autoscaler import AutoscalerSpec
from conveyor_operator.observe.autoscaler import History, decide, driver_behind, running_manifest, running_tasks


def spec(**overrides: object) -> AutoscalerSpec:
    return AutoscalerSpec.model_validate({"maxTasks": 8, "metricsWindowSeconds": 30,
                                          "scaleDownStabilizationSeconds": 60, **overrides})


class Feed:
    """Reads every 10 s of a connector whose tasks put ``put_rate`` records/s at ``busy``,
    with ``produce_rate`` records/s arriving and the lag following from the two."""

    def __init__(self, tasks: int, partitions: int = 8, lag: int = 0) -> None:
        self.tasks, self.partitions, self.lag = tasks, partitions, lag
        self.now = 1000.0
        self.put = self.busy_ms = self.running_ms = 0
        self.log_end = 10**6

    def step(self, put_rate: float, produce_rate: float, busy: float, seconds: float = 10.0) -> SinkLoad:
        self.now += seconds
        self.put += int(put_rate * seconds)
        self.log_end += int(produce_rate * seconds)
        self.lag = max(0, self.lag + int((produce_rate - put_rate) * seconds))
        self.running_ms += int(seconds * 1000 * self.tasks)
        self.busy_ms += int(seconds * 1000 * self.tasks * busy)
        return SinkLoad(tasks=self.tasks, records_put=self.put, busy_time_ms=self.busy_ms,
                        running_time_ms=self.running_ms, partitions=self.partitions, lag=self.lag,
                        log_end=self.log_end)


def run(auto: AutoscalerSpec, history: History, feed: Feed, reads: int, put_rate: float, produce_rate: float,
        busy: float) -> list[int | None]:
    decisions = []
    for _ in range(reads):
        decisions.append(decide(auto, history, feed.step(put_rate, produce_rate, busy), feed.tasks, feed.now).tasks)
    return decisions


def test_no_decision_before_a_whole_window() -> None:
    feed, history = Feed(tasks=1, lag=100_000), History()
    assert run(spec(), history, feed, 3, put_rate=200, produce_rate=400, busy=1.0) == [None, None, None]
    assert run(spec(), history, feed, 1, put_rate=200, produce_rate=400, busy=1.0) != [None]


def test_a_saturated_task_under_lag_is_scaled_to_what_takes_the_input_and_works_off_the_lag() -> None:
    # One task at 100 % busy takes 200 records/s; 400 arrive; 98,000 behind at the 4th read
    # (target 1,000): target rate 400 + 97,000/300 = ~723 records/s at 0.7 of 200 each: ceil(5.2) = 6.
    feed, history = Feed(tasks=1, lag=90_000), History()
    decisions = run(spec(), history, feed, 4, put_rate=200, produce_rate=400, busy=1.0)
    assert decisions[:3] == [None, None, None]
    assert decisions[3] == 6
    evaluation = decide(spec(), history, feed.step(200, 400, 1.0), 1, feed.now).evaluation
    assert evaluation is not None and evaluation.reason == "lag above target"
    assert evaluation.processing_rate == pytest.approx(200)
    assert evaluation.input_rate == pytest.approx(400)
    assert evaluation.busy == pytest.approx(1.0)


def test_a_target_lag_in_seconds_is_that_many_seconds_of_the_records_arriving() -> None:
    # 2 tasks at 0.6 busy take the 300 records/s that arrive, 6,000 behind: 20 s of arrivals.
    # A target of 30 s leaves it standing; a target of 10 s (3,000 records) is breached.
    feed, history = Feed(tasks=2, lag=6_000), History()
    assert run(spec(targetLagSeconds=30), history, feed, 6, put_rate=300, produce_rate=300, busy=0.6) == [None] * 6
    evaluation = decide(spec(targetLagSeconds=30), history, feed.step(300, 300, 0.6), 2, feed.now).evaluation
    assert evaluation is not None and evaluation.reason == "within the target utilization"
    feed, history = Feed(tasks=2, lag=6_000), History()
    # 300 + 3,000/300 = 310 records/s at 0.7 of 250 each: ceil(1.77) = 2, so it stays, for the lag
    run(spec(targetLagSeconds=10), history, feed, 4, put_rate=300, produce_rate=300, busy=0.6)
    evaluation = decide(spec(targetLagSeconds=10), history, feed.step(300, 300, 0.6), 2, feed.now).evaluation
    assert evaluation is not None and evaluation.reason == "lag above target"
    assert spec().target_lag(1e6) == 1000 and spec(targetLagRecords=5).target_lag(1e6) == 5


def test_a_target_lag_is_in_records_or_in_seconds_not_both() -> None:
    with pytest.raises(ValueError, match="targetLagRecords and targetLagSeconds are both set"):
        spec(targetLagRecords=10, targetLagSeconds=10)


def test_it_never_goes_above_the_partitions_nor_max_tasks() -> None:
    feed, history = Feed(tasks=1, partitions=3, lag=900_000), History()
    assert run(spec(), history, feed, 4, put_rate=100, produce_rate=1000, busy=1.0)[-1] == 3
    evaluation = decide(spec(), history, feed.step(100, 1000, 1.0), 1, feed.now).evaluation
    assert evaluation is not None and "held at 3 (partitions)" in evaluation.reason
    feed, history = Feed(tasks=1, partitions=12, lag=900_000), History()
    assert run(spec(maxTasks=4), history, feed, 4, put_rate=100, produce_rate=1000, busy=1.0)[-1] == 4


def test_within_the_utilization_band_with_no_lag_it_stays() -> None:
    feed, history = Feed(tasks=2), History()
    assert run(spec(), history, feed, 12, put_rate=300, produce_rate=300, busy=0.6) == [None] * 12


def test_an_idle_connector_scales_down_only_after_the_scale_down_window() -> None:
    # 4 tasks at 5 % busy putting the 40 records/s that arrive: one task would do at 0.7.
    feed, history = Feed(tasks=4), History()
    decisions = run(spec(), history, feed, 10, put_rate=40, produce_rate=40, busy=0.05)
    # reads every 10 s: the 4th has a whole window (30 s), 60 s of recommendations follow it
    assert decisions[:9] == [None] * 9
    assert decisions[9] == 1


def test_scale_down_takes_the_highest_recommendation_of_its_window() -> None:
    feed, history = Feed(tasks=4), History()
    run(spec(), history, feed, 4, put_rate=600, produce_rate=600, busy=0.4)  # recommends 3 (ceil(600/(0.7*375)))
    decisions = run(spec(), history, feed, 5, put_rate=40, produce_rate=40, busy=0.05)  # then 1
    assert all(d in (None, 3) for d in decisions)
    assert 1 not in decisions


def test_scale_up_stabilization_takes_the_lowest_recommendation_of_its_window() -> None:
    auto = spec(scaleUpStabilizationSeconds=30)
    feed, history = Feed(tasks=1), History()
    run(auto, history, feed, 5, put_rate=100, produce_rate=100, busy=0.5)  # within the band: recommends 1
    decisions = run(auto, history, feed, 6, put_rate=100, produce_rate=1000, busy=1.0)
    assert decisions[:3] == [None, None, None]  # a recommendation of 1 is still in the window
    assert decisions[3:] == [5, 8, 8]  # then the lowest of the last 30 s: 5 (its window spanned both loads), 8


def test_a_read_with_another_task_count_or_counters_gone_back_measures_anew() -> None:
    auto, history = spec(), History()
    feed = Feed(tasks=1, lag=90_000)
    run(auto, history, feed, 3, put_rate=200, produce_rate=400, busy=1.0)
    moving = feed.step(200, 400, 1.0)
    assert decide(auto, history, moving, 2, feed.now).tasks is None  # 1 running, 2 wanted: a change under way
    assert not history.samples
    restarted = Feed(tasks=1, lag=90_000)  # counters from zero: a task restarted
    restarted.now = feed.now
    run(auto, history, feed, 2, put_rate=200, produce_rate=400, busy=1.0)
    assert decide(auto, history, restarted.step(200, 400, 1.0), 1, restarted.now).tasks is None
    assert len(history.samples) == 1


def test_no_records_put_under_lag_is_no_capacity_to_size_by() -> None:
    feed, history = Feed(tasks=2, lag=50_000), History()
    decisions = run(spec(), history, feed, 6, put_rate=0, produce_rate=100, busy=1.0)
    assert decisions == [None] * 6
    evaluation = decide(spec(), history, feed.step(0, 100, 1.0), 2, feed.now).evaluation
    assert evaluation is not None and evaluation.recommended == 2


def manifest(**spec_fields: object) -> ConnectorManifest:
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "c", "namespace": "n"},
        "spec": {"class": "file-sink", "kafka": {"bootstrapServers": "k:9092"}, **spec_fields}})


def test_the_driver_runs_the_autoscalers_count_within_its_bounds() -> None:
    plain = manifest(tasksMax=3)
    assert running_tasks(plain, {"autoscaler": {"tasks": 5}}) == 3
    auto = manifest(tasksMax=3, autoscaler={"minTasks": 2, "maxTasks": 6})
    assert running_tasks(auto, {}) == 3
    assert running_tasks(auto, {"autoscaler": {"tasks": 5}}) == 5
    assert running_tasks(auto, {"autoscaler": {"tasks": 9}}) == 6
    assert running_manifest(auto, {"autoscaler": {"tasks": 1}}).spec.tasks_max == 2
    off = manifest(tasksMax=3, autoscaler={"enabled": False, "maxTasks": 6})
    assert running_tasks(off, {"autoscaler": {"tasks": 5}}) == 3


def test_an_autoscaler_sizes_a_local_master_for_its_max_tasks() -> None:
    assert manifest(tasksMax=2, autoscaler={"maxTasks": 6}).spec.most_tasks == 6
    assert manifest(tasksMax=2, autoscaler={"enabled": False, "maxTasks": 6}).spec.most_tasks == 2
    assert manifest(tasksMax=2).spec.most_tasks == 2


def test_a_driver_left_on_another_count_is_sent_the_autoscalers_again_after_a_window() -> None:
    """A reconcile that read the status before the autoscaler's last write pushes the count before
    it; the autoscaler sends its own again once the driver has run the other for a whole window."""
    auto, history = spec(metricsWindowSeconds=30), History()
    assert not driver_behind(auto, history, driver_tasks=2, current=3, now=100.0)
    assert not driver_behind(auto, history, driver_tasks=2, current=3, now=129.0)
    assert driver_behind(auto, history, driver_tasks=2, current=3, now=130.0)
    assert not driver_behind(auto, history, driver_tasks=2, current=3, now=131.0), "measured anew after a send"
    assert not driver_behind(auto, history, driver_tasks=3, current=3, now=200.0)
    assert history.driver_differs_since is None
