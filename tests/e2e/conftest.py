"""The end-to-end tier: Conveyor's images, Helm chart and Connectors on a real single-node
Kubernetes (conveyor.testing.node), with Kafka and PostgreSQL on the node IP."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that restart the session's node run before the e2e tests that build on it."""
    first = [item for item in items if item.get_closest_marker("restarts_node")]
    if first:
        rest = [item for item in items if not item.get_closest_marker("restarts_node")]
        items[:] = first + rest
