"""The common base of sink and source tasks."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any


class Task(abc.ABC):
    """One unit of a connector's work, run by the runtime as one long-running Spark job.

    Every hook of a task instance is called from that task's own runner thread, in
    the Spark executor's Python worker, never concurrently (except where a hook says
    otherwise). A task object is used for one run only: a restarted or re-placed task
    is a new instance.
    """

    def version(self) -> str:
        """The task's version, usually the connector's. Defaults to ``"0.0.0"``."""
        return "0.0.0"

    @abc.abstractmethod
    def start(self, config: Mapping[str, Any]) -> None:
        """Start with one of the connector's ``task_configs``.

        Called once, after ``initialize``. Raising fails the task before it does any work.
        """

    def stop(self, connector_deleted: bool = False) -> None:  # noqa: B027 - optional hook
        """Stop the task; the last hook called on it.

        Args:
            connector_deleted: ``True`` only when the connector is being deleted: remove
                what this task provisioned outside Kafka (KAFKA-14651). ``False`` on every
                plain stop, restart, drain, rebalance, pause or scale-down.

        Not called after an abrupt end (``kill -9``, a lost executor): a task must not
        rely on ``stop`` for correctness, only for tidiness. Raising is logged.
        """
