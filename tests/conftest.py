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
    work, handed whole to one worker; every other test goes alone to whichever worker is free.
    Units go out in collection order: the e2e tier first (its worker builds what the node needs on
    a fresh machine while the other runs the integration tier), the kube tier after the
    integration tier (by then the Kubernetes binaries it shares with the node are built)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((tier for tier in ONE_WORKER_TIERS if nodeid.startswith(tier)), nodeid)

    return TierScheduling(config, log)
