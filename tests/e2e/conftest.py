"""The end-to-end tier: Conveyor's images, Helm chart and Connectors on a real single-node
Kubernetes (conveyor.testing.node), with Kafka and PostgreSQL on the node IP.

Session fixtures: ``conveyor_images`` (both Dockerfile targets built with buildah on a Debian
base, cached by content hash, imported into the node) and ``conveyor_release`` (``helm install``
of charts/conveyor with those images; the operator runs as a pod under the chart's
ServiceAccount and RBAC). Every namespace the tier's pods run in enforces Pod Security
"restricted" (``node_namespace``, and the operator's)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from conveyor.testing.node_images import BUSYBOX_IMAGE

OPERATOR_NAMESPACE = "conveyor-system"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that restart the session's node run before the e2e tests that build on it."""
    first = [item for item in items if item.get_closest_marker("restarts_node")]
    if first:
        rest = [item for item in items if not item.get_closest_marker("restarts_node")]
        items[:] = first + rest


@pytest.fixture(scope="session", autouse=True)
def images_building() -> Iterator[Future]:
    """The images' build, started with the tier: on a fresh machine it runs beside the node's
    Kubernetes build (both mostly wait on downloads) instead of after it; cached, it returns at
    once."""
    from conveyor.testing.images import build_images

    with ThreadPoolExecutor(1, thread_name_prefix="images") as pool:
        yield pool.submit(build_images)


@pytest.fixture(scope="session")
def conveyor_images(kube_node, images_building):
    """``{"runtime": BuiltImage, "operator": BuiltImage}``, imported into the node."""
    from conveyor.testing import _support
    from conveyor.testing.fixtures import start_or_fail

    with _support.outside_test_timeout():  # each build step has its own timeout
        images = start_or_fail(images_building.result)
    for image in images.values():
        kube_node.import_image(image.archive, image.ref)
    return images


@pytest.fixture(scope="session")
def conveyor_release(kube_node, conveyor_images):
    """``helm install conveyor charts/conveyor`` with the images just built; waits until the
    operator pod is Ready. Returns the operator's namespace."""
    from conveyor.testing.chart import install_chart

    runtime_repo = conveyor_images["runtime"].ref.rsplit(":", 1)[0]
    return install_chart(kube_node, conveyor_images, namespace=OPERATOR_NAMESPACE, values={
        "statusIntervalSeconds": "2",
        # the crash-loop test's driver is the test busybox image (no conveyor entrypoint)
        "connectors.allowedImages": f"{{{runtime_repo}:*,{BUSYBOX_IMAGE.rsplit(':', 1)[0]}:*}}",
    })
