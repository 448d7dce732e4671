"""Archive sink connector (entry point ``archive-sink``): Kafka records to files, like
Confluent's S3 sink, on local disk or S3 (any fsspec filesystem), as JSON Lines or Avro.

Modules: :mod:`.config` (configuration keys), :mod:`.sink` (connector and task, delivery
guarantees, KIP-275 closing commits), :mod:`.formats` (file contents, Avro schema
derivation, memory use), :mod:`.storage` (atomic writes, error translation).
Uses only :mod:`conveyor.api`, fsspec (s3fs for ``s3://``), fastavro and pydantic.
"""

from conveyor.connectors.archive.config import ArchiveSinkConfig
from conveyor.connectors.archive.sink import ArchiveSinkConnector, ArchiveSinkTask

__all__ = ["ArchiveSinkConfig", "ArchiveSinkConnector", "ArchiveSinkTask"]
