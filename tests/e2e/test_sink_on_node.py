"""A postgres-sink Connector installed the way users install it — images from the Dockerfile,
the operator from the Helm chart — runs as a driver pod and Spark executor pods on a real node,
and moves records from Kafka into PostgreSQL."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from _connectors import apply, condition, connector, create_topic, diagnostics, eventually, get, pods, row_count

from conveyor.testing.runs import produce

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

RECORDS = 2000


def test_postgres_sink_with_two_tasks_runs_on_executor_pods(kube_node, node_kafka, node_postgres,
                                                            conveyor_release, node_namespace):
    topic = f"orders_{uuid.uuid4().hex[:8]}"
    create_topic(node_kafka.bootstrap_servers, topic, partitions=4)
    produce(node_kafka.bootstrap_servers, topic,
            [(str(i), json.dumps({"id": i, "amount": i * 10})) for i in range(RECORDS)])
    body = connector("orders", node_namespace, "postgres-sink", node_kafka.bootstrap_servers, {
        "topics": topic,
        "connection.url": node_postgres.url,
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }, tasksMax=2)
    applied = time.monotonic()
    apply(kube_node, body)
    try:
        eventually(lambda: row_count(node_postgres.url, topic) > 0, 300, "the first row in PostgreSQL")
        first_row_s = time.monotonic() - applied
        eventually(lambda: row_count(node_postgres.url, topic) == RECORDS, 120, f"{RECORDS} rows")

        def tasks_running():
            status = (get(kube_node, "connector", "orders", node_namespace) or {}).get("status") or {}
            tasks = status.get("tasks") or []
            ready = condition({"status": status}, "Ready") or {}
            if ready.get("status") == "True" and len(tasks) == 2 and all(t["state"] == "RUNNING" for t in tasks):
                return tasks
            return None

        tasks = eventually(tasks_running, 60, "Ready and two RUNNING tasks")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, node_namespace)}") from None

    executors = {p["metadata"]["name"]: p for p in pods(kube_node, node_namespace, "conveyor.dev/component=executor")}
    drivers = pods(kube_node, node_namespace, "conveyor.dev/component=driver")
    assert len(drivers) == 1 and drivers[0]["status"]["phase"] == "Running"
    assert all(re.fullmatch(r"orders-exec-\d+", name) for name in executors), sorted(executors)
    assert all(p["status"]["phase"] == "Running" for p in executors.values())
    assert len(executors) == 2, sorted(executors)  # one task slot each (tasksMax 2, 1 core per executor)
    assert {t["pod"] for t in tasks} == set(executors), (tasks, sorted(executors))
    print(f"apply -> first row in PostgreSQL: {first_row_s:.1f}s")
