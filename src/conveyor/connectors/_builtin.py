"""What the connectors that ship with Conveyor share: their version is Conveyor's."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version


def _conveyor_version() -> str:
    try:
        return package_version("conveyor")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0.0.0"


VERSION = _conveyor_version()
"""The version of every built-in connector and task (Conveyor's, from its package metadata)."""


class BuiltIn:
    """Mixed into a built-in connector or task class, before its API base: :meth:`version` is
    Conveyor's (:data:`VERSION`), as Kafka Connect's own connectors report Kafka's."""

    def version(self) -> str:
        return VERSION
