"""Bad input at start: the driver refuses with a message that names the problem, and
leaves nothing running."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conveyor.runtime.driver.driver import Driver, DriverError
from conveyor.testing.ports import free_port
from conveyor.testing.runs import connector_manifest

pytestmark = pytest.mark.integration


def _refused(manifest, spark) -> str:
    driver = Driver(manifest, spark=spark, control_port=0)
    with pytest.raises(DriverError) as err:
        driver.start()
    assert driver.server is None, "control API not left listening"
    assert driver.tasks == {}, "no task launched"
    return str(err.value)


def test_unknown_connector_class_lists_installed_ones(kafka_bootstrap, spark):
    message = _refused(connector_manifest("x", "no-such-sink", kafka_bootstrap, {"topics": "t"}), spark)
    assert "unknown connector class 'no-such-sink'" in message
    assert "postgres-sink" in message and "noop-sink" in message


def test_dotted_path_that_does_not_exist(kafka_bootstrap, spark):
    message = _refused(connector_manifest("x", "nowhere.module:Sink", kafka_bootstrap, {"topics": "t"}), spark)
    assert "cannot import module 'nowhere.module'" in message


def test_mistyped_runtime_key_names_key_and_type(kafka_bootstrap, spark):
    manifest = connector_manifest("x", "noop-sink", kafka_bootstrap,
                                  {"topics": "t", "offset.flush.interval.ms": "soon"})
    message = _refused(manifest, spark)
    assert "spec.config.offset.flush.interval.ms" in message and "valid integer" in message


def test_connector_config_errors_name_each_key(kafka_bootstrap, spark):
    manifest = connector_manifest("x", "postgres-sink", kafka_bootstrap, {"topics": "t", "batch.size": "ten"})
    message = _refused(manifest, spark)
    assert "spec.config.connection.url: Field required" in message
    assert "spec.config.batch.size" in message and "integer" in message


def test_unreachable_broker_is_a_clear_error(spark):
    manifest = connector_manifest("x", "noop-sink", f"127.0.0.1:{free_port()}", {"topics": "t"})
    message = _refused(manifest, spark)
    assert "cannot reach Kafka at 127.0.0.1:" in message


def test_unreachable_database_is_a_clear_error(kafka_bootstrap, spark):
    url = f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/db"
    manifest = connector_manifest("x", "postgres-sink", kafka_bootstrap, {"topics": "t", "connection.url": url})
    message = _refused(manifest, spark)
    assert "failed to start" in message and "127.0.0.1" in message
    assert "s3cret" not in message, "no password in error messages"


def test_a_connector_that_cannot_start_fails_before_spark_starts(kafka_bootstrap):
    """The driver makes its own SparkSession only after the connector started (issue 29 §2)."""
    url = f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/db"
    driver = Driver(connector_manifest("x", "postgres-sink", kafka_bootstrap, {"topics": "t", "connection.url": url}),
                    control_port=0)
    with pytest.raises(DriverError, match="failed to start"):
        driver.start()
    assert driver.spark is None, "no SparkSession for a connector that could not start"


@pytest.mark.process_boundary("the CLI's message and exit code")
def test_cli_rejects_invalid_manifest_naming_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent("""\
        apiVersion: conveyor.dev/v1alpha1
        kind: Connector
        metadata: {name: bad}
        spec: {class: noop-sink, tasksMax: 0, kafka: {bootstrapServers: "k:1"}}
    """))
    result = subprocess.run([sys.executable, "-m", "conveyor.cli", "run", str(bad)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert "spec.tasksMax" in result.stderr and "greater than or equal to 1" in result.stderr


@pytest.mark.process_boundary("the CLI's message and exit code")
def test_cli_exits_nonzero_when_broker_unreachable(tmp_path):
    manifest = tmp_path / "c.yaml"
    manifest.write_text(textwrap.dedent(f"""\
        apiVersion: conveyor.dev/v1alpha1
        kind: Connector
        metadata: {{name: c}}
        spec: {{class: noop-sink, kafka: {{bootstrapServers: "127.0.0.1:{free_port()}"}}, config: {{topics: t}}}}
    """))
    result = subprocess.run([sys.executable, "-m", "conveyor.cli", "run", str(manifest), "--control-port", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "cannot reach Kafka" in result.stderr
