"""Objects many Connectors share (a namespace's Spark ServiceAccount and RoleBinding),
applied once rather than by every reconcile.

Every reconcile of every Connector in a namespace renders the same shared objects; applying
them each time costs the API server a server-side apply (and a RoleBinding's admission) per
Connector for nothing. :class:`SharedObjects` applies an object only when it differs from what
this operator process last applied, or when that was more than ``ttl_seconds`` ago, so an
object deleted by hand comes back within that time.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from conveyor_operator.kube import Kube

DEFAULT_TTL_SECONDS = 300.0


class SharedObjects:
    """Thread-safe (kopf runs handlers in a pool): concurrent reconciles that need the same
    object wait for the one that applies it instead of applying it again."""

    def __init__(self, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        self.ttl_seconds = ttl_seconds
        self._applied: dict[tuple[str, str, str, str], tuple[str, float]] = {}
        self._locks: dict[tuple[str, str, str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def ensure(self, kube: Kube, obj: dict[str, Any]) -> bool:
        """Apply ``obj`` unless this process applied the same object less than
        ``ttl_seconds`` ago. Returns whether it was applied.

        Raises:
            kubernetes.client.rest.ApiException: the apply failed (nothing is remembered,
                so the next call applies again).
        """
        meta = obj["metadata"]
        key = (obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
        digest = json.dumps(obj, sort_keys=True)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            last = self._applied.get(key)
            if last is not None and last[0] == digest and time.monotonic() - last[1] < self.ttl_seconds:
                return False
            kube.apply(obj)
            self._applied[key] = (digest, time.monotonic())
            return True
