"""The one client of a driver's control API (served by ``conveyor run``, see
:mod:`conveyor.runtime.rest.server`): the operator, the ``conveyor`` commands, the task
runners' link and the test harness all call the driver through :class:`DriverClient`.
Standard library only: the operator image has no Spark and needs no HTTP library for this.

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

from conveyor.control.auth import authorization_header
from conveyor.control.errors import DriverRefused, DriverTimedOut, DriverUnreachable
from conveyor.control.protocol import Directive, TaskReport

__all__ = ["DriverClient", "DriverRefused", "DriverTimedOut", "DriverUnreachable"]


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """No new request for a 3xx: urllib then raises the 3xx as an :class:`urllib.error.HTTPError`."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}), _RefuseRedirects())


def _open_direct(request: urllib.request.Request, timeout_s: float) -> Any:
    """Send ``request`` (which may carry a token) to its URL and nowhere else: ``HTTP_PROXY`` and
    ``http_proxy`` are ignored, and a redirect is not followed (urllib would repeat the request,
    ``Authorization`` header included, at the ``Location``).

    Returns:
        The response, as :func:`urllib.request.urlopen` returns it (a context manager).

    Raises:
        urllib.error.HTTPError: an error status, a 3xx included.
        urllib.error.URLError, OSError: nothing answered, or not within ``timeout_s`` seconds.
    """
    return _DIRECT.open(request, timeout=timeout_s)


def _document(payload: bytes) -> Any:
    """An answer's JSON document (``None`` when empty), or its text when it is not JSON."""
    try:
        return json.loads(payload or b"null")
    except ValueError:
        return payload.decode(errors="replace")


class DriverClient:
    """Calls to one driver. Every method raises :class:`DriverUnreachable` when the driver
    cannot be reached (:class:`DriverTimedOut` when it took the request but did not answer in
    time) and, but for :meth:`exchange`, :class:`DriverRefused` when it answers with an error
    or a redirect (never followed: a 3xx is refused with its status). Calls that block in the
    driver (``stop``, ``drain``, state changes, restarts) wait longer than ``timeout_s``: their
    own timeout plus a margin, or ``wait_s`` where given.

    Args:
        base_url: e.g. ``http://orders-driver.data.svc:8083``.
        timeout_s: timeout of calls that do not block in the driver, in seconds.
        token: the driver's admin token, or a task runner's task token (``Authorization:
            Bearer``; see :mod:`conveyor.control.auth`), ``None`` to send none.
        on_unauthorized: called when the driver answers 401 (the token is stale), before
            :class:`DriverRefused` is raised.
    """

    def __init__(self, base_url: str, timeout_s: float = 5.0, token: str | None = None,
                 on_unauthorized: Callable[[], None] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._headers = {"Content-Type": "application/json", **authorization_header(token)}
        self._on_unauthorized = on_unauthorized

    def exchange(self, method: str, path: str, body: Any = None, timeout_s: float | None = None) -> tuple[int, Any]:
        """One request, whatever the answer's status: ``(HTTP status, JSON document)``; the
        document is ``None`` for an empty answer, the text for one that is not JSON.

        Args:
            path: the path and query, e.g. ``/status``.
            body: sent as JSON when not ``None``.
            timeout_s: seconds to wait for the answer (default: ``timeout_s`` of the client).

        Raises:
            DriverUnreachable: nothing answered; :class:`DriverTimedOut` when the driver took
                the request and did not answer in time.
        """
        timeout_s = timeout_s or self.timeout_s
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=self._headers)
        try:
            with _open_direct(request, timeout_s) as response:
                return response.status, _document(response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, _document(exc.read())
        except TimeoutError as exc:  # the answer did not come (a connect timeout is a URLError)
            raise DriverTimedOut(f"{self.base_url}: no answer to {method} {path.split('?')[0]} within "
                                 f"{timeout_s:.0f}s ({exc})") from None
        except (urllib.error.URLError, ConnectionError, HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DriverUnreachable(f"{self.base_url}: {reason}") from None

    def call(self, method: str, path: str, body: Any = None, timeout_s: float | None = None) -> Any:
        """:meth:`exchange`, returning the document of a success.

        Raises:
            DriverRefused: the driver answered with an error status or a redirect.
            DriverUnreachable: as :meth:`exchange`.
        """
        status, document = self.exchange(method, path, body, timeout_s)
        if status < HTTPStatus.MULTIPLE_CHOICES:
            return document
        phrase = _phrase(status)
        if status < HTTPStatus.BAD_REQUEST:
            raise DriverRefused(status, f"a redirect ({phrase}); redirects are not followed")
        if status == HTTPStatus.UNAUTHORIZED and self._on_unauthorized is not None:
            self._on_unauthorized()
        message = document.get("message", phrase) if isinstance(document, dict) else phrase
        text = document if isinstance(document, str) else json.dumps(document)
        raise DriverRefused(status, str(message), text)

    def _blocking(self, wait_s: float | None, margin_s: float) -> float:
        return wait_s if wait_s is not None else self.timeout_s + margin_s

    def status(self) -> dict[str, Any]:
        """Kafka Connect's status document: ``{"name", "connector": {...}, "tasks": [...]}``."""
        return self.call("GET", "/status")

    def put_config(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Reconfigure live (``PUT /config`` with the whole spec, camelCase keys)."""
        return self.call("PUT", "/config", spec, timeout_s=self.timeout_s + 120)

    def set_state(self, state: str, wait_s: float | None = None) -> dict[str, Any]:
        """``running``, ``paused`` or ``stopped``; waits ``wait_s`` seconds (default
        ``timeout_s`` + 120) for the tasks to get there."""
        return self.call("POST", f"/state?target={quote(state)}", timeout_s=self._blocking(wait_s, 120))

    def pause(self) -> dict[str, Any]:
        """Kafka Connect's pause: no more put/poll; offsets are still committed."""
        return self.call("POST", "/pause")

    def stop(self, connector_deleted: bool, delete_offsets: bool, timeout_s: float) -> dict[str, Any]:
        """The stop path, waiting up to ``timeout_s`` + 30 seconds; returns the driver's report
        (tasks' closing commits, what the connector removed, ``connector_trace`` when ``stop``
        failed)."""
        query = urlencode({"connector_deleted": str(connector_deleted).lower(),
                           "delete_offsets": str(delete_offsets).lower()})
        return self.call("POST", f"/stop?{query}", timeout_s=timeout_s + 30)

    def drain(self, pod: str | None = None, timeout_s: float = 60.0, task: int | None = None) -> dict[str, Any]:
        """Closing commits of the tasks on ``pod`` (or of task ``task``) within ``timeout_s``
        seconds: ``{"tasks": [{"id", "drained", "committed": {"topic-partition": offset}}],
        "complete": bool}``. A stopping driver refuses with 409."""
        target = {"task": int(task)} if task is not None else {"pod": pod or ""}
        query = urlencode({**target, "timeout_s": timeout_s})
        return self.call("POST", f"/drain?{query}", timeout_s=timeout_s + 30)

    def restart(self, include_tasks: bool = True, only_failed: bool = False,
                wait_s: float | None = None) -> dict[str, Any]:
        """Kafka Connect's connector restart: the connector, with ``include_tasks`` its tasks,
        with ``only_failed`` only what is FAILED; waits ``wait_s`` seconds (default
        ``timeout_s`` + 120)."""
        query = urlencode({"include_tasks": str(include_tasks).lower(), "only_failed": str(only_failed).lower()})
        return self.call("POST", f"/restart?{query}", timeout_s=self._blocking(wait_s, 120))

    def restart_task(self, task_id: int) -> dict[str, Any]:
        """Closing commit of task ``task_id``, then a new run of it."""
        return self.call("POST", f"/tasks/{int(task_id)}/restart", timeout_s=self.timeout_s + 120)

    def offsets(self, connector: str) -> dict[str, Any]:
        """Kafka Connect's ``GET /connectors/<name>/offsets`` document."""
        return self.call("GET", f"/connectors/{quote(connector)}/offsets", timeout_s=self.timeout_s + 60)

    def alter_offsets(self, connector: str, offsets: dict[str, Any]) -> dict[str, Any]:
        """KIP-875's ``PATCH /connectors/<name>/offsets``; Connect's ``{"message"}``."""
        return self.call("PATCH", f"/connectors/{quote(connector)}/offsets", offsets, timeout_s=self.timeout_s + 60)

    def reset_offsets(self, connector: str) -> dict[str, Any]:
        """KIP-875's ``DELETE /connectors/<name>/offsets``; Connect's ``{"message"}``."""
        return self.call("DELETE", f"/connectors/{quote(connector)}/offsets", timeout_s=self.timeout_s + 60)

    def sync_task(self, task_id: int, report: TaskReport, directive_version: int, wait_ms: int) -> Directive:
        """A task runner's report, answered with the current directive: the driver holds the
        request up to ``wait_ms`` milliseconds while the directive is still at
        ``directive_version`` (long-poll). Called by :class:`~conveyor.runtime.task.control_link.ControlLink`."""
        path = f"/internal/tasks/{int(task_id)}/sync?directive_version={directive_version}&wait_ms={wait_ms}"
        return Directive.from_json(self.call("POST", path, report.to_json(), timeout_s=wait_ms / 1000 + 10))


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"
