import re

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
        ({"initialOffsets": {"offsets": []}}, "spec.initialOffsets.offsets"),
        ({"initialOffsets": {"offsets": [{"offset": {"kafka_offset": 1}}]}}, "spec.initialOffsets.offsets.0.partition"),
        ({"initialOffsets": {"offsets": [{"partition": {"s": 1}}], "existing": "merge"}},
         "spec.initialOffsets.existing"),
        ({"initialOffsets": {"offsets": [{"partition": {"s": 1}, "offzet": {}}]}},
         "spec.initialOffsets.offsets.0.offzet"),
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


def test_the_written_spec_keeps_the_config_references_unresolved(tmp_path, monkeypatch):
    """What Connect's GET .../config shows and PATCH merges into (issue 28): never a resolved value."""
    monkeypatch.setenv("CONVEYOR_MOUNT_DIR", str(tmp_path))
    (tmp_path / "secrets" / "pg").mkdir(parents=True)
    (tmp_path / "secrets" / "pg" / "password").write_text("written-spec-canary")
    f = tmp_path / "c.yaml"
    f.write_text(
        "apiVersion: conveyor.dev/v1alpha1\nkind: Connector\nmetadata: {name: c}\n"
        "spec:\n  class: noop-sink\n  kafka: {bootstrapServers: '${env:BROKER}'}\n"
        "  configFrom: [{secretRef: {name: pg}}]\n"
        "  config: {topics: t, connection.url: 'postgresql://${env:PGHOST}/db', pw: '${secret:pg:password}'}\n"
    )
    manifest, written = ConnectorManifest.load_as_written(f, environ={"BROKER": "b:1", "PGHOST": "h"})
    assert manifest.spec.config == {"password": "written-spec-canary", "topics": "t",
                                    "connection.url": "postgresql://h/db", "pw": "written-spec-canary"}
    assert written.config == {"topics": "t", "connection.url": "postgresql://${env:PGHOST}/db",
                              "pw": "${secret:pg:password}"}
    assert written.kafka == manifest.spec.kafka and written.config_from == manifest.spec.config_from


def _pasted(spec_patch: dict, config: dict) -> ConnectorManifest:
    spec = {k: v for k, v in GOOD["spec"].items() if k != "tasksMax"} | spec_patch
    return ConnectorManifest.from_dict({**GOOD, "spec": {**spec, "config": config}})


def test_a_pasted_connect_config_sets_tasks_max_when_the_spec_does_not():
    assert _pasted({}, {"topics": "t", "tasks.max": "4"}).spec.tasks_max == 4
    assert _pasted({"tasksMax": 2}, {"topics": "t", "tasks.max": "4"}).spec.tasks_max == 2  # kubectl scale wins


def test_tasks_max_overridden_by_the_spec_is_named_in_a_warning():
    from conveyor.connect_config import tasks_max_overridden

    assert tasks_max_overridden({"tasks.max": "4"}, 2) == "spec.config.tasks.max (4) is overridden by spec.tasksMax (2)"
    assert tasks_max_overridden({"tasks.max": "2"}, 2) is None
    assert tasks_max_overridden({}, 2) is None


@pytest.mark.parametrize(("spec_patch", "config", "message"), [
    ({}, {"tasks.max": "many"}, "spec.config.tasks.max: must be a whole number from 1 to 1000 (got 'many')"),
    ({}, {"tasks.max": "0"}, "spec.config.tasks.max: must be a whole number"),
    ({}, {"connector.class": "noop-sink"}, "spec.config.connector.class: noop-sink is not the connector spec.class "
                                           "names (postgres-sink)"),
    ({}, {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector"}, "a Java connector"),
    ({"class": "file-sink"}, {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector"},
     "is not the connector spec.class names (file-sink)"),
])
def test_a_pasted_connect_config_that_disagrees_with_the_spec_is_refused_naming_the_field(spec_patch, config,
                                                                                       message):
    with pytest.raises(ManifestError, match=re.escape(message)):
        _pasted(spec_patch, {"topics": "t", **config})


@pytest.mark.parametrize(("cls", "named"), [
    ("postgres-sink", "postgres-sink"),
    ("postgres-sink", "conveyor.connectors.postgres.sink.PostgresSinkConnector"),
    ("postgres-sink", "conveyor.connectors.postgres.sink:PostgresSinkConnector"),
    ("file-sink", "org.apache.kafka.connect.file.FileStreamSinkConnector"),
    ("file-sink", "FileStreamSink"),
    ("file-source", "FileStreamSourceConnector"),
])
def test_connector_class_naming_the_same_connector_is_accepted(cls, named):
    assert _pasted({"class": cls}, {"topics": "t", "connector.class": named}).spec.connector_class == cls


def test_initial_offsets_keep_what_is_stored_unless_told_to_replace_it_and_a_missing_offset_is_null():
    spec = {**GOOD["spec"], "initialOffsets": {"offsets": [{"partition": {"stream": "s0"}}]}}
    initial = ConnectorManifest.from_dict({**GOOD, "spec": spec}).spec.initial_offsets
    assert initial.existing.value == "keep"
    assert initial.document() == {"offsets": [{"partition": {"stream": "s0"}, "offset": None}]}
