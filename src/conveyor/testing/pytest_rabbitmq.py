"""pytest fixtures giving tests a real RabbitMQ broker.

Enable in a ``conftest.py`` (next to ``conveyor.testing.pytest_plugin``)::

    pytest_plugins = ["conveyor.testing.pytest_plugin", "conveyor.testing.pytest_rabbitmq"]

Session-scoped (started lazily by the first test that needs them, stopped at session end):

* ``rabbitmq_server`` -> :class:`~conveyor.testing.rabbitmq.RabbitMQEndpoint`: a started
  :class:`~conveyor.testing.rabbitmq.RabbitMQServer` (a private node from Debian's
  ``rabbitmq-server`` package, about 4 s to start), or
  :class:`~conveyor.testing.rabbitmq.ExternalRabbitMQ` when ``$CONVEYOR_RABBITMQ_URL`` is set.
* ``rabbitmq_url`` -> ``str``: its ``amqp://`` URL,
  ``amqp://guest:guest@127.0.0.1:<port>/%2F`` for the harness's node (``guest`` may only log
  in over loopback, which is what the node listens on).
* ``rabbitmq_node`` -> :class:`~conveyor.testing.rabbitmq.RabbitMQServer`: a node the harness
  controls (``ctl``, ``pause``/``resume``, ``restart``), for tests that disturb the broker: the
  session's ``rabbitmq_server`` when the harness started it, else (``$CONVEYOR_RABBITMQ_URL``
  set) a private node started for these tests.

Function-scoped:

* ``rabbitmq_queue_name`` -> ``(suffix: str = "") -> str``: a unique queue (or topic) name
  derived from the test name; every queue so named is deleted after the test.

When the broker cannot start the fixture *fails* (an error at setup with the
:class:`~conveyor.testing.errors.ComponentUnavailable` message, e.g. ``apt-get install
rabbitmq-server`` when the package is missing); nothing is ever skipped.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator

import pytest

from conveyor.testing.fixtures import running

log = logging.getLogger("conveyor.testing")



def pytest_report_header(config: pytest.Config) -> list[str]:
    from conveyor.testing.rabbitmq_client import ENV_URL, redact_url

    if os.environ.get(ENV_URL):
        return [f"conveyor.testing: reusing {ENV_URL}={redact_url(os.environ[ENV_URL])}"]
    return []


@pytest.fixture(scope="session")
def rabbitmq_server():
    """The session's RabbitMQ (RabbitMQServer, or ExternalRabbitMQ for $CONVEYOR_RABBITMQ_URL)."""
    from conveyor.testing.rabbitmq import start_or_reuse

    with running(start_or_reuse) as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def rabbitmq_url(rabbitmq_server) -> str:
    """``amqp://`` URL of the session's broker."""
    return rabbitmq_server.url


@pytest.fixture(scope="session")
def rabbitmq_node(rabbitmq_server):
    """A harness-started RabbitMQServer (the session's own, or a private one when the session
    reuses an external broker)."""
    from conveyor.testing.rabbitmq import RabbitMQServer

    if isinstance(rabbitmq_server, RabbitMQServer):
        yield rabbitmq_server
        return
    with running(lambda: RabbitMQServer().start()) as node:
        yield node


@pytest.fixture
def rabbitmq_queue_name(rabbitmq_server, request) -> Iterator[Callable[[str], str]]:
    """Factory ``name(suffix="") -> str`` of unique names (``<test>-<random>[-suffix]``);
    queues with those names are deleted after the test."""
    made: list[str] = []
    slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^test_?", "", request.node.name.lower())).strip("-")[:80] or "t"

    def make(suffix: str = "") -> str:
        name = f"{slug}-{uuid.uuid4().hex[:8]}" + (f"-{suffix}" if suffix else "")
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            rabbitmq_server.delete_queue(name)
        except Exception as e:  # noqa: BLE001 - cleanup only
            log.warning("could not delete queue %s: %s", name, e)
