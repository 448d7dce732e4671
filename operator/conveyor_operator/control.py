"""Client of a driver's control API (served by ``conveyor run``, see
``conveyor.runtime.control_server``). Standard library and ``conveyor.runtime.control_auth``
only: the operator image has no Spark and needs no HTTP library for this.

Redirects are never followed: urllib's default opener would repeat the request, with its
``Authorization`` header, at whatever ``Location`` the answer names. A 3xx is
:class:`DriverRefused` with its status instead; nor are ``HTTP_PROXY``/``http_proxy`` honoured
(issue 28: the admin token goes to the driver and nowhere else)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from http import HTTPStatus
from http.client import HTTPException
from typing import Any
from urllib.parse import quote, urlencode

from conveyor.runtime.control_auth import authorization_header, open_direct


class DriverUnreachable(ConnectionError):
    """Nothing answers at the driver's URL (no pod, DNS failure, connection refused,
    timeout): the driver is not running, as far as the operator can tell."""


class DriverTimedOut(DriverUnreachable):
    """The driver took the request but did not answer within the timeout: it is running and
    busy (a stop still committing, say), not gone. Callers that act on an absent driver (the
    deletion path's cleanup Job) must tell it apart; the others may treat it as unreachable."""


class DriverRefused(RuntimeError):
    """The driver answered with an error status.

    Attributes:
        status: HTTP status code.
        message: the driver's ``message``.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"driver answered {status}: {message}")
        self.status = status
        self.message = message


class DriverClient:
    """Calls to one driver. Every method raises :class:`DriverUnreachable` when the driver
    cannot be reached (:class:`DriverTimedOut` when it took the request but did not answer in
    time) and :class:`DriverRefused` when it answers with an error or a redirect (never
    followed: a 3xx is refused with its status); blocking
    calls (``stop``, ``drain``) wait up to their own timeout plus a margin.

    Args:
        base_url: e.g. ``http://orders-driver.data.svc:8083``.
        timeout_s: timeout of calls that do not block in the driver, in seconds.
        token: the driver's admin token (``Authorization: Bearer``; see
            ``conveyor.runtime.control_auth``), ``None`` to send none.
        on_unauthorized: called when the driver answers 401 (the token is stale), before
            :class:`DriverRefused` is raised.
    """

    def __init__(self, base_url: str, timeout_s: float = 5.0, token: str | None = None,
                 on_unauthorized: Callable[[], None] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._headers = {"Content-Type": "application/json", **authorization_header(token)}
        self._on_unauthorized = on_unauthorized

    def _call(self, method: str, path: str, body: Any = None, timeout_s: float | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=self._headers)
        try:
            with open_direct(request, timeout_s or self.timeout_s) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            if HTTPStatus.MULTIPLE_CHOICES <= exc.code < HTTPStatus.BAD_REQUEST:
                exc.close()
                raise DriverRefused(exc.code, f"a redirect ({exc.reason}); redirects are not followed") from None
            try:
                message = json.loads(exc.read() or b"{}").get("message", exc.reason)
            except ValueError:
                message = str(exc.reason)
            if exc.code == HTTPStatus.UNAUTHORIZED and self._on_unauthorized is not None:
                self._on_unauthorized()
            raise DriverRefused(exc.code, str(message)) from None
        except TimeoutError as exc:  # the answer did not come (a connect timeout is a URLError)
            raise DriverTimedOut(f"{self.base_url}: no answer to {method} {path.split('?')[0]} within "
                                 f"{timeout_s or self.timeout_s:.0f}s ({exc})") from None
        except (urllib.error.URLError, ConnectionError, HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DriverUnreachable(f"{self.base_url}: {reason}") from None
        return json.loads(payload or b"null")

    def status(self) -> dict[str, Any]:
        """Kafka Connect's status document: ``{"name", "connector": {...}, "tasks": [...]}``."""
        return self._call("GET", "/status")

    def put_config(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Reconfigure live (``PUT /config`` with the whole spec, camelCase keys)."""
        return self._call("PUT", "/config", spec, timeout_s=self.timeout_s + 120)

    def set_state(self, state: str) -> dict[str, Any]:
        """``running``, ``paused`` or ``stopped``."""
        return self._call("POST", f"/state?target={quote(state)}", timeout_s=self.timeout_s + 120)

    def stop(self, connector_deleted: bool, delete_offsets: bool, timeout_s: float) -> dict[str, Any]:
        """The stop path; returns the driver's report (tasks' closing commits, what the
        connector removed, ``connector_trace`` when ``stop`` failed)."""
        query = urlencode({"connector_deleted": str(connector_deleted).lower(),
                           "delete_offsets": str(delete_offsets).lower()})
        return self._call("POST", f"/stop?{query}", timeout_s=timeout_s + 30)

    def drain(self, pod: str, timeout_s: float) -> dict[str, Any]:
        """Closing commits of the tasks on ``pod``: ``{"tasks": [{"id", "drained",
        "committed": {"topic-partition": offset}}], "complete": bool}``."""
        query = urlencode({"pod": pod, "timeout_s": timeout_s})
        return self._call("POST", f"/drain?{query}", timeout_s=timeout_s + 30)

    def restart(self, only_failed: bool = False) -> dict[str, Any]:
        """Kafka Connect's restart with ``includeTasks``: every task, or only the FAILED ones
        (and the connector only if FAILED) with ``only_failed``."""
        query = "include_tasks=true" + ("&only_failed=true" if only_failed else "")
        return self._call("POST", f"/restart?{query}", timeout_s=self.timeout_s + 120)

    def offsets(self, connector: str) -> dict[str, Any]:
        """Kafka Connect's ``GET /connectors/<name>/offsets`` document."""
        return self._call("GET", f"/connectors/{quote(connector)}/offsets", timeout_s=self.timeout_s + 60)

    def alter_offsets(self, connector: str, offsets: dict[str, Any]) -> dict[str, Any]:
        """KIP-875's ``PATCH /connectors/<name>/offsets``; Connect's ``{"message"}``."""
        return self._call("PATCH", f"/connectors/{quote(connector)}/offsets", offsets, timeout_s=self.timeout_s + 60)

    def reset_offsets(self, connector: str) -> dict[str, Any]:
        """KIP-875's ``DELETE /connectors/<name>/offsets``; Connect's ``{"message"}``."""
        return self._call("DELETE", f"/connectors/{quote(connector)}/offsets", timeout_s=self.timeout_s + 60)

    def restart_task(self, task_id: int) -> dict[str, Any]:
        return self._call("POST", f"/tasks/{int(task_id)}/restart", timeout_s=self.timeout_s + 120)
