"""A canary password (from ``${env:...}``, inside ``connection.url``) goes through a whole
lifecycle -- a config error, a run that moves records, status, metrics, a task failing against an
unreachable database, stop -- and appears in no output; nor does a canary database name from
``${env:...}`` that PostgreSQL's error repeats (redaction by provenance) (issue 11, "first hour" §3: no secret
value in any log, status or error)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import yaml

from conveyor.testing.runs import produce, wait_until

pytestmark = pytest.mark.integration

CANARY = f"Canary{uuid.uuid4().hex[:10]}"
DATABASE_CANARY = f"canarydb{uuid.uuid4().hex[:10]}"


def with_password(url: str, port: int | None = None) -> str:
    """``url`` with user postgres and the password taken from ``${env:PG_PASSWORD}`` (the
    harness's PostgreSQL trusts local connections, so any password is accepted)."""
    parts = urlsplit(url)
    netloc = f"postgres:${{env:PG_PASSWORD}}@{parts.hostname}:{port or parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def manifest(tmp_path, name: str, bootstrap: str, config: dict) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name},
        "spec": {"class": "postgres-sink", "tasksMax": 1, "kafka": {"bootstrapServers": bootstrap},
                 "config": {"value.converter": "json", "value.converter.schemas.enable": "false",
                            "key.converter": "string", "offset.flush.interval.ms": "1000", **config}}}))
    return str(path)


@pytest.mark.process_boundary("the output of every process: driver, JVM, Python workers, the CLI")
def test_a_canary_password_appears_in_no_output(kafka_bootstrap, topic_factory, pg_database, tmp_path):
    env = {**os.environ, "PG_PASSWORD": CANARY}
    outputs: list[str] = []
    topic = topic_factory(partitions=1)
    table = f"canary_{uuid.uuid4().hex[:6]}"
    good = {"topics": topic, "connection.url": with_password(pg_database), "auto.create": "true",
            "table.name.format": table}

    # 1. invalid configs: a misspelt key, a bad value
    for broken in ({**good, "topic": topic, "topics": None}, {**good, "batch.size": "ten"}):
        path = manifest(tmp_path, f"bad-{uuid.uuid4().hex[:6]}", kafka_bootstrap,
                        {k: v for k, v in broken.items() if v is not None})
        run = subprocess.run([sys.executable, "-m", "conveyor.cli", "run", path, "--control-port", "0",
                              "--no-progress"], capture_output=True, text=True, env=env, check=False, timeout=120)
        assert run.returncode != 0 and "invalid configuration" in run.stderr, run.stderr[-2000:]
        outputs += [run.stdout, run.stderr]

    # 2. a run that moves records; its status and metrics; a stop
    log_path = tmp_path / "run.log"
    path = manifest(tmp_path, f"ok-{uuid.uuid4().hex[:6]}", kafka_bootstrap, good)
    with open(log_path, "wb") as log:
        driver = subprocess.Popen([sys.executable, "-m", "conveyor.cli", "run", path, "--control-port", "0",
                                   "--no-progress", "--log-level", "DEBUG"], stdout=log, stderr=subprocess.STDOUT,
                                  env=env, stdin=subprocess.DEVNULL)
    try:
        url = wait_until(lambda: (m := re.search(r"control API at (http://\S+)", log_path.read_text())) and m.group(1),
                         timeout_s=120, message="the control API")
        produce(kafka_bootstrap, topic, [(str(i), json.dumps({"id": i})) for i in range(20)])

        def rows() -> int:
            try:
                with psycopg.connect(pg_database, autocommit=True) as conn:
                    return conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            except psycopg.errors.UndefinedTable:
                return 0

        wait_until(lambda: rows() == 20, timeout_s=120, message="20 rows")
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
            outputs.append(resp.read().decode())
        for cmd in (["status", "--url", url], ["stop", "--url", url]):
            done = subprocess.run([sys.executable, "-m", "conveyor.cli", *cmd], capture_output=True, text=True,
                                  env=env, check=False, timeout=180)
            outputs += [done.stdout, done.stderr]
            assert done.returncode == 0, (cmd, done.stderr[-2000:])
        # `conveyor stop` (POST /stop) ends the run: by default it exits 0 once the stop is done
        assert driver.wait(timeout=120) == 0, log_path.read_text()[-3000:]
    finally:
        if driver.poll() is None:
            driver.kill()
    outputs.append(log_path.read_text())

    # 3. an unreachable database (the URL, canary included, in play): the start fails and says why
    dead = {**good, "connection.url": with_password(pg_database, port=1)}
    path = manifest(tmp_path, f"dead-{uuid.uuid4().hex[:6]}", kafka_bootstrap, dead)
    run = subprocess.run([sys.executable, "-m", "conveyor.cli", "run", path, "--control-port", "0", "--no-progress"],
                         capture_output=True, text=True, env=env, check=False, timeout=180)
    assert run.returncode != 0 and "cannot connect to PostgreSQL" in run.stderr, run.stderr[-2000:]
    outputs += [run.stdout, run.stderr]

    # 4. by provenance: a database name from ${env:PG_DATABASE}, under no secret key and in no
    # password position, that PostgreSQL's own error repeats ('database "..." does not exist')
    missing_db = {**good, "connection.url": with_password(pg_database).rsplit("/", 1)[0] + "/${env:PG_DATABASE}"}
    path = manifest(tmp_path, f"nodb-{uuid.uuid4().hex[:6]}", kafka_bootstrap, missing_db)
    run = subprocess.run([sys.executable, "-m", "conveyor.cli", "run", path, "--control-port", "0", "--no-progress"],
                         capture_output=True, text=True, env={**env, "PG_DATABASE": DATABASE_CANARY}, check=False,
                         timeout=180)
    assert run.returncode != 0 and "${env:PG_DATABASE}" in run.stderr, run.stderr[-2000:]
    outputs += [run.stdout, run.stderr]

    leaked = [text[max(0, i - 200):i + 50] for text in outputs for canary in (CANARY, DATABASE_CANARY)
              if (i := text.find(canary)) >= 0]
    assert not leaked, leaked

