"""``helm install`` of the project's chart (``charts/conveyor``) on a node whose images were
built here (:mod:`conveyor.testing.images`; no registry: ``image.pullPolicy=Never``).

Typical use, on a :class:`~conveyor.testing.node.KubeNode` with the images imported::

    from conveyor.testing.chart import install_chart

    namespace = install_chart(node, build_images())   # "conveyor-system", the operator Ready
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

CHART = Path(__file__).resolve().parents[3] / "charts" / "conveyor"
OPERATOR_NAMESPACE = "conveyor-system"


def install_chart(node: Any, images: Mapping[str, Any], *, namespace: str = OPERATOR_NAMESPACE,
                  values: Mapping[str, str] | None = None, timeout_s: int = 180) -> str:
    """Install (or upgrade) the release ``conveyor`` of :data:`CHART` into ``namespace``, created
    under Pod Security "restricted", with ``images["operator"]`` and ``images["runtime"]``
    (:class:`~conveyor.testing.images.BuiltImage`) and ``values`` (``--set`` pairs) on top; waits
    up to ``timeout_s`` seconds for the operator to be Ready. Returns ``namespace``.

    Raises:
        subprocess.CalledProcessError: helm failed (its stderr in the error).
    """
    operator_repo, operator_tag = images["operator"].ref.rsplit(":", 1)
    runtime_repo, runtime_tag = images["runtime"].ref.rsplit(":", 1)
    node.restricted_namespace(namespace)  # the operator pod too is Pod Security "restricted"
    sets = {"image.repository": operator_repo, "image.tag": operator_tag, "image.pullPolicy": "Never",
            "runtimeImage.repository": runtime_repo, "runtimeImage.tag": runtime_tag, **(values or {})}
    node.helm("upgrade", "--install", "conveyor", str(CHART), "--namespace", namespace, "--create-namespace",
              *(arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")),
              "--wait", "--timeout", f"{timeout_s}s", timeout=timeout_s + 60)
    return namespace
