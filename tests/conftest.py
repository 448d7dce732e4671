"""Shared pytest configuration: the conveyor test harness fixtures (real Kafka, PostgreSQL, Spark,
S3, Schema Registry, ...), and how pytest-xdist's two workers share the tests.

See tests/README.md and ``conveyor.testing.pytest_plugin`` for the fixtures.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["conveyor.testing.pytest_plugin", "conveyor.testing.pytest_rabbitmq", "conveyor.testing.pytest_s3",
                  "conveyor.testing.pytest_schema_registry",
                  "conveyor.testing.pytest_kube", "conveyor.testing.pytest_node"]

#: Test paths whose tests share one expensive session fixture, so they all run in one worker:
#: the Kubernetes node (there can be one per machine) and the kube tier's API server.
ONE_WORKER_TIERS = ("tests/e2e/", "tests/kube/")


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """pytest-xdist's load scheduling, except that each of :data:`ONE_WORKER_TIERS` is one unit of
    work, handed whole to one worker (the largest first, so both start at once); every other test
    goes alone to whichever worker is free."""
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((tier for tier in ONE_WORKER_TIERS if nodeid.startswith(tier)), nodeid)

    return TierScheduling(config, log)
