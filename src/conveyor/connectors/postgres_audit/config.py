"""Configuration of the PostgreSQL audit source, and the names of what it provisions.

Keys (Kafka Connect style, dotted; string values are coerced as Kafka Connect's ``ConfigDef``
does, so ``"500"`` is ``500``):

``name`` (string, required for ``start``)
    the connector name; the runtime sets it in the connector's and every task's configuration
    (as Kafka Connect does). Every database object the connector creates is named from it, so
    two connectors never share a trigger, function, audit table or notification channel
    (see :class:`AuditNames`).
``connection.url`` (string, required)
    libpq URL or keyword string (``postgresql://user@host:5432/db``, ``host=h dbname=db``);
    a JDBC URL ``jdbc:postgresql://host:5432/db`` is accepted too.
``connection.user`` / ``connection.password`` (string, default: from the URL)
    override the URL's user / password. The password is never logged or put in errors.
``connection.timeout.ms`` (int >= 1, default 10000)
    connect timeout in milliseconds (libpq rounds to whole seconds, at least 2).
``tables`` (comma list or YAML list of ``schema.table``, required, at least one)
    the tables to capture. An unqualified name means ``public.<name>``. Names are taken
    literally, as stored in the catalog (case-sensitive, no quotes): ``Sales.Orders`` is the
    table created as ``"Sales"."Orders"``. Duplicates are ignored.
``audit.schema`` (string, default ``conveyor_audit``)
    schema of the audit table and trigger function; created if missing (then marked as
    created by Conveyor, see :mod:`.provision`).
``topic.prefix`` (string, default ``""``)
    records of table ``s.t`` go to topic ``<topic.prefix><s>.<t>``: with the default,
    ``public.orders``. Set e.g. ``pg1.`` to keep databases apart on a shared cluster
    (Debezium's convention). Characters Kafka does not allow in a topic name (anything outside
    ``[A-Za-z0-9._-]``) become ``_``.
``poll.max.rows`` (int >= 1, default 1000)
    most records one ``poll`` returns.
``poll.interval.ms`` (int >= 0, default 1000)
    longest time ``poll`` blocks, waiting with ``LISTEN`` for a change, when there is nothing
    to return; it then returns ``[]``.
``ddl.lock.timeout.ms`` (int >= 1, default 30000)
    Conveyor-specific. ``lock_timeout`` of the provisioning and cleanup transactions: creating
    or dropping a trigger waits for writers of that table to finish; past this the transaction
    is rolled back (nothing changed) and :class:`~conveyor.api.ConnectError` says which lock.

``audit.retention`` (``committed`` or ``keep``, default ``committed``)
    Conveyor-specific. ``committed``: once a table's offset is committed (the task's
    ``commit()``), its audit rows up to that offset are deleted, so the audit table holds only
    what Kafka does not have yet. ``keep``: rows stay until the connector is deleted.

Invalid values raise :class:`~conveyor.api.ConfigError` naming the key and the expected
type or value (through :func:`conveyor.api.parse_config`), e.g.
``poll.max.rows: Input should be a valid integer, unable to parse string as an integer (got 'ten')``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from psycopg.conninfo import conninfo_to_dict
from pydantic import BeforeValidator, Field, SecretStr, field_validator

from conveyor.api import ConfigError, ConnectorConfig, parse_config
from conveyor.connectors.postgres.config import normalize_url

DEFAULT_AUDIT_SCHEMA = "conveyor_audit"
#: Prefix of every trigger and notification channel this connector creates.
OBJECT_PREFIX = "conveyor_audit_"
_MAX_IDENTIFIER = 63  # PostgreSQL's NAMEDATALEN - 1, in bytes
_PLAIN_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_TOPIC_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_SLUG_MAX = 40


@dataclass(frozen=True, order=True)
class TableName:
    """A captured table, ``schema`` and ``table`` exactly as in the catalog."""

    schema: str
    table: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"


def _parse_tables(value: Any) -> Any:
    """``"a.b, c"`` or ``["a.b", "c"]`` → ``(TableName("a", "b"), TableName("public", "c"))``."""
    if value is None:
        return value
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        return value  # pydantic reports the type error
    seen: dict[TableName, None] = {}
    for item in items:
        if isinstance(item, TableName):
            seen.setdefault(item, None)
            continue
        if not isinstance(item, str):
            raise ValueError(f"expected 'schema.table' strings, got {item!r}")  # noqa: TRY004 - pydantic wants ValueError
        text = item.strip()
        if not text:
            continue
        parts = text.split(".")
        if len(parts) > 2 or not all(p.strip() for p in parts):
            raise ValueError(f"expected 'schema.table' (or 'table' for public.table), got {text!r}")
        schema, table = (parts[0].strip(), parts[1].strip()) if len(parts) == 2 else ("public", parts[0].strip())
        for part in (schema, table):
            if len(part.encode()) > _MAX_IDENTIFIER:
                raise ValueError(f"{part!r} in {text!r} is longer than PostgreSQL's 63-byte identifier limit")
        seen.setdefault(TableName(schema, table), None)
    return tuple(seen)


TableList = Annotated[tuple[TableName, ...], BeforeValidator(_parse_tables)]


class PostgresAuditSourceConfig(ConnectorConfig):
    """Validated configuration; build it with :func:`load_config` (see the module docstring)."""

    name: str | None = Field(None, description="connector name (set by the runtime)")
    connection_url: str = Field(alias="connection.url", description="libpq or JDBC PostgreSQL URL")
    connection_user: str | None = Field(None, alias="connection.user")
    connection_password: SecretStr | None = Field(None, alias="connection.password")
    connection_timeout_ms: int = Field(10_000, alias="connection.timeout.ms", ge=1)
    tables: TableList = Field(alias="tables", min_length=1, description="comma list of schema.table")
    audit_schema: str = Field(DEFAULT_AUDIT_SCHEMA, alias="audit.schema", min_length=1)
    topic_prefix: str = Field("", alias="topic.prefix")
    poll_max_rows: int = Field(1000, alias="poll.max.rows", ge=1)
    poll_interval_ms: int = Field(1000, alias="poll.interval.ms", ge=0)
    ddl_lock_timeout_ms: int = Field(30_000, alias="ddl.lock.timeout.ms", ge=1)
    audit_retention: Literal["committed", "keep"] = Field("committed", alias="audit.retention")

    @field_validator("connection_url")
    @classmethod
    def _normalize_url(cls, value: str) -> str:
        # Checked in load_config, where the error can avoid echoing the URL (and its password).
        return normalize_url(value.strip())

    @field_validator("audit_schema")
    @classmethod
    def _check_schema(cls, value: str) -> str:
        if len(value.encode()) > _MAX_IDENTIFIER:
            raise ValueError("a schema name of at most 63 bytes")
        return value

    def topic_for(self, table: TableName) -> str:
        """Destination topic of ``table``'s records: ``<topic.prefix><schema>.<table>``,
        characters Kafka does not allow replaced by ``_``."""
        return _TOPIC_UNSAFE.sub("_", f"{self.topic_prefix}{table.schema}.{table.table}")[:249]


def _check_url(url: str) -> str | None:
    """Why ``url`` is not a usable libpq connection string, or ``None``. Never echoes text
    that may hold a password."""
    if not url:
        return "a PostgreSQL URL (string) is required, e.g. postgresql://user@host:5432/db"
    try:
        conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError  # noqa: BLE001
        may_hold_secret = "@" in url or "password" in url.lower()
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return "not a valid libpq connection string or postgresql:// URL" + ("" if may_hold_secret else f": {first}")
    return None


def load_config(config: Mapping[str, Any], *, require_name: bool = True) -> PostgresAuditSourceConfig:
    """Parse and cross-check a connector or task configuration. No I/O.

    Args:
        config: the connector's ``spec.config`` (with ``name``) or one task configuration.
        require_name: ``name`` must be set (always, except for ``validate`` of a
            configuration the runtime has not yet given a name).

    Raises:
        ConfigError: naming each invalid key with the expected type or value.
    """
    parsed = parse_config(PostgresAuditSourceConfig, config)
    errors: dict[str, str] = {}
    url_problem = _check_url(parsed.connection_url)
    if url_problem:
        errors["connection.url"] = url_problem
    if require_name and not (parsed.name or "").strip():
        errors["name"] = (
            "the connector name (non-empty string) is required: the audit table, trigger function,"
            " triggers and notification channel are named from it"
        )
    if errors:
        raise ConfigError(errors)
    return parsed


def connector_slug(name: str) -> str:
    """The identifier-safe part of every object name, from the connector name.

    A name that is already a plain lowercase identifier (``[a-z_][a-z0-9_]*``) of at most 40
    characters is used as it is (``orders_audit`` → ``orders_audit``). Any other name is
    lowercased, every other character becomes ``_``, it is cut to 31 characters and gets
    ``_`` plus the first 8 hex digits of the SHA-256 of the exact name (``orders-audit`` →
    ``orders_audit_<8 hex>``), so distinct names give distinct slugs and every derived name
    stays within PostgreSQL's 63-byte identifier limit.
    """
    if _PLAIN_NAME.match(name) and len(name) <= _SLUG_MAX:
        return name
    base = re.sub(r"[^a-z0-9_]", "_", name.lower())[:31] or "c"
    if base[0].isdigit():
        base = "c" + base[:30]
    return f"{base}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class AuditNames:
    """Every name the connector ``name`` uses in the database, all derived from
    :func:`connector_slug` (``<slug>`` below) and ``audit.schema``:

    * audit table ``<audit.schema>.<slug>_log`` (its ``bigserial`` sequence is
      ``<slug>_log_id_seq``, its index ``<slug>_log_table_idx``),
    * trigger function ``<audit.schema>.<slug>_capture()``,
    * trigger ``conveyor_audit_<slug>`` on each captured table,
    * notification channel ``conveyor_audit_<slug>``,
    * advisory lock: ``pg_advisory_xact_lock(hashtext('conveyor.postgres_audit'),
      hashtext(<audit.schema>))`` serialises provisioning and cleanup of all connectors
      sharing an audit schema.
    """

    connector: str
    schema: str
    slug: str

    @classmethod
    def of(cls, config: PostgresAuditSourceConfig) -> AuditNames:
        if not config.name:
            raise ConfigError({"name": "the connector name (non-empty string) is required"})
        return cls(connector=config.name, schema=config.audit_schema, slug=connector_slug(config.name))

    @property
    def table(self) -> str:
        return f"{self.slug}_log"

    @property
    def index(self) -> str:
        return f"{self.slug}_log_table_idx"

    @property
    def function(self) -> str:
        return f"{self.slug}_capture"

    @property
    def trigger(self) -> str:
        return f"{OBJECT_PREFIX}{self.slug}"

    @property
    def channel(self) -> str:
        return f"{OBJECT_PREFIX}{self.slug}"

    @property
    def qualified_table(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def qualified_function(self) -> str:
        return f"{self.schema}.{self.function}()"
