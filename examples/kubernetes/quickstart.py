"""The Kubernetes quickstart's steps, on a cluster where the chart is installed (run by
``examples/kubernetes/quickstart.sh``, which brings that cluster up first).

Reads ``KUBECONFIG``, ``CONVEYOR_KUBECTL`` (the kubectl binary), ``CONVEYOR_KAFKA_BOOTSTRAP`` and
``CONVEYOR_POSTGRES_URL`` (a broker and a database that the pods reach at these addresses).
In namespace ``quickstart`` (Pod Security "restricted"), it stores the database URL in the
Secret ``orders-db``, produces ``--orders`` JSON orders to the topic ``orders``,
``kubectl apply``s ``examples/kubernetes/orders-to-postgres.yaml`` and waits until every
order is a row of the table ``orders``. It prints each step and its time, and what
``kubectl get connectors`` shows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from rich.console import Console

from conveyor.testing.runs import produce

HERE = Path(__file__).resolve().parent
NAMESPACE = "quickstart"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}
console = Console()
T = TypeVar("T")


class Kubectl:
    """``kubectl`` with the environment's ``KUBECONFIG``."""

    def __init__(self, binary: str) -> None:
        self.binary = binary

    def __call__(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        ran = subprocess.run([self.binary, *args], input=input, capture_output=True, text=True, timeout=120)
        if check and ran.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {ran.stderr.strip()}")
        return ran


@contextmanager
def step(title: str):
    began = time.monotonic()
    console.print(f"[bold]» {title}[/]")
    yield
    console.print(f"  [green]done[/] in {time.monotonic() - began:.1f}s")


def wait_for(probe: Callable[[], T | None], timeout_s: float, what: str, progress: Callable[[], str] | None = None
             ) -> T:
    deadline = time.monotonic() + timeout_s
    with console.status(what) as status:
        while True:
            found = probe()
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout_s:.0f}s")
            if progress is not None:
                status.update(f"{what} ({progress()})")
            time.sleep(1.0)


def rows(url: str) -> int:
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM orders").fetchone()[0]
    except psycopg.errors.UndefinedTable:
        return 0


def connector_status(kubectl: Kubectl, name: str) -> dict[str, Any]:
    out = kubectl("get", "connector", name, "-n", NAMESPACE, "-o", "json", check=False)
    return (json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for each step")
    args = parser.parse_args()
    kubectl = Kubectl(os.environ["CONVEYOR_KUBECTL"])
    bootstrap, pg_url = os.environ["CONVEYOR_KAFKA_BOOTSTRAP"], os.environ["CONVEYOR_POSTGRES_URL"]

    with step(f"namespace {NAMESPACE} (Pod Security restricted) and the Secret orders-db with the database URL"):
        kubectl("create", "namespace", NAMESPACE, check=False)
        kubectl("label", "--overwrite", "namespace", NAMESPACE, *(f"{k}={v}" for k, v in RESTRICTED.items()))
        secret = kubectl("create", "secret", "generic", "orders-db", "-n", NAMESPACE, f"--from-literal=url={pg_url}",
                         "--dry-run=client", "-o", "json").stdout
        kubectl("apply", "-f", "-", input=secret)

    with step(f"{args.orders:,} orders produced to the topic orders ({bootstrap})"):
        produce(bootstrap, "orders", [(str(i), json.dumps({"id": i, "customer": f"customer-{i % 17}",
                                                           "amount": round(i * 1.25, 2)}))
                                      for i in range(args.orders)])

    with step("kubectl apply -f examples/kubernetes/orders-to-postgres.yaml"):
        manifest = (HERE / "orders-to-postgres.yaml").read_text().replace("${KAFKA_BOOTSTRAP}", bootstrap)
        print(kubectl("apply", "-f", "-", input=manifest).stdout.strip())

    with step("the connector's driver and executor pods running its tasks"):
        wait_for(lambda: (tasks := connector_status(kubectl, "orders-to-postgres").get("tasks") or [])
                 and len(tasks) == 2 and all(t.get("state") == "RUNNING" for t in tasks),
                 args.timeout, "waiting for two RUNNING tasks",
                 lambda: kubectl("get", "pods", "-n", NAMESPACE, "--no-headers", check=False).stdout.count("Running")
                 .__str__() + " pods Running")
        print(kubectl("get", "connectors,pods", "-n", NAMESPACE, "-o", "wide").stdout.rstrip(), flush=True)

    with step(f"every order in the PostgreSQL table orders ({pg_url.split('@')[-1]})"):
        wait_for(lambda: rows(pg_url) >= args.orders, args.timeout, "waiting for the rows",
                 lambda: f"{rows(pg_url):,} of {args.orders:,}")
        console.print(f"  {rows(pg_url):,} rows")
    console.print("[green]Kubernetes quickstart done[/]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
