"""The file connectors without Kafka: line splitting and byte positions, the source task on a
real file, configuration, task configs and entry points. (What ``file-sink`` writes per value:
``test_file_java_text.py``; with a broker and Spark: ``tests/integration/test_file_connectors.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.api import (
    ConfigError,
    ConnectError,
    OffsetStorageReader,
    Schema,
    SchemaType,
    SourceTaskContext,
)
from conveyor.connectors.file import FileSinkConnector, FileSourceConnector
from conveyor.connectors.file.config import load_source_config
from conveyor.connectors.file.lines import LineSplitter
from conveyor.connectors.file.source import FileSourceTask, committed_position
from conveyor.runtime.config.plugins import load_object

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_lines_end_at_lf_crlf_and_lone_cr_with_byte_positions():
    lines = LineSplitter()
    lines.feed("a\r\nb\rc\nü€😀\nbad".encode() + b"\xff\xfe" + b"x\n\nlast\r")
    got = []
    while (found := lines.next_line()) is not None:
        got.append(found)
    assert got == [("a", 3), ("b", 5), ("c", 7), ("ü€😀", 17), ("bad\ufffd\ufffdx", 24), ("", 25)]
    assert lines.pending == 5, "'last\\r' waits: the \\r may start a \\r\\n"
    lines.feed(b"\n")
    assert lines.next_line() == ("last", 31)
    assert lines.next_line() is None


def test_a_line_split_across_reads_and_a_resume_position():
    lines = LineSplitter(position=100)
    lines.feed(b"par")
    assert lines.next_line() is None
    lines.feed("tié\r".encode())
    assert lines.next_line() is None
    lines.feed(b"\nnext\n")
    assert [lines.next_line(), lines.next_line(), lines.next_line()] == [("partié", 109), ("next", 114), None]


def test_committed_positions():
    assert committed_position(None, "f") == 0
    assert committed_position({"other": 1}, "f") == 0
    assert committed_position({"position": 42}, "f") == 42
    with pytest.raises(Exception, match="Offset position is the incorrect type"):
        committed_position({"position": 4.0}, "f")
    with pytest.raises(Exception, match="negative"):
        committed_position({"position": -1}, "f")


def test_source_config_refuses_stdin_and_topic_lists_and_trims_like_configdef():
    with pytest.raises(ConfigError) as refused:
        load_source_config({"topic": "t"})
    assert "standard input" in refused.value.errors["file"]
    with pytest.raises(ConfigError, match="topic"):
        load_source_config({"file": "/f", "topic": "a,b"})
    with pytest.raises(ConfigError, match="topic"):
        load_source_config({"file": "/f", "topic": " "})
    cfg = load_source_config({"file": " /f\t", "topic": "t ", "batch.size": "-5"})
    assert (cfg.file, cfg.topic, cfg.batch_size, cfg.records_per_poll) == ("/f", "t", -5, 1)
    assert load_source_config({"file": "/f", "topic": "t"}).batch_size == 2000


def test_task_configs_are_kafka_connects():
    sink = FileSinkConnector()
    sink.start({"file": "/tmp/out", "topics": "t"})
    assert sink.task_configs(3) == [{"file": "/tmp/out", "topics": "t"}] * 3
    source = FileSourceConnector()
    source.start({"file": "/tmp/in", "topic": "t"})
    assert source.task_configs(5) == [{"file": "/tmp/in", "topic": "t"}]


def test_entry_points_name_the_classes():
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    group = entry_points["conveyor.connectors"]
    assert load_object(group["file-sink"]) is FileSinkConnector
    assert load_object(group["file-source"]) is FileSourceConnector


class _StoredOffset(OffsetStorageReader):
    def __init__(self, offset):
        self._offset = offset

    def offset(self, partition):
        return self._offset


class _Context(SourceTaskContext):
    def __init__(self, offset):
        self._reader = _StoredOffset(offset)

    def configs(self):
        return {}

    def offset_storage_reader(self):
        return self._reader

    def transaction_context(self):
        return None


def _source_task(path, offset=None, **config):
    task = FileSourceTask()
    task.initialize(_Context(offset))
    task.start({"file": str(path), "topic": "t", **config})
    return task


def test_source_task_records_and_lines_left_after_a_full_batch(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\nc\nd\ne")
    task = _source_task(path, **{"batch.size": "3"})
    first = task.poll()
    assert [(r.value, r.source_offset) for r in first] == [("a", {"position": 2}), ("b", {"position": 4}),
                                                           ("c", {"position": 6})]
    record = first[0]
    assert (record.topic, record.key, record.key_schema, record.value_schema, record.source_partition) == \
        ("t", None, None, Schema(SchemaType.STRING), {"filename": str(path)})
    assert isinstance(record.timestamp, int)
    # Kafka Connect keeps "d" in its buffer until more bytes arrive; here the next poll returns it.
    assert [r.value for r in task.poll()] == ["d"]
    with path.open("ab") as f:
        f.write(b"\n")
    assert [(r.value, r.source_offset) for r in task.poll()] == [("e", {"position": 10})]
    task.stop()


def test_source_task_resumes_at_its_position_and_refuses_a_shorter_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"one\ntwo\n")
    task = _source_task(path, {"position": 4})
    assert [r.value for r in task.poll()] == ["two"]
    task.stop()
    task = _source_task(path, {"position": 99})
    with pytest.raises(ConnectError, match="fewer than its committed position 99"):
        task.poll()


def test_source_task_waits_for_a_missing_file(tmp_path):
    path = tmp_path / "later.txt"
    task = _source_task(path)
    assert task.poll() is None  # after Kafka Connect's 1 s back-off
    path.write_bytes(b"x\n")
    assert [r.value for r in task.poll()] == ["x"]
    task.stop()
