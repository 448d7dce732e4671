"""Single message transformations and predicates (Kafka Connect's SMT contract).

Configured with Kafka Connect's keys::

    transforms: route,mask
    transforms.route.type: org.apache.kafka.connect.transforms.RegexRouter
    transforms.route.regex: "(.*)-raw"
    transforms.route.replacement: "$1"
    transforms.mask.type: my_package.transforms.Mask        # any dotted Python path
    transforms.mask.predicate: is-orders
    transforms.mask.negate: "false"
    predicates: is-orders
    predicates.is-orders.type: org.apache.kafka.connect.transforms.predicates.TopicNameMatches
    predicates.is-orders.pattern: "orders.*"

``configure`` receives the keys under the alias's prefix with the prefix removed
(``{"regex": "(.*)-raw", "replacement": "$1"}``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from conveyor.api.records import SinkRecord, SourceRecord

R = TypeVar("R", SinkRecord, SourceRecord)


class Transformation(abc.ABC, Generic[R]):
    """Transforms one record at a time; runs on the task's thread, after conversion
    (sink) or before conversion (source), in the order the ``transforms`` key lists.

    Raising :class:`~conveyor.api.errors.DataError` (or any exception) marks the record
    as failed in stage ``TRANSFORMATION``; ``errors.tolerance`` decides what follows.
    """

    def configure(self, config: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Receive the transformation's own keys, prefix removed. Called once, first."""

    @abc.abstractmethod
    def apply(self, record: R) -> R | None:
        """Return the transformed record, the same record, or ``None`` to drop it."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; called once when the task stops."""


class Predicate(abc.ABC, Generic[R]):
    """Decides whether a transformation applies to a record (KIP-585)."""

    def configure(self, config: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Receive the predicate's own keys, prefix removed. Called once, first."""

    @abc.abstractmethod
    def test(self, record: R) -> bool:
        """True when the record matches."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; called once when the task stops."""
