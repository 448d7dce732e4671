"""Conveyor's connector API: what connector authors implement and call.

Importable without Spark, Kafka or Kubernetes (an import-linter contract checks it).
Mirrors Kafka Connect's ``connect-api`` with its proposed-but-unshipped contracts
implemented: ``SinkTaskContext.is_closing()`` (KIP-275) and
``stop(connector_deleted)`` (KIP-883 / KAFKA-14651).
"""

from conveyor.api.config import ConnectorConfig, parse_config
from conveyor.api.connector import (
    Connector,
    ConnectorContext,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SinkConnector,
    SourceConnector,
)
from conveyor.api.converters import Converter, HeaderConverter
from conveyor.api.errors import ConfigError, ConnectError, DataError, RetriableError
from conveyor.api.records import Header, RecordMetadata, SinkRecord, SourceRecord, TimestampType, TopicPartition
from conveyor.api.schema import Field, Schema, SchemaAndValue, SchemaType
from conveyor.api.sink import ErrantRecordReporter, SinkTask, SinkTaskContext
from conveyor.api.source import OffsetStorageReader, SourceTask, SourceTaskContext, TransactionContext
from conveyor.api.tasks import Task
from conveyor.api.transforms import Predicate, Transformation

__all__ = [
    "ConfigError",
    "ConnectError",
    "Connector",
    "ConnectorConfig",
    "ConnectorContext",
    "ConnectorTransactionBoundaries",
    "Converter",
    "DataError",
    "ErrantRecordReporter",
    "ExactlyOnceSupport",
    "Field",
    "Header",
    "HeaderConverter",
    "OffsetStorageReader",
    "Predicate",
    "RecordMetadata",
    "RetriableError",
    "Schema",
    "SchemaAndValue",
    "SchemaType",
    "SinkConnector",
    "SinkRecord",
    "SinkTask",
    "SinkTaskContext",
    "SourceConnector",
    "SourceRecord",
    "SourceTask",
    "SourceTaskContext",
    "Task",
    "TimestampType",
    "TopicPartition",
    "TransactionContext",
    "Transformation",
    "parse_config",
]
