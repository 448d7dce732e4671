"""RabbitMQ topology for the sink connector and its tasks: connection parameters, an
administrative link, and the declarations and deletions of durable queues (bound to
``rabbitmq.exchange`` when set). Shared by the connector (on the driver) and its tasks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pika

from conveyor.api import ConnectError
from conveyor.connectors.rabbitmq.config import RabbitMQSinkConfig, describe_url, scrub
from conveyor.connectors.rabbitmq.link import BrokerRefused, Link, LinkDown


def connection_parameters(cfg: RabbitMQSinkConfig, role: str) -> pika.URLParameters:
    url = cfg.url.get_secret_value()
    params = pika.URLParameters(url)
    query = parse_qs(urlsplit(url).query)
    timeout = cfg.connection_timeout_ms / 1000
    if "stack_timeout" not in query:
        params.stack_timeout = timeout
    if "socket_timeout" not in query:
        params.socket_timeout = timeout
    client = dict(params.client_properties or {})
    client.setdefault("connection_name", f"conveyor {cfg.name or 'rabbitmq-sink'} {role}")
    params.client_properties = client
    return params


def open_budget(params: pika.ConnectionParameters) -> float:
    """Seconds pika may take to connect, all attempts included, plus a margin."""
    attempts = max(1, int(params.connection_attempts or 1))
    per_attempt = float(params.stack_timeout or 15.0)
    return attempts * per_attempt + (attempts - 1) * float(params.retry_delay or 0) + 1.0


def where(cfg: RabbitMQSinkConfig) -> str:
    return describe_url(cfg.url.get_secret_value())


def scrub_secrets(cfg: RabbitMQSinkConfig, text: str) -> str:
    return scrub(cfg.url.get_secret_value(), text)


def ignore(*_args: Any) -> None:
    return None


def admin_link(cfg: RabbitMQSinkConfig, role: str) -> Link:
    """An open link for declarations and deletions (no publishing).

    Raises:
        ConnectError: the broker cannot be reached or refuses the login.
    """
    params = connection_parameters(cfg, role)
    link = Link(params, on_confirm=ignore, on_return=ignore, on_lost=ignore)
    try:
        link.open(open_budget(params))
    except LinkDown as exc:
        raise ConnectError(f"cannot connect to RabbitMQ at {where(cfg)}: {scrub_secrets(cfg, str(exc))}") from None
    return link


def check_exchange(link: Link, cfg: RabbitMQSinkConfig) -> None:
    try:
        link.check_exchange(cfg.exchange, cfg.connection_timeout_ms / 1000)
    except BrokerRefused as exc:
        raise ConnectError(
            f"rabbitmq.exchange {cfg.exchange!r} cannot be used on RabbitMQ at {where(cfg)}:"
            f" {exc.reply_code} {exc.reply_text} (the connector does not create exchanges)"
        ) from None


def declare_queue(link: Link, cfg: RabbitMQSinkConfig, queue: str) -> None:
    """Declare durable ``queue`` (and bind it to ``rabbitmq.exchange`` when set).

    Raises:
        ConnectError: the broker refused (e.g. the queue exists with other settings).
        LinkDown: the connection failed.
    """
    timeout = cfg.connection_timeout_ms / 1000
    try:
        link.declare_queue(queue, cfg.queue_arguments, timeout)
        if cfg.exchange:
            link.bind_queue(queue, cfg.exchange, queue, timeout)
    except BrokerRefused as exc:
        hint = ""
        if exc.reply_code == 406:
            hint = (
                " (a queue of that name exists with other settings: durable=false or other"
                " x-arguments; delete it or adjust rabbitmq.queue.arguments)"
            )
        what = f"durable queue {queue!r}" + (f" bound to exchange {cfg.exchange!r}" if cfg.exchange else "")
        raise ConnectError(f"RabbitMQ at {where(cfg)} refused to declare {what}: {exc}{hint}") from None


def delete_queues(link: Link, cfg: RabbitMQSinkConfig, queues: Iterable[str]) -> list[str]:
    """Delete ``queues`` (with their messages); one report line per queue.

    Raises:
        ConnectError: the broker refused a deletion.
        LinkDown: the connection failed.
    """
    timeout = cfg.connection_timeout_ms / 1000
    lines: list[str] = []
    for queue in queues:
        try:
            if link.queue_message_count(queue, timeout) is None:
                lines.append(f"queue {queue!r} was already gone")
                continue
            dropped = link.delete_queue(queue, timeout)
        except BrokerRefused as exc:
            raise ConnectError(f"RabbitMQ at {where(cfg)} refused to delete queue {queue!r}: {exc}") from None
        lines.append(f"deleted queue {queue!r} ({dropped} message(s) with it)")
    return lines
