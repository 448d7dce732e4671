"""kopf's record of the last handled configuration in ``status.lastHandledConfiguration``, read
from the annotation of earlier versions until its next store removes it."""

from __future__ import annotations

import json

import kopf

from conveyor_operator.diffbase import ANNOTATION_KEY, ANNOTATION_PREFIX, StatusDiffBase

OLD = f"{ANNOTATION_PREFIX}/{ANNOTATION_KEY}"


def _body(annotations: dict | None = None, status: dict | None = None) -> kopf.Body:
    return kopf.Body({"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
                      "metadata": {"name": "orders", "namespace": "ns", "uid": "u1", "generation": 2,
                                   "labels": {"team": "a"}, "annotations": annotations or {}},
                      "spec": {"class": "noop-sink", "tasksMax": 2}, "status": status or {}})


def test_the_essence_is_spec_labels_and_annotations_without_either_record():
    storage = StatusDiffBase()
    essence = storage.build(body=_body({"conveyor.dev/restart": "1", OLD: "{}"},
                                       {"lastHandledConfiguration": "{}", "observedGeneration": 1}))
    assert essence == {"spec": {"class": "noop-sink", "tasksMax": 2},
                       "metadata": {"labels": {"team": "a"}, "annotations": {"conveyor.dev/restart": "1"}}}


def test_stored_in_the_status_in_the_patch_kopf_writes_with_the_handlers_status():
    storage = StatusDiffBase()
    body = _body()
    essence = storage.build(body=body)
    patch = kopf.Patch()
    patch.status["observedGeneration"] = 2  # what the reconcile handler put there
    storage.store(body=body, patch=patch, essence=essence)
    assert set(patch) == {"status"}, "nothing outside the status: kopf sends one request, to the status"
    assert json.loads(patch["status"]["lastHandledConfiguration"]) == essence
    stored = _body(status={"lastHandledConfiguration": patch["status"]["lastHandledConfiguration"]})
    assert storage.fetch(body=stored) == essence


def test_a_connector_handled_by_an_earlier_version_is_read_from_its_annotation_which_the_store_removes():
    storage = StatusDiffBase()
    old_essence = {"spec": {"class": "noop-sink", "tasksMax": 2}, "metadata": {"labels": {"team": "a"}}}
    body = _body({OLD: json.dumps(old_essence) + "\n"})
    assert storage.fetch(body=body) == old_essence
    assert storage.build(body=body) == old_essence, "unchanged since: no change to handle"
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    assert patch["metadata"]["annotations"] == {OLD: None}
    assert "lastHandledConfiguration" in patch["status"]
    assert storage.fetch(body=_body()) is None, "neither: a Connector kopf never handled"
