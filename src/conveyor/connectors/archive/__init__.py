"""Archive sink connector (entry point ``archive-sink``): Kafka records to files, like
Confluent's S3 sink, on local disk or S3 (any fsspec filesystem), as JSON Lines, Avro or
Parquet records with their Kafka coordinates, or as Confluent's value-only files.

Modules: :mod:`.config` (configuration keys), :mod:`.sink` (connector and task, delivery
guarantees, KIP-275 closing commits), :mod:`.formats` (file contents, Avro schema
derivation, memory use), :mod:`.parquet_format` (Parquet), :mod:`.value_formats`
(Confluent's ``format.class`` files), :mod:`.partitioner` (time-based folders),
:mod:`.storage` (atomic writes, multipart uploads, error translation).
Uses :mod:`conveyor.api`, Conveyor's converters, fsspec (s3fs for ``s3://``), fastavro,
pyarrow (Parquet only) and pydantic.
"""

from conveyor.connectors.archive.config import ArchiveSinkConfig
from conveyor.connectors.archive.sink import ArchiveSinkConnector, ArchiveSinkTask

__all__ = ["ArchiveSinkConfig", "ArchiveSinkConnector", "ArchiveSinkTask"]
