"""Where a connector starts: the offsets found at a driver's start, and ``spec.initialOffsets``
written before any task runs (KIP-995's offsets at creation; :mod:`conveyor.manifest.initial_offsets`).

The driver calls :func:`check_initial_offsets` while it validates the configuration and
:func:`settle` after the runtime's topics exist and before the connector starts, on its main
thread. Writing goes through the same code as Kafka Connect's ``PATCH
/connectors/<name>/offsets`` (:mod:`conveyor.runtime.rest.connect_offsets`): the connector's
``alter_offsets`` hook is asked first, a sink's offsets are committed for the group
``connect-<name>``, a source's written to its offsets topic (fenced for an exactly-once source).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from conveyor.api import Connector
from conveyor.api import TopicPartition as ApiTopicPartition
from conveyor.control.errors import OperationError
from conveyor.manifest.initial_offsets import ExistingOffsets, InitialOffsetsSpec
from conveyor.runtime.config.settings import parse_source_settings
from conveyor.runtime.config.validation import PreflightError
from conveyor.runtime.kafka.clients import KafkaProperties
from conveyor.runtime.rest import connect_offsets

log = logging.getLogger(__name__)

SAMPLE_SIZE = 20
NOT_GIVEN, APPLIED, KEPT = "NotGiven", "Applied", "Kept"


@dataclass(frozen=True)
class StartingOffsets:
    """What a driver's start found and did, as its ``/status`` reports it (``starting_offsets``).

    Attributes:
        found: partitions with stored offsets when the driver started (before anything was written).
        sample: up to :data:`SAMPLE_SIZE` of them, as KIP-875 entries.
        initial: :data:`NOT_GIVEN` (no ``spec.initialOffsets``), :data:`APPLIED` (written) or
            :data:`KEPT` (``existing: keep`` and offsets were found: nothing written).
        written: entries written (0 unless applied).
        message: what happened, in words.
    """

    found: int
    sample: list[dict[str, Any]] = field(default_factory=list)
    initial: str = NOT_GIVEN
    written: int = 0
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"found": self.found, "sample": self.sample, "initial": self.initial, "written": self.written,
                "message": self.message}


def check_initial_offsets(initial: InitialOffsetsSpec | None, connector_type: str) -> None:
    """Check ``spec.initialOffsets`` as Kafka Connect checks a ``PATCH`` body (its messages).

    Raises:
        PreflightError: ``spec.initialOffsets: <what is wrong>``.
    """
    if initial is not None:
        _parsed(initial, connector_type)


def _parsed(initial: InitialOffsetsSpec, connector_type: str) -> Any:
    entries = initial.document()["offsets"]
    try:
        if connector_type == "sink":
            return connect_offsets.parse_sink_offsets(entries)
        return connect_offsets.parse_source_offsets(entries)
    except OperationError as exc:
        raise PreflightError(f"spec.initialOffsets: {exc}") from None


def settle(kafka: KafkaProperties, cls: type[Connector], connector_type: str, config: Mapping[str, Any],
           namespace: str, initial: InitialOffsetsSpec | None) -> StartingOffsets:
    """List the connector's stored offsets, then write ``initial`` when it is given and either
    nothing was found or ``existing`` is ``replace``; replacing resets every stored partition
    that ``initial`` does not name (as KIP-995 wipes a connector name's offsets first).

    Raises:
        PreflightError: the offsets could not be read, the connector's ``alter_offsets`` hook
            refused them, or Kafka refused the write (``spec.initialOffsets: ...``; e.g. a
            member of the group ``connect-<name>`` still running).
    """
    name = str(config["name"])
    try:
        found = _stored(kafka, name, connector_type, config)
    except (KafkaException, TimeoutError) as exc:
        raise PreflightError(f"connector {name}: its stored offsets could not be read: {exc}") from None
    sample = found[:SAMPLE_SIZE]
    if initial is None:
        if found:
            log.info("connector %s resumes from stored offsets of %d partition(s)", name, len(found))
        return StartingOffsets(len(found), sample)
    if found and initial.existing is ExistingOffsets.KEEP:
        message = (f"spec.initialOffsets not written: the connector has stored offsets of {len(found)} partition(s), "
                   "which it resumes from (existing: keep)")
        log.info("connector %s: %s", name, message)
        return StartingOffsets(len(found), sample, KEPT, 0, message)
    offsets = _wiping(_parsed(initial, connector_type), found, connector_type)
    try:
        if connector_type == "sink":
            written = connect_offsets.alter_sink_offsets(kafka, cls, config, offsets)
        else:
            written = connect_offsets.alter_source_offsets(kafka, cls, config, namespace, offsets)
    except OperationError as exc:
        raise PreflightError(f"spec.initialOffsets: {exc}") from None
    replaced = f"; the stored offsets of {len(found)} partition(s) replaced (existing: replace)" if found else ""
    message = f"spec.initialOffsets written: {len(initial.offsets)} partition(s){replaced}. {written}"
    log.info("connector %s: %s", name, message)
    return StartingOffsets(len(found), sample, APPLIED, len(initial.offsets), message)


def _wiping(offsets: Any, found: list[dict[str, Any]], connector_type: str) -> Any:
    """``offsets`` plus a reset (``None``) of every stored partition they do not name: what is
    stored is replaced, not merged (as KIP-995 wipes a name's offsets before writing)."""
    if connector_type == "sink":
        stored = {ApiTopicPartition(e["partition"][connect_offsets.KAFKA_TOPIC_KEY],
                                    e["partition"][connect_offsets.KAFKA_PARTITION_KEY]) for e in found}
        return {**{tp: None for tp in stored if tp not in offsets}, **offsets}
    given = [partition for partition, _ in offsets]
    return [(e["partition"], None) for e in found if e["partition"] not in given] + offsets


def _stored(kafka: KafkaProperties, name: str, connector_type: str, config: Mapping[str, Any]) -> list[dict[str, Any]]:
    if connector_type == "sink":
        return connect_offsets.list_sink_offsets(kafka, name)
    topic = parse_source_settings(config).offsets_storage_topic
    return connect_offsets.list_source_offsets(kafka, name, topic)
