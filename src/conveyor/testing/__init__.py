"""Reusable test harness: real Kafka, PostgreSQL and Spark for connector tests.

Public API (submodules import their heavy dependencies lazily, so ``import conveyor.testing``
is cheap and needs neither Java nor pyspark):

* :class:`ComponentUnavailable` - the one error raised when a component cannot start or be
  reached; says which component and why.
* :mod:`conveyor.testing.kafka` - :class:`KafkaBroker` (a real single-node KRaft broker from the
  Maven Central jars), :class:`ExternalKafka`, :func:`start_or_reuse_kafka`
  (``$CONVEYOR_KAFKA_BOOTSTRAP``), :func:`kafka_libs`.
* :mod:`conveyor.testing.connect` - :class:`ConnectWorker` (a real Apache Kafka Connect
  distributed worker from the Maven Central jars, beside Conveyor), :func:`connect_libs`.
* :mod:`conveyor.testing.postgres` - :class:`PostgresServer` (a real PostgreSQL from Debian's
  packages), :class:`ExternalPostgres`, :func:`start_or_reuse_postgres`
  (``$CONVEYOR_POSTGRES_URL``).
* :mod:`conveyor.testing.spark` - :func:`local_spark_session`.
* :mod:`conveyor.testing.pytest_plugin` - pytest fixtures ``kafka_broker``, ``kafka_bootstrap``,
  ``topic_factory``, ``connect_worker``, ``postgres_server``, ``postgres_url``, ``pg_database``, ``spark``; enable
  with ``pytest_plugins = ["conveyor.testing.pytest_plugin"]`` in a ``conftest.py``.
* ``python -m conveyor.testing up [--kafka] [--postgres] [--env-file PATH]`` / ``resolve`` - run the components in
  the foreground for development; pre-resolve the Kafka jars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from conveyor.testing.errors import ComponentUnavailable

__all__ = [
    "ComponentUnavailable",
    "ExternalKafka",
    "ExternalPostgres",
    "KafkaBroker",
    "KafkaEndpoint",
    "PostgresEndpoint",
    "PostgresServer",
    "kafka_libs",
    "local_spark_session",
    "start_or_reuse_kafka",
    "start_or_reuse_postgres",
]

_LAZY = {
    "KafkaBroker": ("conveyor.testing.kafka", "KafkaBroker"),
    "ExternalKafka": ("conveyor.testing.kafka", "ExternalKafka"),
    "KafkaEndpoint": ("conveyor.testing.kafka", "KafkaEndpoint"),
    "kafka_libs": ("conveyor.testing.kafka", "kafka_libs"),
    "start_or_reuse_kafka": ("conveyor.testing.kafka", "start_or_reuse"),
    "PostgresServer": ("conveyor.testing.postgres", "PostgresServer"),
    "ExternalPostgres": ("conveyor.testing.postgres", "ExternalPostgres"),
    "PostgresEndpoint": ("conveyor.testing.postgres", "PostgresEndpoint"),
    "start_or_reuse_postgres": ("conveyor.testing.postgres", "start_or_reuse"),
    "local_spark_session": ("conveyor.testing.spark", "local_spark_session"),
}

if TYPE_CHECKING:  # pragma: no cover
    from conveyor.testing.kafka import ExternalKafka, KafkaBroker, KafkaEndpoint, kafka_libs
    from conveyor.testing.kafka import start_or_reuse as start_or_reuse_kafka
    from conveyor.testing.postgres import ExternalPostgres, PostgresEndpoint, PostgresServer
    from conveyor.testing.postgres import start_or_reuse as start_or_reuse_postgres
    from conveyor.testing.spark import local_spark_session


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'conveyor.testing' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
