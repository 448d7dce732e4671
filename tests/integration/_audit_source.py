"""Helpers of the PostgreSQL audit source's tests, which drive the connector directly (no Spark, no
Kafka) against a real PostgreSQL: a minimal runtime (:class:`DictContext`: committed source
offsets from a dict, transaction-boundary requests counted), catalog queries, roles, and a TCP
proxy that can cut connections."""


import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from conveyor.api import (
    OffsetStorageReader,
    SourceRecord,
    SourceTaskContext,
    TransactionContext,
)
from conveyor.connectors.postgres_audit.config import AuditNames, load_config
from conveyor.connectors.postgres_audit.source import PostgresAuditSourceConnector, PostgresAuditSourceTask

# -- a minimal runtime ----------------------------------------------------------------------------


class DictOffsetReader(OffsetStorageReader):
    """Committed offsets keyed by ``(schema, table)``."""

    def __init__(self, offsets: Mapping[tuple[str, str], Mapping[str, Any]]) -> None:
        self._offsets = dict(offsets)
        self.asked: list[Mapping[str, Any]] = []

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        self.asked.append(dict(partition))
        return self._offsets.get((partition["schema"], partition["table"]))


class CountingTransactions(TransactionContext):
    def __init__(self) -> None:
        self.commits = 0
        self.aborts = 0

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        self.commits += 1

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        self.aborts += 1


class DictContext(SourceTaskContext):
    def __init__(
        self,
        config: Mapping[str, Any],
        offsets: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
        transactions: TransactionContext | None = None,
    ) -> None:
        self._config = dict(config)
        self.reader = DictOffsetReader(offsets or {})
        self._transactions = transactions

    def configs(self) -> Mapping[str, Any]:
        return self._config

    def offset_storage_reader(self) -> OffsetStorageReader:
        return self.reader

    def transaction_context(self) -> TransactionContext | None:
        return self._transactions


# -- helpers --------------------------------------------------------------------------------------


def sql(url: str, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params or None)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def make_tables(url: str) -> None:
    sql(url, "CREATE TABLE orders (id bigint PRIMARY KEY, item text, qty integer)")
    sql(url, "CREATE TABLE customers (id integer PRIMARY KEY, name text)")
    sql(url, "CREATE SCHEMA sales")
    sql(url, "CREATE TABLE sales.lines (order_id bigint, line_no integer, sku text, PRIMARY KEY (order_id, line_no))")


def config(url: str, name: str = "orders-audit", tables: str = "public.orders", **extra: Any) -> dict[str, Any]:
    return {"name": name, "connection.url": url, "tables": tables, "poll.interval.ms": "200", **extra}


def start_connector(cfg: Mapping[str, Any]) -> PostgresAuditSourceConnector:
    connector = PostgresAuditSourceConnector()
    connector.validate(cfg)
    connector.start(cfg)
    return connector


def start_task(
    cfg: Mapping[str, Any],
    offsets: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    transactions: TransactionContext | None = None,
) -> PostgresAuditSourceTask:
    task = PostgresAuditSourceTask()
    task.initialize(DictContext(cfg, offsets, transactions))
    task.start(cfg)
    return task


def poll_until(task: PostgresAuditSourceTask, count: int, timeout: float = 30.0) -> list[SourceRecord]:
    records: list[SourceRecord] = []
    deadline = time.monotonic() + timeout
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records within {timeout}s"
        records.extend(task.poll())
    return records


def triggers(url: str) -> set[tuple[str, str, str]]:
    """``(trigger, schema.table, function)`` of every user trigger (clones on partitions excluded)."""
    rows = sql(
        url,
        """
        SELECT t.tgname, n.nspname || '.' || c.relname, t.tgfoid::regprocedure::text
          FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE NOT t.tgisinternal AND t.tgparentid = 0
        """,
    )
    return {(a, b, c) for a, b, c in rows}


def relations(url: str, schema: str) -> set[str]:
    return {
        r[0]
        for r in sql(
            url,
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
            (schema,),
        )
    }


def functions(url: str, schema: str) -> set[str]:
    return {
        r[0]
        for r in sql(
            url,
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s",
            (schema,),
        )
    }


def schema_exists(url: str, schema: str) -> bool:
    return bool(sql(url, "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)))


def names_of(cfg: Mapping[str, Any]) -> AuditNames:
    return AuditNames.of(load_config(cfg))


@contextlib.contextmanager
def role(url: str, *privileges: str) -> Iterator[str]:
    """A LOGIN role (not superuser) with ``privileges`` (GRANT statements with ``{role}``), dropped afterwards."""
    name = f"r_{uuid.uuid4().hex[:10]}"
    sql(url, f'CREATE ROLE "{name}" LOGIN')
    try:
        for statement in privileges:
            sql(url, statement.format(role=f'"{name}"'))
        yield name
    finally:
        sql(url, f'DROP OWNED BY "{name}" CASCADE')
        sql(url, f'DROP ROLE "{name}"')


def with_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


class TcpProxy:
    """Forwards 127.0.0.1:<port> to PostgreSQL; ``close()`` makes the database unreachable."""

    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{self.port}"))
        self.sockets: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def reopen(self) -> None:
        """Listen again on the same port (the database is back)."""
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.closed:
                client.close()
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (Linux)
        self.listener.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


# -- provisioning ---------------------------------------------------------------------------------
