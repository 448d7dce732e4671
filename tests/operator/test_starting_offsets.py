"""``status.startingOffsets``, its Events, and ``spec.initialOffsets`` out of what a driver runs
once recorded (issue 35, item 2); the path through a real API server is in
tests/kube/test_initial_offsets_through_the_operator.py."""

from __future__ import annotations

from datetime import datetime, timezone

from conveyor.manifest import ConnectorManifest
from conveyor_operator.observe import starting_offsets
from conveyor_operator.reconcile import render
from conveyor_operator.reconcile.initial_offsets import settled_manifest


def _manifest(**spec) -> ConnectorManifest:
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "orders", "namespace": "ns"},
        "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"}, "config": {"topics": "t"}, **spec}})


INITIAL = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 6}}],
           "existing": "replace"}


def test_the_initial_offsets_leave_what_the_driver_runs_once_recorded_and_roll_no_pod():
    manifest = _manifest(initialOffsets=INITIAL)
    assert settled_manifest(manifest, started=False) is manifest
    settled = settled_manifest(manifest, started=True)
    assert settled.spec.initial_offsets is None and settled.spec.config == manifest.spec.config
    assert "initialOffsets" not in render.manifest_document(settled)
    assert "initialOffsets" in render.manifest_document(manifest)
    assert render.spec_hash(settled) == render.spec_hash(manifest) == render.spec_hash(_manifest())
    assert starting_offsets.recorded({"startingOffsets": {"initial": "Applied"}})
    assert not starting_offsets.recorded({})


def test_the_status_entry_is_the_drivers_report_with_the_time_it_was_recorded():
    now = datetime(2026, 12, 6, 21, 0, tzinfo=timezone.utc)
    report = {"initial": "Applied", "found": 0, "sample": [], "written": 1, "message": "written"}
    assert starting_offsets.status_entry(report, now) == {
        "initial": "Applied", "found": 0, "written": 1, "message": "written", "time": "2026-12-06T21:00:00Z"}
    assert starting_offsets.status_entry(None) is None
    assert starting_offsets.status_entry({"initial": "Applied"}) is None


def test_offsets_found_name_the_partitions_of_a_sink_and_of_a_source():
    sink = [{"partition": {"kafka_topic": "orders", "kafka_partition": p}, "offset": {"kafka_offset": 10 + p}}
            for p in range(12)]
    events = starting_offsets.events({"initial": "Kept", "found": 14, "sample": sink, "message": "kept"})
    assert [reason for reason, _ in events] == ["OffsetsFound", "InitialOffsetsKept"]
    found = events[0][1]
    assert found.startswith("stored offsets of 14 partition(s) found")
    assert "orders-0@10, orders-1@11" in found and "orders-9@19 and 4 more" in found and "orders-10@" not in found

    source = [{"partition": {"stream": "s0"}, "offset": {"seq": 5}}, {"partition": {"stream": "s1"}, "offset": None}]
    (reason, message), = starting_offsets.events({"initial": "NotGiven", "found": 2, "sample": source})
    assert reason == "OffsetsFound" and message.endswith('{"stream":"s0"}={"seq":5}, {"stream":"s1"}=null')


def test_a_first_start_without_stored_offsets_has_an_event_only_when_it_wrote_some():
    assert starting_offsets.events({"initial": "NotGiven", "found": 0, "sample": []}) == []
    assert starting_offsets.events({"initial": "Applied", "found": 0, "sample": [], "message": "spec.x"}) == [
        ("InitialOffsetsApplied", "spec.x")]
