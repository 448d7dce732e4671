"""pytest fixtures giving tests real Kafka, PostgreSQL and Spark.

Enable in a ``conftest.py``::

    pytest_plugins = ["conveyor.testing.pytest_plugin"]

Session-scoped (started lazily by the first test that needs them, stopped at session end):

* ``kafka_broker`` -> :class:`~conveyor.testing.kafka.KafkaEndpoint`: a started
  :class:`~conveyor.testing.kafka.KafkaBroker`, or :class:`~conveyor.testing.kafka.ExternalKafka`
  when ``$CONVEYOR_KAFKA_BOOTSTRAP`` is set.
* ``kafka_bootstrap`` -> ``str``: its ``bootstrap.servers``.
* ``connect_worker`` -> :class:`~conveyor.testing.connect.ConnectWorker`: a real Apache Kafka
  Connect distributed worker (same version as the broker) on the session's Kafka, with its own
  group and internal topics; ``worker.rest(...)``, ``worker.put_connector(...)``.
* ``postgres_server`` -> :class:`~conveyor.testing.postgres.PostgresEndpoint`: a started
  :class:`~conveyor.testing.postgres.PostgresServer`, or
  :class:`~conveyor.testing.postgres.ExternalPostgres` when ``$CONVEYOR_POSTGRES_URL`` is set.
* ``postgres_url`` -> ``str``: libpq URL of the session's database (``.../conveyor`` on the
  harness server, ``$CONVEYOR_POSTGRES_URL`` itself when reused).
* ``spark`` -> ``pyspark.sql.SparkSession`` on ``local[8]``.

Function-scoped:

* ``topic_factory`` -> ``(partitions: int = 1, *, config: dict | None = None,
  name: str | None = None) -> str``: creates a topic with a unique name (derived from the test
  name unless ``name`` is given) and returns the name; the topics are deleted after the test.
* ``pg_database`` -> ``str``: URL of a fresh, empty database for this test, dropped afterwards.

When a component cannot start the fixture *fails* (pytest reports an error at setup with the
:class:`~conveyor.testing.errors.ComponentUnavailable` message); nothing is ever skipped. A session
fixture that failed once fails every later test that uses it without trying again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping

import pytest

from conveyor.testing.fixtures import running, start_or_fail

log = logging.getLogger("conveyor.testing")



def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs a real Kafka broker / PostgreSQL / Spark (started by the harness)"
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    for var in ("CONVEYOR_KAFKA_BOOTSTRAP", "CONVEYOR_POSTGRES_URL"):
        if os.environ.get(var):
            lines.append(f"conveyor.testing: reusing {var}={os.environ[var]}")
    return lines


def _slug(request: pytest.FixtureRequest, maxlen: int) -> str:
    name = request.node.name.lower()
    name = re.sub(r"^test_?", "", name)
    return re.sub(r"[^a-z0-9]+", "_", name).strip("_")[:maxlen] or "t"


# -- Kafka -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka_broker():
    """The session's Kafka (KafkaBroker, or ExternalKafka for $CONVEYOR_KAFKA_BOOTSTRAP)."""
    from conveyor.testing.kafka import start_or_reuse

    with running(start_or_reuse) as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker) -> str:
    """``bootstrap.servers`` of the session's Kafka, e.g. ``"127.0.0.1:40123"``."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def topic_factory(kafka_broker, request) -> Iterator[Callable[..., str]]:
    """Factory ``make(partitions=1, *, config=None, name=None) -> topic name``; topics are
    created (all partitions led) before it returns and deleted after the test."""
    created: list[str] = []

    def make(partitions: int = 1, *, config: Mapping[str, str] | None = None, name: str | None = None) -> str:
        topic = name or f"{_slug(request, 180)}-{uuid.uuid4().hex[:10]}"
        kafka_broker.create_topic(topic, partitions=partitions, config=config)
        created.append(topic)
        return topic

    yield make
    for topic in created:
        try:
            kafka_broker.delete_topic(topic, timeout=10)
        except Exception as e:  # noqa: BLE001 - cleanup only
            log.warning("could not delete topic %s: %s", topic, e)


@pytest.fixture(scope="session")
def connect_worker(kafka_bootstrap):
    """A started Apache Kafka Connect distributed worker (:class:`~conveyor.testing.connect.ConnectWorker`)
    on the session's Kafka, stopped at the end of the session. Tests share it: use unique
    connector names and delete the connectors they create."""
    from conveyor.testing.connect import ConnectWorker

    with running(lambda: ConnectWorker(kafka_bootstrap).start()) as worker:
        yield worker


# -- PostgreSQL ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server():
    """The session's PostgreSQL (PostgresServer, or ExternalPostgres for $CONVEYOR_POSTGRES_URL)."""
    from conveyor.testing.postgres import start_or_reuse

    with running(start_or_reuse) as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def postgres_url(postgres_server) -> str:
    """libpq URL of the session's database."""
    return postgres_server.url


@pytest.fixture
def pg_database(postgres_server, request) -> Iterator[str]:
    """URL of a fresh database for this test (``t_<test name>_<random>``), dropped afterwards."""
    name = f"t_{_slug(request, 40)}_{uuid.uuid4().hex[:8]}"
    url = start_or_fail(lambda: postgres_server.create_database(name))
    yield url
    with contextlib.suppress(Exception):
        postgres_server.drop_database(name)


# -- Spark -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark():
    """A local SparkSession (``local[8]``) for the session, stopped at the end."""
    from conveyor.testing.spark import local_spark_session

    with running(local_spark_session) as session:
        yield session
