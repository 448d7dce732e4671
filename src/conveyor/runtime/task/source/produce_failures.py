"""A source task's records the producer could not write (at least once; stage
``KAFKA_PRODUCE``): tried again while ``errors.retry.timeout`` allows, then handed to
``errors.tolerance``. Runs on the task's thread (delivery callbacks come inside
``producer.poll``/``flush`` there).

As Kafka Connect's ``WorkerSourceTask.producerSendFailed``: under ``errors.tolerance=all`` a
record that cannot be written is skipped (logged with ``errors.log.enable``; sources have no
dead-letter queue) and its source offset may be committed; under ``none`` the task fails naming
the stage. **Beyond Connect**, which gives up once the producer's own ``delivery.timeout.ms``
has passed: a retriable failure (the partition has no leader, too few in-sync replicas, a
timeout, the broker unreachable, the topic not there yet) is produced again after a backoff
growing from 300 ms to ``errors.retry.delay.max.ms``, until ``errors.retry.timeout`` ms have
passed since its first failure (``-1``: forever; ``0``, the default: never). A record produced
again lands after records sent since, within its partition too.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from conveyor.runtime.errors.tolerance import FailedRecord, Stage, ToleranceOperator

log = logging.getLogger(__name__)

RETRIABLE = frozenset({
    KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
    KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.NETWORK_EXCEPTION, KafkaError.KAFKA_STORAGE_ERROR, KafkaError._QUEUE_FULL,
})
"""Delivery errors worth trying again (the Java client's ``RetriableException`` kinds, and
librdkafka's local timeouts and transport errors): the record itself is not at fault."""
FIRST_DELAY_S = 0.3

OnDelivery = Callable[[KafkaError | None, Any], None]


def retriable(err: KafkaError) -> bool:
    """Whether a delivery error may go away on its own (see :data:`RETRIABLE`)."""
    return err.retriable() or err.code() in RETRIABLE


@dataclass(order=True)
class _Retry:
    due: float
    seq: int
    first_failed: float = field(compare=False)
    attempt: int = field(compare=False)
    message: dict[str, Any] = field(compare=False)
    on_delivery: OnDelivery = field(compare=False)
    on_skip: Callable[[], None] = field(compare=False)


class ProduceFailures:
    """The failed deliveries of one task's producer and their retries.

    ``failed`` is called by a delivery callback; :meth:`handle`, on the task's loop, produces
    again what is due and hands to ``errors.tolerance`` what may not be tried again.
    """

    def __init__(self, tolerance: ToleranceOperator, cls_name: str) -> None:
        self._tolerance = tolerance
        self._cls_name = cls_name
        self._failed: list[tuple[KafkaError, dict[str, Any], OnDelivery, Callable[[], None], float, int]] = []
        self._retries: list[_Retry] = []
        self._seq = itertools.count()
        self.retried = 0
        self.skipped = 0

    def __bool__(self) -> bool:
        """Whether records are waiting to be tried again or decided on."""
        return bool(self._failed or self._retries)

    def failed(self, err: KafkaError, msg: Any, on_delivery: OnDelivery, on_skip: Callable[[], None],
               first_failed: float | None = None, attempt: int = 0) -> None:
        """A delivery of ``msg`` failed with ``err``; ``on_delivery`` is what its next delivery
        reports to, ``on_skip`` what to call if it is skipped. Only queues: :meth:`handle` decides."""
        message = {"topic": msg.topic(), "value": msg.value(), "key": msg.key(), "headers": msg.headers(),
                   "partition": msg.partition(), "timestamp": msg.timestamp()}
        self._failed.append((err, message, on_delivery, on_skip,
                             time.monotonic() if first_failed is None else first_failed, attempt))

    def handle(self, producer: Producer) -> None:
        """Decide on the failures queued and produce again the retries that are due.

        Raises:
            ConnectError: a record that may not be tried again under ``errors.tolerance=none``
                (Kafka Connect's ``Tolerance exceeded`` message, stage ``KAFKA_PRODUCE``).
        """
        failed, self._failed = self._failed, []
        now = time.monotonic()
        for err, message, on_delivery, on_skip, first, attempt in failed:
            timeout_ms = self._tolerance.retry_timeout_ms
            within = timeout_ms < 0 or (timeout_ms > 0 and (now - first) * 1000 < timeout_ms)
            if retriable(err) and within:
                delay = min(FIRST_DELAY_S * 2 ** attempt, self._tolerance.retry_delay_max_ms / 1000)
                heapq.heappush(self._retries, _Retry(now + delay, next(self._seq), first, attempt + 1, message,
                                                     on_delivery, on_skip))
                continue
            ts_type, ts = message["timestamp"]
            partition = message["partition"] if message["partition"] is not None else -1  # -1: none chosen yet
            record = FailedRecord(message["topic"], partition, -1, message["key"], message["value"],
                                  message["headers"], ts if ts_type else None)
            self._tolerance.failed(record, Stage.KAFKA_PRODUCE, self._cls_name, KafkaException(err))
            self.skipped += 1
            log.warning("skipped a record the producer could not write to %s: %s", message["topic"], err.str())
            on_skip()
        while self._retries and self._retries[0].due <= now:
            retry = heapq.heappop(self._retries)
            try:
                self._produce(producer, retry)
            except BufferError:  # the producer's queue is full: again once it drains
                retry.due = now + 0.05
                heapq.heappush(self._retries, retry)
                break

    def _produce(self, producer: Producer, retry: _Retry) -> None:
        message = retry.message

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                retry.on_delivery(None, msg)
            else:
                self.failed(err, msg, retry.on_delivery, retry.on_skip, retry.first_failed, retry.attempt)

        extra: dict[str, Any] = {}
        if message["partition"] is not None and message["partition"] >= 0:
            extra["partition"] = message["partition"]
        ts_type, ts = message["timestamp"]
        if ts_type:
            extra["timestamp"] = ts
        if message["headers"]:
            extra["headers"] = message["headers"]
        producer.produce(message["topic"], message["value"], message["key"], on_delivery=on_delivery, **extra)
        self.retried += 1
        self._tolerance.retries += 1  # Connect's total-retries
