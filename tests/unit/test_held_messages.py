"""The batch path's held messages: found by their coordinates until the limits let them go."""

from __future__ import annotations

from confluent_kafka import Message

from conveyor.runtime.task.sink.held_messages import HeldMessages


def _batch(start: int, n: int, size: int = 10) -> list[Message]:
    return [Message(topic="t", partition=0, offset=o, key=b"k", value=b"v" * (size - 1)) for o in range(start, start + n)]


def test_a_held_message_is_found_by_its_coordinates():
    held = HeldMessages()
    first, second = _batch(0, 5), _batch(5, 5)
    held.hold(first)
    held.hold(second)
    assert held.find("t", 0, 2) is first[2] and held.find("t", 0, 7) is second[2]
    assert held.find("t", 0, 10) is None and held.find("t", 1, 2) is None and held.find("u", 0, 2) is None


def test_a_message_read_twice_is_found_as_read_last():
    held = HeldMessages()
    held.hold(_batch(0, 5))
    again = _batch(3, 5)  # a rewind read offsets 3 and 4 again
    held.hold(again)
    assert held.find("t", 0, 3) is again[0]


def test_the_oldest_batches_go_beyond_the_message_and_byte_limits_but_the_newest_stays():
    by_count = HeldMessages(max_messages=10)
    batches = [_batch(i * 4, 4) for i in range(4)]
    for batch in batches:
        by_count.hold(batch)
    assert by_count.find("t", 0, 0) is None and by_count.find("t", 0, 7) is None
    assert by_count.find("t", 0, 8) is batches[2][0] and by_count.find("t", 0, 15) is batches[3][3]
    by_bytes = HeldMessages(max_bytes=100)
    big = _batch(0, 3, size=200)
    by_bytes.hold(big)
    assert by_bytes.find("t", 0, 1) is big[1], "one batch is kept whatever its size"
    by_bytes.hold(_batch(3, 1))
    assert by_bytes.find("t", 0, 1) is None and by_bytes.find("t", 0, 3) is not None
