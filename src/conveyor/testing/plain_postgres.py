"""A plain PostgreSQL sink with no error handling of its own: each ``put`` (or ``put_batch``)
copies its records into a table in one transaction and lets PostgreSQL's errors go. It declares
``psycopg.DataError`` and ``psycopg.IntegrityError`` as its ``poison_errors``, so the runtime
finds the records PostgreSQL refuses (:mod:`conveyor.runtime.task.sink.isolation`): it stands
for any sink that has no code of its own for that. Spec class
``conveyor.testing.plain_postgres:PlainPostgresSinkConnector``.

Configuration: ``connection.url`` (a libpq URL) and ``table`` (an existing table with
columns ``id`` and ``body``). Each record's value is a JSON object: ``id`` is its ``"id"``
field, ``body`` the whole value as JSON text. Records with a null value are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql

from conveyor.api import ConfigError, SinkConnector, SinkRecord, SinkTask, Task
from conveyor.api.batches import VALUE

_KEYS = ("connection.url", "table")


def _required(config: Mapping[str, Any]) -> dict[str, str]:
    missing = {key: "required" for key in _KEYS if not config.get(key)}
    if missing:
        raise ConfigError(missing)
    return {key: str(config[key]) for key in _KEYS}


class PlainPostgresSinkConnector(SinkConnector):
    """Hands every task the connector's configuration."""

    def start(self, config: Mapping[str, Any]) -> None:
        _required(config)
        self._config = dict(config)

    def task_class(self) -> type[Task]:
        return PlainPostgresSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        return [dict(self._config) for _ in range(max_tasks)]

    def stop(self, connector_deleted: bool = False) -> None:
        pass


class PlainPostgresSinkTask(SinkTask):
    """Copies each call's records into the table in one transaction (task runner thread)."""

    poison_errors = (psycopg.DataError, psycopg.IntegrityError)

    def start(self, config: Mapping[str, Any]) -> None:
        settings = _required(config)
        self._conn = psycopg.connect(settings["connection.url"], autocommit=True)
        self._copy = sql.SQL("COPY {} (id, body) FROM STDIN").format(sql.Identifier(*settings["table"].split(".")))

    def put(self, records: Sequence[SinkRecord]) -> None:
        self._write([record.value for record in records])

    def put_batch(self, batch: pa.RecordBatch) -> None:
        self._write([None if text is None else json.loads(text) for text in batch.column(VALUE).to_pylist()])

    def _write(self, values: list[Any]) -> None:
        rows = [(value.get("id"), json.dumps(value)) for value in values if value is not None]
        if not rows:
            return
        with self._conn.transaction(), self._conn.cursor() as cur, cur.copy(self._copy) as copy:
            for row in rows:
                copy.write_row(row)

    def stop(self, connector_deleted: bool = False) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
