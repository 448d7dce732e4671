"""The RabbitMQ sink, driven directly (no Spark, no Kafka) against a real RabbitMQ.

``rabbitmq_server`` (from ``conveyor.testing.pytest_rabbitmq``) is a private RabbitMQ node
started from Debian's ``rabbitmq-server`` package (or ``$CONVEYOR_RABBITMQ_URL``); the tests
that disturb the broker use ``rabbitmq_node``, a node the harness controls. The runtime is replaced by
:class:`TaskContext`, whose ``is_closing()`` the tests toggle. Confirms are held back with the
broker's own mechanisms: freezing the node (SIGSTOP), a memory alarm (the broker blocks
publishers), a ``reject-publish`` queue (the broker nacks), deleting a queue under the task
(the broker returns messages as unroutable), stopping the RabbitMQ application.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from conveyor.api import (
    ConfigError,
    ConnectError,
    DataError,
    ErrantRecordReporter,
    Header,
    RetriableError,
    SinkRecord,
    TopicPartition,
)
from conveyor.connectors.rabbitmq import RabbitMQSinkConnector, RabbitMQSinkTask
from conveyor.connectors.rabbitmq.config import load_config
from conveyor.testing.contexts import RecordingReporter, StubSinkTaskContext
from conveyor.testing.ports import free_port

pytestmark = pytest.mark.integration


class TaskContext(StubSinkTaskContext):
    """The stand-in runtime; the RabbitMQ sink must never rewind."""

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        raise AssertionError("the RabbitMQ sink never rewinds")

    @contextlib.contextmanager
    def closing_commit(self) -> Iterator[None]:
        """``is_closing()`` is true inside the block, as during the runtime's closing commit."""
        self.closing = True
        try:
            yield
        finally:
            self.closing = False


# -- helpers ----------------------------------------------------------------------------------


def rec(
    topic: str,
    offset: int,
    value: Any = None,
    *,
    partition: int = 0,
    key: Any = None,
    headers: Sequence[Header] = (),
    timestamp: int | None = None,
) -> SinkRecord:
    return SinkRecord(
        topic=topic,
        kafka_partition=partition,
        key=key,
        value=f"{topic}#{partition}@{offset}" if value is None else value,
        kafka_offset=offset,
        headers=tuple(headers),
        timestamp=timestamp,
    )


def recs(topic: str, start: int, stop: int, *, partition: int = 0) -> list[SinkRecord]:
    return [rec(topic, i, partition=partition) for i in range(start, stop)]


def offsets_in(messages: Sequence[Any]) -> list[int]:
    return sorted(m.headers["x-kafka-offset"] for m in messages)


def wait_for(condition, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def names(rabbitmq_queue_name):
    """Unique topic names; with the default ``${topic}`` format they are also the queue names,
    and they are deleted after the test."""
    return rabbitmq_queue_name


@contextlib.contextmanager
def task_factory(url: str) -> Iterator[Any]:
    """``make(topics, partitions=..., reporter=None, **config) -> (task, context)``: a started,
    opened task on ``url`` (config keys with ``_`` for ``.``); stopped afterwards if still running."""
    started: list[RabbitMQSinkTask] = []

    def make(
        topics: Sequence[str],
        partitions: Sequence[TopicPartition] = (),
        *,
        reporter: ErrantRecordReporter | None = None,
        **config: Any,
    ) -> tuple[RabbitMQSinkTask, TaskContext]:
        cfg = {"name": "rabbit-test", "rabbitmq.url": url, "topics": ",".join(topics)}
        cfg.update({key.replace("_", "."): value for key, value in config.items()})
        task = RabbitMQSinkTask()
        context = TaskContext(cfg, reporter)
        task.initialize(context)
        task.start(cfg)
        started.append(task)
        parts = list(partitions) or [TopicPartition(t, 0) for t in topics]
        context.assigned.update(parts)
        task.open(parts)
        return task, context

    try:
        yield make
    finally:
        for task in started:
            with contextlib.suppress(Exception):
                task.stop(connector_deleted=False)


@pytest.fixture
def make_task(rabbitmq_url) -> Iterator[Any]:
    """Tasks on the session's broker (``rabbitmq_server``)."""
    with task_factory(rabbitmq_url) as make:
        yield make


@pytest.fixture
def make_node_task(rabbitmq_node) -> Iterator[Any]:
    """Tasks on ``rabbitmq_node``, the broker the harness controls (pause, rabbitmqctl, restart)."""
    with task_factory(rabbitmq_node.url) as make:
        yield make


def confirm_all(task: RabbitMQSinkTask, context: TaskContext, offsets: Mapping[TopicPartition, int]):
    with context.closing_commit():
        return task.pre_commit(offsets)


# -- provisioning ------------------------------------------------------------------------------


def test_start_declares_durable_queues_for_configured_topics(make_node_task, names, rabbitmq_node):
    a, b = names("a"), names("b")
    task, _ = make_node_task([a, b])
    assert task.declared_queues == [a, b]
    for queue in (a, b):
        assert rabbitmq_node.queue_exists(queue), queue  # passive declare
        assert rabbitmq_node.queue_is_durable(queue), queue
    listed = dict(
        line.split("\t") for line in rabbitmq_node.ctl("list_queues", "name", "durable").splitlines() if "\t" in line
    )
    assert listed[a] == listed[b] == "true"


def test_queue_name_format_and_topics_seen_at_runtime(make_task, names, rabbitmq_server):
    known, routed = names("known"), names("routed")
    fmt = "sink.${topic}"
    task, context = make_task([known], [TopicPartition(known, 0)], rabbitmq_queue_name_format=fmt)
    assert task.declared_queues == [f"sink.{known}"]
    assert not rabbitmq_server.queue_exists(routed) and not rabbitmq_server.queue_exists(f"sink.{routed}")
    # a routing transformation sent this record to another topic: its queue is declared on first use
    record = rec(known, 0).new_record(topic=routed)
    task.put([record])
    assert confirm_all(task, context, {TopicPartition(known, 0): 1}) == {TopicPartition(known, 0): 1}
    assert task.declared_queues == [f"sink.{known}", f"sink.{routed}"]
    assert rabbitmq_server.queue_is_durable(f"sink.{routed}")
    [message] = rabbitmq_server.get_messages(f"sink.{routed}")
    assert message.headers["x-kafka-topic"] == known  # where it was consumed
    task.stop(connector_deleted=True)
    assert not rabbitmq_server.queue_exists(f"sink.{known}")
    assert not rabbitmq_server.queue_exists(f"sink.{routed}")


# -- publishing --------------------------------------------------------------------------------


def test_messages_are_published_persistent_with_kafka_headers(make_task, names, rabbitmq_server):
    topic = names()
    tp = TopicPartition(topic, 0)
    task, context = make_task([topic])
    task.put(
        [
            rec(
                topic,
                10,
                "plain text",
                key="k1",
                timestamp=1_700_000_000_123,
                headers=[Header("trace", b"abc"), Header("empty", None), Header("dup", b"1"), Header("dup", b"2")],
            ),
            rec(topic, 11, b"\x00\x01raw", key=b"\xff"),
            rec(topic, 12, {"id": 7, "tags": ["x", "y"], "blob": b"\x01\x02"}, key={"id": 7}),
            rec(topic, 13, [1, 2.5, None]),
        ]
    )
    task.put([rec(topic, 14, None).new_record(value=None)])  # a tombstone: ignored by default
    assert confirm_all(task, context, {tp: 15}) == {tp: 15}
    assert task.stats["confirmed"] == 4

    m10, m11, m12, m13 = rabbitmq_server.get_messages(topic)
    assert m10.body == b"plain text"
    assert m10.properties.content_type == "text/plain; charset=utf-8"
    assert m10.properties.delivery_mode == 2
    assert m10.properties.message_id == f"{topic}-0-10"
    assert m10.properties.timestamp == 1_700_000_000
    assert m10.headers["x-kafka-topic"] == topic
    assert m10.headers["x-kafka-partition"] == 0
    assert m10.headers["x-kafka-offset"] == 10
    assert m10.headers["x-kafka-key"] == "k1"
    assert m10.headers["x-kafka-timestamp"] == 1_700_000_000_123
    assert m10.headers["trace"] == b"abc"
    assert m10.headers["empty"] is None
    assert m10.headers["dup"] == [b"1", b"2"]
    assert m11.body == b"\x00\x01raw" and m11.properties.content_type is None
    assert m11.headers["x-kafka-key"] == b"\xff"
    assert m12.properties.content_type == "application/json"
    assert json.loads(m12.body) == {"id": 7, "tags": ["x", "y"], "blob": "AQI="}
    assert json.loads(m12.headers["x-kafka-key"]) == {"id": 7}
    assert json.loads(m13.body) == [1, 2.5, None]
    assert "x-kafka-key" not in m13.headers and "x-kafka-timestamp" not in m13.headers


def test_transient_delivery_mode_and_exchange(make_task, names, rabbitmq_server):
    topic = names()
    exchange = names("ex")
    with rabbitmq_server.channel() as ch:
        ch.exchange_declare(exchange=exchange, exchange_type="direct", durable=True)
    try:
        task, context = make_task([topic], rabbitmq_exchange=exchange, rabbitmq_delivery_mode="transient")
        task.put(recs(topic, 0, 3))
        assert confirm_all(task, context, {TopicPartition(topic, 0): 3}) == {TopicPartition(topic, 0): 3}
        messages = rabbitmq_server.get_messages(topic)
        assert [m.exchange for m in messages] == [exchange] * 3
        assert [m.routing_key for m in messages] == [topic] * 3
        assert {m.properties.delivery_mode for m in messages} == {1}
    finally:
        with rabbitmq_server.channel() as ch:
            ch.exchange_delete(exchange=exchange)


def test_missing_exchange_fails_start(make_task, names):
    with pytest.raises(ConnectError, match=r"rabbitmq\.exchange 'no-such-exchange' .*404"):
        make_task([names()], rabbitmq_exchange="no-such-exchange")


def test_throughput_with_publisher_confirms(make_task, names, rabbitmq_server):
    """Persistent messages of about 250 bytes, confirmed; prints the rate (a sanity floor only)."""
    topic = names()
    tp = TopicPartition(topic, 0)
    task, context = make_task([topic])
    n, batch = 20_000, 500
    value = {"id": 1, "customer": "c" * 200, "amount": 12.5}
    started = time.monotonic()
    for first in range(0, n, batch):
        task.put([rec(topic, i, value) for i in range(first, first + batch)])
    assert confirm_all(task, context, {tp: n}) == {tp: n}
    elapsed = time.monotonic() - started
    print(
        f"\nRabbitMQ sink: {n} persistent messages published and confirmed in {elapsed:.2f}s = {n / elapsed:.0f} msg/s"
    )
    assert rabbitmq_server.queue_message_count(topic) == n
    assert n / elapsed > 500


# -- commits: only what the broker confirmed ----------------------------------------------------


def test_pre_commit_returns_only_confirmed_offsets(make_node_task, names, rabbitmq_node):
    topic = names()
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, context = make_node_task([topic], [tp0, tp1], rabbitmq_confirm_timeout_ms=800)
    task.put(recs(topic, 0, 5, partition=0))
    assert confirm_all(task, context, {tp0: 5}) == {tp0: 5}

    with rabbitmq_node.paused():  # the broker answers nothing: no confirms
        task.put(recs(topic, 5, 10, partition=0) + recs(topic, 0, 4, partition=1))
        # periodic commit: tp0 up to its last confirmed record; tp1 has nothing confirmed
        assert task.pre_commit({tp0: 10, tp1: 4}) == {tp0: 5}
        # closing commit: waits (bounded by rabbitmq.confirm.timeout.ms), still nothing more
        started = time.monotonic()
        assert confirm_all(task, context, {tp0: 10, tp1: 4}) == {tp0: 5}
        assert 0.7 < time.monotonic() - started < 5
        assert task.unconfirmed() == 9

    wait_for(lambda: task.pre_commit({tp0: 10, tp1: 4}) == {tp0: 10, tp1: 4}, what="confirms after resume")
    assert rabbitmq_node.queue_message_count(topic) == 14


def test_closing_pre_commit_waits_for_outstanding_confirms(make_node_task, names, rabbitmq_node):
    topic = names()
    tp = TopicPartition(topic, 0)
    task, context = make_node_task([topic], rabbitmq_confirm_timeout_ms=20_000)
    rabbitmq_node.pause()
    resumer = threading.Timer(1.0, rabbitmq_node.resume)
    try:
        task.put(recs(topic, 0, 50))
        assert task.pre_commit({tp: 50}) == {}  # periodic: nothing confirmed yet, nothing waited for
        resumer.start()
        started = time.monotonic()
        assert confirm_all(task, context, {tp: 50}) == {tp: 50}
        waited = time.monotonic() - started
    finally:
        resumer.cancel()
        rabbitmq_node.resume()
    assert 0.8 < waited < 15, waited
    assert task.stats["resent"] == 0  # nothing needed to be sent twice
    assert offsets_in(rabbitmq_node.get_messages(topic)) == list(range(50))


def test_put_waits_for_confirms_beyond_max_in_flight_then_asks_for_a_retry(make_node_task, names, rabbitmq_node):
    topic = names()
    tp = TopicPartition(topic, 0)
    task, context = make_node_task([topic], rabbitmq_max_in_flight=5, rabbitmq_confirm_timeout_ms=300)
    with rabbitmq_node.paused():
        task.put(recs(topic, 0, 5))
        started = time.monotonic()
        with pytest.raises(RetriableError, match=r"5 message\(s\) still unconfirmed.*max\.in\.flight=5"):
            task.put(recs(topic, 5, 6))
        assert time.monotonic() - started >= 0.3
    task.put(recs(topic, 5, 6))  # the runtime's redelivery: confirms arrived meanwhile
    assert confirm_all(task, context, {tp: 6}) == {tp: 6}
    assert offsets_in(rabbitmq_node.get_messages(topic)) == list(range(6))  # offset 5 published once


def test_nacked_messages_are_not_committed_and_are_published_again(make_task, names, rabbitmq_server):
    topic = names()
    tp = TopicPartition(topic, 0)
    task, context = make_task(
        [topic],
        rabbitmq_queue_arguments=json.dumps({"x-max-length": 3, "x-overflow": "reject-publish"}),
        rabbitmq_retry_backoff_ms=50,
        rabbitmq_confirm_timeout_ms=2000,
    )
    task.put(recs(topic, 0, 5))
    assert confirm_all(task, context, {tp: 5}) == {tp: 3}  # the broker nacked offsets 3 and 4
    assert task.stats["nacked"] >= 2
    assert offsets_in(rabbitmq_server.get_messages(topic)) == [0, 1, 2]  # a consumer drains the queue
    time.sleep(0.1)
    task.put([])  # failed messages are published again after rabbitmq.retry.backoff.ms
    assert confirm_all(task, context, {tp: 5}) == {tp: 5}
    assert offsets_in(rabbitmq_server.get_messages(topic)) == [3, 4]


def test_queue_deleted_under_a_running_task_is_declared_again(make_task, names, rabbitmq_server):
    topic = names()
    tp = TopicPartition(topic, 0)
    task, context = make_task([topic], rabbitmq_retry_backoff_ms=0)
    task.put(recs(topic, 0, 3))
    assert confirm_all(task, context, {tp: 3}) == {tp: 3}
    rabbitmq_server.delete_queue(topic)
    task.put(recs(topic, 3, 6))  # unroutable: returned by the broker, then acked
    assert confirm_all(task, context, {tp: 6}) == {tp: 6}
    assert task.stats["returned"] >= 1
    assert rabbitmq_server.queue_is_durable(topic)
    assert offsets_in(rabbitmq_server.get_messages(topic)) == [3, 4, 5]


def test_connection_loss_is_retriable_and_unconfirmed_messages_are_published_again(
    make_node_task, names, rabbitmq_node
):
    topic = names()
    tp = TopicPartition(topic, 0)
    task, context = make_node_task([topic], rabbitmq_confirm_timeout_ms=500, rabbitmq_retry_backoff_ms=100)
    task.put(recs(topic, 0, 5))
    assert confirm_all(task, context, {tp: 5}) == {tp: 5}

    # a memory alarm: RabbitMQ stops reading from publishing connections, so no confirms
    rabbitmq_node.ctl("set_vm_memory_high_watermark", "0")
    try:
        wait_for(lambda: "memory" in rabbitmq_node.ctl("eval", "rabbit_alarm:get_alarms()."), what="memory alarm")
        task.put(recs(topic, 5, 10))
        assert confirm_all(task, context, {tp: 10}) == {tp: 5}
        rabbitmq_node.ctl("stop_app")  # closes every connection, then refuses new ones
        try:
            with pytest.raises(RetriableError, match=r"127\.0\.0\.1:\d+.*lost the connection.*will reconnect") as lost:
                task.put(recs(topic, 10, 15))
            assert "guest:guest" not in str(lost.value)
            with pytest.raises(RetriableError, match="cannot connect.*Connection refused"):
                task.put(recs(topic, 10, 15))
            assert task.pre_commit({tp: 10}) == {tp: 5}  # commits still only what was confirmed
        finally:
            rabbitmq_node.ctl("start_app")
    finally:
        rabbitmq_node.ctl("set_vm_memory_high_watermark", "0.4")
    rabbitmq_node.wait_ready()

    task.put(recs(topic, 10, 15))  # reconnects, publishes 5..9 again, then the batch
    assert confirm_all(task, context, {tp: 15}) == {tp: 15}
    assert task.stats["lost"] == 5 and task.stats["resent"] == 5
    assert offsets_in(rabbitmq_node.get_messages(topic)) == list(range(15))


def test_durable_queue_and_persistent_messages_survive_a_broker_restart(make_node_task, names, rabbitmq_node):
    topic = names()
    tp = TopicPartition(topic, 0)
    task, context = make_node_task([topic])
    task.put(recs(topic, 0, 3))
    assert confirm_all(task, context, {tp: 3}) == {tp: 3}
    rabbitmq_node.restart()
    assert offsets_in(rabbitmq_node.get_messages(topic, ack=False)) == [0, 1, 2]
    with pytest.raises(RetriableError, match="lost the connection.*reconnected"):  # the old connection is gone
        task.put(recs(topic, 3, 4))
    task.put(recs(topic, 3, 4))
    assert confirm_all(task, context, {tp: 4}) == {tp: 4}
    assert offsets_in(rabbitmq_node.get_messages(topic)) == [0, 1, 2, 3]


# -- record errors -----------------------------------------------------------------------------


def test_records_that_cannot_be_encoded(make_task, names, rabbitmq_server):
    topic = names()
    tp = TopicPartition(topic, 0)
    task, _ = make_task([topic], behavior_on_null_values="fail")
    with pytest.raises(DataError, match="null value"):
        task.put([rec(topic, 0).new_record(value=None)])
    with pytest.raises(DataError, match="JSON"):
        task.put([rec(topic, 0, {"x": object()})])

    reporter = RecordingReporter()
    task2, context2 = make_task([topic], reporter=reporter)
    task2.put([rec(topic, 0, "ok"), rec(topic, 1, {"bad": float("nan")}), rec(topic, 2, "ok too")])
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    assert confirm_all(task2, context2, {tp: 3}) == {tp: 3}
    assert [m.body for m in rabbitmq_server.get_messages(topic)] == [b"ok", b"ok too"]


# -- stop and deletion -------------------------------------------------------------------------


def test_stop_connector_deleted_deletes_exactly_the_task_queues(make_task, names, rabbitmq_server):
    a, b, routed, other = names("a"), names("b"), names("routed"), names("other")
    rabbitmq_server.declare_queue(other)  # someone else's queue
    task, context = make_task([a, b])
    task.put([rec(a, 0), rec(a, 1).new_record(topic=routed)])
    assert confirm_all(task, context, {TopicPartition(a, 0): 2}) == {TopicPartition(a, 0): 2}
    rabbitmq_server.delete_queue(b)  # deleted by hand meanwhile

    task.stop(connector_deleted=True)

    assert task.deleted == [
        f"deleted queue {a!r} (1 message(s) with it)",
        f"queue {b!r} was already gone",
        f"deleted queue {routed!r} (1 message(s) with it)",
    ]
    for queue in (a, b, routed):
        assert not rabbitmq_server.queue_exists(queue), queue
    assert rabbitmq_server.queue_exists(other)


def test_stop_without_deletion_deletes_nothing(make_task, names, rabbitmq_server):
    a, b = names("a"), names("b")
    task, context = make_task([a, b])
    task.put([rec(a, 0)])
    assert confirm_all(task, context, {TopicPartition(a, 0): 1}) == {TopicPartition(a, 0): 1}
    task.stop(connector_deleted=False)
    assert task.deleted == []
    assert rabbitmq_server.queue_message_count(a) == 1
    assert rabbitmq_server.queue_exists(b)


def test_connector_declares_at_start_and_deletes_configured_queues_on_deletion(names, rabbitmq_url, rabbitmq_server):
    a, b, other = names("a"), names("b"), names("other")
    rabbitmq_server.declare_queue(other)
    config = {
        "name": "rabbit-conn",
        "rabbitmq.url": rabbitmq_url,
        "topics": f"{a}, {b}",
        "rabbitmq.queue.name.format": "${topic}",
    }

    connector = RabbitMQSinkConnector()
    connector.start(config)
    assert rabbitmq_server.queue_is_durable(a) and rabbitmq_server.queue_is_durable(b)
    assert connector.task_configs(3) == [config] * 3
    connector.stop(connector_deleted=False)
    assert rabbitmq_server.queue_exists(a) and rabbitmq_server.queue_exists(b)
    assert connector.cleanup_report() == []

    # deletion with no task running (what `conveyor cleanup` does): a queue already deleted by hand is fine
    rabbitmq_server.publish(a, b"left over")
    rabbitmq_server.delete_queue(b)
    deleting = RabbitMQSinkConnector()
    deleting.start(config)  # declares b again
    rabbitmq_server.delete_queue(b)
    deleting.stop(connector_deleted=True)
    assert deleting.cleanup_report() == [
        f"deleted queue {a!r} (1 message(s) with it)",
        f"queue {b!r} was already gone",
    ]
    assert not rabbitmq_server.queue_exists(a) and not rabbitmq_server.queue_exists(b)
    assert rabbitmq_server.queue_exists(other)


# -- configuration and connection errors --------------------------------------------------------


def test_unreachable_broker_is_a_connect_error_naming_host_and_port(names):
    port = free_port()  # nothing listens there
    url = f"amqp://app:s3cret-pw@127.0.0.1:{port}/%2F"
    config = {"rabbitmq.url": url, "topics": names(), "rabbitmq.connection.timeout.ms": 2000}
    task = RabbitMQSinkTask()
    task.initialize(TaskContext(config))
    with pytest.raises(ConnectError) as task_error:
        task.start(config)
    with pytest.raises(ConnectError) as connector_error:
        RabbitMQSinkConnector().start(config)
    for error in (task_error.value, connector_error.value):
        message = str(error)
        assert f"127.0.0.1:{port}" in message and "user 'app'" in message
        assert "Connection refused" in message
        assert "s3cret-pw" not in message
        assert not isinstance(error, RetriableError)


def test_wrong_password_is_a_connect_error_without_the_password(rabbitmq_server, names):
    url = f"amqp://guest:not-the-password@127.0.0.1:{rabbitmq_server.port}/%2F"
    config = {"rabbitmq.url": url, "topics": names()}
    task = RabbitMQSinkTask()
    task.initialize(TaskContext(config))
    with pytest.raises(ConnectError, match=r"127\.0\.0\.1:\d+ .*ACCESS_REFUSED") as error:
        task.start(config)
    assert "not-the-password" not in str(error.value)


@pytest.mark.parametrize(
    ("config", "key", "fragment"),
    [
        ({}, "rabbitmq.url", "Field required"),
        ({"rabbitmq.url": "http://h:5672/"}, "rabbitmq.url", "must start with amqp:// or amqps://"),
        ({"rabbitmq.url": "amqp://u:pw@h:notaport/"}, "rabbitmq.url", "not a valid amqp:// URL"),
        ({"rabbitmq.max.in.flight": "many"}, "rabbitmq.max.in.flight", "valid integer"),
        ({"rabbitmq.max.in.flight": "0"}, "rabbitmq.max.in.flight", "greater than or equal to 1"),
        ({"rabbitmq.confirm.timeout.ms": "soon"}, "rabbitmq.confirm.timeout.ms", "valid integer"),
        ({"rabbitmq.delivery.mode": "sometimes"}, "rabbitmq.delivery.mode", "'persistent' or 'transient'"),
        ({"rabbitmq.queue.arguments": "{not json"}, "rabbitmq.queue.arguments", "not valid JSON"),
        ({"rabbitmq.queue.arguments": '{"x-max-length": 1.5}'}, "rabbitmq.queue.arguments", "float"),
        ({"rabbitmq.queue.name.format": "amq.${topic}"}, "rabbitmq.queue.name.format", "reserves"),
        ({"behavior.on.null.values": "explode"}, "behavior.on.null.values", "'ignore' or 'fail'"),
        ({"rabbitmq.exchange": "amq.mine"}, "rabbitmq.exchange", "reserved"),
    ],
)
def test_bad_configuration_names_key_and_expectation(config, key, fragment):
    full = {"rabbitmq.url": "amqp://guest:guest@127.0.0.1:5672/%2F", "topics": "orders", **config}
    if not config:
        full.pop("rabbitmq.url")
    with pytest.raises(ConfigError) as error:
        load_config(full)
    assert key in error.value.errors, error.value.errors
    assert fragment in error.value.errors[key], error.value.errors[key]
    with pytest.raises(ConfigError):
        RabbitMQSinkConnector().validate(full)
    assert "pw@" not in str(error.value)


def test_valid_configuration_defaults():
    cfg = load_config(
        {
            "rabbitmq.url": "amqp://guest:guest@localhost/%2F",
            "topics": "a,b",
            "rabbitmq.delivery.mode": "2",
            "rabbitmq.queue.arguments": {"x-queue-type": "quorum"},
        }
    )
    assert cfg.configured_queues() == ["a", "b"]
    assert cfg.delivery_mode.amqp == 2 and cfg.exchange == "" and cfg.queue_arguments == {"x-queue-type": "quorum"}
    assert (cfg.confirm_timeout_ms, cfg.max_in_flight, cfg.connection_timeout_ms) == (30_000, 10_000, 10_000)
    assert "guest:guest" not in repr(cfg)
