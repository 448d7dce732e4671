"""Partitions spread over a sink connector's tasks within seconds (issue 11 §5): with
``tasksMax: 2`` on a 3-partition topic each task owns at least one partition at once, from the
start and again after one task restarts."""

from __future__ import annotations

import uuid

import pytest

from conveyor.testing.recording import read_journal
from conveyor.testing.runs import connector_manifest, running_connector, wait_until

pytestmark = pytest.mark.integration

RECORDING = "conveyor.testing.recording:RecordingSinkConnector"


def owned(journal) -> dict[int, set[int]]:
    """``{task: partitions it holds}`` from the journal's open and close events."""
    out: dict[int, set[int]] = {}
    for event in read_journal(journal):
        if event["event"] in ("open", "close"):
            partitions = {int(p.rsplit(":", 1)[1]) for p in event["partitions"]}
            held = out.setdefault(event["task"], set())
            held |= partitions if event["event"] == "open" else set()
            held -= partitions if event["event"] == "close" else set()
    return out


def spread(journal) -> dict[int, set[int]] | None:
    held = owned(journal)
    both = len(held) == 2 and all(held.values())
    return held if both and sorted(p for ps in held.values() for p in ps) == [0, 1, 2] else None


def test_two_tasks_share_three_partitions_within_seconds_and_again_after_a_restart(
        kafka_bootstrap, topic_factory, spark, tmp_path):
    topic = topic_factory(partitions=3)
    journal = tmp_path / "j.jsonl"
    manifest = connector_manifest(f"spread-{uuid.uuid4().hex[:8]}", RECORDING, kafka_bootstrap,
                                  {"topics": topic, "journal.path": str(journal)}, tasks_max=2)
    with running_connector(manifest, spark) as driver:
        first_open = wait_until(lambda: next((e for e in read_journal(journal) if e["event"] == "open"), None),
                                timeout_s=120, message="a first assignment")
        held = wait_until(lambda: spread(journal), timeout_s=20, message="both tasks holding partitions", interval_s=0.2)
        assert len(held) == 2, held
        assert first_open is not None
        closes = sum(e["event"] == "close" and e["task"] == 0 for e in read_journal(journal))
        driver.restart_task(0)
        wait_until(lambda: sum(e["event"] == "close" and e["task"] == 0 for e in read_journal(journal)) > closes,
                   timeout_s=60, message="task 0 closing its partitions for the restart")
        wait_until(lambda: spread(journal), timeout_s=20,
                   message="both tasks holding partitions after task 0 restarted", interval_s=0.2)
