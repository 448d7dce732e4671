"""The operator imports only connector classes it may import (issue 13, item 8): installed
connectors (entry points), modules matching ``allowed_connector_modules``, and nothing else.
A dotted path to anything else is validated by the driver, not imported in the operator.

The module under test is written to a temporary directory on ``sys.path``; importing it appends
a line to a marker file, which is how a test sees that the operator ran its code."""

from __future__ import annotations

import sys
import textwrap
import uuid

import kopf
import pytest
from conveyor_operator import names
from conveyor_operator.handlers import connector as handlers
from conveyor_operator.reconcile.control_key import OperatorKey
from conveyor_operator.reconcile.control_secret import ControlSecrets
from conveyor_operator.settings import OperatorSettings
from conveyor_operator.validate import connector_classes

from conveyor import import_policy
from conveyor.manifest import ConnectorManifest

SINK_MODULE = '''
import pathlib
pathlib.Path({marker!r}).open("a").write("imported\\n")

from conveyor.api import ConfigError, SinkConnector, SinkTask
from conveyor.converters import StringConverter


class Sink(SinkConnector):
    def validate(self, config):
        if config.get("size") != "ok":
            raise ConfigError({{"size": "must be ok"}})

    def start(self, config):
        pass

    def task_class(self):
        return SinkTask

    def task_configs(self, max_tasks):
        return [{{}}] * max_tasks


class Converter(StringConverter):
    pass
'''


@pytest.fixture
def side_effect_module(tmp_path, monkeypatch):
    """``(module name, marker file)``: a fresh module (never imported before in this process)
    defining a sink ``Sink`` and a converter ``Converter``, which writes the marker when imported."""
    name = f"side_effect_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "imported"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(SINK_MODULE.format(marker=str(marker))))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, marker
    sys.modules.pop(name, None)


def manifest(cls, **config):
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "c", "namespace": "data"},
        "spec": {"class": cls, "kafka": {"bootstrapServers": "kafka:9092"}, "config": {"topics": "t", **config}}})


def test_a_dotted_path_to_another_module_is_not_imported_and_left_to_the_driver(side_effect_module):
    module, marker = side_effect_module
    for cls in (f"{module}:Sink", f"{module}.Sink"):
        errors, note = connector_classes.config_errors(manifest(cls, size="bad"), OperatorSettings())
        assert errors == "", "not judged in the operator"
        assert "validated by its driver" in note and repr(module) in note and cls in note
    assert not marker.exists(), "the operator ran the module's code"
    assert module not in sys.modules


def test_a_dotted_converter_path_in_the_config_is_not_imported_either(side_effect_module):
    """spec.config names classes too (converters, transformations, predicates): same rule."""
    module, marker = side_effect_module
    for key in ("value.converter", "transforms.x.type"):
        extra = {"transforms": "x"} if key.startswith("transforms") else {}
        errors, note = connector_classes.config_errors(
            manifest("noop-sink", **{key: f"{module}.Converter"}, **extra), OperatorSettings())
        assert (errors, module in note) == ("", True)
    assert not marker.exists()


def test_an_entry_point_name_is_still_validated():
    errors, note = connector_classes.config_errors(manifest("postgres-sink", **{"batch.size": "ten"}),
                                                   OperatorSettings())
    assert note == ""
    assert "spec.config.connection.url" in errors and "spec.config.batch.size" in errors
    # a dotted path into an installed connector's module is an installed connector too
    errors, note = connector_classes.config_errors(
        manifest("conveyor.connectors.postgres.sink:PostgresSinkConnector"), OperatorSettings())
    assert note == "" and "spec.config.connection.url" in errors


def test_an_allowed_module_glob_is_imported_and_validated(side_effect_module):
    module, marker = side_effect_module
    allowed = OperatorSettings(allowed_connector_modules=["unrelated.*", "side_effect_*"])
    errors, note = connector_classes.config_errors(manifest(f"{module}:Sink", size="bad"), allowed)
    assert note == "" and errors == "spec.config.size: must be ok"
    assert marker.read_text() == "imported\n"
    errors, note = connector_classes.config_errors(manifest(f"{module}:Sink", size="ok"), allowed)
    assert (errors, note) == ("", "")


def test_a_module_that_is_not_installed_is_reported_as_unknown_not_refused():
    """Nothing to run: its import fails, and a Kafka Connect class Conveyor lacks is still named."""
    errors, note = connector_classes.config_errors(
        manifest("noop-sink", **{"value.converter": "org.apache.kafka.connect.avro.AvroConverter"}),
        OperatorSettings())
    assert note == "" and "spec.config.value.converter" in errors and "not available in Conveyor" in errors


def test_the_driver_is_not_restricted(side_effect_module):
    """Outside ``import_policy.restricted`` (the driver, ``conveyor run``) a dotted path imports."""
    from conveyor.runtime.config.plugins import load_connector_class

    module, marker = side_effect_module
    assert load_connector_class(f"{module}:Sink").__name__ == "Sink"
    assert marker.exists()
    with import_policy.restricted(lambda _: False):  # imported now: importing again runs nothing
        assert load_connector_class(f"{module}:Sink").__name__ == "Sink"


def test_settings_and_rule_from_the_environment():
    settings = OperatorSettings.from_env({"CONVEYOR_OPERATOR_ALLOWED_CONNECTOR_MODULES": "acme.*, my_sinks"})
    assert settings.allowed_connector_modules == ["acme.*", "my_sinks"]
    rule = connector_classes.import_rule(settings.allowed_connector_modules)
    assert rule("acme.sinks.s3") and rule("my_sinks") and not rule("my_sinks_evil") and not rule("acmeX")
    assert rule("conveyor.connectors.noop"), "installed connectors' modules"
    assert OperatorSettings().allowed_connector_modules == []


class _Kube:
    """What reconcile calls, recorded (no API server)."""

    def __init__(self):
        self.events, self.applied = [], []

    def get(self, *_, **__):
        return None

    def list_pods(self, *_, **__):
        return []

    def exists_by_dry_run(self, *_):
        return False

    def create(self, obj):
        return {"metadata": {"uid": "secret-uid"}}

    def apply(self, obj):
        self.applied.append(obj)

    def delete(self, *_):
        pass

    def event(self, obj, type_, reason, message):
        self.events.append((type_, reason, message))

    def patch_connector_status(self, namespace, name, status):
        self.status = status


def test_reconcile_applies_a_connector_it_may_not_import_and_says_the_driver_validates_it(side_effect_module,
                                                                                         monkeypatch):
    module, marker = side_effect_module
    kube = _Kube()
    monkeypatch.setattr(handlers.RUNTIME, "kube", kube)
    monkeypatch.setattr(handlers.RUNTIME, "settings", OperatorSettings())
    monkeypatch.setattr(handlers.RUNTIME, "control_secrets", ControlSecrets(OperatorKey(b"k" * 32)))
    body = {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": "c", "namespace": "data", "generation": 1, "uid": "u"},
            "spec": {"class": f"{module}:Sink", "kafka": {"bootstrapServers": "kafka:9092"},
                     "config": {"topics": "t", "size": "bad"}}}
    patch = kopf.Patch()
    handlers.reconcile(body=body, meta=body["metadata"], status={}, uid="u", patch=patch)
    assert not marker.exists()
    assert [(t, r) for t, r, _ in kube.events] == [("Normal", connector_classes.EVENT_REASON)]
    assert "Deployment" in [o["kind"] for o in kube.applied]
    progressing = next(c for c in patch["status"]["conditions"] if c["type"] == "Progressing")
    assert progressing["status"] == "True" and "validated by its driver" in progressing["message"]
    assert names.driver("c") in {o["metadata"]["name"] for o in kube.applied}
