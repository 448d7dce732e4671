"""Spark RPC between a connector's driver and its executors is authenticated and encrypted
(issue 13, item 3): a local driver runs with the enforced properties, and a second JVM that
does not hold the driver's secret cannot reach the driver's RPC endpoints, while the same
client with the secret can (so the refusals are the authentication's, not a broken client)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conveyor.spark_security import ENFORCED

pytestmark = pytest.mark.integration

PROBE = Path(__file__).with_name("_spark_rpc_probe.py")


def test_a_client_without_the_spark_secret_is_refused(tmp_path):
    with open(tmp_path / "driver.log", "w") as log:
        driver = subprocess.Popen([sys.executable, str(PROBE), "driver"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        line = driver.stdout.readline()
        assert line, (tmp_path / "driver.log").read_text()[-3000:]
        info = json.loads(line)
        assert info["conf"] == ENFORCED, "the driver's SparkConf holds the enforced properties"
        assert info["sum"] == 90, "a job runs with authentication on"
        assert info["host"] == "127.0.0.1" and len(info["secret"]) >= 32
        client = subprocess.run([sys.executable, str(PROBE), "client", info["host"], str(info["port"]),
                                 info["secret"]], check=False, capture_output=True, text=True, timeout=300)
        assert client.returncode == 0, client.stderr[-3000:]
        attempts = json.loads(client.stdout.strip().splitlines()[-1])
    finally:
        driver.stdin.close()
        driver.wait(timeout=120)
    assert attempts["right secret"] == "connected", attempts
    for way in ("no secret", "wrong secret", "right secret, SASL instead of AES"):
        assert attempts[way].startswith("refused: "), (way, attempts[way])
    # the driver refused the unauthenticated RPC itself (AuthRpcHandler expects a challenge first)
    assert "Unknown challenge message" in attempts["no secret"], attempts["no secret"]
