"""Which modules a configuration may make this process import (issue 13, item 8).

A connector's ``spec.class`` and the classes its config names (converters, transformations,
predicates) may be dotted paths: resolving one imports its module, which runs that module's
code. The driver imports whatever its manifest names (it runs the connector anyway); the
operator, which holds its ServiceAccount's rights, validates configs under :func:`restricted`
and imports only what its rule allows (``conveyor_operator.validate.connector_classes``).

Pure: no Spark, Kafka or Kubernetes import, so converters and transforms may use it.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_RULE: ContextVar[Callable[[str], bool] | None] = ContextVar("conveyor_import_rule", default=None)


class ImportNotAllowed(Exception):
    """A configuration names a class in a module this process may not import. Not an
    ``ImportError``: nothing was imported, and nothing is known about the class.

    Attributes:
        module: the module's dotted name.
    """

    def __init__(self, module: str) -> None:
        super().__init__(f"module {module!r} may not be imported here")
        self.module = module


@contextmanager
def restricted(allowed: Callable[[str], bool]) -> Iterator[None]:
    """Within the block (this thread or task), :func:`check` refuses every module
    ``allowed(module_name)`` is false for."""
    token = _RULE.set(allowed)
    try:
        yield
    finally:
        _RULE.reset(token)


def check(module_name: str) -> None:
    """Call before importing ``module_name`` for a configuration. A module already imported
    passes (importing it again runs no code), and so does one whose top-level package is not
    installed (its import fails without running anything, and the caller reports the name as
    unknown, e.g. a Kafka Connect class Conveyor does not have).

    Raises:
        ImportNotAllowed: under :func:`restricted`, for a module its rule refuses.
    """
    rule = _RULE.get()
    if rule is None or module_name in sys.modules or rule(module_name):
        return
    top = module_name.partition(".")[0]
    try:
        installed = bool(top) and importlib.util.find_spec(top) is not None  # finds; imports nothing
    except (ImportError, ValueError):
        installed = False
    if installed:
        raise ImportNotAllowed(module_name)
