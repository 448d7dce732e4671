"""Running connectors inside tests: an in-process driver on the session's SparkSession,
and polling helpers."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from conveyor.manifest import ConnectorManifest

log = logging.getLogger("conveyor.testing")

T = TypeVar("T")


def connector_manifest(
    name: str, connector_class: str, bootstrap_servers: str, config: dict[str, Any], tasks_max: int = 1, **spec: Any
) -> ConnectorManifest:
    """A validated manifest from keyword arguments (``spec`` adds e.g. ``state``, ``shutdown``)."""
    return ConnectorManifest.from_dict(
        {
            "apiVersion": "conveyor.dev/v1alpha1",
            "kind": "Connector",
            "metadata": {"name": name},
            "spec": {
                "class": connector_class,
                "tasksMax": tasks_max,
                "kafka": {"bootstrapServers": bootstrap_servers},
                "config": config,
                **spec,
            },
        }
    )


GROUP_PROTOCOLS = ("classic", "consumer")
"""The consumer group protocols a sink task runs on: classic, and KIP-848's ``consumer``."""


def group_protocol_config(protocol: str) -> dict[str, str]:
    """A sink connector's config keys for ``protocol`` (one of :data:`GROUP_PROTOCOLS`) in the
    tests: classic with a 6 s session and 0.5 s heartbeats; ``consumer`` takes both from the
    broker (:class:`conveyor.testing.kafka.KafkaBroker`: 6 s and 1.5 s)."""
    if protocol == "classic":
        return {"consumer.override.session.timeout.ms": "6000", "consumer.override.heartbeat.interval.ms": "500"}
    return {"consumer.override.group.protocol": protocol}


def group_member_config(bootstrap_servers: str, group: str, protocol: str) -> dict[str, Any]:
    """librdkafka settings of another member of ``group`` on ``protocol``, as a sink task's."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "group.id": group, "enable.auto.commit": False}
    if protocol == "classic":
        config.update({"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 6000})
    else:
        config["group.protocol"] = protocol
    return config


@contextmanager
def running_connector(manifest: ConnectorManifest, spark: Any, stop_timeout_s: float = 60.0) -> Iterator[Any]:
    """Start a :class:`~conveyor.runtime.driver.driver.Driver` on ``spark`` (control API on a
    free port) and stop it gracefully on exit, unless the test already stopped it."""
    from conveyor.runtime.driver.driver import Driver

    driver = Driver(manifest, spark=spark, control_port=0)
    driver.start()
    try:
        yield driver
    finally:
        try:
            driver.stop(timeout_s=stop_timeout_s)
        finally:
            driver.close()


def control_request(url: str, path: str, method: str = "GET", token: str | None = None,
                    timeout_s: float = 120.0, body: Any = None) -> tuple[int, Any]:
    """Call a driver's control API: ``(HTTP status, JSON answer)``, an error status included.
    ``body`` is sent as JSON; an empty answer (202, 204) is ``None``.

    ``token`` defaults to what the ``conveyor`` commands would send
    (:func:`conveyor.control.auth.find_token`: the file a local ``conveyor run`` wrote
    for the port); pass ``driver.control_tokens.admin`` for an in-process driver. A redirect is
    answered as its status, never followed (:class:`conveyor.control.client.DriverClient`).

    Raises:
        conveyor.control.errors.DriverUnreachable: (an :class:`OSError`) the driver cannot be reached.
    """
    from conveyor.control.auth import find_token
    from conveyor.control.client import DriverClient

    token = token if token is not None else find_token(url)
    return DriverClient(url, timeout_s=timeout_s, token=token).exchange(method, path, body)


def wait_until(predicate: Callable[[], T], timeout_s: float = 60.0, message: str = "condition", interval_s: float = 0.2) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that. How long it took
    is logged at INFO (logger ``conveyor.testing``), so that a slow test shows where it waited.

    Raises:
        AssertionError: after ``timeout_s`` seconds, naming ``message`` and the last value.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            log.info("waited %.1fs for %s", time.monotonic() - started, message)
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {message}; last value: {last!r}")


def produce(
    bootstrap_servers: str,
    topic: str,
    items: list[tuple[bytes | str | None, bytes | str | None]],
    partition: int | None = None,
    headers: list[tuple[str, bytes]] | None = None,
) -> None:
    """Write ``(key, value)`` pairs to ``topic`` (optionally one partition) and wait for acks.
    librdkafka's log lines (e.g. a retried "Coordinator load in progress" right after a broker
    starts) go to the ``conveyor.testing.producer`` logger, not straight to stderr.

    Raises:
        RuntimeError: when a record is not acknowledged within 60 s.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20, "enable.idempotence": True},
                        logger=logging.getLogger("conveyor.testing.producer"))
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for key, value in items:
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(60)
    if remaining or errors:
        raise RuntimeError(f"produce to {topic} failed: {remaining} unacknowledged, errors: {errors[:3]}")


class SteadyLoad:
    """Records ``{"id": n}`` (key ``k<n>``, n from 0) written to a topic at a steady rate on a
    thread, until the ``with`` block ends: load that runs on while a test rescales or drains.
    ``produced`` is how many were acknowledged once the block ended; ``sent`` how many were
    handed to the producer so far; :meth:`set_rate` changes the rate from now on. With
    ``partitions``, record n goes to partition ``n % partitions`` and says so: ``{"id": n, "p": ...}``.

    Raises (on leaving the block):
        RuntimeError: a record was not acknowledged within 60 s.
    """

    def __init__(self, bootstrap_servers: str, topic: str, records_per_s: float = 200.0,
                 partitions: int | None = None) -> None:
        self.bootstrap_servers, self.topic, self.records_per_s = bootstrap_servers, topic, records_per_s
        self.partitions = partitions
        self.produced = self.sent = 0
        self._since, self._base = time.monotonic(), 0  # the rate holds from _since, when _base were due
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"steady-load-{topic}", daemon=True)
        self._error: BaseException | None = None

    def __enter__(self) -> SteadyLoad:
        self._since = time.monotonic()
        self._thread.start()
        return self

    def set_rate(self, records_per_s: float) -> None:
        """Write ``records_per_s`` records a second from now on (0 pauses the load)."""
        with self._lock:
            self._base = self._due()
            self._since, self.records_per_s = time.monotonic(), records_per_s

    def _due(self) -> int:
        return self._base + int((time.monotonic() - self._since) * self.records_per_s)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(90)
        if self._error is not None:
            raise RuntimeError(f"steady load on {self.topic} failed: {self._error}") from self._error

    def _run(self) -> None:
        import json

        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap_servers, "linger.ms": 5, "enable.idempotence": True},
                            logger=logging.getLogger("conveyor.testing.producer"))
        errors: list[str] = []
        sent = 0
        try:
            while not self._stop.is_set():
                with self._lock:
                    due = self._due()
                for i in range(sent, due):
                    where = {} if self.partitions is None else {"partition": i % self.partitions}
                    value = {"id": i} if self.partitions is None else {"id": i, "p": i % self.partitions}
                    producer.produce(self.topic, key=f"k{i}".encode(), value=json.dumps(value).encode(), **where,
                                     on_delivery=lambda err, _msg: err is not None and errors.append(str(err)))
                self.sent = sent = max(sent, due)
                producer.poll(0)
                self._stop.wait(0.05)
            remaining = producer.flush(60)
            if remaining or errors:
                raise RuntimeError(f"{remaining} unacknowledged, errors: {errors[:3]}")
            self.produced = sent
        except BaseException as exc:  # noqa: BLE001 - raised again in __exit__
            self._error = exc


def end_offsets(bootstrap_servers: str, topic: str, partitions: int) -> dict[int, int]:
    """``{partition: high watermark}`` of ``topic`` (the next offset to be written).

    Raises:
        KafkaException: the broker did not answer within 30 s.
    """
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "conveyor-tests-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def group_protocol_of(bootstrap_servers: str, group: str) -> str:
    """The protocol the broker runs ``group`` on: ``"classic"`` or ``"consumer"`` (KIP-848),
    ``"unknown"`` for no such group.

    Raises:
        KafkaException: the group could not be described within 30 s.
    """
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    description = admin.describe_consumer_groups([group], request_timeout=30)[group].result(timeout=30)
    return description.type.name.lower()


def committed_offsets(bootstrap_servers: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """``{partition: committed next-offset}`` of ``group`` on ``topic`` (absent = none).
    Waits out a group coordinator that is still loading (a broker just started).

    Raises:
        KafkaException: any other error, or the coordinator not ready within 30 s.
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    not_ready = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                 KafkaError.COORDINATOR_NOT_AVAILABLE)
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                result = consumer.committed([KafkaTopicPartition(topic, p) for p in range(partitions)], timeout=30)
                break
            except KafkaException as exc:
                if exc.args[0].code() not in not_ready or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in result if tp.offset >= 0}


def consume_all(bootstrap_servers: str, topic: str, expected: int, timeout_s: float = 60.0) -> list[Any]:
    """Read every partition of ``topic`` from the beginning, ``read_committed``, until
    ``expected`` messages arrived or ``timeout_s`` passed; returns confluent-kafka
    ``Message`` objects. Partitions are assigned directly (no consumer-group join)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": "conveyor-test-reader",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "fetch.queue.backoff.ms": 10,
    })
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        partitions: list[int] = []
        while not partitions and time.monotonic() < deadline:
            metadata = consumer.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))
            info = metadata.topics.get(topic)
            if info is not None and info.error is None:
                partitions = list(info.partitions)
            else:
                time.sleep(0.2)
        consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while len(out) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is None:
                    out.append(msg)
    finally:
        consumer.close()
    return out


def dead_letter_context(headers: list[tuple[str, bytes | None]] | None) -> dict[str, str | None]:
    """A dead letter's headers as text, but for its connector's name and the stack trace:
    what two runs of one connector under different names, through different code paths
    (the record path, the batch path), must agree on. The record's own headers come too
    (bytes that are not UTF-8 escaped; of a repeated key, the last)."""
    return {k: None if v is None else v.decode(errors="backslashreplace") for k, v in headers or ()
            if k not in ("__connect.errors.connector.name", "__connect.errors.exception.stacktrace")}
