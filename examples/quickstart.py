"""Quickstart: records from a real Kafka topic into a real PostgreSQL table through a
connector running on Spark.

Starts a local single-node Kafka broker and PostgreSQL (or reuses ``CONVEYOR_KAFKA_BOOTSTRAP``
/ ``CONVEYOR_POSTGRES_URL``), produces ``--orders`` JSON orders and one malformed record to
the topic ``orders``, runs ``conveyor run examples/orders-to-postgres.yaml`` until every
order is in the table ``orders``, prints some rows, the connector's status and the dead-letter
queue, then stops the connector with SIGTERM (closing commits) and prints what it committed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import psycopg
from rich.console import Console
from rich.table import Table

from conveyor.testing.kafka import start_or_reuse as start_or_reuse_kafka
from conveyor.testing.postgres import start_or_reuse as start_or_reuse_postgres
from conveyor.testing.runs import consume_all, control_request, produce

HERE = Path(__file__).resolve().parent
console = Console()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def count_rows(url: str) -> int:
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute("SELECT count(*) FROM orders").fetchone()[0]
    except psycopg.errors.UndefinedTable:
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for every order")
    args = parser.parse_args()

    with ExitStack() as stack:
        with console.status("starting a local Kafka broker and PostgreSQL ..."):
            kafka = stack.enter_context(start_or_reuse_kafka())
            pg = stack.enter_context(start_or_reuse_postgres())
            pg_url = pg.create_database(f"quickstart_{int(time.time())}")
        console.print(f"Kafka at [bold]{kafka.bootstrap_servers}[/], PostgreSQL at [bold]{pg_url}[/]")

        kafka.create_topic("orders", partitions=3) if "orders" not in kafka.admin().list_topics(timeout=10).topics \
            else None
        orders = [
            (str(i).encode(), json.dumps({"id": i, "customer": f"customer-{i % 17}", "amount": round(i * 1.25, 2)})
             .encode())
            for i in range(args.orders)
        ]
        orders.append((b"broken", b"{this is not json"))
        produce(kafka.bootstrap_servers, "orders", orders)
        console.print(f"produced {args.orders:,} orders and 1 malformed record to topic [bold]orders[/]")

        port = free_port()
        env = {**os.environ, "CONVEYOR_KAFKA_BOOTSTRAP": kafka.bootstrap_servers, "CONVEYOR_POSTGRES_URL": pg_url}
        command = [sys.executable, "-m", "conveyor.cli", "run", str(HERE / "orders-to-postgres.yaml"),
                   "--control-port", str(port)]
        console.print(f"running: conveyor run examples/orders-to-postgres.yaml --control-port {port}")
        driver = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + args.timeout
            while count_rows(pg_url) < args.orders:
                if driver.poll() is not None:
                    console.print("[red]conveyor run exited early[/]")
                    return 1
                if time.monotonic() > deadline:
                    console.print(f"[red]only {count_rows(pg_url)} of {args.orders} orders arrived[/]")
                    return 1
                time.sleep(0.5)
            _, status = control_request(f"http://127.0.0.1:{port}", "/status", timeout_s=10)
        finally:
            driver.send_signal(signal.SIGTERM)
            stop_output, _ = driver.communicate(timeout=120)

        with psycopg.connect(pg_url) as conn:
            rows = conn.execute("SELECT id, customer, amount, kafka_offset FROM orders ORDER BY id LIMIT 5").fetchall()
            total = conn.execute("SELECT count(*) FROM orders").fetchone()[0]
        table = Table(title=f"PostgreSQL table orders: {total:,} rows (first 5)")
        for column in ("id", "customer", "amount", "kafka_offset"):
            table.add_column(column)
        for row in rows:
            table.add_row(*map(str, row))
        console.print(table)
        dead = consume_all(kafka.bootstrap_servers, "orders-dlq", expected=1, timeout_s=20)
        for msg in dead:
            headers = {k: v.decode() for k, v in msg.headers() or []}
            console.print(
                f"dead-letter queue orders-dlq: {msg.value()!r} from {headers.get('__connect.errors.topic')}"
                f"-{headers.get('__connect.errors.partition')}@{headers.get('__connect.errors.offset')}: "
                f"{headers.get('__connect.errors.exception.message')}"
            )
        console.print("connector status while running (GET /status):")
        console.print_json(data={k: status[k] for k in ("name", "connector", "type")} | {
            "tasks": [{k: t.get(k) for k in ("id", "state", "assignment", "records_put", "lag")}
                      for t in status["tasks"]]})
        console.print("after SIGTERM, each task's closing commit:")
        console.print_json(stop_output.strip() or "{}")
        ok = total == args.orders and driver.returncode == 0
        console.print("[green]quickstart done[/]" if ok else f"[red]quickstart failed (exit {driver.returncode})[/]")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
