"""The file source (entry point ``file-source``): Kafka Connect's ``FileStreamSourceConnector``
and ``FileStreamSourceTask`` (connect-file 4.1.1), with the same keys, records and offsets.

* One task, whatever ``tasks.max`` (one file, one reader), with the connector's whole
  configuration, as ``FileStreamSourceConnector.taskConfigs``.
* Each line (split as :mod:`.lines` says) is one record: topic ``topic``, key ``None`` without
  a schema, value the line (a ``str``, no terminator) with a STRING schema, partition chosen by
  the producer, timestamp the wall-clock time it was read (``System.currentTimeMillis()``).
* Source partition ``{"filename": <file>}``, source offset ``{"position": <byte offset right
  after the line>}``: Kafka Connect's keys, so the offsets-topic record is
  ``["<connector>",{"filename":"<file>"}]`` → ``{"position":<n>}``, and an offset either side
  wrote resumes on the other (Kafka Connect skips ``position`` bytes; so does this).
* The task reads its committed offset at ``start``; the file is opened by ``poll`` (a missing
  file is waited for: a warning, then ``poll`` waits 1 s and returns ``None``, again and
  again, as Kafka Connect). Reading continues at end of file like ``tail -f``: with nothing
  new, ``poll`` waits 1 s (Kafka Connect's back-off) and returns ``None``.
* ``exactly_once_support`` is SUPPORTED (Kafka Connect's answer for a file: an offset is an
  exact position, provided the file is only appended to); transaction boundaries are not
  defined by the task.

Where Kafka Connect 4.1.1 differs, on purpose:

* its ``position`` counts the UTF-16 chars read (line terminators included), not bytes, while
  it resumes by skipping bytes: past a non-ASCII character its restarts land mid-line. Here
  ``position`` is a byte offset, equal to Kafka Connect's for ASCII files; Kafka Connect
  resumes correctly from it.
* lines still buffered when a poll returns a full ``batch.size`` wait there, in Kafka Connect,
  until more bytes are appended to the file; here the next ``poll`` returns them.
* a committed ``position`` beyond the file's size (a truncated or replaced file) makes Kafka
  Connect's skip loop spin for ever; here the task fails saying so. A negative one fails too
  (Kafka Connect's offsets API refuses it).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

import pyarrow as pa

from conveyor.api import (
    ConnectError,
    ExactlyOnceSupport,
    Schema,
    SchemaType,
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from conveyor.api.batches import SourceBatch
from conveyor.connectors._builtin import BuiltIn
from conveyor.connectors.file.config import FileSourceConfig, load_source_config
from conveyor.connectors.file.lines import LineSplitter
from conveyor.converters.columnar import Utf8Columns

#: Kafka Connect's ``FileStreamSourceTask.FILENAME_FIELD`` / ``POSITION_FIELD``.
FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
#: How long ``poll`` waits when the file is missing or has nothing new (seconds; Kafka
#: Connect's ``this.wait(1000)``).
IDLE_WAIT_S = 1.0
#: Bytes read from the file at a time.
READ_CHUNK = 64 * 1024
VALUE_SCHEMA = Schema(SchemaType.STRING)

log = logging.getLogger(__name__)


def source_partition(filename: str) -> dict[str, str]:
    """The source partition of ``filename``, exactly as given in ``file``."""
    return {FILENAME_FIELD: filename}


def committed_position(offset: Mapping[str, Any] | None, filename: str) -> int:
    """The byte position to resume at from a committed offset (``None``: the start).

    As Kafka Connect: no offset or no ``position`` starts at 0.

    Raises:
        ConnectError: ``position`` is not an integer (Kafka Connect: "Offset position is the
            incorrect type") or is negative.
    """
    if offset is None:
        return 0
    value = offset.get(POSITION_FIELD)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConnectError(f"Offset position is the incorrect type: {value!r} in the committed offset {dict(offset)}"
                           f" of {source_partition(filename)} (expected an integer number of bytes)")
    if value < 0:
        raise ConnectError(f"Offset position {value} of {source_partition(filename)} is negative")
    return value


class FileSourceConnector(BuiltIn, SourceConnector):
    """Entry point ``file-source``: Kafka Connect's ``FileStreamSourceConnector``. Every hook
    runs on the driver's control thread; no I/O."""

    config_model = FileSourceConfig

    def __init__(self) -> None:
        self._config: dict[str, Any] = {}

    def start(self, config: Mapping[str, Any]) -> None:
        cfg = load_source_config(config)
        self._config = dict(config)
        log.info("Starting file source connector reading from %s", cfg.file)

    def task_class(self) -> type[FileSourceTask]:
        return FileSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        """One task with the connector's configuration, whatever ``max_tasks`` ("only one input
        stream makes sense", as Kafka Connect)."""
        return [dict(self._config)]

    def exactly_once_support(self, config: Mapping[str, Any]) -> ExactlyOnceSupport:
        """SUPPORTED, as Kafka Connect answers for a file (always one here)."""
        return ExactlyOnceSupport.SUPPORTED

    def alter_offsets(self, config: Mapping[str, Any],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> bool:
        """Check offsets written through the offsets API, as Kafka Connect's
        ``FileStreamSourceConnector.alterOffsets``: a reset (``None``) of anything is allowed;
        otherwise the partition holds ``filename`` and the offset a non-negative integer
        ``position``. The task checks the position against the file when it starts.

        Raises:
            ConnectError: an offset or partition of another shape (Connect's messages).
        """
        for partition, offset in offsets:
            if offset is None:
                continue
            if POSITION_FIELD not in offset:
                raise ConnectError(f"Offset objects should either be null or contain the key '{POSITION_FIELD}'")
            position = offset[POSITION_FIELD]
            if isinstance(position, bool) or not isinstance(position, int):
                raise ConnectError(f"The value for the '{POSITION_FIELD}' key in the offset is expected to be a "
                                   "Long value")
            if position < 0:
                raise ConnectError(f"The value for the '{POSITION_FIELD}' key in the offset should be a "
                                   "non-negative value")
            if FILENAME_FIELD not in partition:
                raise ConnectError(f"Partition objects should contain the key '{FILENAME_FIELD}'")
        return True


class FileSourceTask(BuiltIn, SourceTask):
    """Tails one file. Every hook runs on the task's runner thread in a Spark Python worker."""

    def __init__(self) -> None:
        self._cfg: FileSourceConfig | None = None
        self._partition: dict[str, str] = {}
        self._resume_at = 0
        self._file: IO[bytes] | None = None
        self._lines = LineSplitter()
        self._warned_missing = False
        self._stopping = threading.Event()

    @property
    def position(self) -> int:
        """The byte offset after the last line returned (the offset of the next record)."""
        return self._lines.position if self._file is not None else self._resume_at

    def start(self, config: Mapping[str, Any]) -> None:
        """Validate the configuration and read the committed offset of ``{"filename": file}``.

        Raises:
            ConfigError: see :func:`.config.load_source_config`.
            ConnectError: the committed offset is malformed (see :func:`committed_position`).
        """
        cfg = load_source_config(config)
        self._cfg = cfg
        assert cfg.file is not None
        self._partition = source_partition(cfg.file)
        stored = self.context.offset_storage_reader().offset(self._partition)
        self._resume_at = committed_position(stored, cfg.file)
        if stored is not None:
            log.info("found committed offset %s of %s: resuming at byte %d", dict(stored), self._partition,
                     self._resume_at)

    def poll(self) -> list[SourceRecord] | None:
        """Up to ``batch.size`` records of complete lines after the current position; ``None``
        after a 1 s wait when the file is missing or holds no new complete line.

        Raises:
            ConnectError: the file cannot be opened or read (other than missing), or is shorter
                than the committed position.
        """
        cfg = self._require()
        if self._file is None and not self._open(cfg):
            self._stopping.wait(IDLE_WAIT_S)
            return None
        assert self._file is not None
        limit, lines, records = cfg.records_per_poll, self._lines, []
        while True:
            while len(records) < limit:
                found = lines.next_line()
                if found is None:
                    break
                line, position = found
                records.append(SourceRecord(
                    source_partition=self._partition, source_offset={POSITION_FIELD: position}, topic=cfg.topic,
                    value=line, value_schema=VALUE_SCHEMA, timestamp=time.time_ns() // 1_000_000,
                ))
            if len(records) >= limit:
                return records
            chunk = self._read(cfg)
            if not chunk:
                break
            lines.feed(chunk)
        if records:
            return records
        self._stopping.wait(IDLE_WAIT_S)
        return None

    def poll_batch(self) -> SourceBatch | None:
        """:meth:`poll` as one :class:`~conveyor.api.batches.SourceBatch`: up to ``batch.size``
        lines as a ``string`` column (UTF-8, a malformed sequence becoming U+FFFD, as
        :meth:`poll`'s records) and the position after the last as the batch's offset; no
        timestamps (the producer stamps the records when it takes them).

        Raises:
            As :meth:`poll`.
        """
        cfg = self._require()
        if self._file is None and not self._open(cfg):
            self._stopping.wait(IDLE_WAIT_S)
            return None
        lines: list[bytes] = []
        while True:
            lines += self._lines.next_lines(cfg.records_per_poll - len(lines))
            if len(lines) >= cfg.records_per_poll:
                break
            chunk = self._read(cfg)
            if not chunk:
                break
            self._lines.feed(chunk)
        if not lines:
            self._stopping.wait(IDLE_WAIT_S)
            return None
        return SourceBatch(topic=cfg.topic, values=_utf8(lines), source_partition=self._partition,
                           source_offset={POSITION_FIELD: self._lines.position})

    def stop(self, connector_deleted: bool = False) -> None:
        """Close the file. The task created nothing, so ``connector_deleted`` changes nothing."""
        self._stopping.set()
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self, cfg: FileSourceConfig) -> bool:
        assert cfg.file is not None
        try:
            handle = open(cfg.file, "rb", buffering=0)  # noqa: SIM115 - kept open across polls
        except FileNotFoundError:
            if not self._warned_missing:
                log.warning("Couldn't find file %s for FileSourceTask, waiting for it to be created", cfg.file)
                self._warned_missing = True
            return False
        except OSError as exc:
            raise ConnectError(f"Error while trying to open file {cfg.file}: {exc}") from exc
        try:
            size = os.fstat(handle.fileno()).st_size
            if self._resume_at > size:
                raise ConnectError(
                    f"file {cfg.file} has {size} bytes, fewer than its committed position {self._resume_at}: it was"
                    " truncated or replaced. Reset the connector's offsets to read it from the start")
            handle.seek(self._resume_at)
        except BaseException:
            handle.close()
            raise
        self._file = handle
        self._lines = LineSplitter(self._resume_at)
        log.info("opened %s for reading at byte %d", cfg.file, self._resume_at)
        return True

    def _read(self, cfg: FileSourceConfig) -> bytes:
        assert self._file is not None
        try:
            return self._file.read(READ_CHUNK) or b""
        except OSError as exc:
            raise ConnectError(f"Error while reading file {cfg.file}: {exc}") from exc

    def _require(self) -> FileSourceConfig:
        if self._cfg is None:
            raise RuntimeError("FileSourceTask used before start()")
        return self._cfg


def _utf8(lines: list[bytes]) -> pa.Array:
    """``lines`` as a ``string`` column, decoded as :class:`~.lines.LineSplitter` decodes a line
    (malformed UTF-8 replaced, as ``StringConverter`` does)."""
    return Utf8Columns().to_column(lines, _never_fails)  # type: ignore[arg-type]


def _never_fails(index: int, error: Exception) -> None:  # pragma: no cover - UTF-8 text never fails
    raise AssertionError(error)
