"""A sink task's commits (:class:`SinkCommits`, a part of
:class:`~conveyor.runtime.task.sink.runner.SinkTaskRunner`): periodic and closing-aware commits
(KIP-275), closing partitions, and leaving the group. Runs on the task's thread.

Why a closing commit cannot hang on a rebalance (librdkafka's classic group protocol, as
its ``rdkafka_cgrp.c`` and the broker's request handling show):

* A broker answers one request per connection at a time, and a consumer sends its
  ``OffsetCommit`` on the same coordinator connection as its ``JoinGroup``. While a
  rebalance waits for a member that neither rejoins nor leaves, this member's
  ``JoinGroup`` is parked at the coordinator and a synchronous commit queued behind it
  waits for that member's ``session.timeout.ms`` (6 s here, see below; librdkafka's
  default is 45 s).
* A cooperative consumer whose assignment is empty does not send ``LeaveGroup`` from
  ``close()`` (``rd_kafka_cgrp_revoke_all_rejoin`` returns early when terminating), so
  the broker keeps it as a member until its session expires: a task without partitions
  that stops first left every other closing task waiting (measured: 44 s). So every
  consumer here is ``unsubscribe()``-d before ``close()``: that path sends ``LeaveGroup``
  whatever the assignment (measured: the broker sees the member gone in 0.2 s).
* Static membership (KIP-345, ``group.instance.id``) is not used: a static member sends no
  ``LeaveGroup`` from ``close()`` nor from ``unsubscribe()`` (measured on librdkafka 2.16:
  still a member 20 s later), and confluent-kafka has no ``RemoveMembersFromConsumerGroup``,
  so a stopped, drained or scaled-down task would hold its partitions, and keep the group
  from being deleted, for a whole session. A crash instead costs at most
  ``session.timeout.ms`` (6 s) before the survivors, or the restarted task, take over.
* The closing commit of a stop, drain or failure is asynchronous, and the task thread
  keeps serving the consumer (rebalance callbacks, the commit's result) until the
  broker answers, with every partition paused and fetched records dropped (they were
  never ``put``; the next owner reads them from the commit). It is retried on
  ``ILLEGAL_GENERATION`` / ``REBALANCE_IN_PROGRESS`` and bounded by half the closing
  timeout (``shutdown.gracePeriodSeconds``), so a task always ends before the driver
  would cancel its Spark job; a commit not confirmed by then is logged and the next
  start resumes from the previous commit (at least once, never lost).
* A closing commit inside the revoke callback stays synchronous, as Kafka Connect's
  ``onPartitionsRevoked``: the member has already rejoined and nothing is parked ahead
  of it.
* ``close()`` waits for the ``LeaveGroup`` answer and any commit in flight, which the
  same parked rebalance delays: it gets what is left of the grace period, then is left to
  finish on its own, so ``stop`` has run and the final report reaches the driver in time
  (``closing_commit_error`` in the report says when the closing commit did not land).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from conveyor.api import TopicPartition
from conveyor.control.protocol import tp_key
from conveyor.api.sink import Offsets
from conveyor.runtime.task.runner import TaskFailed
from conveyor.runtime.task.sink.isolation import PartlyWritten, record_error

log = logging.getLogger("conveyor.runtime.task.sink.runner")  # the runner's: librdkafka's repeats collapse there

POLL_TIMEOUT_S = 0.2
ISOLATION_RETRY_S = 60.0
"""How long the records of a write refused in ``pre_commit`` are tried again through retriable errors."""
CLOSING_COMMIT_RETRY_S = 10.0
"""How long a closing commit inside a revoke callback is retried while the group rebalances."""
_REBALANCING = (KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS)


class SinkCommits:
    """``pre_commit``, the commit of what it returns, ``close`` of the partitions; uses the
    runner's consumer, task and offsets."""

    def _commit(self, closing: bool, partitions: Sequence[TopicPartition] | None = None) -> None:
        """:meth:`_commit_offsets`, timed when it completes (Connect's ``offset-commit-*-time-ms``)."""
        commits, started = self.commits, time.monotonic()
        self._commit_offsets(closing, partitions)
        if self.commits > commits:
            self.meter.commit(time.monotonic() - started)

    def _commit_offsets(self, closing: bool, partitions: Sequence[TopicPartition] | None = None) -> None:
        """``pre_commit`` then commit what it returned, validated as Kafka Connect does
        (``WorkerSinkTask.commitOffsets``): only assigned partitions, never past what was
        consumed and put. Synchronous."""
        assert self.task and self.context and self.consumer and self.tolerance
        scope = set(self.context.assigned if partitions is None else partitions)
        offsets = {tp: off for tp, off in self.current.items() if tp in scope}
        self.tolerance.await_reports(self.spec.closing_timeout_s)
        closing_aware = closing and self.settings.closing_aware_commits  # type: ignore[union-attr]
        try:
            requested = self._pre_commit(offsets, closing_aware)
        except TaskFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed pre_commit skips this commit
            log.error("task %s-%d: pre_commit failed, nothing committed: %s", self.spec.connector,
                      self.spec.task_id, exc)
            return
        valid: dict[TopicPartition, int] = {}
        for tp, off in (requested or {}).items():
            if tp not in scope:
                log.warning("task %s-%d: ignoring offset for %s: partition not assigned", self.spec.connector,
                            self.spec.task_id, tp)
            elif tp not in self.current or off > self.current[tp]:
                log.warning("task %s-%d: ignoring offset %d for %s: not yet consumed", self.spec.connector,
                            self.spec.task_id, off, tp)
            else:
                valid[tp] = off
        to_commit = {tp: off for tp, off in valid.items() if self._committed_assigned.get(tp) != off}
        if to_commit:
            try:
                self._commit_sync(to_commit, closing)
            except KafkaException as exc:
                # As Kafka Connect: a failed commit (e.g. the group is rebalancing) is logged and the
                # same offsets are offered again at the next commit; only a fatal error fails the task.
                if exc.args[0].fatal():
                    raise TaskFailed(f"offset commit failed fatally: {exc.args[0].str()}") from exc
                if closing:
                    self.closing_commit_error = exc.args[0].str()
                    log.error("task %s-%d: closing commit failed: %s; the partitions' next owner resumes from "
                              "the last commit %s", self.spec.connector, self.spec.task_id, exc.args[0].str(),
                              {str(tp): off for tp, off in self._committed_assigned.items() if tp in to_commit})
                else:
                    log.warning("task %s-%d: offset commit failed, will retry at the next commit: %s",
                                self.spec.connector, self.spec.task_id, exc.args[0].str())
                return
            self.committed.update(to_commit)
            self._committed_assigned.update(to_commit)
        self.commits += 1
        if closing:
            self.closing_commits += 1
            self.closing_commit_error = None
            # What the group holds for these partitions after the closing commit, including
            # offsets an earlier commit already wrote.
            self.last_closing_commit = {tp_key(tp.topic, tp.partition): off for tp, off in valid.items()}

    def _pre_commit(self, offsets: dict[TopicPartition, int], closing: bool) -> Offsets:
        """``pre_commit(offsets)`` with ``is_closing()`` as ``closing``. A record error that
        names the records its refused write held (``DataError.records``) has them written but
        for the records refused (:mod:`.isolation`), a retriable error meanwhile tried again
        for up to :data:`ISOLATION_RETRY_S`, then ``pre_commit`` is called again.

        Raises:
            TaskFailed: a refused record under ``errors.tolerance=none``, or the records of a
                refused write still not written after :data:`ISOLATION_RETRY_S` (nothing past
                them is committed: the next start reads them again).
            Exception: what ``pre_commit`` raised otherwise.
        """
        assert self.task and self.context
        self.context.closing = closing
        try:
            return self.task.pre_commit(offsets)
        except Exception as exc:  # noqa: BLE001
            held = getattr(exc, "records", None)
            if held is None or not record_error(exc, self._poison_errors):
                raise
            error: BaseException | None = exc
        finally:
            self.context.closing = False
        part, deadline = list(held), time.monotonic() + ISOLATION_RETRY_S
        while True:
            try:
                self._isolate(part, error)
                break
            except PartlyWritten as again:
                if time.monotonic() + 1.0 > deadline:
                    raise TaskFailed(f"records of a refused write still not written after {ISOLATION_RETRY_S:.0f} s: "
                                     f"{again}") from again
                time.sleep(min(again.delay.total_seconds() if again.delay else 1.0, 5.0))
                part, error = again.remainder, None
        self.context.closing = closing
        try:
            return self.task.pre_commit(offsets)
        finally:
            self.context.closing = False

    def _commit_sync(self, offsets: dict[TopicPartition, int], closing: bool) -> None:
        """Commit and wait for the broker's answer (the rule is in the module docstring).

        A closing commit outside a revoke callback goes through
        :meth:`_commit_serving_group`. Any other commit is synchronous; inside a revoke
        callback a closing commit that meets a group rebalance (``ILLEGAL_GENERATION`` /
        ``REBALANCE_IN_PROGRESS``) is retried for up to :data:`CLOSING_COMMIT_RETRY_S` (at
        most half the closing timeout): there is no later commit to offer these offsets again.

        Raises:
            KafkaException: the commit failed (for good), or a closing commit was not
                confirmed in time (``_TIMED_OUT``).
        """
        assert self.consumer is not None
        partitions = [KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        budget_s = min(CLOSING_COMMIT_RETRY_S, self.spec.closing_timeout_s / 2) if closing else 0
        if closing and not self._in_revoke_callback:
            half = self.spec.closing_timeout_s / 2
            self._commit_serving_group(partitions, max(1.0, min(half, self.closing_time_left() - half / 2)))
            return
        deadline = time.monotonic() + budget_s
        while True:
            try:
                self.consumer.commit(offsets=partitions, asynchronous=False)
                return
            except KafkaException as exc:
                if exc.args[0].code() not in _REBALANCING or time.monotonic() + 0.2 > deadline:
                    raise
                log.info("task %s-%d: closing commit met a rebalance (%s); retrying", self.spec.connector,
                         self.spec.task_id, exc.args[0].name())
                time.sleep(0.2)

    def _commit_serving_group(self, partitions: list[KafkaTopicPartition], budget_s: float) -> None:
        """An asynchronous commit of ``partitions`` while this (the task's) thread keeps
        serving the consumer, so that the group's rebalances complete and the answer
        arrives; retried on a rebalance error until ``budget_s`` seconds have passed.

        Raises:
            KafkaException: the commit failed for good, or was not confirmed within
                ``budget_s`` (code ``_TIMED_OUT``).
        """
        assert self.consumer is not None and self.context is not None
        deadline = time.monotonic() + budget_s
        self._serving_close = True
        try:
            self._pause_all_assigned()
            while True:
                self._commit_result = None
                self.consumer.commit(offsets=partitions, asynchronous=True)
                while self._commit_result is None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise KafkaException(KafkaError(
                            KafkaError._TIMED_OUT, f"closing commit not confirmed within {budget_s:.0f}s"))
                    self.consumer.poll(min(POLL_TIMEOUT_S, remaining))  # a record fetched now is not put
                error, results = self._commit_result
                failed = next((p.error for p in results if p.error is not None), None)
                error = error or failed
                if error is None:
                    return
                if error.code() not in _REBALANCING or time.monotonic() + 0.2 > deadline:
                    raise KafkaException(error)
                log.info("task %s-%d: closing commit met a rebalance (%s); retrying", self.spec.connector,
                         self.spec.task_id, error.name())
                time.sleep(0.2)
        finally:
            self._serving_close = False

    def _on_commit(self, error: KafkaError | None, partitions: list[KafkaTopicPartition]) -> None:
        self._commit_result = (error, partitions)

    def _pause_all_assigned(self) -> None:
        assert self.consumer is not None
        assignment = self.consumer.assignment()
        if assignment:
            self.consumer.pause(assignment)

    def _close_partitions(self, partitions: list[TopicPartition], commit: bool) -> None:
        assert self.task and self.context
        partitions = [tp for tp in partitions if tp in self.context.assigned]
        if not partitions:
            return
        if commit:
            self._commit(closing=True, partitions=partitions)
        self.task.close(partitions)
        for tp in partitions:
            self.context.assigned.discard(tp)
            self.context.paused_by_task.discard(tp)
            self.current.pop(tp, None)
            self._committed_assigned.pop(tp, None)
            self.context.rewinds.pop(tp, None)
        self._drop_from_retry(set(partitions))

    def _close(self, clean: bool) -> None:
        """A closing commit of every assigned partition, then ``close`` (also after a
        failure: what earlier ``put`` calls processed is committed)."""
        if self.task is not None and self.context is not None:
            self._close_partitions(sorted(self.context.assigned), commit=True)

    def _release(self) -> None:
        self._stopping = True
        if self.consumer is not None:
            self._close_consumer(self.consumer)
        if self.tolerance is not None:
            self.tolerance.close()
        self.chain_close()

    def _close_consumer(self, consumer: Consumer) -> None:
        """``unsubscribe()`` (it sends ``LeaveGroup`` even with no partitions, see the module
        docstring), then ``close()``, waiting until the closing deadline at most: librdkafka's
        ``close()`` has no timeout and waits for the ``LeaveGroup`` answer and any commit in
        flight, which a rebalance parked behind a frozen member delays for that member's
        ``session.timeout.ms``. A close still running then is left to finish on its own
        (the broker expires the member) so that the task ends within its grace period."""
        def close() -> None:
            try:
                consumer.unsubscribe()
                consumer.close()
            except Exception:  # noqa: BLE001
                log.exception("task %s: consumer close failed", self.where)

        closer = threading.Thread(target=close, name=f"close-consumer-{self.where}", daemon=True)
        closer.start()
        closer.join(max(1.0, self.closing_time_left()))
        if closer.is_alive():
            log.error("task %s: the consumer did not close before the grace period ends; leaving it to the "
                      "broker's session timeout", self.where)

    def chain_close(self) -> None:
        chain = getattr(self, "chain", None)
        if chain is not None:
            chain.close()
