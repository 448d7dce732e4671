"""``spec.initialOffsets``: where a new connector starts (KIP-995's offsets at creation).

The entries are Kafka Connect's KIP-875 offsets document entries, as ``PATCH
/connectors/<name>/offsets`` takes them: a sink's ``{"partition": {"kafka_topic": str,
"kafka_partition": int}, "offset": {"kafka_offset": int}}``, a source's own partition and offset
maps; a ``null`` offset starts that partition as if never read. The driver writes them before
any task starts (:mod:`conveyor.runtime.driver.starting_offsets`): when the connector has no
offsets yet, or in place of all its stored ones with ``existing: replace`` (KIP-995's behaviour). The operator reports the outcome in
``status.startingOffsets`` and an Event, then leaves them out of what a restarted driver runs,
so that a driver's restart never rewinds the connector.

The CRD refuses adding or changing them after creation (:data:`IMMUTABLE_RULE`); the offsets of a
running connector are changed with ``spec.alterOffsets`` while it is stopped.
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import Field

from conveyor.manifest.base import StrictModel

MAX_ENTRIES = 1000
MAX_MAP_PROPERTIES = 32

IMMUTABLE_RULE = {
    "rule": "!has(self.initialOffsets) || (has(oldSelf.initialOffsets) && self.initialOffsets == oldSelf.initialOffsets)",
    "message": "spec.initialOffsets is where a new connector starts: it can be given at creation only and not "
               "added or changed later; change the offsets of an existing connector with spec.alterOffsets while "
               "it is stopped (spec.state: stopped)",
}
"""The CRD's transition rule on ``spec`` that keeps ``initialOffsets`` as it was at creation
(removing it is allowed: it has been applied by then)."""


class ExistingOffsets(str, enum.Enum):
    """What ``spec.initialOffsets`` does when the connector already has offsets (a Connector
    re-created under the same name after ``deletionPolicy.offsets: retain``)."""

    KEEP = "keep"
    REPLACE = "replace"


_MAP = {"x-kubernetes-preserve-unknown-fields": True, "maxProperties": MAX_MAP_PROPERTIES}


class OffsetEntry(StrictModel):
    """One KIP-875 entry: a partition and the offset to start it from."""

    partition: dict[str, Any] = Field(
        description="A sink's {kafka_topic, kafka_partition} or a source's own partition map.",
        json_schema_extra=_MAP,
    )
    offset: dict[str, Any] | None = Field(
        None,
        description="A sink's {kafka_offset: next offset to read} or a source's own offset map; null (or absent) "
                    "starts the partition as if never read.",
        json_schema_extra={**_MAP, "nullable": True},
    )


class InitialOffsetsSpec(StrictModel):
    """``spec.initialOffsets``."""

    offsets: list[OffsetEntry] = Field(
        min_length=1, max_length=MAX_ENTRIES,
        description="Kafka Connect's offsets document entries (as PATCH /connectors/<name>/offsets takes them).",
    )
    existing: ExistingOffsets = Field(
        ExistingOffsets.KEEP,
        description="keep: applied only when the connector has no offsets yet (a re-created connector whose "
                    "offsets were retained resumes from them); replace: every stored offset is removed and these "
                    "written (KIP-995).",
    )

    def document(self) -> dict[str, Any]:
        """The entries as a KIP-875 ``PATCH`` body, ``{"offsets": [...]}``."""
        return {"offsets": [{"partition": e.partition, "offset": e.offset} for e in self.offsets]}
