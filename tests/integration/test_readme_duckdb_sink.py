"""The README's Arrow-native sink (DuckDB, offsets kept in DuckDB's own commit) works as the
README says: its code, as written there, writes every record exactly once across a restart while
Kafka's consumer group commits nothing (issue 31, "what the batch hook opens for users")."""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from pathlib import Path

import duckdb
import pytest

from conveyor.testing.runs import committed_offsets, connector_manifest, produce, running_connector, wait_until

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def duckdb_example() -> str:
    section = README.read_text().split("## Writing a connector", 1)[1].split("\n## ", 1)[0]
    return next(block for block in re.findall(r"```python\n(.*?)```", section, re.S) if "import duckdb" in block)


@pytest.fixture
def duckdb_sink(tmp_path, spark, monkeypatch):
    """The README's module, importable here (the connector) and in Spark's Python workers (the task)."""
    module = tmp_path / "duckdb_sink.py"
    module.write_text(duckdb_example())
    monkeypatch.syspath_prepend(str(tmp_path))
    spark.sparkContext.addPyFile(str(module))
    yield "duckdb_sink:DuckDBSink"
    sys.modules.pop("duckdb_sink", None)


def _config(topic: str, path: Path, **more: str) -> dict:
    return {"topics": topic, "duckdb.path": str(path), "value.converter": "json",
            "value.converter.schemas.enable": "false", "offset.flush.interval.ms": "300", **more}


def _put(driver) -> int:
    tasks = driver.status()["tasks"]
    assert all(t["state"] != "FAILED" for t in tasks), tasks
    return sum(t.get("records_put", 0) for t in tasks)


def test_the_readme_duckdb_sink_writes_each_record_once_across_a_restart(kafka_bootstrap, topic_factory, spark,
                                                                        tmp_path, duckdb_sink):
    topic, path, name = topic_factory(partitions=2), tmp_path / "orders.duckdb", f"duck-{uuid.uuid4().hex[:6]}"
    manifest = connector_manifest(name, duckdb_sink, kafka_bootstrap, _config(topic, path))
    for run, total in ((1, 120), (2, 180)):
        sent = total - (120 if run == 2 else 0)
        produce(kafka_bootstrap, topic, [(None, json.dumps({"id": i, "run": run})) for i in range(total - sent, total)])
        with running_connector(manifest, spark) as d:
            task = wait_until(lambda: next((t for t in d.status()["tasks"] if t["state"] == "RUNNING"  # noqa: B023
                                            and t.get("batch_path")), None), message="the task on the batch path")
            wait_until(lambda: _put(d) >= sent, message=f"run {run}: the {sent} new records put")  # noqa: B023
            time.sleep(1)  # records read again (a wrong rewind) would come now
            assert task["batch_path"] is True
    with duckdb.connect(str(path), read_only=True) as db:
        rows = db.execute("SELECT part, off, value FROM events ORDER BY part, off").fetchall()
        stored = {(t, p): n for t, p, n in db.execute("SELECT topic, part, next FROM kafka_offsets").fetchall()}
    assert len(rows) == 180 and len({(p, o) for p, o, _ in rows}) == 180, "each record once"
    assert sorted(json.loads(v)["id"] for *_, v in rows) == list(range(180))
    assert sum(stored.values()) == 180 and set(stored) == {(topic, 0), (topic, 1)}
    assert committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2) == {}, \
        "Kafka committed nothing: the offsets live in DuckDB"


def test_a_batch_only_task_fails_at_start_saying_why_its_records_cannot_come_as_batches(
    kafka_bootstrap, topic_factory, spark, tmp_path, duckdb_sink
):
    topic = topic_factory(partitions=1)
    config = _config(topic, tmp_path / "x.duckdb", transforms="toKey", **{
        "transforms.toKey.type": "org.apache.kafka.connect.transforms.ValueToKey", "transforms.toKey.fields": "id"})
    with running_connector(connector_manifest(f"duck-{uuid.uuid4().hex[:6]}", duckdb_sink, kafka_bootstrap, config),
                           spark) as d:
        task = wait_until(lambda: next((t for t in d.status()["tasks"] if t["state"] == "FAILED"), None),  # noqa: B023
                          message="the task FAILED")
    assert "DuckDBTask takes batches only (put_batch)" in task["trace"]
    assert ("transformation 'toKey' (org.apache.kafka.connect.transforms.ValueToKey): ValueToKey takes batches of "
            "values with Connect schemas (typed columns), not extension<arrow.json>") in task["trace"]
