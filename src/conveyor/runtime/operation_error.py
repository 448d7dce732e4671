"""The error a driver operation raises to refuse a control API call."""

from __future__ import annotations

from http import HTTPStatus


class OperationError(Exception):
    """A control operation was refused; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
