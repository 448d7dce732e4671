"""Converters between Kafka's bytes and Connect data (Kafka Connect's ``Converter``).

Configured per connector with Kafka Connect's keys, the class name or a Conveyor alias::

    key.converter: org.apache.kafka.connect.storage.StringConverter     # or "string"
    value.converter: org.apache.kafka.connect.json.JsonConverter        # or "json"
    value.converter.schemas.enable: "false"

``configure`` receives the keys under ``key.converter.`` / ``value.converter.`` with
the prefix removed.

Header values go through a :class:`HeaderConverter`, configured with ``header.converter``
(Kafka Connect's key) and the keys under ``header.converter.``.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from conveyor.api.records import Header
from conveyor.api.schema import Schema, SchemaAndValue


class Converter(abc.ABC):
    """Serialises keys or values; one instance per task and per side (key or value).

    Called on the task's thread. Raises :class:`~conveyor.api.errors.DataError` for
    bytes or data it cannot convert; ``errors.tolerance`` decides what follows.
    """

    #: Whether what ``to_connect_data`` reads comes with a Connect schema (a value without
    #: one is then JSON-like data, or null): a sink's batch path gives such keys or values
    #: typed columns (:mod:`conveyor.api.arrow_types`), per record through ``to_connect_data``
    #: with empty headers. Read after ``configure``.
    gives_schemas: ClassVar[bool] = False

    def configure(self, config: Mapping[str, Any], is_key: bool) -> None:  # noqa: B027
        """Receive the converter's own keys, prefix removed, and which side it serves."""

    @abc.abstractmethod
    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        """Bytes read from ``topic`` → schema and value. ``None`` (a tombstone) → ``(None, None)``."""

    @abc.abstractmethod
    def from_connect_data(self, topic: str, headers: Sequence[Header], schema: Schema | None, value: Any) -> bytes | None:
        """Schema and value to write to ``topic`` → bytes (``None`` for a null value)."""


class HeaderConverter(abc.ABC):
    """Serialises header values (Kafka Connect's ``HeaderConverter``); one instance per task.

    Configured with ``header.converter``. Without it, Conveyor passes header bytes through
    untouched: a :class:`~conveyor.api.Header` then holds the raw ``bytes`` (or ``None``)
    and no schema. (Kafka Connect's worker default is ``SimpleHeaderConverter``; name it to
    get typed header values.)

    Called on the task's thread: for a sink, on every consumed record's headers before
    transformations; for a source, on every header of a record being written, except a
    header with no schema whose value is ``bytes`` or ``None``, which is written as it is.
    Raises :class:`~conveyor.api.errors.DataError` for bytes or data it cannot convert;
    ``errors.tolerance`` decides what follows (stage ``HEADER_CONVERTER``).
    """

    def configure(self, config: Mapping[str, Any]) -> None:  # noqa: B027
        """Receive the keys under ``header.converter.``, prefix removed."""

    @abc.abstractmethod
    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        """A header's bytes read from ``topic`` → schema and value. ``None`` → ``(None, None)``."""

    @abc.abstractmethod
    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        """A header's schema and value to write to ``topic`` → bytes (``None`` for a null value)."""
