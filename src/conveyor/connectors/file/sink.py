"""The file sink (entry point ``file-sink``): Kafka Connect's ``FileStreamSinkConnector`` and
``FileStreamSinkTask`` (connect-file 4.1.1), with the same key and the same output.

* ``task_configs(max_tasks)`` returns ``max_tasks`` copies of the connector's configuration,
  as Kafka Connect does: with ``tasks.max`` above 1 several tasks append to the same path
  (each on its executor's file system), lines of different tasks interleaved.
* Records come as Arrow record batches where the batch path applies (``put_batch``):
  ``StringConverter`` values are joined into lines in Arrow, one buffer per batch.
* Each record becomes one line: ``String.valueOf(record.value())`` and ``\\n``, as
  ``PrintStream.println`` prints it (:func:`.java_text.java_string`: ``{a=1, b=x}`` for a
  schemaless JSON object, ``Struct{...}``, ``null``, ``1.0E7``...), UTF-8, a lone surrogate
  written ``?``. Keys, headers and timestamps are not written.
* The file is opened for appending (created if missing, its directory is not) in ``start``;
  failing that, the task fails with Kafka Connect's "Couldn't find or create file ..." message.
  Without ``file`` lines go to the task's standard output.
* The lines of each ``put`` reach the file in one write before ``put`` returns (Kafka
  Connect's unbuffered ``PrintStream`` writes each line at once), so offsets, committed after
  the default ``pre_commit`` calls ``flush``, never run ahead of the file (not fsynced: a
  machine crash can lose lines whose offsets were committed, as with Kafka Connect). A task
  failure before a commit redelivers, and may duplicate, lines.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api import ConnectError, SinkConnector, SinkRecord, SinkTask, TopicPartition, parse_config
from conveyor.api.batches import VALUE, sink_records
from conveyor.connectors._builtin import BuiltIn
from conveyor.connectors.file.config import FileSinkConfig
from conveyor.connectors.file.java_text import java_string

#: Size of the file object's buffer; every ``put`` flushes it.
WRITE_BUFFER = 1 << 20

log = logging.getLogger(__name__)


def render_lines(records: Sequence[SinkRecord]) -> bytes:
    """The bytes ``println(record.value())`` writes for each record, UTF-8."""
    if not records:
        return b""
    text = "\n".join([java_string(r.value, r.value_schema) for r in records]) + "\n"
    return text.encode("utf-8", "replace")  # Java's encoder writes '?' for a lone surrogate


def render_string_lines(values: pa.StringArray) -> list[pa.Buffer | bytes]:
    """What :func:`render_lines` writes for records whose values are these strings (a null
    value prints ``null``), built in Arrow: the lines joined in one buffer, then ``\n``."""
    if not len(values):
        return []
    lines = pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), pc.fill_null(values, "null"))
    return [pc.binary_join(lines, "\n")[0].as_buffer(), b"\n"]


class FileSinkConnector(BuiltIn, SinkConnector):
    """Entry point ``file-sink``: Kafka Connect's ``FileStreamSinkConnector``. Every hook runs
    on the driver's control thread; no I/O."""

    config_model = FileSinkConfig

    def __init__(self) -> None:
        self._config: dict[str, Any] = {}

    def start(self, config: Mapping[str, Any]) -> None:
        cfg = parse_config(FileSinkConfig, config)
        self._config = dict(config)
        log.info("Starting file sink connector writing to %s", cfg.path or "standard output")

    def task_class(self) -> type[FileSinkTask]:
        return FileSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        """``max_tasks`` copies of the connector's configuration, as Kafka Connect."""
        return [dict(self._config) for _ in range(max_tasks)]

    def alter_offsets(self, config: Mapping[str, Any], offsets: Mapping[TopicPartition, int | None]) -> bool:
        """``True``: the sink keeps no offsets of its own, so the consumer group's are all there is
        (as Kafka Connect's ``FileStreamSinkConnector.alterOffsets``)."""
        return True


class FileSinkTask(BuiltIn, SinkTask):
    """Appends one line per record. Every hook runs on the task's runner thread in a Spark
    Python worker."""

    def __init__(self) -> None:
        self._path: str | None = None
        self._file: Any = None
        self.lines_written = 0

    def start(self, config: Mapping[str, Any]) -> None:
        """Open ``file`` for appending (created if missing).

        Raises:
            ConfigError: an invalid configuration.
            ConnectError: the file cannot be opened or created (its directory is missing, a
                permission, a directory of that name).
        """
        cfg = parse_config(FileSinkConfig, config)
        self._path = cfg.path
        if self._path is None:
            self._file = _StandardOutput()
            return
        try:
            self._file = open(self._path, "ab", buffering=WRITE_BUFFER)  # noqa: SIM115 - kept open until stop
        except OSError as exc:
            raise ConnectError(f"Couldn't find or create file '{self._path}' for FileStreamSinkTask: {exc}") from exc

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Write the records' lines to the file, in one write.

        Raises:
            ConnectError: writing failed.
        """
        self._write([render_lines(records)], len(records))

    def takes_batches(self, key_type: pa.DataType | None, value_type: pa.DataType | None) -> bool:
        """String values only: their lines are made in Arrow. Other values would be turned
        back into records."""
        return value_type == pa.string()

    def batch_columns(self) -> frozenset[str]:
        """Only the values: they are all a line holds."""
        return frozenset({VALUE})

    def put_batch(self, batch: pa.RecordBatch) -> None:
        """:meth:`put` for a record batch: string values (``StringConverter``) are written
        from their Arrow column without a Python object per record; bytes go through
        :meth:`put`, as Kafka Connect prints them (``[B@...``).

        Raises:
            ConnectError: writing failed.
        """
        values = batch.column(VALUE)
        if values.type != pa.string():
            self.put(sink_records(batch))
            return
        self._write(render_string_lines(values), batch.num_rows)

    def _write(self, chunks: list[pa.Buffer | bytes], lines: int) -> None:
        try:
            for chunk in chunks:
                self._file.write(chunk)
            self._file.flush()  # a put's lines reach the file at once, as Connect's unbuffered PrintStream's
        except OSError as exc:
            raise ConnectError(f"writing to {self._describe()} failed: {exc}") from exc
        self.lines_written += lines

    def flush(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Flush the file object: every line put so far reaches the file before the offsets
        ``pre_commit`` returns are committed, so they never run ahead of it.

        Raises:
            ConnectError: writing failed (the commit is then skipped).
        """
        try:
            self._file.flush()
        except OSError as exc:
            raise ConnectError(f"flushing {self._describe()} failed: {exc}") from exc

    def stop(self, connector_deleted: bool = False) -> None:
        """Close the file, writing what is buffered (standard output is only flushed). Nothing
        is deleted, also when the connector is."""
        if self._file is None:
            return
        handle, self._file = self._file, None
        handle.close()

    def _describe(self) -> str:
        return f"file '{self._path}'" if self._path is not None else "standard output"


class _StandardOutput:
    """The worker's standard output as a byte sink; ``close`` only flushes it."""

    def write(self, data: bytes | pa.Buffer) -> None:
        stream = sys.stdout
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            stream.write(bytes(data).decode("utf-8"))
            return
        stream.flush()  # keep order with text already printed
        buffer.write(data)

    def flush(self) -> None:
        sys.stdout.flush()

    def close(self) -> None:
        self.flush()
