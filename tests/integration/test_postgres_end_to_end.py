"""``conveyor run`` moving records from Kafka into PostgreSQL, and surviving ``kill -9``.

The driver runs as a real ``conveyor run`` process (its own Spark, local mode); it is
killed with SIGKILL in the middle of a 200k-record run and started again (in-process, on the
session's SparkSession: the rerun only resumes from what was committed). Every record
must end up in PostgreSQL exactly once: by key in upsert mode, and with no key at all
(plain inserts) in exactly-once mode, where a duplicate would show as an extra row.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import yaml

from conveyor.manifest import ConnectorManifest
from conveyor.testing.runs import produce, running_connector, wait_until

pytestmark = pytest.mark.integration

TOTAL = 200_000


def _manifest(tmp_path: Path, name: str, bootstrap: str, config: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "conveyor.dev/v1alpha1",
        "kind": "Connector",
        "metadata": {"name": name},
        "spec": {"class": "postgres-sink", "tasksMax": 2, "kafka": {"bootstrapServers": bootstrap},
                 "config": config, "shutdown": {"gracePeriodSeconds": 30}},
    }))
    return path


def _start(manifest: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "conveyor.cli", "run", str(manifest), "--control-port", "0", "--no-progress"],
        stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )


def _count(url: str, sql: str) -> int:
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(sql).fetchone()[0]
    except psycopg.errors.UndefinedTable:
        return 0


def _kill_driver_hard(proc: subprocess.Popen) -> None:
    """SIGKILL the driver process alone, as a crash would; Spark's JVM and Python
    workers notice their parent is gone and exit by themselves."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True).returncode != 0:
            return
        time.sleep(0.5)
    subprocess.run(["pkill", "-9", "-s", str(proc.pid)])
    pytest.fail("Spark processes outlived the killed driver by 60 s")


def _produce_rows(bootstrap: str, topic: str) -> None:
    pad = "x" * 120
    batch = []
    for i in range(TOTAL):
        batch.append((str(i).encode(), json.dumps({"id": i, "name": f"order-{i}", "pad": pad}).encode()))
    produce(bootstrap, topic, batch)


@pytest.mark.process_boundary("kill -9 of a conveyor run process mid-batch; Spark's JVM and workers must die after it")
@pytest.mark.parametrize("mode", ["upsert", "exactly_once"])
def test_kill_9_mid_run_then_rerun_delivers_every_record_once(
    mode, kafka_bootstrap, topic_factory, pg_database, tmp_path, spark
):
    """The crashed run is a process; the rerun, which only has to resume from what was
    committed, runs on the session's SparkSession."""
    topic = topic_factory(partitions=6)
    _produce_rows(kafka_bootstrap, topic)
    table = topic.replace("-", "_").replace(".", "_")
    config = {
        "topics": topic,
        "connection.url": pg_database,
        "auto.create": "true",
        "value.converter": "json",
        "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "1000",
        "batch.size": "2000",
        "consumer.override.session.timeout.ms": "6000",
        "consumer.override.heartbeat.interval.ms": "500",
    }
    if mode == "upsert":
        config.update({"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"})
    else:
        config.update({"insert.mode": "insert", "exactly.once": "true"})
    name = f"pg-{mode.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    manifest = _manifest(tmp_path, name, kafka_bootstrap, config)
    log = tmp_path / "driver.log"

    first = _start(manifest, log)
    try:
        wait_until(lambda: _count(pg_database, f'SELECT count(*) FROM "{table}"') >= TOTAL // 4, timeout_s=240,
                   message=f"a quarter of the rows (log: {log.read_text()[-2000:] if log.exists() else ''})")
    finally:
        _kill_driver_hard(first)
    after_kill = _count(pg_database, f'SELECT count(*) FROM "{table}"')
    assert after_kill < TOTAL, "the kill must land mid-run for this test to mean anything"

    with running_connector(ConnectorManifest.load(manifest), spark) as second:
        wait_until(lambda: _count(pg_database, f'SELECT count(DISTINCT id) FROM "{table}"') >= TOTAL,
                   timeout_s=300, message="every id in PostgreSQL after the rerun")
        time.sleep(2)
        stopped = second.stop()
    assert all(t["state"] == "STOPPED" for t in stopped["tasks"]), stopped
    rows = _count(pg_database, f'SELECT count(*) FROM "{table}"')
    distinct = _count(pg_database, f'SELECT count(DISTINCT id) FROM "{table}"')
    assert (rows, distinct) == (TOTAL, TOTAL), f"rows={rows} distinct={distinct}; none lost, none twice"
