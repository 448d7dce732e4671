"""Splitting a growing file into lines the way Kafka Connect's ``FileStreamSourceTask`` does.

Rules (``FileStreamSourceTask.extractLine``, connect-file 4.1.1):

* a line ends at ``\\n``, ``\\r\\n`` or a lone ``\\r``; the terminator is not part of the line;
* a ``\\r`` that is the last byte read so far waits for the next byte (it may start ``\\r\\n``),
  so a file ending in ``\\r`` keeps its last line until more is written, as does a last line
  without any terminator;
* bytes are decoded as UTF-8, a malformed sequence becoming U+FFFD (Java's
  ``InputStreamReader``); a byte-order mark is kept.

Positions are byte offsets in the file: the offset stored for a line is the position right
after its terminator, so that resuming there (Kafka Connect skips that many bytes too) starts
at the next line. ``\\n`` and ``\\r`` never occur inside a multi-byte UTF-8 sequence, so lines
are split on bytes and decoded one by one.
"""

from __future__ import annotations

import re

_TERMINATOR = re.compile(rb"\r\n?|\n")
#: Consumed bytes are dropped from the buffer once this many have accumulated.
_COMPACT_AT = 1 << 20


class LineSplitter:
    """Accumulates bytes read from a file and hands out complete lines with their positions.

    Args:
        position: the file offset of the first byte that :meth:`feed` will receive.
    """

    def __init__(self, position: int = 0) -> None:
        self._buffer = bytearray()
        self._start = 0  # index in _buffer of the first unconsumed byte
        self._position = position  # file offset of _buffer[_start]

    @property
    def position(self) -> int:
        """The file offset right after the last line handed out (where a restart resumes)."""
        return self._position

    @property
    def pending(self) -> int:
        """Bytes read but not yet part of a complete line."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> None:
        """Append bytes read from the file."""
        if self._start >= _COMPACT_AT:
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    def next_line(self) -> tuple[str, int] | None:
        """The next complete line and the file offset after its terminator, or ``None`` when
        the bytes read so far hold no complete line."""
        buffer = self._buffer
        match = _TERMINATOR.search(buffer, self._start)
        if match is None:
            return None
        end = match.end()
        if end == len(buffer) and buffer[end - 1] == 0x0D:  # "\r" last: it may be the start of "\r\n"
            return None
        line = buffer[self._start: match.start()].decode("utf-8", "replace")
        self._position += end - self._start
        self._start = end
        return line, self._position

    def next_lines(self, limit: int) -> list[bytes]:
        """Up to ``limit`` complete lines (undecoded, without terminators), as :meth:`next_line`
        would hand them out one by one; :attr:`position` moves past the last one."""
        buffer = self._buffer
        last = max(buffer.rfind(b"\n"), buffer.rfind(b"\r"))
        if last < self._start:
            return []
        parts = bytes(buffer[self._start: last + 1]).splitlines(keepends=True)  # each ends in one terminator
        if last == len(buffer) - 1 and buffer[last] == 0x0D:  # "\r" last: it may be the start of "\r\n"
            parts.pop()
        del parts[limit:]
        consumed = sum(map(len, parts))
        self._position += consumed
        self._start += consumed
        return [part.rstrip(b"\r\n") for part in parts]
