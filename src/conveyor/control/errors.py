"""How a control API call fails: refused by the driver (:class:`OperationError`, which the
driver's operations raise and its server answers with), or seen from a client
(:class:`DriverUnreachable`, :class:`DriverTimedOut`, :class:`DriverRefused`)."""

from __future__ import annotations

from http import HTTPStatus


class OperationError(Exception):
    """A control operation was refused; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class DriverUnreachable(ConnectionError):
    """Nothing answers at the driver's URL (no pod, DNS failure, connection refused,
    timeout): the driver is not running, as far as the caller can tell."""


class DriverTimedOut(DriverUnreachable):
    """The driver took the request but did not answer within the timeout: it is running and
    busy (a stop still committing, say), not gone. Callers that act on an absent driver (the
    deletion path's cleanup Job) must tell it apart; the others may treat it as unreachable."""


class DriverRefused(RuntimeError):
    """The driver answered with an error status (a redirect included: never followed).

    Attributes:
        status: HTTP status code.
        message: the driver's ``message`` (else the status's reason).
        body: the answer's body as text (``""`` when it had none).
    """

    def __init__(self, status: int, message: str, body: str = "") -> None:
        super().__init__(f"driver answered {status}: {message}")
        self.status = status
        self.message = message
        self.body = body
