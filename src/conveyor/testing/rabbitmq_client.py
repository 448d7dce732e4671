"""A RabbitMQ broker as the tests talk to it (pika): queues, messages, and the broker's
``rabbitmqctl`` where the harness started it; :class:`ExternalRabbitMQ` for one someone else
runs. The harness's own node is :class:`conveyor.testing.rabbitmq.RabbitMQServer`."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from conveyor.testing.errors import ComponentUnavailable, Endpoint

log = logging.getLogger("conveyor.testing.rabbitmq")

#: Environment variable with the ``amqp://`` URL of an already running broker to reuse.
ENV_URL = "CONVEYOR_RABBITMQ_URL"


def load_pika() -> Any:
    try:
        import pika
    except ImportError:
        raise ComponentUnavailable(
            "rabbitmq", "the AMQP client library pika is not installed", hint="pip install -e '.[rabbitmq]'"
        ) from None
    return pika


def redact_url(url: str) -> str:
    """``url`` with the password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


@contextlib.contextmanager
def _quiet_pika() -> Iterator[None]:
    logger = logging.getLogger("pika")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


@dataclass(frozen=True)
class Message:
    """A message taken from a queue by :meth:`RabbitMQEndpoint.get_messages`."""

    body: bytes
    properties: Any  # pika.BasicProperties
    routing_key: str
    exchange: str
    redelivered: bool

    @property
    def headers(self) -> dict[str, Any]:
        return dict(self.properties.headers or {})


class RabbitMQEndpoint(Endpoint):
    """A reachable RabbitMQ broker (:attr:`url`), with small AMQP helpers for tests.

    Every helper opens its own short :mod:`pika` connection. Usable as a context manager;
    ``__exit__`` calls :meth:`stop`.
    """

    component = "rabbitmq"

    _url: str | None = None
    component = "rabbitmq"

    @property
    def url(self) -> str:
        """``amqp://`` URL with credentials and vhost, e.g. ``amqp://guest:guest@127.0.0.1:5672/%2F``."""
        if not self._url:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._url

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "localhost"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 5672

    @property
    def vhost(self) -> str:
        path = urlsplit(self.url).path
        return unquote(path[1:]) if len(path) > 1 else "/"

    def connect(self, **params: Any) -> Any:
        """A new ``pika.BlockingConnection`` to :attr:`url` (``params`` set on its parameters).
        Close it when done."""
        pika = load_pika()
        parameters = pika.URLParameters(self.url)
        parameters.connection_attempts = 1
        parameters.socket_timeout = 5
        parameters.blocked_connection_timeout = 30
        for name, value in params.items():
            setattr(parameters, name, value)
        return pika.BlockingConnection(parameters)

    @contextlib.contextmanager
    def channel(self) -> Iterator[Any]:
        """A ``BlockingChannel`` on a new connection, closed afterwards."""
        conn = self.connect()
        try:
            yield conn.channel()
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def queue_exists(self, name: str) -> bool:
        """True if queue ``name`` exists (passive declare; a 404 means no)."""
        return self.queue_message_count(name) is not None

    def queue_message_count(self, name: str) -> int | None:
        """Number of ready messages in queue ``name`` (passive declare), ``None`` if it does not exist."""
        pika = load_pika()
        with self.channel() as ch:
            try:
                ok = ch.queue_declare(queue=name, passive=True)
            except pika.exceptions.ChannelClosedByBroker as e:
                if e.reply_code == 404:
                    return None
                raise
            return int(ok.method.message_count)

    def queue_is_durable(self, name: str) -> bool:
        """Whether existing queue ``name`` is durable.

        AMQP's passive declare does not say, so this re-declares the queue as *non*-durable:
        RabbitMQ answers 406 ``inequivalent arg 'durable'`` exactly when it is durable.

        Raises:
            KeyError: no such queue.
        """
        pika = load_pika()
        if not self.queue_exists(name):
            raise KeyError(name)
        with self.channel() as ch:
            try:
                ch.queue_declare(queue=name, durable=False, passive=False)
            except pika.exceptions.ChannelClosedByBroker as e:
                if e.reply_code == 406 and "durable" in str(e.reply_text):
                    return True
                raise
        return False

    def declare_queue(self, name: str, *, durable: bool = True, arguments: Mapping[str, Any] | None = None) -> None:
        with self.channel() as ch:
            ch.queue_declare(queue=name, durable=durable, arguments=dict(arguments or {}) or None)

    def delete_queue(self, name: str) -> None:
        """Delete queue ``name`` (and its messages); no error if it does not exist."""
        pika = load_pika()
        with self.channel() as ch, contextlib.suppress(pika.exceptions.ChannelClosedByBroker):
            ch.queue_delete(queue=name)

    def publish(self, queue: str, body: bytes, **properties: Any) -> None:
        """Publish ``body`` to ``queue`` through the default exchange, with publisher confirms."""
        pika = load_pika()
        with self.channel() as ch:
            ch.confirm_delivery()
            ch.basic_publish("", queue, body, pika.BasicProperties(**properties), mandatory=True)

    def get_messages(self, queue: str, limit: int | None = None, *, ack: bool = True) -> list[Message]:
        """Take up to ``limit`` (default: all ready) messages from ``queue`` with ``basic.get``.

        With ``ack=False`` they are requeued when the helper's connection closes.
        """
        out: list[Message] = []
        with self.channel() as ch:
            while limit is None or len(out) < limit:
                method, props, body = ch.basic_get(queue=queue, auto_ack=ack)
                if method is None:
                    break
                out.append(Message(bytes(body), props, method.routing_key, method.exchange, bool(method.redelivered)))
        return out

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until an AMQP login on :attr:`url` succeeds.

        Raises:
            ComponentUnavailable: not within ``timeout`` seconds.
        """
        pika = load_pika()
        deadline = time.monotonic() + timeout
        with _quiet_pika():  # pika logs every refused attempt at ERROR level
            while True:
                self._check_alive()
                try:
                    conn = self.connect(socket_timeout=2, stack_timeout=5, blocked_connection_timeout=None)
                except pika.exceptions.ProbableAuthenticationError as e:
                    raise self._unavailable(f"the broker refused the login: {e!r}") from None
                except (pika.exceptions.AMQPError, OSError) as e:
                    if time.monotonic() >= deadline:
                        raise self._unavailable(f"no AMQP login within {timeout:.0f}s: {e!r}") from None
                    time.sleep(0.1)
                    continue
                with contextlib.suppress(Exception):
                    conn.close()
                return

    # -- control of the broker (harness-started nodes only) -------------------------------------

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``rabbitmqctl <args>`` against this node and return its stdout."""
        raise self._not_ours("rabbitmqctl")

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): it accepts TCP data but answers nothing, confirms included."""
        raise self._not_ours("pausing the broker")

    def resume(self) -> None:
        """Undo :meth:`pause` (SIGCONT)."""
        raise self._not_ours("resuming the broker")

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """``with broker.paused():`` freezes the broker for the block."""
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def restart(self) -> None:
        """Stop the broker and start it again with the same data and ports."""
        raise self._not_ours("restarting the broker")

    def _not_ours(self, what: str) -> ComponentUnavailable:
        return ComponentUnavailable(
            "rabbitmq",
            f"{what} needs a broker started by the harness, not {self!r}",
            hint=f"unset {ENV_URL} to let the harness start RabbitMQ",
        )


class ExternalRabbitMQ(RabbitMQEndpoint):
    """A broker someone else runs (``$CONVEYOR_RABBITMQ_URL``). Never stopped by us."""

    def __init__(self, url: str) -> None:
        url = url.strip()
        if not url.startswith(("amqp://", "amqps://")):
            raise ComponentUnavailable("rabbitmq", f"{ENV_URL} must be an amqp:// URL, got {redact_url(url)!r}")
        self._url = url

    def _unavailable(self, reason: str) -> ComponentUnavailable:
        return ComponentUnavailable(
            "rabbitmq",
            f"the reused broker {ENV_URL}={redact_url(self.url)} is not usable: {reason}",
            hint=f"unset {ENV_URL} to let the harness start RabbitMQ",
        )

    def __repr__(self) -> str:
        return f"ExternalRabbitMQ({redact_url(self.url)!r})"

