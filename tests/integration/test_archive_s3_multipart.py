"""The archive sink's large files on a real S3 server (S3Proxy): multipart uploads, and the
server going away in the middle of one.

The task is driven directly (no Spark, no Kafka) with :class:`StubSinkTaskContext`, as in
``test_archive_sink.py``; each test runs its own S3Proxy so that it can stop it.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from conveyor.api import RetriableError, SinkRecord, TopicPartition
from conveyor.connectors.archive import ArchiveSinkTask
from conveyor.testing.contexts import StubSinkTaskContext, closing_commit, start_sink_task
from conveyor.testing.s3 import S3Server

pytestmark = pytest.mark.integration

TP = TopicPartition("events", 0)
PART = 5 * 2**20  # S3's smallest part size
RECORDS = 12_000  # about 12.5 MB of JSON lines: three parts of 5 MiB
KEY = "archive/topics/events/partition=0/events+0+0000000000.jsonl"


def _records(count: int = RECORDS) -> list[SinkRecord]:
    blob = "x" * 1000
    return [
        SinkRecord(topic=TP.topic, kafka_partition=TP.partition, key=None, value={"id": o, "blob": blob},
                   kafka_offset=o, timestamp=1_700_000_000_000 + o)
        for o in range(count)
    ]


def _config(server: S3Server, bucket: str, **overrides: Any) -> dict[str, Any]:
    return {
        "name": "archive-mpu",
        "archive.url": f"s3://{bucket}/archive",
        "archive.s3.endpoint.url": server.endpoint_url,
        "archive.s3.key": S3Server.ACCESS_KEY,
        "archive.s3.secret": S3Server.SECRET_KEY,
        "flush.size": RECORDS,
        "s3.part.size": PART,
        "retry.backoff.ms": 250,
        "archive.storage.config_kwargs.connect_timeout": 2,
        "archive.storage.config_kwargs.retries.max_attempts": 1,
        "archive.storage.skip_instance_cache": True,
        **overrides,
    }


def _start(config: dict[str, Any]) -> tuple[ArchiveSinkTask, StubSinkTaskContext]:
    return start_sink_task(ArchiveSinkTask(), config, [TP])


def _closing_commit(task: ArchiveSinkTask, context: StubSinkTaskContext, offset: int) -> dict:
    return closing_commit(task, context, {TP: offset})


def _uploads(server: S3Server, bucket: str) -> list[str]:
    """Keys with an unfinished multipart upload."""
    return sorted(u["Key"] for u in server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def _count_requests(task: ArchiveSinkTask, monkeypatch, before=None) -> list[str]:
    """Record the S3 operations the task's s3fs makes; ``before(method)`` runs before each is sent."""
    fs = task.storage.fs
    real = fs._call_s3
    calls: list[str] = []

    async def call_s3(method, *args, **kwargs):
        if before is not None:
            before(method)
        result = await real(method, *args, **kwargs)
        calls.append(method)
        return result

    monkeypatch.setattr(fs, "_call_s3", call_s3)
    return calls


def test_a_large_file_goes_as_a_multipart_upload(monkeypatch) -> None:
    with S3Server() as server:
        bucket = server.create_bucket("mpu-large")
        task, context = _start(_config(server, bucket))
        calls = _count_requests(task, monkeypatch)
        batch = _records()
        task.put(batch)
        assert task.pre_commit({TP: RECORDS}) == {TP: RECORDS}
        assert calls.count("upload_part") == 3 and "complete_multipart_upload" in calls
        assert "put_object" not in calls
        data = server.get_bytes(bucket, KEY)
        assert len(data) > 2 * PART
        assert [json.loads(line)["offset"] for line in data.splitlines()] == list(range(RECORDS))
        assert server.list_keys(bucket) == [KEY] and _uploads(server, bucket) == []

        # below twice the part size: one PUT
        small = _config(server, bucket, **{"flush.size": 100, "topics.dir": "small"})
        task2, _ = _start(small)
        calls2 = _count_requests(task2, monkeypatch)
        task2.put(_records(100))
        assert calls2 == ["put_object"]


def test_server_stopped_mid_upload_commits_nothing_shows_nothing_and_the_retry_completes(monkeypatch) -> None:
    """Issue 15's fault test: the S3 server goes away in the middle of a multipart upload,
    after its parts and before its completion. The write is a RetriableError, nothing is committed, nothing is visible under the
    final key; the redelivered batch after the restart writes the whole file (aborting the
    upload the outage left behind) and commits it."""
    server = S3Server().start()
    try:
        bucket = server.create_bucket("mpu-fault")
        task, context = _start(_config(server, bucket))
        stopped: list[str] = []

        def stop_before_completion(method: str) -> None:
            if method == "complete_multipart_upload" and not stopped:
                stopped.append(method)
                server.stop(keep_data=True)  # the JVM is gone, its disk is not

        calls = _count_requests(task, monkeypatch, before=stop_before_completion)
        batch = _records()
        with pytest.raises(RetriableError) as info:
            task.put(batch)
        assert stopped and calls == ["create_multipart_upload"] + ["upload_part"] * 3
        assert info.value.delay == timedelta(milliseconds=250)
        assert task.pre_commit({TP: RECORDS}) == {}  # nothing written, nothing to commit
        with pytest.raises(RetriableError):  # a closing commit still cannot write it
            _closing_commit(task, context, RECORDS)

        server.restart()
        assert server.list_keys(bucket) == []  # no partial object under the final key
        assert _uploads(server, bucket) == [KEY]  # the interrupted upload s3fs could not abort

        calls.clear()
        task.put(batch)  # the runtime redelivers the batch after the RetriableError
        assert _closing_commit(task, context, RECORDS) == {TP: RECORDS}
        assert calls == ["create_multipart_upload"] + ["upload_part"] * 3 + ["complete_multipart_upload"]
        assert server.list_keys(bucket) == [KEY]
        assert _uploads(server, bucket) == []  # the leftover was aborted before the new upload
        data = server.get_bytes(bucket, KEY)
        assert [json.loads(line)["offset"] for line in data.splitlines()] == list(range(RECORDS))
    finally:
        server.stop()
