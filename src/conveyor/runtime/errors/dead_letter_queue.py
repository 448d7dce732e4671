"""The dead-letter queue: tolerated bad records, as they were read, with context headers.

Headers are Kafka Connect's (``DeadLetterQueueReporter``) when
``errors.deadletterqueue.context.headers.enable=true``: ``__connect.errors.topic``,
``.partition``, ``.offset``, ``.connector.name``, ``.task.id``, ``.stage``,
``.class.name``, ``.exception.class.name``, ``.exception.message``,
``.exception.stacktrace``, all UTF-8 strings.
"""

from __future__ import annotations

import logging
import threading
import traceback
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from conveyor.runtime.errors.tolerance import FailedRecord, Reporter, Stage

log = logging.getLogger(__name__)
HEADER_PREFIX = "__connect.errors."


def context_headers(
    failed: FailedRecord, stage: Stage, cls_name: str, error: BaseException, connector: str, task_id: int
) -> list[tuple[str, bytes]]:
    """The ``__connect.errors.*`` headers describing one failure."""
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    values = {
        "topic": failed.topic,
        "partition": str(failed.partition),
        "offset": str(failed.offset),
        "connector.name": connector,
        "task.id": str(task_id),
        "stage": stage.value,
        "class.name": cls_name,
        "exception.class.name": f"{type(error).__module__}.{type(error).__qualname__}",
        "exception.message": str(error),
        "exception.stacktrace": trace,
    }
    return [(HEADER_PREFIX + k, v.encode("utf-8")) for k, v in values.items()]


DELIVERY_TIMEOUT_MS = 120_000


class DeadLetterQueue(Reporter):
    """Writes failed records to ``errors.deadletterqueue.topic.name``.

    Each :meth:`report` future is done within ``delivery.timeout.ms`` (120000 unless
    ``producer_config`` sets it or librdkafka's alias ``message.timeout.ms``: the Java
    producer's default, which Connect's DLQ producer has, instead of librdkafka's 300000), so a
    task waiting on it never waits on an unreachable broker for longer."""

    def __init__(
        self, producer_config: dict[str, Any], topic: str, connector: str, task_id: int, context_headers_enabled: bool
    ) -> None:
        timeout = {} if {"delivery.timeout.ms", "message.timeout.ms"} & producer_config.keys() else {
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS}
        self._producer = Producer({**timeout, **producer_config, "enable.idempotence": True, "linger.ms": 5})
        self.topic = topic
        self._connector = connector
        self._task_id = task_id
        self._headers_enabled = context_headers_enabled
        self.sent = 0
        self.failures = 0  # records the producer could not write (Connect's deadletterqueue-produce-failures)
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll, name=f"dlq-{connector}-{task_id}", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        """Serve delivery callbacks so that report futures complete without the task
        thread's help (a task may wait on one inside ``put``)."""
        while not self._closed.is_set():
            self._producer.poll(0.1)

    def report(self, failed: FailedRecord, stage: Stage, cls_name: str, error: BaseException) -> Future[None]:
        future: Future[None] = Future()
        headers = list(failed.headers or [])
        if self._headers_enabled:
            headers += context_headers(failed, stage, cls_name, error, self._connector, self._task_id)

        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            if err is None:
                future.set_result(None)
            else:
                self.failures += 1
                future.set_exception(KafkaException(err))

        self._producer.produce(
            self.topic, key=failed.key, value=failed.value, headers=headers, on_delivery=on_delivery,
            **({"timestamp": failed.timestamp} if failed.timestamp else {}),
        )
        self.sent += 1
        return future

    def flush(self, timeout_s: float) -> None:
        """Send what is queued; delivery callbacks complete the report futures."""
        self._producer.flush(timeout_s)

    def close(self) -> None:
        self._producer.flush(10.0)
        self._closed.set()
        self._poller.join(timeout=5)
