"""Read deadlines for uvicorn's h11 server: a request must arrive within a set time.

uvicorn closes a kept-alive connection that stays idle for ``timeout_keep_alive`` seconds,
but sets no deadline on reading a request: a client that sends half a request line, or its
headers or body a byte at a time, holds its connection (and its parser buffer) for ever.
:func:`deadline_protocol` gives uvicorn's ``H11Protocol`` the two deadlines of Go's
``net/http.Server``:

* ``read_header_timeout_s`` (Go's ``ReadHeaderTimeout``): the request line and headers are
  complete within this time, counted from the connection's accept for its first request and
  from the first byte for a later one (until that byte, ``timeout_keep_alive`` applies).
* ``read_timeout_s`` (Go's ``ReadTimeout``): the whole request, body included, from the same
  start. The body of a request the application answered without reading it (a 401 before
  a ``PUT``'s body, say) falls under it too.

On expiry the connection is closed without an answer, as Go's server does: the client has
not finished a request to answer. An application still reading the body sees a client
disconnect (ASGI ``http.disconnect``). Once a request is read in full no deadline applies:
a long-poll's answer may take as long as the application needs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


class ReadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with read deadlines; build a subclass with
    :func:`deadline_protocol` to set them."""

    read_header_timeout_s: float
    read_timeout_s: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_started: float | None = None
        self._reading_body = False
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._begin_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_request()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._read_started is None and self.conn.their_state is h11.IDLE:
            self._begin_request()  # the first byte of a kept-alive connection's next request
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        state = self.conn.their_state
        if state is h11.IDLE:
            return
        if state is h11.SEND_BODY:
            if not self._reading_body:  # the headers are complete
                self._reading_body = True
                started = self._read_started if self._read_started is not None else self.loop.time()
                self._arm(started, self.read_timeout_s)
            return
        self._end_request()  # read in full, or the connection is closing

    def _begin_request(self) -> None:
        self._read_started = self.loop.time()
        self._reading_body = False
        self._arm(self._read_started, self.read_header_timeout_s)

    def _arm(self, started: float, timeout_s: float) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._read_started = started
        self._deadline = self.loop.call_at(started + timeout_s, self._expire)

    def _end_request(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._read_started, self._reading_body = None, None, False

    def _expire(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        part, timeout_s = (("body", self.read_timeout_s) if self._reading_body
                           else ("headers", self.read_header_timeout_s))
        log.info("control api: closed the connection of %s:%s, whose request %s did not arrive within %s s",
                 *(self.client or ("?", "?")), part, timeout_s)
        self.transport.close()


def deadline_protocol(read_header_timeout_s: float, read_timeout_s: float) -> type[ReadDeadlineProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with these deadlines (seconds).

    Raises:
        ValueError: a deadline is not positive, or ``read_timeout_s`` is shorter than
            ``read_header_timeout_s`` (it counts from the same start).
    """
    if not 0 < read_header_timeout_s <= read_timeout_s:
        raise ValueError(f"need 0 < read_header_timeout_s ({read_header_timeout_s}) <= "
                         f"read_timeout_s ({read_timeout_s})")
    header_s, whole_s = read_header_timeout_s, read_timeout_s

    class Deadlines(ReadDeadlineProtocol):
        read_header_timeout_s = header_s
        read_timeout_s = whole_s

    return Deadlines
