"""The archive sink connector (entry point ``archive-sink``) and its task.

Writes every record of the consumed topics to files, ``flush.size`` records per file per
partition, on local disk or S3 (any fsspec filesystem), in JSON Lines, Avro or Parquet; like
Confluent's S3 sink connector, with KIP-275's ``is_closing()`` so that a rebalance,
shutdown or drain never costs a buffered partition its progress.

Layout, Confluent's S3 sink's (``topics.dir``, default ``topics``; ``file.name.format``
changes only the last part)::

    <archive.url>/<topics.dir>/<topic>/partition=<p>/<topic>+<p>+<start offset>.<jsonl|avro>

The start offset is zero-padded to ``filename.offset.zero.pad.width`` digits (default 10).
With a time-based ``partitioner.class`` (:mod:`.partitioner`) ``partition=<p>`` is replaced
by the record's time folder (``year=2026/month=11/day=27/hour=08``), and a file is also cut
where consecutive records change folder, so a file still holds consecutive records of one
partition; with ``timestamp.extractor=Record`` (or ``RecordField``) a replay cuts the same
files in the same folders, so what follows holds as well. ``Wallclock`` time is not
reproducible: a replay may write records again into another folder (as Confluent's sink).

``<topic>`` and ``<p>`` are where the records were consumed from (before any topic-routing
transformation: offsets belong to that partition). A file holds consecutive records of one
partition and is named after its first offset, so the same records always produce the same
name.

Delivery (exactly once in the archive, built on at-least-once consumption):

* ``put`` encodes records into one in-memory buffer per partition and writes the buffer as
  one complete file when it holds ``flush.size`` records, or, with ``rotate.interval.ms``,
  when its first record is that old. A file appears whole or not at all (see
  :mod:`.storage`).
* ``pre_commit`` returns, per partition, the offset just after the last record of a fully
  written file (never beyond the offsets it was given); a partition with nothing written
  since its assignment is left out, so the runtime commits nothing for it. Committed
  offsets are therefore always file boundaries.
* With ``context.is_closing()`` true (KIP-275: the partitions are being revoked, the task
  is stopping, its pod is drained), ``pre_commit`` first writes every partial buffer of the
  partitions it is given as a (smaller) file, so everything consumed is committed and the
  next owner re-reads nothing.
* After a crash, or partitions *lost* without a closing commit, the next owner resumes at
  the last committed offset, which is the first offset of the first file not committed:
  it rewrites the same records under the same names (overwriting). When the earlier
  owner had cut files differently (a time rotation, a closing commit whose offset commit
  then failed), the files it left whose first offset falls inside a file the new owner has
  just written are deleted as stale duplicates, once that file is complete: the archive
  ends up with each record exactly once. (The only files the connector ever deletes;
  the task lists a partition's directory once, before its first write after assignment.)
* Records redelivered at or below an offset already processed (a batch retried after a
  :class:`~conveyor.api.RetriableError`, a rewind) are skipped.

The batch path (``SinkTask.put_batch``, :mod:`conveyor.api.batches`): with ``format=jsonl``
or ``parquet``, the default partitioner and no ``format.class``, the task takes Arrow record
batches: ``jsonl`` lines made by Arrow kernels (:mod:`.jsonl_batches`), ``parquet`` columns
taken from the batch's (:mod:`.parquet_batches`), byte for byte the files ``put`` writes;
offsets and errors are the same on both paths.

Memory: the buffers hold the encoded records (JSON text, Avro binary) of every assigned
partition, up to ``flush.size`` each; see :mod:`.formats`.

Errors: storage unreachable (connection refused, timeouts, throttling, 5xx, local I/O
errors) → :class:`~conveyor.api.RetriableError` from ``put`` / ``pre_commit`` with
``retry.backoff.ms``; the buffer is kept and written at the next attempt. Configuration
problems (missing bucket, access denied, missing credentials) → :class:`~conveyor.api.ConnectError`
naming the URL and what to fix. A record that cannot be encoded goes to the errant
record reporter (dead-letter queue per ``errors.tolerance``) or, without one, raises
:class:`~conveyor.api.DataError`.

Deletion: archives outlive connectors. ``stop(connector_deleted=True)`` deletes nothing;
the connector's ``cleanup_report()`` says where the data was kept.

Threads: the connector's hooks run on the driver's control thread; the task's on its
runner thread in a Spark executor, one at a time (no locking needed).
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import pyarrow as pa

from conveyor.api import (
    ConnectError,
    DataError,
    RetriableError,
    SinkConnector,
    SinkRecord,
    SinkTask,
    TopicPartition,
)
from conveyor.api.batches import OFFSET, partition_runs
from conveyor.api.sink import Offsets
from conveyor.connectors._builtin import BuiltIn
from conveyor.connectors.archive.config import (
    ArchiveFormat,
    ArchiveSinkConfig,
    file_name_pattern,
    load_config,
    render_file_name,
)
from conveyor.connectors.archive.formats import AvroLayout, AvroLayouts, BatchRows, FileBuffer, new_buffer
from conveyor.connectors.archive.jsonl_batches import JsonlRows
from conveyor.connectors.archive.partitioner import TimeFolders
from conveyor.connectors.archive.storage import TEMP_SUFFIX, Storage
from conveyor.connectors.archive.value_formats import ValueFiles

log = logging.getLogger("conveyor.connectors.archive")


class ArchiveSinkConnector(BuiltIn, SinkConnector):
    """Archives Kafka records to files on local disk or S3 (entry point ``archive-sink``).

    Every hook runs on the driver's control thread. The connector provisions nothing:
    ``start`` only checks the storage is usable; ``stop(connector_deleted=True)`` keeps
    the archive (archives outlive connectors) and says so in :meth:`cleanup_report`.
    """

    config_model = ArchiveSinkConfig

    def __init__(self) -> None:
        self._raw: dict[str, Any] = {}
        self._config: ArchiveSinkConfig | None = None
        self._report: list[str] = []

    def start(self, config: Mapping[str, Any]) -> None:
        """Validate ``config`` and check the storage: the local directory can be created /
        written, the S3 bucket exists and can be listed (blocks up to the storage's
        timeouts, ~10 s to connect for S3).

        Raises:
            ConfigError: invalid configuration.
            ConnectError: the storage is unreachable or misconfigured (missing bucket,
                access denied); the message names the URL and what to fix.
        """
        self._config = load_config(config)
        self._raw = dict(config)
        storage = Storage(self._config)
        try:
            storage.check()
        except RetriableError as exc:
            raise ConnectError(f"cannot reach the archive storage {storage.describe()}: {exc}") from exc

    def task_class(self) -> type[ArchiveSinkTask]:
        return ArchiveSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        """``max_tasks`` (at least 1) identical configurations; the consumer group splits the
        partitions between the tasks."""
        return [dict(self._raw) for _ in range(max(1, max_tasks))]

    def stop(self, connector_deleted: bool = False) -> None:
        """Nothing to release. With ``connector_deleted=True`` the archived files are
        deliberately kept (they are the archive: they outlive the connector)."""
        if connector_deleted and self._config is not None:
            self._report = [
                (
                    f"kept the archived data under {self._config.archive_url}: archives outlive their"
                    " connector (delete it yourself if it is no longer wanted)"
                )
            ]

    def cleanup_report(self) -> list[str]:
        """``[]``, or after ``stop(connector_deleted=True)`` one line saying the data was kept."""
        return list(self._report)


_LISTED_FOLDERS_KEPT = 64


class _Partition:
    """Per-partition state of a task."""

    __slots__ = ("boundaries", "buffer", "buffer_dir", "directory", "existing", "next_offset", "pattern", "tp")

    def __init__(self, tp: TopicPartition, storage: Storage, config: ArchiveSinkConfig, time_based: bool) -> None:
        self.tp = tp
        # the partition's folder, or with a time-based partitioner the topic's (time folders go below)
        self.directory = storage.topic_dir(tp.topic) if time_based else storage.partition_dir(tp.topic, tp.partition)
        self.buffer_dir = self.directory  # the folder of the buffer's file
        ext = config.extension
        self.pattern = file_name_pattern(config.file_name_format, tp.topic, tp.partition, ext, config.offset_pad_width)
        self.next_offset: int | None = None  # last processed offset + 1 (redelivery filter)
        self.buffer: FileBuffer | None = None
        self.boundaries: list[int] = []  # next offsets after fully written files, ascending
        # folder -> {start offset -> path} of files found there before the first write to it
        # (stale candidates), for the folders written most recently
        self.existing: dict[str, dict[int, str]] = {}


class ArchiveSinkTask(BuiltIn, SinkTask):
    """Buffers and writes the records of its assigned partitions (see the module docstring).

    Every hook runs on the task's runner thread, never concurrently.
    """

    def __init__(self) -> None:
        self._config: ArchiveSinkConfig | None = None
        self._storage: Storage | None = None
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._layouts = AvroLayouts()
        self._parquet: Any = None  # parquet_format.ParquetBuffers, made on first use
        self._flush_size = 1
        self._rotate_s: float | None = None
        self._folders: TimeFolders | None = None
        self._values: ValueFiles | None = None
        self._takes_batches = False
        self._jsonl_rows = JsonlRows()

    @property
    def config(self) -> ArchiveSinkConfig:
        if self._config is None:
            raise RuntimeError("ArchiveSinkTask used before start()")
        return self._config

    @property
    def storage(self) -> Storage:
        if self._storage is None:
            raise RuntimeError("ArchiveSinkTask used before start()")
        return self._storage

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, config: Mapping[str, Any]) -> None:
        """Validate the configuration and set up the filesystem (no I/O; storage problems
        surface at the first write). Task runner thread, once, after ``initialize``.

        Raises:
            ConfigError: invalid configuration or storage options.
        """
        self._config = load_config(config)
        self._storage = Storage(self._config)
        self._folders = self._config.time_folders()
        self._values = ValueFiles(self._config) if self._config.format_class else None
        self._flush_size = self._config.flush_size
        self._rotate_s = self._config.rotate_interval_ms / 1000 if self._config.rotate_interval_ms > 0 else None
        self._takes_batches = (self._config.format in (ArchiveFormat.JSONL, ArchiveFormat.PARQUET)
                               and self._folders is None and self._values is None)

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        """Start state for newly assigned ``partitions`` (the consumer resumes at their
        committed offset, which is a file boundary; nothing to rewind). A partition that
        is still open keeps its buffer. Task runner thread; no I/O."""
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if key not in self._partitions:
                self._partitions[key] = self._new_partition(tp)

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Buffer ``records`` per partition; write a partition's buffer as one file when it
        reaches ``flush.size`` records (and, first, any buffer older than
        ``rotate.interval.ms``). Task runner thread; blocks while files are written.

        Records at offsets already processed (a redelivered batch) are skipped, so calling
        ``put`` again with the same batch after a :class:`RetriableError` is safe.

        Raises:
            RetriableError: storage unreachable; every record of the batch up to the failure
                is kept buffered and the runtime redelivers the batch (``retry.backoff.ms``).
            ConnectError: storage misconfigured (missing bucket, access denied).
            DataError: a record cannot be encoded and the context has no errant record reporter.
        """
        now = time.monotonic()
        if self._rotate_s is not None:
            self._rotate_due(now, raise_errors=True)
        flush_size = self._flush_size
        parts = self._partitions
        reports: list[Future[None]] = []
        for record in records:
            key = (record.original_topic, record.original_kafka_partition)
            part = parts.get(key)  # type: ignore[arg-type]
            if part is None:  # put without open (tests, or a runtime that skips open)
                part = parts[key] = self._new_partition(TopicPartition(*key))  # type: ignore[arg-type]
            offset: int = record.original_kafka_offset  # type: ignore[assignment]
            if part.next_offset is not None and offset < part.next_offset:
                continue  # redelivered
            if record.value is None and self._values is not None:  # behavior.on.null.values
                if not self._values.skip_nulls:
                    reports.append(self._reject(record, self._values.null_value(record)))
                self._pass_over(part, offset)
                continue
            buffer = part.buffer
            folder = part.directory
            if self._folders is not None:
                try:
                    folder = self.storage.join(part.directory, self._folders.folder(record))
                except DataError as exc:  # no usable time
                    reports.append(self._reject(record, exc))
                    self._pass_over(part, offset)
                    continue
            if buffer is not None and (
                len(buffer.offsets) >= flush_size or not buffer.accepts(record) or folder != part.buffer_dir
            ):
                self._write(part)
                buffer = None
            if buffer is None:
                part.buffer_dir = folder
                try:
                    buffer = part.buffer = self._new_buffer(record, offset, now)
                except DataError as exc:  # the schemas cannot be expressed in Avro
                    reports.append(self._reject(record, exc))
                    self._pass_over(part, offset)
                    continue
            try:
                buffer.append(record, offset)
            except DataError as exc:
                reports.append(self._reject(record, exc))
            buffer.last = offset
            part.next_offset = offset + 1
            if len(buffer.offsets) >= flush_size:
                self._write(part)
        for future in reports:
            future.result()

    def takes_batches(self, key_type: pa.DataType | None, value_type: pa.DataType | None) -> bool:
        """With ``format=jsonl`` or ``parquet``, the default partitioner and no
        ``format.class``: their files are made from Arrow columns (for ``jsonl``, of keys
        and values without Connect schemas: typed ones take records). Other configurations
        take records."""
        if self.config.format is ArchiveFormat.JSONL and (key_type is None or value_type is None):
            return False
        return self._takes_batches

    def put_batch(self, batch: pa.RecordBatch) -> None:
        """:meth:`put` for a record batch (:mod:`conveyor.api.batches`), with the same files,
        offsets and errors. With ``format=jsonl`` or ``parquet``, the default partitioner and
        no ``format.class``, a partition's run of rows goes into its buffer at once: ``jsonl``
        lines made by Arrow kernels (:mod:`.jsonl_batches`), ``parquet`` columns taken from
        the batch's (:mod:`.parquet_batches`). Any other configuration takes the batch's
        records through :meth:`put`. Task runner thread.

        Raises:
            as :meth:`put`.
        """
        if not self._takes_batches:
            super().put_batch(batch)
            return
        now = time.monotonic()
        if self._rotate_s is not None:
            self._rotate_due(now, raise_errors=True)
        if not batch.num_rows:
            return
        offsets = batch.column(OFFSET).to_pylist()
        for tp, start, stop in partition_runs(batch):
            rows = batch.slice(start, stop - start)
            if self.config.format is ArchiveFormat.JSONL:
                self._put_rows(tp, rows, offsets[start:stop], now, self._jsonl_rows)
                continue
            from conveyor.connectors.archive.parquet_batches import ParquetRows, layout_runs

            buffers = self._parquet_buffers()
            for key_schema, value_schema, first, end in layout_runs(rows):
                writer = ParquetRows(buffers, buffers.layout(key_schema, value_schema))
                self._put_rows(tp, rows.slice(first, end - first), offsets[start + first:start + end], now, writer)

    def _put_rows(self, tp: TopicPartition, rows: pa.RecordBatch, offsets: list[int], now: float,
                  writer: BatchRows) -> None:
        """Consecutive rows of ``tp`` (at ``offsets``, one file layout) into its buffer through
        ``writer``, writing the buffer first when it holds another layout and whenever it
        holds ``flush.size`` records, as :meth:`put` does."""
        key = (tp.topic, tp.partition)
        part = self._partitions.get(key)
        if part is None:  # put without open (tests, or a runtime that skips open)
            part = self._partitions[key] = self._new_partition(tp)
        i = 0 if part.next_offset is None else bisect.bisect_left(offsets, part.next_offset)  # redelivered
        while i < len(offsets):
            buffer = part.buffer
            if buffer is not None and (buffer.count >= self._flush_size or not writer.fits(buffer)):
                self._write(part)
                buffer = None
            if buffer is None:
                part.buffer_dir = part.directory
                buffer = part.buffer = writer.new(offsets[i], now)
            take = min(len(offsets) - i, self._flush_size - buffer.count)
            writer.add(buffer, rows.slice(i, take), offsets[i:i + take], tp)
            i += take
            buffer.last = offsets[i - 1]
            part.next_offset = buffer.last + 1
            if buffer.count >= self._flush_size:
                self._write(part)

    def pre_commit(self, offsets: Offsets) -> Offsets:
        """Return what Kafka may commit: per partition in ``offsets``, the offset after the
        last record of a fully written file, at most ``offsets[tp]``; partitions with no
        file written since they were assigned are left out. Task runner thread, every
        ``offset.flush.interval.ms`` and before partitions close.

        With ``context.is_closing()`` true (KIP-275), first writes each given partition's
        partial buffer (its records below ``offsets[tp]``) as a file, so that all consumed
        records are committed. Otherwise writes buffers due by ``rotate.interval.ms``.

        A partition whose write fails keeps its buffer; the others' progress is still
        returned (the failure is logged).

        Raises:
            RetriableError / ConnectError: a write failed and there is nothing to commit
                (the runtime then commits nothing and logs the error).
        """
        closing = self.context.is_closing()
        errors: list[tuple[TopicPartition, ConnectError]] = []
        if closing:
            for tp, limit in offsets.items():
                part = self._partitions.get((tp.topic, tp.partition))
                if part is None or part.buffer is None:
                    continue
                try:
                    self._write(part, limit=limit)
                except ConnectError as exc:
                    errors.append((tp, exc))
        elif self._rotate_s is not None:
            errors = self._rotate_due(time.monotonic(), raise_errors=False)
        result: dict[TopicPartition, int] = {}
        for tp, limit in offsets.items():
            part = self._partitions.get((tp.topic, tp.partition))
            if part is None or not part.boundaries:
                continue
            i = bisect.bisect_right(part.boundaries, limit)
            if i == 0:
                continue
            result[tp] = part.boundaries[i - 1]
            del part.boundaries[: i - 1]
        if errors:
            if not result:
                raise errors[0][1]
            for tp, exc in errors:
                log.error(
                    "archive: %s: could not write %s's buffer, its records stay uncommitted: %s",
                    "closing commit" if closing else "rotation",
                    tp,
                    exc,
                )
        return result

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """Forget ``partitions``: drop their buffers and state. After a closing
        ``pre_commit`` their records are already written and committed; when the
        partitions were *lost*, the buffered records are discarded uncommitted and their
        next owner re-reads them. Task runner thread; no I/O."""
        for tp in partitions:
            self._partitions.pop((tp.topic, tp.partition), None)

    def stop(self, connector_deleted: bool = False) -> None:
        """Drop every buffer (uncommitted records are re-read by the next owner). Never
        deletes archived files, also not with ``connector_deleted=True``: archives outlive
        connectors. Task runner thread, last hook."""
        self._partitions.clear()

    # -- internals ------------------------------------------------------------------------

    def _new_partition(self, tp: TopicPartition) -> _Partition:
        return _Partition(tp, self.storage, self.config, self._folders is not None)

    def _parquet_buffers(self) -> Any:
        """The task's ``parquet_format.ParquetBuffers``, made on first use."""
        if self._parquet is None:
            from conveyor.connectors.archive.parquet_format import ParquetBuffers  # pyarrow.parquet: only when used

            self._parquet = ParquetBuffers(self.config)
        return self._parquet

    def _new_buffer(self, record: SinkRecord, offset: int, now: float) -> FileBuffer:
        if self._values is not None:
            return self._values.new(record, offset, now)
        layout: AvroLayout | None = None
        if self.config.format is ArchiveFormat.PARQUET:
            return self._parquet_buffers().new(record, offset, now)
        if self.config.format is ArchiveFormat.AVRO:
            layout = self._layouts.get(record.key_schema, record.value_schema)
        return new_buffer(self.config.format, offset, now, layout, self.config.avro_codec)

    def _pass_over(self, part: _Partition, offset: int) -> None:
        """A record that goes into no file (rejected, or a skipped null value): its offset is
        committable with the open buffer's file, or at once when none is open."""
        part.next_offset = offset + 1
        if part.buffer is None:
            part.boundaries.append(offset + 1)
        else:
            part.buffer.last = offset

    def _reject(self, record: SinkRecord, error: DataError) -> Future[None]:
        reporter = self.context.errant_record_reporter()
        if reporter is None:
            raise DataError(
                f"record {record.original_topic}-{record.original_kafka_partition}@{record.original_kafka_offset}"
                f" cannot be archived: {error}"
            )
        return reporter.report(record, error)

    def _rotate_due(self, now: float, *, raise_errors: bool) -> list[tuple[TopicPartition, ConnectError]]:
        """Write every buffer whose first record is ``rotate.interval.ms`` old."""
        assert self._rotate_s is not None
        errors: list[tuple[TopicPartition, ConnectError]] = []
        for part in list(self._partitions.values()):
            buffer = part.buffer
            if buffer is None or now - buffer.opened < self._rotate_s:
                continue
            try:
                self._write(part)
            except ConnectError as exc:
                if raise_errors:
                    raise
                errors.append((part.tp, exc))
        return errors

    def _write(self, part: _Partition, limit: int | None = None) -> None:
        """Write ``part``'s buffer (only its records below ``limit`` when given) as one file,
        then record the file's end as a commit boundary and delete stale files it covers.

        Raises:
            RetriableError / ConnectError: the buffer is unchanged.
        """
        buffer = part.buffer
        assert buffer is not None
        if limit is not None and limit <= buffer.start:
            return
        if limit is None or limit > buffer.last:
            count, boundary = buffer.count, buffer.last + 1
        else:
            count, boundary = bisect.bisect_left(buffer.offsets, limit), limit
        if boundary <= buffer.start:
            return
        storage = self.storage
        start = buffer.start
        if count:
            tp = part.tp
            config = self.config
            name = render_file_name(
                config.file_name_format, tp.topic, tp.partition, start, config.extension, config.offset_pad_width
            )
            folder = part.buffer_dir
            path = storage.join(folder, name)
            data = buffer.payload(count, tp.topic, tp.partition)
            existing = part.existing.get(folder)
            if existing is None:
                existing = self._list_existing(part, folder, start, name)
                if len(part.existing) >= _LISTED_FOLDERS_KEPT:
                    del part.existing[next(iter(part.existing))]
                part.existing[folder] = existing
            storage.write(path, data)
        if count == buffer.count:
            part.buffer = None
        else:
            buffer.drop_first(count)
            buffer.start = buffer.offsets[0] if buffer.offsets else boundary
        part.boundaries.append(boundary)
        if count and existing:
            self._delete_stale(existing, start, boundary)

    def _list_existing(self, part: _Partition, folder: str, start: int, start_name: str) -> dict[int, str]:
        """Files of this partition in ``folder`` starting after ``start`` (left by an earlier
        owner); also removes local temporary files an interrupted write left behind. (A
        partition's names differ only in the zero-padded start offset, so they sort by offset
        and S3 lists only those after ``start_name``, while ``start`` is below 10^(width-1):
        then every longer, unpadded offset also sorts after it. A stale file whose first
        record is in the file being written is in the same folder, since that file's records
        all are.)"""
        storage = self.storage
        existing: dict[int, str] = {}
        sorted_after = start < 10 ** (self.config.offset_pad_width - 1)
        for name in storage.list_names(folder, start_after=start_name if sorted_after else ""):
            match = part.pattern.fullmatch(name)
            if match:
                first = int(match.group(1))
                if first > start:
                    existing[first] = storage.join(folder, name)
            elif storage.local and name.startswith(".") and name.endswith(TEMP_SUFFIX):
                final = name[1 : -len(TEMP_SUFFIX)].rsplit(".", 1)[0]
                if part.pattern.fullmatch(final):
                    try:
                        storage.delete(storage.join(folder, name))
                    except ConnectError as exc:
                        log.warning("archive: cannot remove temporary file %s: %s", name, exc)
        return existing

    def _delete_stale(self, existing: dict[int, str], start: int, boundary: int) -> None:
        """Delete files of an earlier owner (``existing``: in the folder just written to)
        whose first offset lies inside the file ``[start, boundary)`` just written: their
        records up to ``boundary`` are in that file, the rest are uncommitted and will be
        written again."""
        for first in sorted(existing):
            if first >= boundary:
                break
            path = existing[first]
            if first <= start:  # same name as the file just written (overwritten), or passed
                del existing[first]
                continue
            try:
                self.storage.delete(path)
            except ConnectError as exc:  # retried after the next write of this partition
                log.warning("archive: cannot delete stale file %s: %s", self.storage.describe(path), exc)
                continue
            log.info(
                "archive: deleted stale file %s (its records from offset %d are in the file starting at %d)",
                self.storage.describe(path),
                first,
                start,
            )
            del existing[first]
