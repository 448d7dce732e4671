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


def connect(config: PostgresSinkConfig) -> psycopg.Connection:
    """A new autocommit connection (transactions are explicit ``conn.transaction()`` blocks).

    Raises:
        ConnectError: the database cannot be reached or refuses the login; the message
            names host, port, database and user, never the password.
    """
    kwargs: dict[str, object] = {
        "autocommit": True,
        "connect_timeout": max(2, math.ceil(config.connection_timeout_ms / 1000)),
        "application_name": APPLICATION_NAME,
    }
    if config.connection_user:
        kwargs["user"] = config.connection_user
    if config.connection_password is not None:
        kwargs["password"] = config.connection_password.get_secret_value()
    try:
        return psycopg.connect(config.connection_url, **kwargs)  # type: ignore[arg-type]
    except psycopg.Error as exc:
        detail = scrub(config, " ".join(str(exc).split()))
        raise ConnectError(f"cannot connect to PostgreSQL at {describe(config)}: {detail}") from None
