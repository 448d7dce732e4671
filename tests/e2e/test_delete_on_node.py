"""``kubectl delete connector`` on a real node drives the connector-deleted stop path
(KAFKA-14651): the postgres-audit-source's triggers, function and audit table are gone from
PostgreSQL's catalog, and the finalizer lets the Connector go."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from _connectors import apply, connector, diagnostics, eventually, get

from conveyor.testing.postgres import audit_catalog

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@pytest.fixture
def audit_database(node_postgres):
    name = f"audit_{uuid.uuid4().hex[:8]}"
    url = node_postgres.create_database(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, item text)")
    yield url
    node_postgres.drop_database(name)


def test_deleting_an_audit_source_removes_its_triggers_function_and_table(
        kube_node, node_kafka, audit_database, conveyor_release, node_namespace):
    ns = node_namespace
    body = connector("audit", ns, "postgres-audit-source", node_kafka.bootstrap_servers, {
        "connection.url": audit_database, "tables": "public.orders", "topic.prefix": "audit.",
        "value.converter": "json", "value.converter.schemas.enable": "false",
        "key.converter": "json", "key.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "500", "poll.interval.ms": "200",
    })
    apply(kube_node, body)
    try:
        provisioned = eventually(lambda: (o := audit_catalog(audit_database))["triggers"] and o, 300,
                                 "the audit trigger in PostgreSQL")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
    assert provisioned["functions"] and provisioned["tables"], provisioned

    kube_node.kubectl("delete", "connector", "audit", "-n", ns, "--wait=false")
    try:
        eventually(lambda: get(kube_node, "connector", "audit", ns) is None, 180,
                   "the Connector gone (finalizer removed)")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnostics(kube_node, ns)}") from None
    assert audit_catalog(audit_database) == {"triggers": [], "functions": [], "tables": []}
