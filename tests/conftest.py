"""Shared pytest configuration: the conveyor test harness fixtures (real Kafka, PostgreSQL, Spark, S3, Schema Registry, ...).

See tests/README.md and ``conveyor.testing.pytest_plugin`` for the fixtures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["conveyor.testing.pytest_plugin", "conveyor.testing.pytest_rabbitmq", "conveyor.testing.pytest_s3",
                  "conveyor.testing.pytest_schema_registry",
                  "conveyor.testing.pytest_kube", "conveyor.testing.pytest_node"]

KUBE_TIER = Path(__file__).parent / "kube"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist's ``--dist loadgroup`` (pyproject's addopts): every test on the
    session's Kubernetes node runs in one worker, and every test of the kube tier (the
    session's API server, the chart installed in it) in one worker, so that each is started
    once; any other test runs in whichever worker is free."""
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.xdist_group("node"))
        elif KUBE_TIER in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("kube"))
