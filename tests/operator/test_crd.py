"""The committed CRD is exactly what the typed models generate, and it is a structural,
documented schema (every field described, so ``kubectl explain`` teaches)."""

import yaml
from conveyor_operator import crd


def test_committed_crds_match_the_models():
    expected = crd.render()
    for path in crd.COMMITTED:
        assert path.read_text() == expected, (
            f"{path} drifted from the models: run `python -m conveyor_operator.crd --write`")


def _walk(schema, path=""):
    yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _walk(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{path}[]")


def _root():
    doc = yaml.safe_load(crd.render())
    return doc, doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_every_field_has_a_description_and_no_unstructural_keywords():
    _, root = _root()
    for path, node in _walk(root["properties"]["spec"], ".spec"):
        assert node.get("description"), f"{path} has no description"
        for keyword in ("$ref", "anyOf", "allOf", "oneOf", "title"):
            assert keyword not in node, f"{path} uses {keyword}"
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), f"{path} has no type"


def test_rules_scale_printer_columns_and_short_name():
    doc, root = _root()
    spec = root["properties"]["spec"]
    assert spec["required"] == ["class", "kafka"]
    assert spec["properties"]["tasksMax"]["minimum"] == 1
    assert spec["properties"]["state"]["enum"] == ["running", "paused", "stopped"]
    version = doc["spec"]["versions"][0]
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.tasksMax"
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert list(columns) == ["Class", "Tasks", "State", "Desired", "Ready", "Age"]
    assert columns["State"]["jsonPath"] == ".status.connector.state", "the state it is in, not the one asked for"
    assert columns["Desired"]["jsonPath"] == ".spec.state" and columns["Desired"]["priority"] == 1
    assert doc["spec"]["names"]["shortNames"]
    config_from = spec["properties"]["configFrom"]["items"]
    assert config_from["x-kubernetes-validations"][0]["rule"] == "has(self.secretRef) != has(self.configMapRef)"
