"""A Schema Registry that stops answering fails the converter's call within its timeouts
(``http.connect.timeout.ms`` / ``http.read.timeout.ms``, Confluent's keys) instead of hanging the
task. The registry here is a listening socket that never answers: the point is the client's
behaviour when nothing comes back, which a real registry does not do on demand."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from conveyor.api import ConfigError, DataError
from conveyor.api.schema import Schema, SchemaType
from conveyor.converters import load_converter
from conveyor.schema_registry._base import http_timeouts
from conveyor.testing.ports import silent_server


@pytest.fixture
def silent_registry() -> Iterator[str]:
    with silent_server() as url:
        yield url


def test_a_registry_that_never_answers_fails_the_call_within_the_read_timeout(silent_registry):
    """(The timeouts are the converters' shared configuration: one format shows them.)"""
    converter = load_converter({"value.converter": "io.confluent.connect.avro.AvroConverter",
                                "value.converter.schema.registry.url": silent_registry,
                                "value.converter.http.read.timeout.ms": "200"}, "value", "json")
    schema = Schema.struct(("id", Schema(SchemaType.INT64)), name="conveyor.test.Id")
    started = time.monotonic()
    with pytest.raises(DataError) as failed:
        converter.from_connect_data("orders", [], schema, {"id": 1})
    elapsed = time.monotonic() - started
    # four attempts of 0.2 s and the client's jittered back-off between them (at most 1 + 2 + 4 s)
    assert elapsed < 30, f"took {elapsed:.1f}s"
    assert "timed out" in str(failed.value).lower() or "timeout" in str(failed.value).lower(), failed.value


def test_timeouts_default_to_confluents_and_the_client_prefixed_key_wins():
    assert http_timeouts({}) == (60.0, 60.0, 60.0, 60.0)
    assert http_timeouts({"http.read.timeout.ms": "1500", "http.connect.timeout.ms": 250}) == (0.25, 1.5, 1.5, 0.25)
    assert http_timeouts({"http.read.timeout.ms": "1500", "schema.registry.http.read.timeout.ms": "900"})[1] == 0.9
    with pytest.raises(ConfigError, match="http.read.timeout.ms"):
        http_timeouts({"http.read.timeout.ms": "0"})
