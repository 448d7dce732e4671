"""Opening connections, and describing them without secrets."""

from __future__ import annotations

import math

import psycopg
from psycopg.conninfo import conninfo_to_dict

from conveyor.api import ConnectError
from conveyor.connectors.postgres.config import PostgresSinkConfig

APPLICATION_NAME = "conveyor-postgres-sink"


def describe(config: PostgresSinkConfig) -> str:
    """``host=h port=p dbname=d user=u`` of the configured database; never the password."""
    params = conninfo_to_dict(config.connection_url)
    if config.connection_user:
        params["user"] = config.connection_user
    shown = {
        "host": params.get("host") or params.get("hostaddr") or "localhost (default socket)",
        "port": params.get("port") or "5432",
        "dbname": params.get("dbname") or "(default)",
        "user": params.get("user") or "(default)",
    }
    return " ".join(f"{key}={value}" for key, value in shown.items())


def scrub(config: PostgresSinkConfig, message: str) -> str:
    """``message`` with any configured password replaced by ``***``."""
    secrets = [conninfo_to_dict(config.connection_url).get("password")]
    if config.connection_password is not None:
        secrets.append(config.connection_password.get_secret_value())
    for secret in secrets:
        if secret:
            message = message.replace(str(secret), "***")
    return message


KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}
"""TCP keepalive of every connection: a peer gone without a word (a node lost, a NAT entry
dropped) is noticed after about 60 s instead of the OS's two-hour idle time. Parameters the
``connection.url`` sets itself win."""


def connect_kwargs(config: PostgresSinkConfig, application_name: str) -> dict[str, object]:
    """psycopg/libpq connection parameters: autocommit, ``connect_timeout`` (whole seconds,
    at least 2) from ``connection.timeout.ms``, :data:`KEEPALIVES`, ``tcp_user_timeout``
    (ms: ``connection.timeout.ms``, at least 60 s), the application name, and the configured
    user and password.

    ``tcp_user_timeout`` bounds how long sent data may stay unacknowledged by the peer's
    kernel, so a write to a database that is gone fails instead of waiting for the kernel's
    retransmissions (about 15 min); its 60 s floor leaves room for a server that is only slow
    to read (a ``COPY`` behind a lock). Shared with the audit source (same field names)."""
    in_url = conninfo_to_dict(config.connection_url)
    kwargs: dict[str, object] = {
        "autocommit": True,
        "connect_timeout": max(2, math.ceil(config.connection_timeout_ms / 1000)),
        "application_name": application_name,
    }
    defaults = {**KEEPALIVES, "tcp_user_timeout": max(60_000, config.connection_timeout_ms)}
    kwargs.update({key: value for key, value in defaults.items() if key not in in_url})
    if config.connection_user:
        kwargs["user"] = config.connection_user
    if config.connection_password is not None:
        kwargs["password"] = config.connection_password.get_secret_value()
    return kwargs


def connect(config: PostgresSinkConfig) -> psycopg.Connection:
    """A new autocommit connection (transactions are explicit ``conn.transaction()`` blocks).

    Raises:
        ConnectError: the database cannot be reached or refuses the login; the message
            names host, port, database and user, never the password.
    """
    try:
        return psycopg.connect(config.connection_url, **connect_kwargs(config, APPLICATION_NAME))  # type: ignore[arg-type]
    except psycopg.Error as exc:
        detail = scrub(config, " ".join(str(exc).split()))
        raise ConnectError(f"cannot connect to PostgreSQL at {describe(config)}: {detail}") from None
