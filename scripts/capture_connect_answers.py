#!/usr/bin/env python3
"""Capture a real Apache Kafka Connect worker's REST answers, for comparison with Conveyor's.

Starts (or reuses, ``$CONVEYOR_KAFKA_BOOTSTRAP``) a broker and a
:class:`conveyor.testing.connect.ConnectWorker`, runs a FileStreamSink ``c1`` (topic ``t1``) and a
FileStreamSource ``s1``, sends a fixed sequence of requests (unknown connectors, bad bodies,
offsets while running and while stopped, pause/resume/restart/stop, 404/405, ...) and writes every
answer as JSON: a list of ``{method, path, body_sent, status, content_type, headers, body, raw,
note?}`` (``body`` parsed as JSON when it is JSON, ``raw`` the exact text).

    PYTHONPATH=src:operator python scripts/capture_connect_answers.py [--out /tmp/connect-answers.json]

Everything stays on 127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
_NO_BODY = object()


class Capture:
    def __init__(self, worker) -> None:
        self.worker = worker
        self.answers: list[dict[str, Any]] = []

    def __call__(self, method: str, path: str, body: Any = _NO_BODY, *, raw: str | None = None,
                 note: str | None = None) -> tuple[int, Any]:
        json_body = None if body is _NO_BODY else body
        status, text, headers = self.worker.rest_text(method, path, json_body=json_body, raw_body=raw)
        parsed: Any = text or None
        try:
            parsed = json.loads(text)
        except ValueError:
            pass
        entry = {
            "method": method,
            "path": path,
            "body_sent": raw if raw is not None else (None if body is _NO_BODY else body),
            "status": status,
            "content_type": headers.get("content-type"),
            "headers": {k: v for k, v in headers.items() if k != "date"},
            "body": parsed,
            "raw": text,
        }
        if note:
            entry["note"] = note
        self.answers.append(entry)
        shown = text if len(text) <= 300 else text[:300] + "..."
        print(f"{status} {method} {path}{'  # ' + note if note else ''}\n    {shown}", file=sys.stderr, flush=True)
        return status, parsed


def wait_lines(path: Path, n: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    count = 0
    while time.monotonic() < deadline:
        count = len(path.read_text().splitlines()) if path.exists() else 0
        if count >= n:
            return count
        time.sleep(0.2)
    raise TimeoutError(f"{path} has {count} lines, not {n}, after {timeout:.0f}s")


def wait_offsets(worker, name: str, timeout: float = 30.0) -> None:
    """Until GET /connectors/<name>/offsets lists at least one offset (flushed/committed)."""
    deadline = time.monotonic() + timeout
    body: Any = None
    while time.monotonic() < deadline:
        status, body, _ = worker.rest("GET", f"/connectors/{name}/offsets")
        if status == 200 and body.get("offsets"):
            return
        time.sleep(0.3)
    raise TimeoutError(f"no offsets for {name} after {timeout:.0f}s: {body}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="/tmp/connect-answers.json")
    parser.add_argument("--sink-file", default="/tmp/x", help="c1's file (default /tmp/x)")
    args = parser.parse_args(argv)

    from confluent_kafka import KafkaException, Producer

    from conveyor.testing.connect import ConnectWorker
    from conveyor.testing.kafka import start_or_reuse

    work = Path(tempfile.mkdtemp(prefix="connect-capture-"))
    sink_file = Path(args.sink_file)
    sink_file.unlink(missing_ok=True)
    source_file = work / "s1-input.txt"
    source_file.write_text("".join(f"line {i}\n" for i in range(5)))

    kafka = start_or_reuse(heap="512m")
    answers: list[dict[str, Any]] = []
    try:
        for topic in ("t1", "s1-out"):
            try:
                kafka.create_topic(topic)
            except KafkaException as e:
                print(f"topic {topic}: {e}", file=sys.stderr)
        started = time.monotonic()
        with ConnectWorker(kafka.bootstrap_servers) as worker:
            print(f"worker {worker.url}: GET / 200 after {worker.ready_seconds:.2f}s, joined after "
                  f"{worker.joined_seconds:.2f}s (start() returned after {time.monotonic() - started:.2f}s); "
                  f"log {worker.log_path}", file=sys.stderr, flush=True)
            cap = Capture(worker)
            answers = cap.answers
            c1 = {"connector.class": FILE_SINK, "topics": "t1", "file": str(sink_file), "tasks.max": "1"}
            s1 = {"connector.class": FILE_SOURCE, "topic": "s1-out", "file": str(source_file), "tasks.max": "1"}
            worker.put_connector("c1", c1)
            worker.put_connector("s1", s1)
            worker.wait_for_state("c1", "RUNNING")
            worker.wait_for_state("s1", "RUNNING")
            producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
            for i in range(10):
                producer.produce("t1", key=str(i).encode(), value=json.dumps({"n": i}).encode())
            assert producer.flush(30) == 0
            del producer  # closed now, not after the broker stopped
            wait_lines(sink_file, 10)
            wait_offsets(worker, "c1")
            wait_offsets(worker, "s1")

            cap("GET", "/")
            cap("GET", "/health")
            cap("GET", "/connectors")
            cap("GET", "/connectors?expand=status")
            cap("GET", "/connectors?expand=info")
            cap("GET", "/connectors?expand=status&expand=info")
            cap("GET", "/connectors/c1")
            cap("GET", "/connectors/c1/config")
            cap("GET", "/connectors/c1/status")
            cap("GET", "/connectors/c1/tasks")
            cap("GET", "/connectors/c1/tasks/0/status")
            cap("GET", "/connectors/c1/tasks/99/status")
            cap("GET", "/connectors/c1/topics")
            cap("GET", "/connectors/nope")
            cap("GET", "/connectors/nope/status")
            cap("GET", "/connectors/nope/config")
            cap("GET", "/connectors/nope/tasks")
            cap("GET", "/connectors/nope/offsets")
            cap("GET", "/connectors/c1/offsets", note="after 10 records flowed")
            cap("GET", "/connectors/s1/offsets", note="after 5 lines were read")

            valid_sink_offsets = {"offsets": [{"partition": {"kafka_topic": "t1", "kafka_partition": 0},
                                               "offset": {"kafka_offset": 5}}]}
            cap("PATCH", "/connectors/c1/offsets", valid_sink_offsets, note="while RUNNING")
            cap("PATCH", "/connectors/c1/offsets", {}, note="while RUNNING")
            cap("PATCH", "/connectors/c1/offsets", {"offsets": []}, note="while RUNNING")
            cap("PATCH", "/connectors/c1/offsets", raw="{not json", note="malformed JSON, while RUNNING")

            cap("PUT", "/connectors/c1/pause")
            worker.wait_for_state("c1", "PAUSED")
            cap("GET", "/connectors/c1/status", note="after pause")
            cap("PUT", "/connectors/c1/resume")
            worker.wait_for_state("c1", "RUNNING")
            cap("PUT", "/connectors/nope/pause")
            cap("POST", "/connectors/c1/restart")
            worker.wait_for_state("c1", "RUNNING")
            cap("POST", "/connectors/c1/restart?includeTasks=true")
            worker.wait_for_state("c1", "RUNNING")
            cap("POST", "/connectors/c1/restart?includeTasks=true&onlyFailed=true")
            worker.wait_for_state("c1", "RUNNING")
            cap("POST", "/connectors/nope/restart")
            cap("POST", "/connectors/nope/restart?includeTasks=true")
            cap("POST", "/connectors/c1/tasks/0/restart")
            worker.wait_for_state("c1", "RUNNING")
            cap("POST", "/connectors/c1/tasks/99/restart")
            cap("POST", "/connectors/nope/tasks/0/restart")

            cap("GET", "/connector-plugins")
            cap("GET", "/connector-plugins?connectorsOnly=false")
            cap("GET", "/connector-plugins/FileStreamSinkConnector/config")
            validate = {"connector.class": FILE_SINK, "topics": "t1", "file": "/tmp/y", "name": "v"}
            cap("PUT", "/connector-plugins/FileStreamSinkConnector/config/validate", validate)
            cap("PUT", "/connector-plugins/FileStreamSinkConnector/config/validate",
                {k: v for k, v in validate.items() if k != "topics"}, note="missing topics")
            cap("PUT", "/connector-plugins/Nope/config/validate", validate, note="body names FileStreamSinkConnector")
            cap("PUT", "/connector-plugins/Nope/config/validate", {"connector.class": "Nope", "name": "v"},
                note="body names Nope too")

            cap("GET", "/no/such/path")
            cap("DELETE", "/")
            cap("POST", "/connectors/c1", {"x": "y"}, note="wrong method")

            cap("PUT", "/connectors/c1/stop")
            worker.wait_for_state("c1", "STOPPED")
            cap("GET", "/connectors/c1/status", note="STOPPED")
            cap("GET", "/connectors/c1/offsets", note="STOPPED")
            cap("PATCH", "/connectors/c1/offsets", valid_sink_offsets, note="STOPPED")
            cap("GET", "/connectors/c1/offsets", note="after PATCH kafka_offset 5")
            cap("PATCH", "/connectors/c1/offsets",
                {"offsets": [{"partition": {"kafka_topic": "t1"}, "offset": {"kafka_offset": 5}}]},
                note="STOPPED; partition missing kafka_partition")
            cap("PATCH", "/connectors/c1/offsets",
                {"offsets": [{"partition": {"kafka_topic": "t1", "kafka_partition": "x"},
                              "offset": {"kafka_offset": 5}}]},
                note='STOPPED; kafka_partition "x"')
            cap("PATCH", "/connectors/c1/offsets",
                {"offsets": [{"partition": {"kafka_topic": "t1", "kafka_partition": 0}, "offset": {"foo": 1}}]},
                note='STOPPED; offset {"foo":1}')
            cap("PATCH", "/connectors/c1/offsets", {}, note="STOPPED")
            cap("PATCH", "/connectors/c1/offsets", {"offsets": []}, note="STOPPED")
            cap("PATCH", "/connectors/c1/offsets", raw="{not json", note="STOPPED; malformed JSON")
            cap("PATCH", "/connectors/c1/offsets",
                {"offsets": [{"partition": {"kafka_topic": "t1", "kafka_partition": 0}, "offset": None}]},
                note="STOPPED; offset null (reset one partition)")
            cap("DELETE", "/connectors/c1/offsets", note="STOPPED")
            cap("GET", "/connectors/c1/offsets", note="after DELETE")

            cap("PUT", "/connectors/s1/stop")
            worker.wait_for_state("s1", "STOPPED")
            cap("PATCH", "/connectors/s1/offsets",
                {"offsets": [{"partition": {"filename": str(source_file)}, "offset": {"position": 3}}]},
                note="STOPPED")
            cap("GET", "/connectors/s1/offsets", note="after PATCH position 3")
            cap("DELETE", "/connectors/s1/offsets", note="STOPPED")
            cap("GET", "/connectors/s1/offsets", note="after DELETE")

            cap("PUT", "/connectors/c1/resume", note="after stop")
            cap("GET", "/connectors/c1/status", note="immediately after resume-after-stop")
            time.sleep(5)
            cap("GET", "/connectors/c1/status", note="5 s after resume-after-stop")
            changed = {**c1, "file": f"{sink_file}.2"}
            cap("PUT", "/connectors/c1/config", changed, note="changed file")
            time.sleep(3)
            cap("GET", "/connectors/c1/status", note="3 s after PUT config")
            cap("GET", "/connectors/c1/topics")
            cap("PUT", "/connectors/c1/topics/reset")
            cap("GET", "/connectors/c1/topics", note="immediately after reset")
            time.sleep(3)
            cap("GET", "/connectors/c1/topics", note="3 s after reset")
            cap("DELETE", "/connectors/c1")
            cap("GET", "/connectors/c1", note="after DELETE")
            cap("DELETE", "/connectors/c1", note="again")

            meta = {"kafka_version": worker.version, "ready_seconds": round(worker.ready_seconds, 2),
                    "joined_seconds": round(worker.joined_seconds, 2), "sink_file": str(sink_file),
                    "source_file": str(source_file)}
            print(json.dumps(meta), file=sys.stderr)
            for name in ("s1",):
                worker.delete_connector(name)
    finally:
        kafka.stop()
        Path(args.out).write_text(json.dumps(answers, indent=1) + "\n")
        print(f"{len(answers)} answers written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
