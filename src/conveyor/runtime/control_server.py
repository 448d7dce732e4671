"""The driver's HTTP control API.

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
  and deleted (:meth:`Driver.stop`); a failed offsets deletion is ``offsets_error`` in it.
* ``POST /drain?pod=<pod>`` or ``?task=<id>`` (``&timeout_s=``) — closing commit of those
  tasks, which then run again; answers with what each committed once done (404 for an
  unknown pod or task).
* ``POST /pause``, ``POST /resume``, ``POST /state?target=running|paused|stopped``.
* ``POST /restart?include_tasks=true|false&only_failed=true|false`` — Kafka Connect's
  ``POST /connectors/<name>/restart`` (KIP-745; both default false): 202 with the status
  document, ``RESTARTING`` for what restarts, and ``"restarted": {"connector": bool,
  "tasks": [ids]}`` (:meth:`Driver.restart`); 409 in the ``stopped`` state.
* ``POST /tasks/<id>/restart`` — 202 ``{"id", "state": "RESTARTING"}``; 404 for an unknown task.
* ``PUT /config`` — a new ``spec`` (JSON, the manifest's ``spec``): tasks close, the
  connector restarts with it.

Internal: ``POST /internal/tasks/<id>/sync?directive_version=N&wait_ms=M`` — a task
runner posts its report and long-polls for its next directive.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError

from conveyor.api.redaction import redact_data
from conveyor.manifest import ConnectorSpec, ConnectorState, with_mounted_config
from conveyor.runtime.driver import OperationError
from conveyor.runtime.protocol import TaskReport

if TYPE_CHECKING:
    from conveyor.runtime.driver import Driver

log = logging.getLogger(__name__)
_SYNC = re.compile(r"^/internal/tasks/(\d+)/sync$")
_RESTART = re.compile(r"^/tasks/(\d+)/restart$")
MAX_WAIT_MS = 30_000
#: The largest request body read (a ``spec`` or a task report is a few KiB); a larger or
#: malformed ``Content-Length`` answers 413 / 400 and closes the connection unread.
MAX_BODY_BYTES = 1 << 20


def _flag(query: dict[str, list[str]], name: str) -> bool:
    value = query.get(name, ["false"])[-1].lower()
    if value not in ("true", "false"):
        raise OperationError(HTTPStatus.BAD_REQUEST, f"{name} must be true or false, got {value!r}")
    return value == "true"


def _optional(query: dict[str, list[str]], name: str, kind: type) -> Any:
    if name not in query:
        return None
    try:
        return kind(query[name][-1])
    except ValueError:
        raise OperationError(HTTPStatus.BAD_REQUEST, f"{name} must be a {kind.__name__}") from None


class _Handler(BaseHTTPRequestHandler):
    server: ControlServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("control api: " + format, *args)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch("PUT")

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        driver = self.server.driver
        try:
            if method == "GET" and url.path == "/status":
                return self._json(HTTPStatus.OK, driver.status())
            if method == "GET" and url.path == "/healthz":
                return self._json(HTTPStatus.OK, {"status": "ok"})
            if method == "GET" and url.path == "/metrics":
                body = generate_latest(driver.metrics_registry)
                return self._send(HTTPStatus.OK, body, CONTENT_TYPE_LATEST)
            if method == "POST" and (m := _SYNC.match(url.path)):
                report = TaskReport.from_json(self._body())
                version = int(query.get("directive_version", ["-1"])[-1])
                wait_ms = min(int(query.get("wait_ms", ["0"])[-1]), MAX_WAIT_MS)
                directive = driver.sync(int(m.group(1)), report, version, wait_ms)
                return self._json(HTTPStatus.OK, directive.to_json())
            if method == "POST" and url.path == "/stop":
                return self._json(HTTPStatus.OK, driver.stop(connector_deleted=_flag(query, "connector_deleted"),
                                                             delete_offsets=_flag(query, "delete_offsets")))
            if method == "POST" and url.path == "/restart":
                return self._json(HTTPStatus.ACCEPTED, driver.restart(include_tasks=_flag(query, "include_tasks"),
                                                                      only_failed=_flag(query, "only_failed")))
            if method == "POST" and url.path == "/drain":
                result = driver.drain(pod=query.get("pod", [None])[-1], task_id=_optional(query, "task", int),
                                      timeout_s=_optional(query, "timeout_s", float))
                return self._json(HTTPStatus.OK, result)
            if method == "POST" and url.path == "/pause":
                return self._json(HTTPStatus.OK, driver.pause())
            if method == "POST" and url.path == "/resume":
                return self._json(HTTPStatus.OK, driver.resume())
            if method == "POST" and url.path == "/state":
                target = query.get("target", [""])[-1]
                try:
                    state = ConnectorState(target)
                except ValueError:
                    raise OperationError(HTTPStatus.BAD_REQUEST,
                                         "target must be one of running, paused, stopped") from None
                return self._json(HTTPStatus.OK, driver.set_state(state))
            if method == "PUT" and url.path == "/config":
                spec = with_mounted_config(ConnectorSpec.model_validate(self._body()), source="PUT /config")
                return self._json(HTTPStatus.OK, driver.reconfigure(spec))
            if method == "POST" and (m := _RESTART.match(url.path)):
                return self._json(HTTPStatus.ACCEPTED, driver.restart_task(int(m.group(1))))
            raise OperationError(HTTPStatus.NOT_FOUND, f"no such endpoint: {method} {url.path}")
        except OperationError as exc:
            self._json(exc.status, {"error_code": exc.status.value, "message": str(exc)})
        except ValidationError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error_code": 400, "message": f"invalid spec: {exc}"})
        except (ValueError, KeyError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error_code": 400, "message": f"bad request: {exc}"})
        except Exception as exc:  # noqa: BLE001 - answer 500 rather than drop the connection
            log.exception("control api: %s %s failed", method, url.path)
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error_code": 500, "message": str(exc)})

    def _body(self) -> dict[str, Any]:
        declared = self.headers.get("Content-Length") or "0"
        length = int(declared) if declared.isdigit() else -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self.close_connection = True
            if length < 0:
                raise OperationError(HTTPStatus.BAD_REQUEST, "Content-Length must be a non-negative integer")
            raise OperationError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                                 f"request body of {length} bytes is over the {MAX_BODY_BYTES}-byte limit")
        data = json.loads(self.rfile.read(length) or b"{}")
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        return data

    def _json(self, status: HTTPStatus, payload: Any) -> None:
        self._send(status, json.dumps(redact_data(payload), indent=None).encode(), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


class ControlServer(ThreadingHTTPServer):
    """Serves the control API for one driver on a daemon thread."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, driver: Driver, host: str, port: int) -> None:
        super().__init__((host, port), _Handler)
        self.driver = driver
        self._thread = threading.Thread(target=self.serve_forever, name="control-api", daemon=True)

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
