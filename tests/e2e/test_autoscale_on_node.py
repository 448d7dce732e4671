"""Autoscaling a Connector on a real node (issue 34).

* A HorizontalPodAutoscaler (item 3), whose kube-controller-manager runs the HPA controller: it
  reads the Connector's scale subresource and takes its ``status.selector``, the step where it
  refuses Strimzi's KafkaConnector (``InvalidSelector``, strimzi-kafka-operator#10450). This
  cluster serves no resource metrics, so the controller's next step, reading the pods' CPU, is
  where it stops.
* The operator's own autoscaler (item 4, ``spec.autoscaler``) on a PostgreSQL sink whose tasks
  take at most 150 records a second each (``conveyor.testing.throttled``): a load it takes
  leaves it alone; a load above it breaches the target lag and it scales up, live; once idle it
  scales down. Its decisions are Events and ``status.autoscaler``; every record is a row once.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from _connectors import (
    apply,
    condition,
    connector,
    create_topic,
    diagnostics,
    driver_control,
    eventually,
    get,
    row_count,
)

from conveyor.testing.runs import SteadyLoad, control_request

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_the_hpa_controller_reads_a_connectors_scale_and_selector(kube_node, node_kafka, conveyor_release,
                                                                     node_namespace):
    ns = node_namespace
    apply(kube_node, connector("scaled", ns, "noop-sink", node_kafka.bootstrap_servers, {"topics": "scaled"}))
    eventually(lambda: ((get(kube_node, "connector", "scaled", ns) or {}).get("status") or {}).get("selector"),
               120, "status.selector written by the operator")
    kube_node.kubectl("autoscale", "connector/scaled", "-n", ns, "--min=1", "--max=3", "--cpu-percent=80")

    def judged():
        hpa = get(kube_node, "hpa", "scaled", ns)
        active = condition(hpa, "ScalingActive")
        return active if active and condition(hpa, "AbleToScale") else None

    active = eventually(judged, 120, "the HPA controller's AbleToScale and ScalingActive conditions")
    hpa = get(kube_node, "hpa", "scaled", ns)
    able = condition(hpa, "AbleToScale")
    assert (able["status"], able["reason"]) == ("True", "SucceededGetScale"), able
    assert active["reason"] == "FailedGetResourceMetric", f"past the selector, to the metrics: {active}"
    kube_node.kubectl("delete", "hpa", "scaled", "-n", ns)


TASK_RATE = 150
TARGET_LAG = 300


def _events(node, namespace: str, name: str) -> list[dict]:
    items = json.loads(node.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return [e for e in items if e["involvedObject"].get("name") == name and e["reason"].startswith("Autoscaler")]


def test_the_autoscaler_scales_a_slow_sink_up_on_a_lag_breach_and_down_once_idle(
        kube_node, node_kafka, node_postgres, conveyor_release, node_namespace):
    ns, kafka, pg = node_namespace, node_kafka.bootstrap_servers, node_postgres.url
    topic = f"auto_{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, partitions=6)
    config = {"topics": topic, "connection.url": pg, "insert.mode": "insert", "auto.create": "true",
              "throttle.records.per.second": str(TASK_RATE),
              # a put of at most a second's records: a task's counters reach the driver between its hooks
              "conveyor.batch.max.records": str(TASK_RATE), "consumer.override.max.poll.records": str(TASK_RATE),
              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false", "offset.flush.interval.ms": "2000"}
    autoscaler = {"minTasks": 1, "maxTasks": 3, "targetLagRecords": TARGET_LAG, "catchUpSeconds": 30,
                  "metricsWindowSeconds": 10, "scaleDownStabilizationSeconds": 20}
    apply(kube_node, connector("auto", ns, "conveyor.testing.throttled:ThrottledPostgresSinkConnector", kafka,
                               config, tasksMax=1, autoscaler=autoscaler))
    try:
        # no records before the task runs: a backlog from the start-up would breach the target lag
        with SteadyLoad(kafka, topic, records_per_s=0) as load:
            control, token = driver_control(kube_node, ns, "auto")

            def driver_status() -> dict:
                try:
                    code, status = control_request(control, "/status", token=token, timeout_s=10)
                except OSError:  # the driver is not listening yet
                    return {}
                return status if code == 200 else {}

            eventually(lambda: [t["state"] for t in driver_status().get("tasks", [])] == ["RUNNING"], 300,
                       "the task RUNNING")
            load.set_rate(60)
            eventually(lambda: row_count(pg, topic) > 0, 120, "the first rows")
            eventually(lambda: (driver_status().get("load") or {}).get("log_end"), 60, "the driver's load figures")
            time.sleep(15)  # a whole metrics window at 60 records/s, 40 % busy: within the band
            assert not _events(kube_node, ns, "auto"), _events(kube_node, ns, "auto")

            load.set_rate(350)  # 2.3 times what one task takes
            breached = eventually(lambda: (driver_status().get("load") or {}).get("lag", 0) > TARGET_LAG and time.monotonic(),
                                  120, f"the group's lag above {TARGET_LAG}", interval_s=0.5)
            def all_putting() -> float | None:
                tasks = driver_status().get("tasks", [])
                ok = len(tasks) == 3 and all(t["state"] == "RUNNING" and t.get("records_put", 0) > 0 for t in tasks)
                return time.monotonic() if ok else None

            consuming = eventually(all_putting, 180, "three tasks putting records", interval_s=0.5)
            print(f"lag breach -> new tasks putting records: {consuming - breached:.1f} s")
            up = eventually(lambda: [e for e in _events(kube_node, ns, "auto") if e["reason"] == "AutoscalerScaledUp"],
                            30, "an AutoscalerScaledUp Event")
            # The lag can breach before the metrics window holds the new rate only: the first decision
            # then takes the window's mean rate (2 tasks), and the next one the rest (CI of stop 56).
            steps = [e["message"] for e in up]
            assert steps[0].startswith(("tasks 1 -> 3: lag above target", "tasks 1 -> 2: lag above target")), steps
            assert all(": lag above target" in step for step in steps), steps
            body = get(kube_node, "connector", "auto", ns)
            status = body["status"]["autoscaler"]
            assert status["tasks"] == 3 and status["lastScaleTime"], status
            assert status["lastDecision"]["reason"].startswith("lag above target"), status
            assert status["lastDecision"]["recommendedTasks"] == 3, status
            assert status["lastDecision"]["lagRecords"] > TARGET_LAG and status["lastDecision"]["partitions"] == 6
            assert body["spec"]["tasksMax"] == 1, "the autoscaler never writes the spec"
            assert body["status"]["tasksMax"] == 3
            load.set_rate(0)  # the lag counts from committed offsets: at 350/s it stays above 300 (2 s commits)
            eventually(lambda: (driver_status().get("load") or {}).get("lag", -1) == 0, 180,
                       "three tasks working off the lag")
            eventually(lambda: get(kube_node, "connector", "auto", ns)["status"]["autoscaler"]["tasks"] == 1, 240,
                       "the autoscaler back at minTasks once idle")
            down = [e for e in _events(kube_node, ns, "auto") if e["reason"] == "AutoscalerScaledDown"]
            assert down and all(" -> " in e["message"] for e in down), down  # 3 -> 1, or 3 -> 2 -> 1
            eventually(lambda: len(driver_status().get("tasks", [])) == 1, 60, "one task")
        eventually(lambda: row_count(pg, topic) >= load.produced, 180, f"{load.produced} rows")
        assert row_count(pg, topic) == row_count(pg, topic, distinct="id") == load.produced, \
            "every record a row, exactly once"
        assert not [e for e in _events(kube_node, ns, "auto") if e["reason"] == "AutoscalerScaleFailed"]
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
