"""The README's "Writing a connector" example is a working sink: its code, saved as the README
says and named by ``spec.class``, moves records with ``conveyor run`` (issue 11, "first hour" §6)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from conveyor.testing.runs import produce, wait_until

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    section = README.read_text().split("## Writing a connector", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.process_boundary("the README's example as a user runs it: conveyor run with its module on PYTHONPATH")
def test_the_readme_sink_example_moves_records(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    (tmp_path / "my_sinks.py").write_text(readme_example())
    out = tmp_path / "out"
    out.mkdir()
    manifest = tmp_path / "connector.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": f"readme-{uuid.uuid4().hex[:6]}"},
        "spec": {"class": "my_sinks:JsonLinesSink", "tasksMax": 2, "kafka": {"bootstrapServers": kafka_bootstrap},
                 "config": {"topics": topic, "jsonl.directory": str(out), "jsonl.batch.records": "50",
                            "offset.flush.interval.ms": "500", "value.converter": "json",
                            "value.converter.schemas.enable": "false", "key.converter": "string"}}}))
    produce(kafka_bootstrap, topic, [(f"k{i}", json.dumps({"id": i})) for i in range(120)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    log_path = tmp_path / "driver.log"
    with open(log_path, "wb") as log:
        driver = subprocess.Popen([sys.executable, "-m", "conveyor.cli", "run", str(manifest), "--control-port", "0",
                                   "--no-progress"], stdout=log, stderr=subprocess.STDOUT, env=env,
                                  stdin=subprocess.DEVNULL)
    try:
        def written() -> list[dict]:
            return [json.loads(line) for f in out.glob("*.jsonl") for line in f.read_text().splitlines()]

        wait_until(lambda: len(written()) >= 100, timeout_s=120, message="the batches written",
                   interval_s=0.5)
        driver.send_signal(signal.SIGTERM)  # closing commits write the rest
        assert driver.wait(timeout=120) == 0, log_path.read_text()[-3000:]
    finally:
        if driver.poll() is None:
            driver.kill()
    ids = sorted(r["value"]["id"] for r in written())
    assert ids == list(range(120)), log_path.read_text()[-3000:]
    assert "is not a known key" not in log_path.read_text()
