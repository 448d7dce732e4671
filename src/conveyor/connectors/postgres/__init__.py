"""PostgreSQL sink connector (entry point ``postgres-sink``).

Modules: :mod:`.config` (configuration keys), :mod:`.sink` (connector and task),
:mod:`.writer` (COPY / upsert / delete SQL), :mod:`.offsets` (exactly-once offsets table),
:mod:`.dialect` (Connect → PostgreSQL types), :mod:`.db` (connections).
Uses only :mod:`conveyor.api`, psycopg 3 and pydantic.
"""

from conveyor.connectors.postgres.config import PostgresSinkConfig
from conveyor.connectors.postgres.sink import PostgresSinkConnector, PostgresSinkTask

__all__ = ["PostgresSinkConfig", "PostgresSinkConnector", "PostgresSinkTask"]
