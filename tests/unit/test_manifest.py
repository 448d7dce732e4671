import pytest

from conveyor.manifest import ConnectorManifest, ConnectorState, ManifestError

GOOD = {
    "apiVersion": "conveyor.dev/v1alpha1",
    "kind": "Connector",
    "metadata": {"name": "orders-sink"},
    "spec": {"class": "postgres-sink", "tasksMax": 3, "kafka": {"bootstrapServers": "k:9092"}, "config": {"topics": "t"}},
}


def test_valid_manifest_parses_with_defaults():
    m = ConnectorManifest.from_dict(GOOD)
    assert m.name == "orders-sink"
    assert m.spec.tasks_max == 3
    assert m.spec.state is ConnectorState.RUNNING
    assert m.metadata.namespace == "default"
    assert m.spec.shutdown.grace_period_seconds == 60


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"tasksMax": 0}, "spec.tasksMax"),
        ({"tasksMax": "many"}, "spec.tasksMax"),
        ({"state": "sleeping"}, "spec.state"),
        ({"class": ""}, "spec.class"),
        ({"kafka": {}}, "spec.kafka.bootstrapServers"),
        ({"unknownField": 1}, "spec.unknownField"),
    ],
)
def test_invalid_fields_are_named(patch, field):
    data = {**GOOD, "spec": {**GOOD["spec"], **patch}}
    with pytest.raises(ManifestError) as err:
        ConnectorManifest.from_dict(data)
    assert field in str(err.value)


def test_missing_class_is_named():
    spec = dict(GOOD["spec"])
    del spec["class"]
    with pytest.raises(ManifestError, match=r"spec\.class: Field required"):
        ConnectorManifest.from_dict({**GOOD, "spec": spec})


def test_bad_name_and_kind():
    with pytest.raises(ManifestError, match="DNS label"):
        ConnectorManifest.from_dict({**GOOD, "metadata": {"name": "Orders_Sink"}})
    with pytest.raises(ManifestError, match="kind must be"):
        ConnectorManifest.from_dict({**GOOD, "kind": "KafkaConnector"})


def test_load_reports_unreadable_and_non_yaml(tmp_path):
    with pytest.raises(ManifestError, match="cannot read manifest"):
        ConnectorManifest.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec: [unclosed")
    with pytest.raises(ManifestError, match="not valid YAML"):
        ConnectorManifest.load(bad)


def test_env_references_are_substituted(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(
        "apiVersion: conveyor.dev/v1alpha1\nkind: Connector\nmetadata: {name: c}\n"
        "spec:\n  class: noop-sink\n  kafka: {bootstrapServers: '${env:BROKER}'}\n"
        "  config: {topics: t, connection.url: 'postgresql://${env:PGHOST}/db'}\n"
    )
    m = ConnectorManifest.load(f, environ={"BROKER": "b:1", "PGHOST": "h"})
    assert m.spec.kafka.bootstrap_servers == "b:1"
    assert m.spec.config["connection.url"] == "postgresql://h/db"
    with pytest.raises(ManifestError, match=r"spec\.kafka\.bootstrapServers: environment variable BROKER is not set"):
        ConnectorManifest.load(f, environ={"PGHOST": "h"})
