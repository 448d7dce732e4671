"""Connections, and psycopg errors turned into connector errors without secrets.

Describing a connection (``host=… port=… dbname=… user=…``) and scrubbing passwords out of
messages reuse the PostgreSQL sink's helpers (:mod:`conveyor.connectors.postgres.db`), which
only read ``connection_url`` / ``connection_user`` / ``connection_password`` — fields this
connector's configuration has under the same names.
"""

from __future__ import annotations

import psycopg

from conveyor.api import ConnectError
from conveyor.connectors.postgres import db as sink_db
from conveyor.connectors.postgres_audit.config import PostgresAuditSourceConfig

APPLICATION_NAME = "conveyor-postgres-audit-source"


class DatabaseUnreachable(ConnectError):
    """The database cannot be reached or refuses the login (a task's ``poll`` retries it)."""


def describe(config: PostgresAuditSourceConfig) -> str:
    """``host=h port=p dbname=d user=u`` of the configured database; never the password."""
    return sink_db.describe(config)  # type: ignore[arg-type]  # same connection field names


def scrub(config: PostgresAuditSourceConfig, message: str) -> str:
    """``message`` on one line, with any configured password replaced by ``***``."""
    return sink_db.scrub(config, " ".join(str(message).split()))  # type: ignore[arg-type]


def connect(config: PostgresAuditSourceConfig) -> psycopg.Connection:
    """A new autocommit connection (transactions are explicit ``conn.transaction()`` blocks),
    ``application_name`` ``conveyor-postgres-audit-source``. Blocks up to
    ``connection.timeout.ms``; TCP keepalive and ``tcp_user_timeout`` as the sink's
    (:func:`conveyor.connectors.postgres.db.connect_kwargs`).

    Raises:
        DatabaseUnreachable: (a :class:`ConnectError`) the database cannot be reached or
            refuses the login; the message names host, port, database and user, never the
            password.
    """
    kwargs = sink_db.connect_kwargs(config, APPLICATION_NAME)  # type: ignore[arg-type]  # same field names
    try:
        return psycopg.connect(config.connection_url, **kwargs)  # type: ignore[arg-type]
    except psycopg.Error as exc:
        raise DatabaseUnreachable(
            f"cannot connect to PostgreSQL at {describe(config)}: {scrub(config, str(exc))}"
        ) from None
