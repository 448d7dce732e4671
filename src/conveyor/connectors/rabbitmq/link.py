"""One AMQP connection with publisher confirms, driven from the caller's thread.

pika's ``BlockingConnection`` waits for each publisher confirm in turn (a round trip per
message). :class:`Link` uses pika's ``SelectConnection`` instead, whose I/O loop runs only
inside :meth:`Link.run` (and the methods that wait for an answer), on the calling thread:
messages are published without waiting and their confirms are handed to a callback as they
arrive, in batches (``multiple=true`` acks). Nothing happens on the socket between calls, so a
single-threaded task hook owns the connection completely; the task runner calls ``put`` every
few hundred milliseconds even without records, which keeps heartbeats flowing.

Two channels: one in confirm mode that only publishes, and one for declarations and deletes,
whose failures (a 404, a 406) close only that channel and do not disturb the confirms in flight.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import pika
import pika.exceptions
from pika.adapters.select_connection import SelectConnection

log = logging.getLogger(__name__)

# Reply codes after which publishing cannot succeed by retrying (the exchange is gone, no
# permission, a malformed message): the task fails instead of retrying forever.
PERMANENT_CHANNEL_CODES = frozenset({403, 404, 406, 505, 530, 540})


class LinkDown(Exception):
    """The connection or the publishing channel is gone, or the broker did not answer in
    time. Transient: a new :class:`Link` may succeed.

    Attributes:
        permanent: the broker closed the publishing channel with a reply code that retrying
            will not fix (e.g. 404 for a deleted exchange).
    """

    def __init__(self, reason: str, *, permanent: bool = False) -> None:
        super().__init__(reason)
        self.permanent = permanent


class BrokerRefused(Exception):
    """The broker refused a declaration or deletion (its channel was closed with a reply code)."""

    def __init__(self, reply_code: int, reply_text: str) -> None:
        super().__init__(f"{reply_code} {reply_text}")
        self.reply_code = reply_code
        self.reply_text = reply_text


def describe_error(exc: BaseException | None) -> str:
    """A one-line description of a pika connection error, unwrapping pika's wrappers."""
    seen = 0
    while exc is not None and seen < 8:
        seen += 1
        inner = getattr(exc, "exceptions", None)
        if inner:
            exc = inner[-1]
            continue
        inner_one = getattr(exc, "exception", None)
        if isinstance(inner_one, BaseException):
            exc = inner_one
            continue
        if isinstance(exc, pika.exceptions.AMQPConnectionError) and exc.args and isinstance(exc.args[0], BaseException):
            exc = exc.args[0]
            continue
        break
    if exc is None:
        return "connection closed"
    text = str(exc) or repr(exc)
    return f"{type(exc).__name__}: {text}"


class Link:
    """An AMQP connection with a confirm-mode publishing channel and an admin channel.

    Args:
        parameters: pika connection parameters.
        on_confirm: ``(delivery_tag, multiple, ack)`` for each ``basic.ack`` / ``basic.nack``.
        on_return: ``(routing_key, properties, reply_code, reply_text)`` for each message the
            broker returned as unroutable (``mandatory`` publishes); its confirm follows.
        on_lost: ``(reason)`` once, when the connection or the publishing channel is lost:
            every message not yet confirmed is in an unknown state.

    Callbacks run inside :meth:`run` (or another waiting method) on the caller's thread; they
    must not call back into the link's waiting methods.
    """

    def __init__(
        self,
        parameters: pika.ConnectionParameters,
        *,
        on_confirm: Callable[[int, bool, bool], None],
        on_return: Callable[[str, Any, int, str], None],
        on_lost: Callable[[str], None],
    ) -> None:
        self._params = parameters
        self._on_confirm = on_confirm
        self._on_return = on_return
        self._on_lost = on_lost
        self._conn: SelectConnection | None = None
        self._pub: Any = None
        self._admin: Any = None
        self._admin_error: BrokerRefused | None = None
        self._opened = False
        self._down: LinkDown | None = None
        self._until: Callable[[], bool] | None = None
        self._tag = 0
        self._blocked = False

    # -- state ----------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._opened and self._down is None

    @property
    def down(self) -> LinkDown | None:
        """Why the link is down (``None`` while it is open)."""
        return self._down

    @property
    def blocked(self) -> bool:
        """The broker blocked publishing (``connection.blocked``: a memory or disk alarm)."""
        return self._blocked

    # -- lifecycle ------------------------------------------------------------------------

    def open(self, timeout: float) -> None:
        """Connect, open both channels and enable confirms.

        Raises:
            LinkDown: refused, unreachable, login failed or not within ``timeout`` seconds
                (the message says why, without credentials).
        """
        state: dict[str, Any] = {}

        def opened(_conn: Any) -> None:
            state["open"] = True
            self._wake()

        def open_failed(_conn: Any, exc: BaseException) -> None:
            state["error"] = exc
            self._wake()

        self._conn = SelectConnection(
            self._params,
            on_open_callback=opened,
            on_open_error_callback=open_failed,
            on_close_callback=self._connection_closed,
        )
        self._conn.add_on_connection_blocked_callback(self._connection_blocked)
        self._conn.add_on_connection_unblocked_callback(self._connection_unblocked)
        if not self._run(timeout, lambda: "open" in state or "error" in state):
            self._abandon()
            raise LinkDown(f"no AMQP connection within {timeout:.1f}s")
        if "error" in state:
            self._abandon()
            raise LinkDown(describe_error(state["error"]))
        self._opened = True
        deadline = time.monotonic() + timeout
        try:
            self._pub = self._open_channel(deadline, publishing=True)
            self._admin = self._open_channel(deadline, publishing=False)
        except BaseException:
            self.close(timeout=1.0)
            raise

    def close(self, timeout: float = 1.0) -> None:
        """Close the connection (waits up to ``timeout`` s for the broker's close-ok). Never raises."""
        conn = self._conn
        if conn is None:
            return
        try:
            if conn.is_open:
                self._down = self._down or LinkDown("closed by the connector")
                conn.close()
            if conn.is_closing:  # ours or one started when the link was lost
                self._run(timeout, lambda: conn.is_closed)
        except Exception:
            log.debug("closing the AMQP connection failed", exc_info=True)
        self._abandon()

    # -- operations -----------------------------------------------------------------------

    def publish(self, exchange: str, routing_key: str, body: bytes, properties: pika.BasicProperties) -> int:
        """Publish one message (``mandatory``) without waiting; returns its delivery tag.

        Raises:
            LinkDown: the link is down.
        """
        if self._down is not None:
            raise self._down
        if not self._opened or self._pub is None:
            raise LinkDown("not connected")
        try:
            self._pub.basic_publish(exchange, routing_key, body, properties, mandatory=True)
        except (pika.exceptions.ChannelWrongStateError, pika.exceptions.ConnectionWrongStateError) as exc:
            raise self._lost(LinkDown(f"publishing channel unusable: {describe_error(exc)}")) from None
        self._tag += 1
        return self._tag

    def declare_queue(self, name: str, arguments: Mapping[str, Any], timeout: float) -> None:
        """Declare durable queue ``name`` (idempotent when it exists with the same settings).

        Raises:
            BrokerRefused: e.g. 406 when it exists with other settings.
            LinkDown: the link went down or the broker did not answer in time.
        """
        self._rpc(
            lambda ch, done: ch.queue_declare(
                queue=name, durable=True, arguments=dict(arguments) or None, callback=done
            ),
            timeout,
            f"declaring queue {name!r}",
        )

    def queue_message_count(self, name: str, timeout: float) -> int | None:
        """Ready messages in queue ``name`` (passive declare), ``None`` if it does not exist."""
        try:
            frame = self._rpc(
                lambda ch, done: ch.queue_declare(queue=name, passive=True, callback=done),
                timeout,
                f"checking queue {name!r}",
            )
        except BrokerRefused as exc:
            if exc.reply_code == 404:
                return None
            raise
        return int(frame.method.message_count)

    def delete_queue(self, name: str, timeout: float) -> int:
        """Delete queue ``name`` with its messages; returns how many messages it held (RabbitMQ
        answers ``delete-ok`` with 0 for a queue that does not exist)."""
        frame = self._rpc(
            lambda ch, done: ch.queue_delete(queue=name, callback=done), timeout, f"deleting queue {name!r}"
        )
        return int(frame.method.message_count)

    def bind_queue(self, queue: str, exchange: str, routing_key: str, timeout: float) -> None:
        self._rpc(
            lambda ch, done: ch.queue_bind(queue=queue, exchange=exchange, routing_key=routing_key, callback=done),
            timeout,
            f"binding queue {queue!r} to exchange {exchange!r}",
        )

    def check_exchange(self, name: str, timeout: float) -> None:
        """Raise :class:`BrokerRefused` (404) unless exchange ``name`` exists (passive declare)."""
        self._rpc(
            lambda ch, done: ch.exchange_declare(exchange=name, passive=True, callback=done),
            timeout,
            f"checking exchange {name!r}",
        )

    def run(self, timeout: float, until: Callable[[], bool] | None = None) -> bool:
        """Run the I/O loop for up to ``timeout`` seconds (0: handle what is ready now), or
        until ``until()`` is true or the link goes down; returns ``until()`` (True without one)."""
        if self._conn is None:
            return bool(until()) if until is not None else True
        if until is None:
            self._run(timeout, lambda: self._down is not None)
            return True
        return self._run(timeout, lambda: until() or self._down is not None) and bool(until())

    # -- internals ------------------------------------------------------------------------

    def _run(self, timeout: float, until: Callable[[], bool]) -> bool:
        if until():
            return True
        conn = self._conn
        if conn is None:
            return False
        loop = conn.ioloop
        self._until = until
        handle = loop.call_later(max(0.0, timeout), loop.stop)
        try:
            loop.start()
        finally:
            self._until = None
            with contextlib.suppress(Exception):
                loop.remove_timeout(handle)
        return until()

    def _wake(self) -> None:
        if self._until is not None and self._conn is not None and self._until():
            self._conn.ioloop.stop()

    def _open_channel(self, deadline: float, *, publishing: bool) -> Any:
        assert self._conn is not None
        box: dict[str, Any] = {}

        def ready(ch: Any) -> None:
            box["ch"] = ch
            if not publishing:
                box["ready"] = True
                self._wake()
                return
            ch.add_on_return_callback(self._returned)
            ch.confirm_delivery(ack_nack_callback=self._confirmed, callback=confirm_ok)

        def confirm_ok(_frame: Any) -> None:
            box["ready"] = True
            self._wake()

        try:
            ch = self._conn.channel(on_open_callback=ready)
        except pika.exceptions.AMQPError as exc:
            raise self._lost(LinkDown(f"cannot open a channel: {describe_error(exc)}")) from None
        ch.add_on_close_callback(self._pub_closed if publishing else self._admin_closed)
        what = "publishing channel" if publishing else "channel"
        if not self._run(max(0.0, deadline - time.monotonic()), lambda: "ready" in box or self._down is not None):
            raise self._lost(LinkDown(f"the broker did not open a {what} in time"))
        if self._down is not None:
            raise self._down
        return box["ch"]

    def _rpc(self, call: Callable[[Any, Callable[[Any], None]], None], timeout: float, what: str) -> Any:
        if self._down is not None:
            raise self._down
        deadline = time.monotonic() + timeout
        if self._admin is None or not self._admin.is_open:
            self._admin = self._open_channel(deadline, publishing=False)
        box: dict[str, Any] = {}

        def done(frame: Any) -> None:
            box["ok"] = frame
            self._wake()

        self._admin_error = None
        try:
            call(self._admin, done)
        except (pika.exceptions.ChannelWrongStateError, pika.exceptions.ConnectionWrongStateError) as exc:
            raise self._lost(LinkDown(f"{what}: {describe_error(exc)}")) from None
        self._run(
            max(0.0, deadline - time.monotonic()),
            lambda: "ok" in box or self._admin_error is not None or self._down is not None,
        )
        if "ok" in box:
            return box["ok"]
        if self._admin_error is not None:
            error, self._admin_error = self._admin_error, None
            raise error
        if self._down is not None:
            raise self._down
        raise LinkDown(f"no answer from the broker within {timeout:.1f}s while {what}")

    def _lost(self, down: LinkDown) -> LinkDown:
        """Mark the link down (once), tell the owner, close the connection if still open."""
        if self._down is None:
            self._down = down
            try:
                self._on_lost(str(down))
            finally:
                conn = self._conn
                if conn is not None and conn.is_open:
                    with contextlib.suppress(Exception):
                        conn.close()
            self._wake()
        return self._down

    def _abandon(self) -> None:
        conn, self._conn = self._conn, None
        self._pub = self._admin = None
        self._opened = False
        if self._down is None:
            self._down = LinkDown("closed")
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.ioloop.close()

    # pika callbacks

    def _connection_closed(self, _conn: Any, exc: BaseException) -> None:
        if self._opened:
            self._lost(LinkDown(f"connection lost: {describe_error(exc)}"))
        self._wake()

    def _connection_blocked(self, _conn: Any, _frame: Any) -> None:
        self._blocked = True
        log.warning("RabbitMQ blocked publishing on this connection (memory or disk alarm)")

    def _connection_unblocked(self, _conn: Any, _frame: Any) -> None:
        self._blocked = False
        log.info("RabbitMQ unblocked publishing on this connection")

    def _pub_closed(self, _ch: Any, exc: BaseException) -> None:
        code = getattr(exc, "reply_code", 0)
        text = getattr(exc, "reply_text", str(exc))
        if self._down is None and isinstance(exc, pika.exceptions.ChannelClosedByBroker):
            self._lost(
                LinkDown(
                    f"the broker closed the publishing channel: {code} {text}",
                    permanent=code in PERMANENT_CHANNEL_CODES,
                )
            )
        elif self._down is None and not isinstance(exc, pika.exceptions.ChannelClosedByClient):
            self._lost(LinkDown(f"publishing channel closed: {describe_error(exc)}"))
        self._wake()

    def _admin_closed(self, _ch: Any, exc: BaseException) -> None:
        if isinstance(exc, pika.exceptions.ChannelClosedByBroker):
            self._admin_error = BrokerRefused(exc.reply_code, exc.reply_text)
        self._admin = None
        self._wake()

    def _confirmed(self, frame: Any) -> None:
        method = frame.method
        self._on_confirm(int(method.delivery_tag), bool(method.multiple), isinstance(method, pika.spec.Basic.Ack))
        self._wake()

    def _returned(self, _ch: Any, method: Any, properties: Any, _body: bytes) -> None:
        self._on_return(method.routing_key, properties, int(method.reply_code), str(method.reply_text))
        self._wake()
