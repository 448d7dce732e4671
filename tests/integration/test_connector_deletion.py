"""Deleting a connector removes what it provisioned outside Kafka, and nothing else does
(KAFKA-14651), through the real runtime: the PostgreSQL audit source's triggers,
function and audit table (checked in PostgreSQL's catalog) and the RabbitMQ sink's
queues (checked against the RabbitMQ server)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import psycopg
import pytest
import yaml

from conveyor.manifest import ConnectorState
from conveyor.testing.ports import free_port
from conveyor.testing.postgres import audit_catalog
from conveyor.testing.runs import connector_manifest, consume_all, produce, running_connector, wait_until

pytestmark = pytest.mark.integration


def _make_tables(url: str, *names: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for name in names:
            conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, item text)")


def _insert(url: str, table: str, start: int, count: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} (id, item) VALUES (%s, %s)",
                            [(i, f"item-{i}") for i in range(start, start + count)])


def _audit_manifest(name, bootstrap, url, tables, tasks_max=1):
    return connector_manifest(name, "postgres-audit-source", bootstrap, {
        "connection.url": url, "tables": tables, "topic.prefix": f"{name}.",
        "value.converter": "json", "value.converter.schemas.enable": "false",
        "key.converter": "json", "key.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "500", "poll.interval.ms": "200",
    }, tasks_max=tasks_max)


def test_audit_source_cleanup_only_when_deleted(kafka_bootstrap, spark, pg_database):
    _make_tables(pg_database, "orders", "refunds")
    name = f"audit-{uuid.uuid4().hex[:6]}"
    manifest = _audit_manifest(name, kafka_bootstrap, pg_database, "public.orders,public.refunds", tasks_max=2)
    with running_connector(manifest, spark) as driver:
        _insert(pg_database, "orders", 0, 20)
        assert len(consume_all(kafka_bootstrap, f"{name}.public.orders", 20)) == 20
        provisioned = audit_catalog(pg_database)
        assert len(provisioned["triggers"]) == 2 and provisioned["functions"] and provisioned["tables"]

        driver.restart_task(0)                                   # restart
        wait_until(lambda: driver.status()["tasks"][0]["attempt"] == 2, message="task restarted")
        driver.pause()                                           # pause
        driver.resume()
        driver.reconfigure(manifest.spec.model_copy(update={"tasks_max": 1}))   # scale down
        driver.set_state(ConnectorState.STOPPED)                 # stop (connector kept)
        driver.set_state(ConnectorState.RUNNING)
        assert audit_catalog(pg_database) == provisioned, "restart, pause, scale-down and stop remove nothing"
        _insert(pg_database, "orders", 20, 5)
        assert len(consume_all(kafka_bootstrap, f"{name}.public.orders", 25)) == 25, "no change lost meanwhile"

        result = driver.stop(connector_deleted=True)
    assert audit_catalog(pg_database) == {"triggers": [], "functions": [], "tables": []}
    assert any("orders" in line for line in result["removed"]), result["removed"]


def _write(tmp_path, manifest) -> str:
    path = tmp_path / f"{manifest.name}.yaml"
    path.write_text(yaml.safe_dump(manifest.model_dump(by_alias=True, mode="json")))
    return str(path)


def _cleanup(path: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conveyor.cli", "cleanup", path, "--timeout", str(timeout)],
                          capture_output=True, text=True, timeout=300)


def test_conveyor_cleanup_removes_audit_objects_of_a_connector_that_is_not_running(
    kafka_bootstrap, spark, pg_database, tmp_path
):
    _make_tables(pg_database, "orders")
    name = f"audit-{uuid.uuid4().hex[:6]}"
    manifest = _audit_manifest(name, kafka_bootstrap, pg_database, "public.orders")
    with running_connector(manifest, spark):
        pass  # ran once, then a plain stop: the triggers stay
    assert audit_catalog(pg_database)["triggers"]
    path = _write(tmp_path, manifest)
    first = _cleanup(path)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["removed"]
    assert audit_catalog(pg_database) == {"triggers": [], "functions": [], "tables": []}
    again = _cleanup(path)
    assert again.returncode == 0, again.stderr
    with psycopg.connect(pg_database, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 0, "no data moved or changed"


def test_cleanup_against_an_unreachable_database_fails_with_the_reason(kafka_bootstrap, tmp_path):
    port = free_port()
    url = f"postgresql://postgres:hunter2@127.0.0.1:{port}/db"
    manifest = _audit_manifest(f"audit-{uuid.uuid4().hex[:6]}", kafka_bootstrap, url, "public.orders")
    result = _cleanup(_write(tmp_path, manifest), timeout=5)
    assert result.returncode == 1
    assert "did not finish" in result.stderr and str(port) in result.stderr
    assert "hunter2" not in result.stderr


def _rabbit_manifest(name, bootstrap, rabbitmq_url, topic):
    return connector_manifest(name, "rabbitmq-sink", bootstrap, {
        "topics": topic, "rabbitmq.url": rabbitmq_url, "rabbitmq.queue.name.format": f"{name}-${{topic}}",
        "value.converter": "bytes", "offset.flush.interval.ms": "500",
    })


def test_rabbitmq_sink_queues_are_deleted_only_when_the_connector_is(
    kafka_bootstrap, topic_factory, spark, rabbitmq_server, tmp_path
):
    topic = topic_factory(partitions=1)
    name = f"rmq-{uuid.uuid4().hex[:6]}"
    queue = f"{name}-{topic}"
    produce(kafka_bootstrap, topic, [(None, f"m{i}".encode()) for i in range(10)])
    manifest = _rabbit_manifest(name, kafka_bootstrap, rabbitmq_server.url, topic)
    with running_connector(manifest, spark) as driver:
        wait_until(lambda: rabbitmq_server.queue_message_count(queue) == 10, message="10 messages in the queue")
        driver.restart_task(0)
        wait_until(lambda: driver.status()["tasks"][0]["attempt"] == 2, message="task restarted")
    assert rabbitmq_server.queue_exists(queue), "a plain stop keeps the queue"
    assert rabbitmq_server.queue_message_count(queue) == 10, "nothing sent twice across the restart"

    with running_connector(manifest, spark) as driver:
        wait_until(lambda: driver.status()["tasks"][0]["state"] == "RUNNING", message="running")
        result = driver.stop(connector_deleted=True)
    assert not rabbitmq_server.queue_exists(queue)
    assert any(queue in line for line in result["removed"]), result["removed"]


def test_conveyor_cleanup_deletes_queues_and_tolerates_one_deleted_by_hand(
    kafka_bootstrap, rabbitmq_server, tmp_path
):
    name = f"rmq-{uuid.uuid4().hex[:6]}"
    manifest = _rabbit_manifest(name, kafka_bootstrap, rabbitmq_server.url, "a,b")
    path = _write(tmp_path, manifest)
    rabbitmq_server.declare_queue(f"{name}-a")
    rabbitmq_server.declare_queue(f"{name}-b")
    rabbitmq_server.declare_queue("someone-elses-queue")
    rabbitmq_server.delete_queue(f"{name}-b")  # by hand
    result = _cleanup(path)
    assert result.returncode == 0, result.stderr
    assert not rabbitmq_server.queue_exists(f"{name}-a")
    assert rabbitmq_server.queue_exists("someone-elses-queue")
    rabbitmq_server.delete_queue("someone-elses-queue")
