"""The source's batch path (``SourceTask.poll_batch``: rows written from Arrow, offsets per
batch) against a real broker and Spark: the file source writes the same records and commits
the same offsets on both paths."""

from __future__ import annotations

import uuid

import pytest

from conveyor.runtime.kafka.offsets_topic import partition_id, read_offsets
from conveyor.testing.runs import connector_manifest, consume_all, running_connector, wait_until

pytestmark = pytest.mark.integration

SOURCE = "conveyor.connectors.file.source:FileSourceConnector"
STRING = "org.apache.kafka.connect.storage.StringConverter"

#: odd lines: non-ASCII, malformed UTF-8, empty, CRLF and lone CR terminators, a BOM
ODD = [b"\xef\xbb\xbfbom", "é ü 日本".encode(), b"x\xffy\xc3", b"", b"tab\there", b"crlf\r", b"lone-cr\rnext"]


def _content(n: int) -> bytes:
    return b"".join((ODD[(i // 11) % len(ODD)] if i % 11 == 0 else b"line %d" % i) + b"\n" for i in range(n))


def test_the_file_source_writes_the_same_records_and_offsets_on_both_paths(kafka_bootstrap, topic_factory, spark,
                                                                           tmp_path):
    content = _content(3000)
    expected_lines = content.count(b"\n") + content.replace(b"\r\n", b"\n").count(b"\r")
    written, offsets = {}, {}
    for path in ("records", "batches"):
        topic, offsets_topic, name = topic_factory(partitions=1), f"offsets-{uuid.uuid4().hex[:6]}", \
            f"src-{uuid.uuid4().hex[:8]}"
        source = tmp_path / f"{path}.txt"
        source.write_bytes(content)
        config = {"file": str(source), "topic": topic, "value.converter": STRING, "batch.size": "500",
                  "offsets.storage.topic": offsets_topic, "offset.flush.interval.ms": "300",
                  "conveyor.batch.path.enable": str(path == "batches").lower()}
        with running_connector(connector_manifest(name, SOURCE, kafka_bootstrap, config), spark) as d:
            msgs = consume_all(kafka_bootstrap, topic, expected_lines, timeout_s=120)
            task = wait_until(lambda: next((t for t in d.status()["tasks"] if t["state"] == "RUNNING"), None),
                              message="the task RUNNING")
            assert task["batch_path"] is (path == "batches")
            wait_until(lambda: read_offsets(kafka_bootstrap, offsets_topic, name)  # noqa: B023
                       == {partition_id({"filename": str(source)}): {"position": len(content)}},  # noqa: B023
                       timeout_s=30, message=f"the final offset through {path}")
        written[path] = [(m.key(), m.value()) for m in msgs]
        offsets[path] = read_offsets(kafka_bootstrap, offsets_topic, name)
    assert written["batches"] == written["records"] and len(written["records"]) == expected_lines
    assert "\ufffd".encode() in b"".join(v for _, v in written["batches"])
    assert list(offsets["batches"].values()) == list(offsets["records"].values()) == [{"position": len(content)}]
