"""Rescaling as a non-event on a real node (issue 34): ``kubectl scale`` of a PostgreSQL sink from 1
to 3 tasks and back to 1 while records keep arriving, on KIP-848's consumer group protocol. The
driver that ran one task asks Spark for the two new executor pods and later removes them; it
never rolls. The sink inserts (no key), so a record written twice would be a second row: every
record is a row exactly once."""

from __future__ import annotations

import uuid

import pytest
from _connectors import (
    apply,
    connector,
    create_topic,
    diagnostics,
    eventually,
    pods,
    row_count,
    running_pod,
    tasks_in,
)

from conveyor.testing.runs import SteadyLoad, group_protocol_config

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def _executors(node, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in pods(node, namespace, "conveyor.dev/component=executor")
            if p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp")}


def test_scale_up_and_down_under_load_loses_nothing_and_writes_nothing_twice(kube_node, node_kafka, node_postgres,
                                                                              conveyor_release, node_namespace):
    ns, kafka, pg = node_namespace, node_kafka.bootstrap_servers, node_postgres.url
    topic = f"rescale_{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, partitions=6)
    config = {"topics": topic, "connection.url": pg, "insert.mode": "insert", "auto.create": "true",
              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false", "offset.flush.interval.ms": "2000",
              **group_protocol_config("consumer")}
    apply(kube_node, connector("rescale", ns, "postgres-sink", kafka, config, tasksMax=1))
    try:
        with SteadyLoad(kafka, topic, records_per_s=100) as load:
            eventually(lambda: row_count(pg, topic) > 0, 300, "the first rows")
            driver = running_pod(kube_node, ns, "conveyor.dev/component=driver")
            assert len(_executors(kube_node, ns)) == 1

            kube_node.kubectl("scale", "connector/rescale", "-n", ns, "--replicas=3")
            tasks = eventually(lambda: tasks_in(kube_node, ns, "rescale", "RUNNING", 3), 240, "three RUNNING tasks")
            assert len({t["pod"] for t in tasks}) == 3 and {t["pod"] for t in tasks} <= _executors(kube_node, ns)
            seen = row_count(pg, topic)
            eventually(lambda: row_count(pg, topic) >= seen + 300, 120, "rows written by three tasks")

            kube_node.kubectl("scale", "connector/rescale", "-n", ns, "--replicas=1")
            eventually(lambda: tasks_in(kube_node, ns, "rescale", "RUNNING", 1), 120, "one RUNNING task")
            eventually(lambda: len(_executors(kube_node, ns)) == 1, 120, "the freed executor pods removed")
            seen = row_count(pg, topic)
            eventually(lambda: row_count(pg, topic) >= seen + 300, 120, "rows written by one task")
        eventually(lambda: row_count(pg, topic) >= load.produced, 180, f"{load.produced} rows")
        assert row_count(pg, topic) == row_count(pg, topic, distinct="id") == load.produced, \
            "every record a row, exactly once"
        assert running_pod(kube_node, ns, "conveyor.dev/component=driver") == driver, "the driver rolled"
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
