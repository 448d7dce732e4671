"""``conveyor run --conf key=value`` and ``spec.spark.sparkConf`` reach the SparkSession the
driver creates (``--conf`` winning; ``spark.master`` from ``--conf`` used without ``--master``);
neither can turn Spark's RPC security off (issue 13, item 3)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid

import pytest
import yaml

from conveyor.testing.ports import free_port
from conveyor.testing.runs import control_request, wait_until

pytestmark = pytest.mark.integration


def _status(port: int) -> dict | None:
    try:
        code, body = control_request(f"http://127.0.0.1:{port}", "/status", timeout_s=5)
    except OSError:
        return None
    return body if code == 200 else None


@pytest.mark.process_boundary("its own SparkSession from --conf; --stay-after-stop, then SIGTERM, exits 0")
def test_conf_and_spark_conf_reach_the_spark_context(kafka_bootstrap, topic_factory, tmp_path):
    """Also ``--stay-after-stop``, as the operator's Deployment runs a driver: stopped through
    the API, it keeps serving its status (an exit would restart the pod) until SIGTERM, then
    exits 0."""
    topic = topic_factory(partitions=1)
    name = f"conf-{uuid.uuid4().hex[:8]}"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name},
        "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": kafka_bootstrap}, "config": {"topics": topic},
                 "spark": {"sparkConf": {"spark.ui.showConsoleProgress": "true"}}},
    }))
    port = free_port()
    with open(tmp_path / "driver.log", "wb") as log:
        driver = subprocess.Popen(
            [sys.executable, "-m", "conveyor.cli", "run", str(manifest), "--control-port", str(port), "--no-progress",
             "--conf", "spark.app.name=from-cli", "--conf", "spark.ui.enabled=false", "--conf", "spark.master=local[3]",
             "--conf", "spark.authenticate=true", "--stay-after-stop"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        status = wait_until(lambda: (s := _status(port)) and s["spark"] and s, timeout_s=120,
                            message="the driver's control API, once Spark runs")
        assert status["spark"]["app_name"] == "from-cli", "--conf wins over the driver's default"
        assert status["spark"]["master"] == "local[3]", "spark.master of --conf, without --master"
        assert status["spark"]["app_id"].startswith("local-")
        answer, stopped = control_request(f"http://127.0.0.1:{port}", "/stop", "POST", timeout_s=120)
        assert answer == 200 and [t["state"] for t in stopped["tasks"]] == ["STOPPED"], stopped
        time.sleep(1.5)  # the CLI checks for a stop every 0.5 s: without --stay-after-stop it would be gone
        assert driver.poll() is None, "stopped through the API, the driver stays up"
        assert (_status(port) or {}).get("connector", {}).get("state") == "STOPPED"
    finally:
        driver.send_signal(signal.SIGTERM)
        code = driver.wait(timeout=120)
    assert code == 0, (tmp_path / "driver.log").read_text()[-3000:]


def _manifest(tmp_path, spark_conf: dict[str, str]):
    path = tmp_path / "refused.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "refused"},
        "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "127.0.0.1:1"}, "config": {"topics": "t"},
                 "spark": {"sparkConf": spark_conf}},
    }))
    return path


@pytest.mark.process_boundary("the CLI's exit code 2")
def test_run_refuses_a_conf_that_turns_spark_rpc_security_off(tmp_path):
    run = subprocess.run([sys.executable, "-m", "conveyor.cli", "run", str(_manifest(tmp_path, {})), "--no-progress",
                          "--conf", "spark.authenticate=false"],
                         check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "--conf spark.authenticate=false: refused, spark.authenticate is always true" in run.stderr


@pytest.mark.process_boundary("the CLI's exit code 2")
def test_run_refuses_a_manifest_whose_spark_conf_sets_the_operators_keys(tmp_path):
    path = _manifest(tmp_path, {"spark.network.crypto.enabled": "false", "spark.master": "local[2]"})
    run = subprocess.run([sys.executable, "-m", "conveyor.cli", "run", str(path), "--no-progress"],
                         check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "spec.spark.sparkConf.spark.network.crypto.enabled: set by the operator" in run.stderr
    assert "spec.spark.sparkConf.spark.master: set by" in run.stderr
