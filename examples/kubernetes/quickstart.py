"""The Kubernetes quickstart's steps, on a cluster where the chart is installed (run by
``examples/kubernetes/quickstart.sh``, which brings that cluster up first; the end-to-end tier
runs them on its own node).

Reads ``KUBECONFIG``, ``CONVEYOR_KUBECTL`` (the kubectl binary), ``CONVEYOR_KAFKA_BOOTSTRAP`` and
``CONVEYOR_POSTGRES_URL``: a broker and a database that the pods reach at these addresses. In
namespace ``quickstart`` (Pod Security "restricted") it:

1. stores the database URL in the Secret ``orders-db`` (the Connectors read it from there);
2. produces orders to the topic ``orders`` and ``kubectl apply``s
   ``examples/kubernetes/orders-to-postgres.yaml`` (postgres-sink, upsert by id), until they are
   rows of the table ``orders``;
3. ``kubectl apply``s ``examples/kubernetes/orders-changes.yaml`` (postgres-audit-source on that
   table): every change of a row becomes a record on ``changes.public.orders``;
4. produces more orders while an executor pod of the sink is evicted through the Eviction API,
   shows the ``EvictionTranslated`` Event (the closing commit before the pod went), and checks
   that every order is a row (nothing lost) and that each was written once (the change topic
   holds one insert per new order and no update: nothing read twice);
5. ``kubectl delete``s the audit source and shows its trigger, function and audit table gone.

It prints each step and its time.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from rich.console import Console

from conveyor.testing.postgres import audit_catalog
from conveyor.testing.runs import consume_all, produce

HERE = Path(__file__).resolve().parent
NAMESPACE = "quickstart"
SINK, SOURCE = "orders-to-postgres", "orders-changes"
CHANGES_TOPIC = "changes.public.orders"
PARTITIONS = 4
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}
console = Console(soft_wrap=True)
T = TypeVar("T")


class Kubectl:
    """``kubectl`` with ``kubeconfig`` (default: the environment's ``KUBECONFIG``)."""

    def __init__(self, binary: str, kubeconfig: str | None = None) -> None:
        self.binary = binary
        self.env = {**os.environ, **({"KUBECONFIG": kubeconfig} if kubeconfig else {})}

    def __call__(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        ran = subprocess.run([self.binary, *args], check=False, input=input, capture_output=True, text=True,
                             timeout=120, env=self.env)
        if check and ran.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {ran.stderr.strip()}")
        return ran

    def json(self, *args: str) -> dict[str, Any]:
        out = self(*args, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else {}


@contextmanager
def step(title: str) -> Iterator[None]:
    began = time.monotonic()
    console.print(f"[bold]» {title}[/]")
    yield
    console.print(f"  [green]done[/] in {time.monotonic() - began:.1f}s")


def wait_for(probe: Callable[[], T], timeout_s: float, what: str, progress: Callable[[], str] | None = None) -> T:
    """``probe()``'s first truthy result, checked every second for up to ``timeout_s``. A probe
    (or ``progress``) that cannot reach PostgreSQL for a moment (``psycopg.OperationalError``: a
    connect timeout on a busy machine) is tried again at the next second.

    Raises:
        TimeoutError: naming ``what``, and the probe's last error if it had one.
    """
    deadline = time.monotonic() + timeout_s
    error: psycopg.OperationalError | None = None
    with console.status(what) as status:
        while True:
            try:
                found = probe()
                if found:
                    return found
                if progress is not None:
                    status.update(f"{what} ({progress()})")
                error = None
            except psycopg.OperationalError as exc:
                error = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout_s:.0f}s" + (f" (last error: {error})" if error else ""))
            time.sleep(1.0)


def rows(url: str) -> tuple[int, int]:
    """(rows, distinct ids) of the table ``orders``."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute("SELECT count(*), count(DISTINCT id) FROM orders").fetchone()
    except psycopg.errors.UndefinedTable:
        return (0, 0)


def orders(ids: range) -> list[tuple[str, str]]:
    return [(str(i), json.dumps({"id": i, "customer": f"customer-{i % 17}", "amount": round(i * 1.25, 2)}))
            for i in ids]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """``topic`` with ``partitions`` partitions, unless it exists."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=30).topics:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def produce_steadily(bootstrap: str, ids: range, batch: int = 300, interval_s: float = 0.2) -> None:
    """``orders(ids)``, ``batch`` every ``interval_s`` seconds (6,000 in about 4 s)."""
    for start in range(ids.start, ids.stop, batch):
        produce(bootstrap, "orders", orders(range(start, min(start + batch, ids.stop))))
        time.sleep(interval_s)


def manifest(name: str, bootstrap: str, namespace: str) -> str:
    text = (HERE / f"{name}.yaml").read_text().replace("${KAFKA_BOOTSTRAP}", bootstrap)
    return text.replace(f"namespace: {NAMESPACE}\n", f"namespace: {namespace}\n")


def tasks_running(kubectl: Kubectl, name: str, namespace: str, count: int) -> bool:
    tasks = (kubectl.json("get", "connector", name, "-n", namespace).get("status") or {}).get("tasks") or []
    return len(tasks) == count and all(t.get("state") == "RUNNING" for t in tasks)


def run(kubectl: Kubectl, bootstrap: str, pg_url: str, *, first: int = 2000, more: int = 6000,
        namespace: str = NAMESPACE, timeout_s: float = 300.0) -> dict[str, Any]:
    """The quickstart's steps (see the module docstring). Returns what they showed:
    ``{"rows", "distinct", "inserts", "updates", "eviction", "catalog_before", "catalog_after"}``.

    Raises:
        TimeoutError: a step did not finish within ``timeout_s``.
        RuntimeError: a kubectl call failed.
    """
    shown: dict[str, Any] = {}
    with step(f"namespace {namespace} (Pod Security restricted) and the Secret orders-db with the database URL"):
        kubectl("create", "namespace", namespace, check=False)
        kubectl("label", "--overwrite", "namespace", namespace, *(f"{k}={v}" for k, v in RESTRICTED.items()))
        secret = kubectl("create", "secret", "generic", "orders-db", "-n", namespace, f"--from-literal=url={pg_url}",
                         "--dry-run=client", "-o", "json").stdout
        kubectl("apply", "-f", "-", input=secret)

    with step(f"{first:,} orders to the topic orders ({PARTITIONS} partitions: one task per executor has some), "
              f"then kubectl apply -f examples/kubernetes/{SINK}.yaml"):
        create_topic(bootstrap, "orders", PARTITIONS)
        produce(bootstrap, "orders", orders(range(first)))
        print(kubectl("apply", "-f", "-", input=manifest(SINK, bootstrap, namespace)).stdout.strip(), flush=True)
        wait_for(lambda: tasks_running(kubectl, SINK, namespace, 2), timeout_s,
                 "waiting for the driver and executor pods to run two tasks")
        wait_for(lambda: rows(pg_url)[0] >= first, timeout_s, "waiting for the rows",
                 lambda: f"{rows(pg_url)[0]:,} of {first:,}")
        print(kubectl("get", "connectors,pods", "-n", namespace, "-o", "wide").stdout.rstrip(), flush=True)

    with step(f"kubectl apply -f examples/kubernetes/{SOURCE}.yaml: changes of table orders to {CHANGES_TOPIC}"):
        print(kubectl("apply", "-f", "-", input=manifest(SOURCE, bootstrap, namespace)).stdout.strip(), flush=True)
        wait_for(lambda: tasks_running(kubectl, SOURCE, namespace, 1), timeout_s, "waiting for its task")
        shown["catalog_before"] = wait_for(lambda: (c := audit_catalog(pg_url))["triggers"] and c, timeout_s,
                                           "waiting for its trigger on orders")
        console.print(f"  in PostgreSQL: {shown['catalog_before']}")

    total = first + more
    with step(f"{more:,} more orders while an executor pod of {SINK} is evicted (Eviction API)"):
        producer = threading.Thread(target=produce_steadily, args=(bootstrap, range(first, total)), daemon=True)
        producer.start()
        wait_for(lambda: rows(pg_url)[0] > first + 600, timeout_s, "waiting for the new orders to flow")
        pod = f"{SINK}-exec-1"
        kubectl("create", "--raw", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", "-f", "-",
                input=json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                                  "metadata": {"name": pod, "namespace": namespace}}))
        console.print(f"  evicted pod {pod}")
        event = wait_for(lambda: next(iter(kubectl.json("get", "events", "-n", namespace, "--field-selector",
                                                        "reason=EvictionTranslated").get("items") or []), None),
                         timeout_s, "waiting for the EvictionTranslated Event")
        shown["eviction"] = event.get("message", "")
        console.print(f"  Event EvictionTranslated: {shown['eviction']}")
        producer.join(timeout_s)
        wait_for(lambda: rows(pg_url)[0] >= total, timeout_s, "waiting for every order",
                 lambda: f"{rows(pg_url)[0]:,} of {total:,}")
        shown["rows"], shown["distinct"] = rows(pg_url)
        changes = consume_all(bootstrap, CHANGES_TOPIC, expected=more, timeout_s=timeout_s)
        ops = [json.loads(m.value())["op"] for m in changes]
        shown["inserts"], shown["updates"] = ops.count("c"), ops.count("u")
        console.print(f"  table orders: {shown['rows']:,} rows, {shown['distinct']:,} distinct ids (nothing lost); "
                      f"{CHANGES_TOPIC}: {shown['inserts']:,} inserts, {shown['updates']:,} updates "
                      "(no order written twice)")

    with step(f"kubectl delete connector {SOURCE}: its trigger, function and audit table removed"):
        kubectl("delete", "connector", SOURCE, "-n", namespace, "--timeout=180s")
        shown["catalog_after"] = audit_catalog(pg_url)
        console.print(f"  in PostgreSQL: {shown['catalog_after']}")
    return shown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=2000, help="orders before the eviction")
    parser.add_argument("--more", type=int, default=6000, help="orders produced while a pod is evicted")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for each step")
    args = parser.parse_args()
    logging.getLogger("conveyor.testing.producer").setLevel(logging.ERROR)  # retried warnings of a new broker
    kubectl = Kubectl(os.environ["CONVEYOR_KUBECTL"])
    shown = run(kubectl, os.environ["CONVEYOR_KAFKA_BOOTSTRAP"], os.environ["CONVEYOR_POSTGRES_URL"],
                first=args.orders, more=args.more, timeout_s=args.timeout)
    total = args.orders + args.more
    ok = (shown["rows"] == shown["distinct"] == total and shown["inserts"] == args.more and shown["updates"] == 0
          and not any(shown["catalog_after"].values()))
    console.print("[green]Kubernetes quickstart done[/]" if ok else "[red]Kubernetes quickstart: see above[/]")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
