"""What the harness's pytest plugins share: a component that cannot start fails the test that
needs it, with the component's message (never a skip), and an endpoint a fixture starts is
stopped when the fixture ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from conveyor.testing.errors import ComponentUnavailable

T = TypeVar("T")


def start_or_fail(factory: Callable[[], T]) -> T:
    """``factory()``; a :class:`ComponentUnavailable` fails the calling test (not a skip)."""
    error: ComponentUnavailable | None = None
    try:
        return factory()
    except ComponentUnavailable as exc:
        error = exc  # fail outside the except block: no "during handling of..." noise
    pytest.fail(str(error), pytrace=False)


@contextmanager
def running(factory: Callable[[], Any]) -> Iterator[Any]:
    """The endpoint ``factory()`` starts (see :func:`start_or_fail`), stopped on exit."""
    endpoint = start_or_fail(factory)
    try:
        yield endpoint
    finally:
        endpoint.stop()
