"""pytest fixture giving tests a real Schema Registry (Apicurio Registry, a separate JVM on
127.0.0.1, through its Confluent-compatible API).

Enable in a ``conftest.py``::

    pytest_plugins = ["conveyor.testing.pytest_schema_registry"]

* ``schema_registry`` (session) -> :class:`~conveyor.testing.schema_registry.SchemaRegistry`:
  Apicurio Registry started on free ``127.0.0.1`` ports for the session (about 8-15 s; the
  distribution resolved into the harness cache on first use; Java 21+ needed), in-memory storage,
  global compatibility ``BACKWARD``. ``.url`` is what Confluent clients and converters take as
  ``schema.registry.url``; ``.client()`` is a ``SchemaRegistryClient`` for it.

Subjects live for the whole session: give each test its own subject names.

When the registry cannot be resolved or started (no Java 21+, no Maven, the JVM exits...), the
fixture *fails* with the :class:`~conveyor.testing.errors.ComponentUnavailable` message and the
server log's last lines; nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conveyor.testing.errors import ComponentUnavailable


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[object]:
    """The session's Schema Registry (:class:`~conveyor.testing.schema_registry.SchemaRegistry`)."""
    from conveyor.testing.schema_registry import SchemaRegistry

    registry = SchemaRegistry()
    error: ComponentUnavailable | None = None
    try:
        registry.start()
    except ComponentUnavailable as exc:
        error = exc
    if error is not None:
        pytest.fail(str(error), pytrace=False)
    try:
        yield registry
    finally:
        registry.stop()
