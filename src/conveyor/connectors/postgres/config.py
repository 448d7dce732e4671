"""Configuration of the PostgreSQL sink (keys mirror Confluent's JDBC sink connector).

``connection.url`` (required)
    libpq URL or keyword string (``postgresql://user@host:5432/db``, ``host=h dbname=db``);
    a JDBC URL ``jdbc:postgresql://host:5432/db`` is accepted too.
``connection.user`` / ``connection.password`` (default: from the URL)
    override the URL's user / password. The password is never logged or put in errors.
``connection.timeout.ms`` (int, default 10000)
    connect timeout in milliseconds (libpq rounds to whole seconds, at least 2); also
    ``tcp_user_timeout`` (at least 60 s), with TCP keepalive after 30 s idle
    (:func:`conveyor.connectors.postgres.db.connect_kwargs`). Conveyor-specific.
``ddl.lock.timeout.ms`` (int >= 1, default 30000)
    Conveyor-specific, as the audit source's. ``lock_timeout`` of the sink's own DDL
    transactions (``auto.create``, ``auto.evolve``, the offsets table): ``ALTER TABLE`` waits
    for the table's readers and writers; past this the transaction is rolled back (nothing
    changed) and the write fails as a :class:`~conveyor.api.RetriableError`.
``table.name.format`` (default ``${topic}``)
    destination table. ``${topic}`` is replaced by the topic name with every character
    outside ``[A-Za-z0-9_]`` (dots, dashes, ...) turned into ``_``: topic ``shop.orders-v1``
    → table ``shop_orders_v1``. A dot in the format itself separates schema and table:
    ``audit.${topic}``. Identifiers are always quoted, so case is kept.
``insert.mode`` (``insert`` | ``upsert`` | ``update``, default ``insert``)
    ``insert``: ``COPY``. ``upsert``: ``COPY`` into a temporary table, then
    ``INSERT ... SELECT ... ON CONFLICT (pk) DO UPDATE``. ``update``: the same temporary table,
    then ``UPDATE ... FROM`` it on the primary key: rows whose key is not in the table are
    not written (as Confluent's ``update``). In both, within one write the last record of each
    key wins; both need a ``pk.mode``.
``pk.mode`` (``none`` | ``kafka`` | ``record_key`` | ``record_value``, default ``none``)
    where the primary key comes from. ``kafka``: the record's topic, partition and offset, in
    the columns ``__connect_topic`` (text), ``__connect_partition`` (integer) and
    ``__connect_offset`` (bigint), or the three names of ``pk.fields`` (as Confluent's); a
    record written again after a crash then updates its own row instead of adding a second one
    (with ``insert.mode=upsert``).
``pk.fields`` (comma list, default empty)
    ``kafka``: none or exactly three column names (topic, partition, offset).
    ``record_key``: a primitive key is stored in the single column named here (default
    ``__connect_key``); a struct/dict key contributes these fields (default: all of them).
    ``record_value``: the value fields forming the key (required here; Confluent would
    default to all value fields).
``fields.whitelist`` (comma list, default empty = all)
    value fields to write; primary-key columns are always written.
``auto.create`` (bool, default false)
    create a missing table from the value (and key) schema, or from the first batch's
    Python values when schemaless (types in :mod:`.dialect`), with ``PRIMARY KEY (pk)``.
    Without it a missing table is a :class:`~conveyor.api.ConnectError` naming the table.
``auto.evolve`` (bool, default false)
    when records have fields (value schema fields, record-key fields, keys of schemaless
    dicts) that an existing table lacks, ``ALTER TABLE ... ADD COLUMN IF NOT EXISTS`` them
    (types as ``auto.create``; nullable, or ``DEFAULT d NOT NULL`` for a required field with
    a default), then re-read the table's columns. A required field without a default is not
    added: its records are rejected (errant record reporter / ``errors.tolerance``) with a
    message naming the table and field. Columns are never dropped, types never changed
    (see :mod:`.evolve`). Without it a missing column is a :class:`~conveyor.api.ConnectError`
    naming the table and the columns.
``delete.enabled`` (bool, default false)
    a tombstone (value ``None``) deletes the row with its key; needs
    ``pk.mode=record_key``. Otherwise tombstones are skipped (their offsets still advance).
``batch.size`` (int >= 1, default 3000)
    records buffered before ``put`` writes; everything buffered is then written in one
    transaction. ``pre_commit`` writes whatever is left.
``exactly.once`` (bool, default false)
    Conveyor-specific. Store each partition's next offset in ``offsets.table`` in the same
    transaction as the rows, rewind to it in ``open``, and commit nothing to Kafka
    (``pre_commit`` returns ``{}``). Needs the connector name under ``name``.
``offsets.table`` (default ``conveyor_sink_offsets``)
    ``[schema.]table`` of the stored offsets; created if missing.
``retry.backoff.ms`` (int >= 0, default 3000)
    the delay of the :class:`~conveyor.api.RetriableError` raised on a transient database error.
``max.retries`` (int >= 0, default 10)
    transient database errors in a row after which the task fails (a :class:`~conveyor.api.ConnectError`
    saying so) instead of retrying again, as Confluent's; a write that succeeds starts the count again.
``name``
    the connector name; the runtime sets it in every task configuration (as Kafka Connect does).

Invalid values raise :class:`~conveyor.api.ConfigError` naming the key and the expected
type or value (through :func:`conveyor.api.parse_config`), e.g.
``batch.size: Input should be a valid integer, unable to parse string as an integer (got 'ten')``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Annotated, Any

from psycopg.conninfo import conninfo_to_dict
from pydantic import BeforeValidator, Field, SecretStr, field_validator

from conveyor.api import ConfigError, ConnectorConfig, parse_config

TOPIC_PLACEHOLDER = "${topic}"
PRIMITIVE_KEY_COLUMN = "__connect_key"
KAFKA_PK_COLUMNS = ("__connect_topic", "__connect_partition", "__connect_offset")
_UNSAFE = re.compile(r"[^0-9A-Za-z_]")


class InsertMode(str, enum.Enum):
    """How rows are written."""

    INSERT = "insert"
    UPSERT = "upsert"
    UPDATE = "update"


class PkMode(str, enum.Enum):
    """Where the primary key comes from."""

    NONE = "none"
    KAFKA = "kafka"
    RECORD_KEY = "record_key"
    RECORD_VALUE = "record_value"


def _comma_list(value: Any) -> Any:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


CommaList = Annotated[tuple[str, ...], BeforeValidator(_comma_list)]


def normalize_url(url: str) -> str:
    """``jdbc:postgresql://...`` → ``postgresql://...``; anything else unchanged."""
    return url[len("jdbc:") :] if url.startswith("jdbc:postgresql:") else url


def split_qualified(name: str) -> tuple[str | None, str]:
    """``"schema.table"`` → ``("schema", "table")``; ``"table"`` → ``(None, "table")``.

    Raises:
        ValueError: empty parts or more than one dot.
    """
    parts = name.split(".")
    if len(parts) > 2 or not all(parts):
        raise ValueError(f"expected 'table' or 'schema.table', got {name!r}")
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def table_for_topic(table_name_format: str, topic: str) -> tuple[str | None, str]:
    """The ``(schema, table)`` that records of ``topic`` go to (see ``table.name.format``)."""
    return split_qualified(table_name_format.replace(TOPIC_PLACEHOLDER, _UNSAFE.sub("_", topic)))


class PostgresSinkConfig(ConnectorConfig):
    """Validated configuration; build it with :func:`load_config`."""

    name: str | None = Field(None, description="connector name (set by the runtime in task configs)")
    connection_url: str = Field(alias="connection.url", description="libpq or JDBC PostgreSQL URL")
    connection_user: str | None = Field(None, alias="connection.user")
    connection_password: SecretStr | None = Field(None, alias="connection.password")
    connection_timeout_ms: int = Field(10_000, alias="connection.timeout.ms", ge=1)
    table_name_format: str = Field(TOPIC_PLACEHOLDER, alias="table.name.format")
    insert_mode: Annotated[InsertMode, BeforeValidator(_lower)] = Field(InsertMode.INSERT, alias="insert.mode")
    pk_mode: Annotated[PkMode, BeforeValidator(_lower)] = Field(PkMode.NONE, alias="pk.mode")
    pk_fields: CommaList = Field((), alias="pk.fields")
    fields_whitelist: CommaList = Field((), alias="fields.whitelist")
    auto_create: bool = Field(False, alias="auto.create")
    auto_evolve: bool = Field(False, alias="auto.evolve")
    delete_enabled: bool = Field(False, alias="delete.enabled")
    batch_size: int = Field(3000, alias="batch.size", ge=1)
    exactly_once: bool = Field(False, alias="exactly.once")
    offsets_table: str = Field("conveyor_sink_offsets", alias="offsets.table")
    retry_backoff_ms: int = Field(3000, alias="retry.backoff.ms", ge=0)
    max_retries: int = Field(10, alias="max.retries", ge=0)
    ddl_lock_timeout_ms: int = Field(30_000, alias="ddl.lock.timeout.ms", ge=1)

    @field_validator("connection_url")
    @classmethod
    def _normalize_url(cls, value: str) -> str:
        # Checked in load_config, where the error can avoid echoing the URL (and its password).
        return normalize_url(value.strip())

    @field_validator("table_name_format")
    @classmethod
    def _check_table_format(cls, value: str) -> str:
        split_qualified(value.replace(TOPIC_PLACEHOLDER, "t"))
        return value

    @field_validator("offsets_table")
    @classmethod
    def _check_offsets_table(cls, value: str) -> str:
        split_qualified(value)
        return value

    def problems(self) -> dict[str, str]:
        """What does not fit across keys (see :meth:`ConnectorConfig.problems`)."""
        errors: dict[str, str] = {}
        url_problem = _check_url(self.connection_url)
        if url_problem:
            errors["connection.url"] = url_problem
        if self.insert_mode is not InsertMode.INSERT and self.pk_mode is PkMode.NONE:
            errors["pk.mode"] = (f"insert.mode={self.insert_mode.value} needs a primary key: set pk.mode to kafka, "
                                 "record_key or record_value")
        if self.pk_mode is PkMode.KAFKA and self.pk_fields and len(self.pk_fields) != 3:
            errors["pk.fields"] = ("pk.mode=kafka takes none or three pk.fields (the topic, partition and offset "
                                   f"columns), not {len(self.pk_fields)}")
        if self.pk_mode is PkMode.RECORD_VALUE and not self.pk_fields:
            errors["pk.fields"] = "pk.mode=record_value needs pk.fields (comma list of value field names)"
        if self.delete_enabled and self.pk_mode is not PkMode.RECORD_KEY:
            errors["delete.enabled"] = "delete.enabled=true needs pk.mode=record_key (deletes are by record key)"
        return errors

    @property
    def kafka_pk_columns(self) -> tuple[str, str, str]:
        """The topic, partition and offset columns of ``pk.mode=kafka``."""
        return (self.pk_fields[0], self.pk_fields[1], self.pk_fields[2]) if self.pk_fields else KAFKA_PK_COLUMNS


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _check_url(url: str) -> str | None:
    """Why ``url`` is not a usable libpq connection string, or ``None``. Never echoes
    the URL's text when it may carry a password."""
    if not url:
        return "a PostgreSQL URL (string) is required, e.g. postgresql://user@host:5432/db"
    try:
        conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError
        may_hold_secret = "@" in url or "password" in url.lower()
        detail = "" if may_hold_secret else f": {_first_line(exc)}"
        return f"not a valid libpq connection string or postgresql:// URL{detail}"
    return None


def load_config(config: Mapping[str, Any], *, for_task: bool = False) -> PostgresSinkConfig:
    """Parse and cross-check a configuration mapping.

    Args:
        config: the connector's ``spec.config`` or one task configuration.
        for_task: also require what only tasks need (``name`` with ``exactly.once``).

    Raises:
        ConfigError: naming each invalid key with the expected type or value.
    """
    parsed = parse_config(PostgresSinkConfig, config)
    if for_task and parsed.exactly_once and not parsed.name:
        raise ConfigError({"name": "exactly.once=true needs the connector name (string) under 'name' in the "
                                   "task config"})
    return parsed
