"""A SIGTERM at any moment of ``conveyor run``'s start-up ends in the same graceful stop as in
steady state (issue 11 §1): the driver logs it, stops its tasks with closing commits and exits 0.
Spark's JVM starts with SIGTERM ignored (so that a signal to the process group reaches only the
driver), which must not make the driver itself deaf while Spark starts."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid

import pytest
import yaml

from conveyor.testing.runs import wait_until

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"


def _log_has(path, text: str) -> bool:
    return text in path.read_text(errors="replace")


@pytest.mark.process_boundary("SIGTERM to a conveyor run process while it starts")
@pytest.mark.parametrize(("marker", "delay_s"), [
    ("starting Spark", 0.0),    # the connector started, the JVM is being launched
    ("starting Spark", 1.5),    # the JVM starts, the SparkContext is being created
    ("starting Spark", 4.0),
    ("launching", 0.0),         # Spark up, the tasks being launched
])
def test_a_sigterm_during_start_up_stops_the_connector_gracefully(kafka_bootstrap, tmp_path, marker, delay_s):
    name = f"startsig-{uuid.uuid4().hex[:8]}"
    manifest = tmp_path / "connector.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name},
        "spec": {"class": RECORDING, "tasksMax": 2, "kafka": {"bootstrapServers": kafka_bootstrap},
                 "config": {"topics": f"{name}-t", "journal.path": str(tmp_path / "journal.jsonl")}},
    }))
    log_path = tmp_path / "driver.log"
    with open(log_path, "ab") as log:
        driver = subprocess.Popen([sys.executable, "-m", "conveyor.cli", "run", str(manifest), "--control-port", "0",
                                   "--no-progress"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: _log_has(log_path, marker), timeout_s=120, message=f"{marker!r} in the log",
                   interval_s=0.05)
        time.sleep(delay_s)
        driver.send_signal(signal.SIGTERM)
        rc = driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(30)
    text = log_path.read_text(errors="replace")
    assert "received SIGTERM" in text, text[-3000:]
    assert rc == 0, text[-3000:]
