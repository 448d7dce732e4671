"""What :class:`~conveyor.connectors.postgres.writer.Writer` plans for one write: per
destination table, the rows to write and the keys to delete in the batch's order, and the
records it set aside (*rejects*)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from conveyor.api import Schema, SinkRecord

Row = tuple[Any, ...]
Rejects = list[tuple[SinkRecord, str]]


@dataclass
class Table:
    """An existing destination table and its columns (``{name: SQL type}``)."""

    ident: sql.Identifier
    display: str
    columns: dict[str, str]


@dataclass
class TableBatch:
    """What one write does to one table.

    ``columns`` are the key columns (``pk.mode=record_key``) followed by the value columns;
    ``pk`` the conflict/delete columns. ``runs`` keeps the batch's order: ``(False,
    RowSource)`` to write and ``(True, keys)`` to delete, where a key is what ``pk_of_row``
    returns for a row (the value itself for a one-column key, else a tuple).
    """

    table: Table
    columns: tuple[str, ...]
    pk: tuple[str, ...]
    runs: list[tuple[bool, Any]]
    pk_of_row: Callable[[Row], Any]


class ShapeChanged(Exception):
    """Raised by :meth:`Writer.execute` when a schemaless batch assumed to have one key set
    (all dicts of the same size as the first) turns out not to: the caller rolls back and
    prepares again with ``trust_shape=False``. Internal; never leaves the task."""


@dataclass
class RowSource:
    """Rows built lazily from records, chunk by chunk, so that building them overlaps
    with the server consuming the previous chunk of a COPY."""

    records: list[SinkRecord]
    build: Callable[[list[SinkRecord]], list[Row]]
    chunk_size: int = 2048

    def chunks(self) -> Iterator[list[Row]]:
        size = self.chunk_size
        for start in range(0, len(self.records), size):
            yield self.build(self.records[start : start + size])

    def all(self) -> list[Row]:
        return self.build(self.records)


@dataclass
class Plan:
    """The result of :meth:`Writer.prepare`: per-table batches and rejected records."""

    batches: list[TableBatch]
    rejects: Rejects


@dataclass(frozen=True)
class KeyLayout:
    """How record keys become columns (``pk.mode=record_key``), or with ``coordinates`` the
    record's topic, partition and offset (``pk.mode=kafka``)."""

    columns: tuple[str, ...]
    is_struct: bool
    schemas: dict[str, Schema | None]
    coordinates: bool = False
