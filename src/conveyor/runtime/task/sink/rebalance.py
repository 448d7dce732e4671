"""A sink task's rebalance callbacks (:class:`SinkRebalance`, a part of
:class:`~conveyor.runtime.task.sink.runner.SinkTaskRunner`): ``open`` of assigned partitions, a
closing commit and ``close`` of revoked ones, ``close`` without a commit of lost ones.
librdkafka calls them on the task's thread, inside ``consume``.
"""

from __future__ import annotations

import logging

from confluent_kafka import OFFSET_INVALID, Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from conveyor.runtime.task.runner import TaskFailed

log = logging.getLogger("conveyor.runtime.task.sink.runner")  # the runner's: librdkafka's repeats collapse there


class SinkRebalance:
    """The consumer's ``on_assign``, ``on_revoke`` and ``on_lost``; uses the runner's task,
    its commits and its paused partitions (:mod:`.pausing`)."""

    def _on_assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        assert self.task and self.context
        if self._stopping:
            return
        if self._serving_close:  # the task is closing: take the partitions, paused, and never open them
            self._assign(consumer, [KafkaTopicPartition(p.topic, p.partition, OFFSET_INVALID) for p in partitions])
            consumer.pause(partitions)
            return
        new = [self._tp(p.topic, p.partition) for p in partitions]
        self.context.assigned.update(new)
        try:
            self.task.open(new)
        except Exception as exc:  # noqa: BLE001 - open failing fails the task
            self._callback_error = TaskFailed(f"open() failed: {exc}")
            self._callback_error.__cause__ = exc
        assign = []
        for tp in new:
            rewind = self.context.rewinds.pop(tp, None)
            if rewind is not None:
                self.current[tp] = rewind
                assign.append(KafkaTopicPartition(tp.topic, tp.partition, rewind))
            else:
                assign.append(KafkaTopicPartition(tp.topic, tp.partition, OFFSET_INVALID))
        self._assign(consumer, assign)  # paused by SinkPausing once it delivers, if held

    def _assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        if self._cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        if self.task is None or self._stopping:
            return
        if self._serving_close:  # the closing commit in flight covers them; the task closes them after it
            self._unassign(consumer, partitions)
            return
        revoked = [self._tp(p.topic, p.partition) for p in partitions]
        self._in_revoke_callback = True
        try:
            self._close_partitions(revoked, commit=True)
        except Exception as exc:  # noqa: BLE001
            self._callback_error = TaskFailed(f"closing partitions on revoke failed: {exc}")
            self._callback_error.__cause__ = exc
        finally:
            self._in_revoke_callback = False
        self._unassign(consumer, partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        if self.task is None or self._stopping:
            return
        if self._serving_close:
            self._unassign(consumer, partitions)
            return
        lost = [self._tp(p.topic, p.partition) for p in partitions]
        log.warning("task %s-%d: partitions lost, closing without commit: %s", self.spec.connector,
                    self.spec.task_id, ", ".join(map(str, lost)))
        try:
            self._close_partitions(lost, commit=False)
        except Exception as exc:  # noqa: BLE001
            self._callback_error = TaskFailed(f"closing lost partitions failed: {exc}")
            self._callback_error.__cause__ = exc
        self._unassign(consumer, partitions)

    def _unassign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        self._unpause_leaving(consumer, partitions)
        if self._cooperative:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()
