"""Kafka Connect's ``/admin/loggers`` (KIP-495, KIP-976) on the driver's control port: read and
change log levels at run time, with Connect's documents, status codes and messages. A level set
here applies in the driver's process and is sent to every task's process with its directive
(:meth:`~conveyor.runtime.herder.protocol.Herder.push_log_levels`); a task started later gets
it too. ``scope=cluster`` answers 204 as Connect does, and means the same: this connector's
driver and tasks are the whole cluster. Levels last as long as the driver does.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from starlette.datastructures import QueryParams
from starlette.responses import Response

from conveyor.control.auth import Role
from conveyor.control.errors import OperationError
from conveyor.runtime.config import log_levels
from conveyor.runtime.herder.protocol import Herder

_ADMIN = frozenset({Role.ADMIN})


def _all(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, log_levels.all_levels()


def _one(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    name = p["logger"]
    try:
        return HTTPStatus.OK, log_levels.level(name)
    except log_levels.UnknownLogger:
        raise OperationError(HTTPStatus.NOT_FOUND, f"Logger {name} not found.") from None


def _set(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any] | Response:
    name = p["logger"]
    level = body.get("level") if isinstance(body, dict) else None
    if level is None:
        raise OperationError(HTTPStatus.BAD_REQUEST, "Desired 'level' parameter was not specified in request.")
    scope = (q.get("scope") or "worker").strip().lower()
    try:
        changed = log_levels.set_level(name, str(level))
    except log_levels.InvalidLevel:
        raise OperationError(HTTPStatus.NOT_FOUND, f"invalid log level '{level}'.") from None
    driver.push_log_levels()
    if scope == "cluster":
        return Response(status_code=HTTPStatus.NO_CONTENT)
    return HTTPStatus.OK, changed


#: (method, path, call, reads a JSON body, roles allowed), as ``CONNECT_ENDPOINTS``.
ENDPOINTS: list[tuple[str, str, Any, bool, frozenset[Role]]] = [
    ("GET", "/admin/loggers", _all, False, _ADMIN),
    ("GET", "/admin/loggers/{logger}", _one, False, _ADMIN),
    ("PUT", "/admin/loggers/{logger}", _set, True, _ADMIN),
]
