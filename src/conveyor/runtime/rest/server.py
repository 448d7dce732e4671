"""The driver's HTTP control API (Starlette on uvicorn's h11 server, in a thread).

Public endpoints (the operator, ``conveyor`` commands and people use them):

* ``GET /status`` — shaped like Kafka Connect's ``GET /connectors/<name>/status``, with
  Conveyor's extras per task (assignment, committed offsets, lag, counters) and, for a sink,
  ``unassigned_lag``: the lag of the partitions no task holds (``{"topic:partition": n}``).
* ``GET /metrics`` — Prometheus text format.
* ``GET /healthz`` — 200 while the driver serves.
* ``POST /stop?connector_deleted=true|false&delete_offsets=true|false`` — stop every task
  (closing commits), then the connector; with ``connector_deleted=true`` both clean up
  what they provisioned; with ``delete_offsets=true`` the sink consumer group
  ``connect-<name>`` is then deleted, or the source offsets (and task-count record)
  tombstoned. Answers 200 once everything has stopped with what was committed, removed
  and deleted (:meth:`Herder.stop`); a failed offsets deletion is ``offsets_error`` in it.
* ``POST /drain?pod=<pod>`` or ``?task=<id>`` (``&timeout_s=``) — closing commit of those
  tasks, which then run again; answers with what each committed once done (404 for an
  unknown pod or task).
* ``POST /pause``, ``POST /resume``, ``POST /state?target=running|paused|stopped``.
* ``POST /restart?include_tasks=true|false&only_failed=true|false`` — Kafka Connect's
  ``POST /connectors/<name>/restart`` (KIP-745; both default false): 202 with the status
  document, ``RESTARTING`` for what restarts, and ``"restarted": {"connector": bool,
  "tasks": [ids]}`` (:meth:`Herder.restart`); 409 in the ``stopped`` state.
* ``POST /tasks/<id>/restart`` — 202 ``{"id", "state": "RESTARTING"}``; 404 for an unknown task.
* ``PUT /config`` — a new ``spec`` (JSON, the manifest's ``spec``): tasks close, the
  connector restarts with it. 409 for what only a new driver may take: Kafka settings (in
  ``spec.kafka`` or as client properties in ``spec.config``), ``configFrom``, Spark, and any
  config change of a connector that holds credentials (:mod:`conveyor.runtime.rest.live_config`).

Internal: ``POST /internal/tasks/<id>/sync?directive_version=N&wait_ms=M`` — a task
runner posts its report and long-polls for its next directive.

Authentication (:mod:`conveyor.control.auth`): every endpoint but ``/healthz``,
``/metrics`` and Kafka Connect's ``GET /health`` (KIP-1017) needs ``Authorization: Bearer
<token>``; the admin token may call all of them, the task token only
``/internal/tasks/<id>/sync`` and ``/drain``. No or an unknown token: 401 with
``WWW-Authenticate``; the task token elsewhere: 403. ``/healthz`` and ``/health`` stay open for
probes, which cannot carry a secret without putting it in the pod spec, and
``/metrics`` for the cluster's Prometheus scrapers: it holds names, task ids, partitions and
counts, never a configuration value.

Errors are Kafka Connect's error document, ``{"error_code": <status>, "message": str}``
(an unknown path 404 ``HTTP 404 Not Found``, a known path with another method 405 ``HTTP 405
Method Not Allowed``, as Connect's Jersey answers). Kafka Connect's own REST API is served
beside these (:mod:`conveyor.runtime.rest.connect_rest`).

Limits (:class:`ServerLimits`), so that no client holds the port:

* A request's line and headers must arrive within ``read_header_timeout_s`` (10 s), the
  whole request within ``read_timeout_s`` (30 s); else the connection is closed unanswered
  (:mod:`conveyor.runtime.rest.read_deadlines`).
* With ``max_connections`` connections open (the caller's included) or requests in flight,
  a request is answered ``503`` at once, with ``Connection: close`` (uvicorn's
  ``limit_concurrency``).
* The probes (``GET /healthz``, ``GET /health``) are answered on the event loop, without a
  worker thread. Every other driver call runs on a worker thread of its own, so that
  long-polls, drains and a stop of many minutes never hold the event loop or one another:
  the calls that may wait (:data:`SHORT_CALLS` lists those that may not) share
  ``max_long_calls`` threads, the short ones (``GET /status``, ``/metrics``, Connect's reads)
  ``max_short_calls`` others, so that long-polls never delay a status request.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import anyio.to_thread
import uvicorn
from anyio import CapacityLimiter
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from conveyor.api.redaction import redact_data
from conveyor.control.auth import AUTH_SCHEME, REALM, ControlTokens, Role
from conveyor.control.errors import OperationError
from conveyor.control.protocol import TaskReport
from conveyor.manifest import ConnectorSpec, ConnectorState
from conveyor.runtime.herder.protocol import Herder
from conveyor.runtime.rest.connect_rest import CONNECT_ENDPOINTS, is_connect_path
from conveyor.runtime.rest.live_config import apply_written_spec
from conveyor.runtime.rest.read_deadlines import deadline_protocol

log = logging.getLogger(__name__)
MAX_WAIT_MS = 30_000
#: The largest request body read (a ``spec`` or a task report is a few KiB); a larger one
#: answers 413 and closes the connection unread (a malformed ``Content-Length`` is a 400 from
#: the HTTP parser itself).
MAX_BODY_BYTES = 1 << 20
#: Open connections (or requests in flight) at which a request is answered 503 (uvicorn counts
#: the caller's own connection).
#: Every task holds one connection for its long-polls (``tasksMax``, up to 1000), while drains,
#: stops, status requests, probes and scrapes come in beside them. Also the listen backlog.
MAX_CONNECTIONS = 2048
#: Worker threads for the calls that may wait (long-polls, drains, stops, Kafka requests): one
#: per connection, so that none waits for a thread while its connection is admitted.
MAX_LONG_CALLS = MAX_CONNECTIONS
#: Worker threads for the calls that answer at once (:data:`SHORT_CALLS`), apart from the long
#: ones so that a status request never waits behind long-polls.
MAX_SHORT_CALLS = 64
#: A request line and headers are a few hundred bytes, sent at once by any HTTP client: 10 s
#: leaves room for a congested network while a client that stalls mid-request (slowloris) is
#: cut before it can hold many connections. Go's ``http.Server.ReadHeaderTimeout`` by another name.
READ_HEADER_TIMEOUT_S = 10.0
#: The whole request, body (up to :data:`MAX_BODY_BYTES`) included: 30 s is 1 MiB at ~35 KiB/s.
READ_TIMEOUT_S = 30.0
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


class _BodyError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def _flag(query: QueryParams, name: str) -> bool:
    value = query.get(name, "false").lower()
    if value not in ("true", "false"):
        raise OperationError(HTTPStatus.BAD_REQUEST, f"{name} must be true or false, got {value!r}")
    return value == "true"


def _optional(query: QueryParams, name: str, kind: type) -> Any:
    if name not in query:
        return None
    try:
        return kind(query[name])
    except ValueError:
        raise OperationError(HTTPStatus.BAD_REQUEST, f"{name} must be a {kind.__name__}") from None


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(redact_data(payload), indent=None).encode()
    return Response(body, status_code=int(status), media_type="application/json", headers=headers)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _json(status, {"error_code": int(status), "message": message}, headers)


async def _read_body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _BodyError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                         f"request body of {declared} bytes is over the {MAX_BODY_BYTES}-byte limit")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _BodyError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                             f"request body is over the {MAX_BODY_BYTES}-byte limit")
        chunks.append(chunk)
    data = json.loads(b"".join(chunks) or b"{}")
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    return data


#: An endpoint's work, run on a worker thread: (driver, query, path params, JSON body or None)
#: -> (status, JSON payload) or a ready :class:`Response`.
Call = Callable[["Herder", QueryParams, dict[str, Any], "dict[str, Any] | None"], "tuple[HTTPStatus, Any] | Response"]


def _status(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, driver.status()


def _healthz(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, {"status": "ok"}


def _metrics(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> Response:
    return Response(generate_latest(driver.metrics_registry), media_type=CONTENT_TYPE_LATEST)


def _sync(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    report = TaskReport.from_json(body)
    version = int(q.get("directive_version", "-1"))
    wait_ms = min(int(q.get("wait_ms", "0")), MAX_WAIT_MS)
    return HTTPStatus.OK, driver.sync(p["task_id"], report, version, wait_ms).to_json()


def _stop(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, driver.stop(connector_deleted=_flag(q, "connector_deleted"),
                                      delete_offsets=_flag(q, "delete_offsets"))


def _restart(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.ACCEPTED, driver.restart(include_tasks=_flag(q, "include_tasks"),
                                               only_failed=_flag(q, "only_failed"))


def _drain(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, driver.drain(pod=q.get("pod"), task_id=_optional(q, "task", int),
                                       timeout_s=_optional(q, "timeout_s", float))


def _pause(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, driver.pause()


def _resume(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, driver.resume()


def _state(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    try:
        state = ConnectorState(q.get("target", ""))
    except ValueError:
        raise OperationError(HTTPStatus.BAD_REQUEST, "target must be one of running, paused, stopped") from None
    return HTTPStatus.OK, driver.set_state(state)


def _config(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, apply_written_spec(driver, ConnectorSpec.model_validate(body))


def _restart_task(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.ACCEPTED, driver.restart_task(p["task_id"])


OPEN: frozenset[Role] = frozenset()
"""No credential needed."""
ADMIN = frozenset({Role.ADMIN})
TASKS = frozenset({Role.ADMIN, Role.TASK})

#: (method, path, call, reads a JSON body, roles allowed; :data:`OPEN` for anyone)
ENDPOINTS: list[tuple[str, str, Call, bool, frozenset[Role]]] = [
    ("GET", "/status", _status, False, ADMIN),
    ("GET", "/healthz", _healthz, False, OPEN),
    ("GET", "/metrics", _metrics, False, OPEN),
    ("POST", "/internal/tasks/{task_id:int}/sync", _sync, True, TASKS),
    ("POST", "/stop", _stop, False, ADMIN),
    ("POST", "/restart", _restart, False, ADMIN),
    ("POST", "/drain", _drain, False, TASKS),
    ("POST", "/pause", _pause, False, ADMIN),
    ("POST", "/resume", _resume, False, ADMIN),
    ("POST", "/state", _state, False, ADMIN),
    ("PUT", "/config", _config, True, ADMIN),
    ("POST", "/tasks/{task_id:int}/restart", _restart_task, False, ADMIN),
]

#: (method, path) answered on the event loop: they read one attribute of the driver, so a
#: kubelet probe never waits for a worker thread (Connect's ``GET /health`` is KIP-1017's).
PROBES: frozenset[tuple[str, str]] = frozenset({("GET", "/healthz"), ("GET", "/health")})
#: (method, path) that answer at once: they read the driver's state under its short-held lock,
#: never wait for tasks, Kafka or the ``operations`` lock. Every other call may wait, and runs
#: on the long calls' threads (a new endpoint is long until listed here).
SHORT_CALLS: frozenset[tuple[str, str]] = frozenset({
    ("GET", "/status"), ("GET", "/metrics"),
    ("GET", "/connectors"), ("GET", "/connectors/{connector}"), ("GET", "/connectors/{connector}/config"),
    ("GET", "/connectors/{connector}/status"), ("GET", "/connectors/{connector}/tasks"),
    ("GET", "/connectors/{connector}/tasks/{task_id:int}/status"), ("GET", "/connectors/{connector}/topics"),
    ("PUT", "/connectors/{connector}/topics/reset"),
    ("GET", "/connector-plugins"), ("GET", "/connector-plugins/{plugin}/config"),
})


@dataclass(frozen=True)
class ServerLimits:
    """How much of the control port a client may hold (see the module docstring).

    Attributes:
        read_header_timeout_s: seconds for a request's line and headers to arrive.
        read_timeout_s: seconds for the whole request, body included (from the same start).
        max_connections: open connections (the caller's included) or requests in flight at
            which a request gets 503.
        max_long_calls: worker threads for the calls that may wait.
        max_short_calls: worker threads for :data:`SHORT_CALLS`.
    """

    read_header_timeout_s: float = READ_HEADER_TIMEOUT_S
    read_timeout_s: float = READ_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    max_long_calls: int = MAX_LONG_CALLS
    max_short_calls: int = MAX_SHORT_CALLS


def _refusal(tokens: ControlTokens, roles: frozenset[Role], request: Request) -> Response | None:
    """401 / 403 for a caller that may not call this endpoint, ``None`` for one that may."""
    if not roles:
        return None
    role = tokens.role_of(request.headers.get("authorization"))
    if role is None:
        return _error(HTTPStatus.UNAUTHORIZED, "a valid control token is required (Authorization: Bearer)",
                      {"WWW-Authenticate": f'{AUTH_SCHEME} realm="{REALM}"'})
    if role not in roles:
        return _error(HTTPStatus.FORBIDDEN,
                      f"the {role.value} token may not call {request.method} {request.url.path}")
    return None


def _call(driver: Herder, tokens: ControlTokens, call: Call, method: str, reads_body: bool,
          roles: frozenset[Role], limiter: CapacityLimiter | None) -> Callable[[Request], Any]:
    """The endpoint serving ``call``: on a worker thread of ``limiter``, or on the event
    loop for ``None`` (a probe)."""
    async def endpoint(request: Request) -> Response:
        if (refused := _refusal(tokens, roles, request)) is not None:
            return refused
        try:
            try:
                body = await _read_body(request) if reads_body else None
            except json.JSONDecodeError as exc:
                # Kafka Connect answers a malformed body with 500 (Jackson's parse error); so do its paths here.
                status = HTTPStatus.INTERNAL_SERVER_ERROR if is_connect_path(request.url.path) else HTTPStatus.BAD_REQUEST
                return _error(status, f"malformed JSON in the request body: {exc}")
            args = (driver, request.query_params, request.path_params, body)
            result = (call(*args) if limiter is None
                      else await anyio.to_thread.run_sync(call, *args, abandon_on_cancel=True, limiter=limiter))
        except ClientDisconnect:  # gone, or its body missed the read deadline: the answer goes nowhere
            log.info("control api: %s %s: the client went before its request was read", method, request.url.path)
            return Response(status_code=HTTPStatus.BAD_REQUEST)
        except _BodyError as exc:
            return _error(exc.status, str(exc), {"Connection": "close"})
        except OperationError as exc:
            return _error(exc.status, str(exc))
        except ValidationError as exc:
            return _error(HTTPStatus.BAD_REQUEST, f"invalid spec: {exc}")
        except (ValueError, KeyError) as exc:
            return _error(HTTPStatus.BAD_REQUEST, f"bad request: {exc}")
        except Exception as exc:
            log.exception("control api: %s %s failed", method, request.url.path)
            return _error(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))
        return result if isinstance(result, Response) else _json(result[0], result[1])
    return endpoint


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = HTTPStatus(exc.status_code)
    message = (f"HTTP {status.value} {status.phrase}" if status in (HTTPStatus.NOT_FOUND, HTTPStatus.METHOD_NOT_ALLOWED)
               else str(exc.detail))  # Jersey's words, as Kafka Connect answers
    return _error(exc.status_code, message, dict(exc.headers or {}))


def build_app(driver: Herder, tokens: ControlTokens, limits: ServerLimits = ServerLimits()) -> Starlette:
    """The control API of ``driver`` as an ASGI application, admitting ``tokens``, its driver
    calls on ``limits.max_long_calls`` and ``limits.max_short_calls`` worker threads."""
    long_calls, short_calls = CapacityLimiter(limits.max_long_calls), CapacityLimiter(limits.max_short_calls)

    def limiter(method: str, path: str) -> CapacityLimiter | None:
        if (method, path) in PROBES:
            return None
        return short_calls if (method, path) in SHORT_CALLS else long_calls

    routes = [Route(path, _call(driver, tokens, call, method, body, roles, limiter(method, path)), methods=[method])
              for method, path, call, body, roles in ENDPOINTS + CONNECT_ENDPOINTS]
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error})


def _listen(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=backlog)


class ControlServer:
    """Serves the control API for one driver on a daemon thread.

    Args:
        driver: the :class:`~conveyor.runtime.herder.protocol.Herder` (the driver, or its
            failed-start stand-in) whose methods the endpoints call, each on a worker thread.
        host: address to listen on (``0.0.0.0`` in a pod).
        port: TCP port; 0 picks a free one (see :attr:`port`).
        tokens: the credentials it admits (see :mod:`conveyor.control.auth`).
        limits: deadlines and capacities (the defaults for a driver; tests take smaller ones).

    Raises:
        OSError: the address cannot be bound (raised here, not on the server thread).
        ValueError: ``limits`` has a deadline that is not positive.
    """

    def __init__(self, driver: Herder, host: str, port: int, tokens: ControlTokens,
                 limits: ServerLimits = ServerLimits()) -> None:
        self.driver = driver
        protocol = deadline_protocol(limits.read_header_timeout_s, limits.read_timeout_s)
        # The backlog only queues connections that arrive faster than the event loop accepts
        # them; the limit on open ones is limit_concurrency.
        self._socket = _listen(host, port, limits.max_connections)
        config = uvicorn.Config(build_app(driver, tokens, limits), http=protocol, loop="asyncio", ws="none",
                                lifespan="off", log_config=None, log_level="warning", access_log=False,
                                server_header=False, timeout_graceful_shutdown=2,
                                limit_concurrency=limits.max_connections, backlog=limits.max_connections)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="control-api", daemon=True)
        self._failure: BaseException | None = None

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    def _serve(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        except BaseException as exc:
            self._failure = exc
            log.exception("control api: the server stopped")

    def start(self) -> None:
        """Serve from now on; returns once the server accepts connections.

        Raises:
            RuntimeError: the server did not start within :data:`START_TIMEOUT_S`.
        """
        self._thread.start()
        for _ in range(int(START_TIMEOUT_S / 0.01)):
            if self._server.started or not self._thread.is_alive():
                break
            time.sleep(0.01)
        if not self._server.started:
            raise RuntimeError(f"the control API did not start: {self._failure or 'timed out'}")

    def stop(self) -> None:
        """Stop accepting and answer what is in flight for up to 2 s; a driver call still
        running then (a long stop) is left to finish on its daemon thread."""
        self._server.should_exit = True
        self._thread.join(STOP_TIMEOUT_S)
        self._socket.close()
