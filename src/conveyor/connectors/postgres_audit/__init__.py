"""PostgreSQL audit source connector (entry point ``postgres-audit-source``).

Captures row changes of configured tables with triggers into one audit table per connector
and emits them as Debezium-like records; removes its triggers, function and audit table when
the connector is deleted (KIP-883 / KAFKA-14651).

Modules: :mod:`.config` (configuration keys, object names), :mod:`.provision` (creating and
dropping the audit objects, each in one transaction), :mod:`.reader` (reading the audit table
in order without losing late commits), :mod:`.source` (connector and task; record and offset
shapes), :mod:`.db` (connections). Uses only :mod:`conveyor.api`, psycopg 3, pydantic and the
PostgreSQL sink's connection helpers.
"""

from conveyor.connectors.postgres_audit.config import PostgresAuditSourceConfig
from conveyor.connectors.postgres_audit.source import PostgresAuditSourceConnector, PostgresAuditSourceTask

__all__ = ["PostgresAuditSourceConfig", "PostgresAuditSourceConnector", "PostgresAuditSourceTask"]
