"""A sink task's paused partitions (:class:`SinkPausing`, a part of
:class:`~conveyor.runtime.task.sink.runner.SinkTaskRunner`): the connector paused
(``state: paused``), a ``put`` waiting to be retried (``RetriableError``), and partitions the
task paused through ``SinkTaskContext.pause``. Runs on the task's thread.

A partition is *held* while any of the three applies: nothing of it is ``put``. Two rules of
librdkafka (2.16, measured) decide how a hold reaches the consumer:

* A ``pause`` issued shortly after a partition is assigned can make librdkafka drop the
  assignment's start of fetching (its version barrier outdates the pending fetch start,
  librdkafka issue #2190): the partition then never fetches again, not even after
  ``resume``, and records written to it while paused are never ``put``. So a partition is
  paused only once it has delivered a message (its fetcher has started), and that message
  and any after it are not ``put``: the partition is sought back to the first of them, so
  that ``resume`` fetches them again. At most one fetched batch per partition is read twice.
* A partition stays paused in librdkafka after it is unassigned, and is still paused when
  assigned again (measured: nothing fetched after a revoke and re-assignment). So a
  partition this task paused is resumed before it is unassigned.
"""

from __future__ import annotations

from confluent_kafka import Consumer, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from conveyor.api import TopicPartition
from conveyor.control.protocol import TaskState


class SinkPausing:
    """Holds, and the consumer's pause and resume of held partitions; uses the runner's
    consumer and context."""

    _paused_for_retry = False
    _paused_by_directive = False

    def _holding(self) -> bool:
        """Whether any partition may be held now (a cheap test for the loop)."""
        return self._paused_by_directive or self._paused_for_retry or bool(self.context.paused_by_task)

    def _held(self, tp: TopicPartition) -> bool:
        return self._paused_by_directive or self._paused_for_retry or tp in self.context.paused_by_task

    def _follow_pause(self, paused: bool) -> None:
        """Follow the driver's directive: ``paused`` is true while the connector is paused."""
        if paused == self._paused_by_directive:
            return
        self._paused_by_directive = paused
        self.state = TaskState.PAUSED if paused else TaskState.RUNNING

    def _pause_for_retry(self, paused: bool) -> None:
        self._paused_for_retry = paused

    def _hold_back(self, msgs: list[Message]) -> list[Message]:
        """``msgs`` without those of held partitions; each held partition that delivered
        is paused and sought back to its first message here, to be fetched again on resume."""
        kept: list[Message] = []
        first: dict[TopicPartition, int] = {}
        for msg in msgs:
            if msg.error() is None:
                tp = self._tp(msg.topic(), msg.partition())
                if self._held(tp):
                    if tp not in self._consumer_paused:  # else a message fetched before its pause
                        first.setdefault(tp, msg.offset())
                    continue
            kept.append(msg)
        if first:
            back = [KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in first.items()]
            self.consumer.pause(back)
            for partition in back:
                self.consumer.seek(partition)
            self._consumer_paused.update(first)
        return kept

    def _release_holds(self) -> None:
        """Resume the partitions :meth:`_hold_back` paused that are no longer held."""
        free = [tp for tp in self._consumer_paused if not self._held(tp)]
        if free:
            self.consumer.resume([KafkaTopicPartition(tp.topic, tp.partition) for tp in free])
            self._consumer_paused.difference_update(free)

    def _unpause_leaving(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        """Resume what this task paused of ``partitions`` before they are unassigned (see the
        module docstring)."""
        leaving = [tp for tp in (self._tp(p.topic, p.partition) for p in partitions) if tp in self._consumer_paused]
        if leaving:
            consumer.resume([KafkaTopicPartition(tp.topic, tp.partition) for tp in leaving])
            self._consumer_paused.difference_update(leaving)
