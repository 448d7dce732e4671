"""Errors raised by the conveyor test harness.

The error is :class:`ComponentUnavailable`; :class:`Endpoint` and :func:`reuse_or_start` are
what every component's endpoint shares. Every helper in ``conveyor.testing`` that starts or
reaches a real component (Kafka broker, PostgreSQL, Spark, Java, Maven) raises it, and only it,
when that component cannot be made available. The message always says *which* component and
*why*, and ends with a hint (what to install, which log to read) where there is one. The pytest
fixtures turn it into a test failure, never into a skip.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ComponentUnavailable", "Endpoint", "reuse_or_start"]


class ComponentUnavailable(RuntimeError):
    """A real component needed by a test could not be started or reached.

    Attributes:
        component: short name of the component, e.g. ``"kafka"``, ``"postgres"``, ``"spark"``,
            ``"java"``, ``"maven"``.
        reason: one-line human explanation of what went wrong.
        hint: what to do about it (may be empty).
        log_tail: the last lines of the component's log, when there is one (may be empty).
    """

    def __init__(self, component: str, reason: str, *, hint: str = "", log_tail: str = "") -> None:
        self.component = component
        self.reason = reason
        self.hint = hint
        self.log_tail = log_tail
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [f"{self.component} unavailable: {self.reason}"]
        if self.hint:
            parts.append(f"hint: {self.hint}")
        if self.log_tail:
            parts.append(f"last lines of the {self.component} log:\n{self.log_tail.rstrip()}")
        return "\n".join(parts)

    def __reduce__(self):  # keep pickling (pytest-xdist, multiprocessing) working
        return (_rebuild, (self.component, self.reason, self.hint, self.log_tail))


def _rebuild(component: str, reason: str, hint: str, log_tail: str) -> ComponentUnavailable:
    return ComponentUnavailable(component, reason, hint=hint, log_tail=log_tail)


class Endpoint:
    """Base of a component's endpoint (a broker or server the tests talk to): how it
    reports being unavailable, :meth:`stop`, and use as a context manager (``__exit__``
    calls :meth:`stop`).

    Attributes:
        component: the name ``ComponentUnavailable`` reports (``"kafka"``, ``"postgres"``...).
    """

    component = "component"

    def _check_alive(self) -> None:
        """Raise ComponentUnavailable if the endpoint is known to be dead (overridden)."""

    def _unavailable(self, reason: str) -> ComponentUnavailable:
        return ComponentUnavailable(self.component, reason)

    def stop(self) -> None:
        """Stop what this endpoint started (nothing for an external one). Idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def reuse_or_start(env: Mapping[str, str] | None, variable: str, external: Callable[[str], Any],
                   start: Callable[[], Any]) -> Any:
    """An endpoint for a test session: ``external(value)`` when ``$variable`` is set
    (waiting up to 30 s for it to answer), else ``start()``.

    Raises:
        ComponentUnavailable: the reused endpoint does not answer, or starting failed.
    """
    value = ((os.environ if env is None else env).get(variable) or "").strip()
    if value:
        endpoint = external(value)
        endpoint.wait_ready(timeout=30.0)
        return endpoint
    return start()
