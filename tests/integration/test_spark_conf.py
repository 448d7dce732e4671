"""``conveyor run --conf key=value`` and ``spec.spark.sparkConf`` reach the SparkSession the
driver creates (``--conf`` winning; ``spark.master`` from them used without ``--master``)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import uuid

import pytest
import yaml

from conveyor.testing.runs import control_request, wait_until

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(port: int) -> dict | None:
    try:
        code, body = control_request(f"http://127.0.0.1:{port}", "/status", timeout_s=5)
    except OSError:
        return None
    return body if code == 200 else None


def test_conf_and_spark_conf_reach_the_spark_context(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory(partitions=1)
    name = f"conf-{uuid.uuid4().hex[:8]}"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name},
        "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": kafka_bootstrap}, "config": {"topics": topic},
                 "spark": {"sparkConf": {"spark.app.name": "from-manifest", "spark.master": "local[3]"}}},
    }))
    port = _free_port()
    with open(tmp_path / "driver.log", "wb") as log:
        driver = subprocess.Popen(
            [sys.executable, "-m", "conveyor.cli", "run", str(manifest), "--control-port", str(port), "--no-progress",
             "--conf", "spark.app.name=from-cli", "--conf", "spark.ui.enabled=false"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        status = wait_until(lambda: (s := _status(port)) and s["spark"] and s, timeout_s=120,
                            message="the driver's control API, once Spark runs")
        assert status["spark"]["app_name"] == "from-cli", "--conf wins over sparkConf"
        assert status["spark"]["master"] == "local[3]", "spark.master of sparkConf, without --master"
        assert status["spark"]["app_id"].startswith("local-")
    finally:
        driver.send_signal(signal.SIGTERM)
        code = driver.wait(timeout=120)
    assert code == 0, (tmp_path / "driver.log").read_text()[-3000:]
