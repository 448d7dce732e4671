"""Archive sink throughput per format, against the format library alone, into a real S3 server.

The archive sink's task is driven directly (``ArchiveSinkTask.put`` in batches of 500, then a
``pre_commit``; no Kafka, no Spark), so the figure isolates the format + storage path:
encoding the records, buffering them, assembling each file and one S3 PUT per file, into an
S3Proxy started here (``conveyor.testing.s3.S3Server``; a JVM on 127.0.0.1, filesystem store).

The baseline writes the same files with the format library alone, from the same
``SinkRecord`` objects: the row dicts (topic, partition, offset, timestamp, key, value,
headers) built in a list comprehension, then

* ``jsonl``: ``orjson.dumps`` per row joined with ``\\n``;
* ``avro``: ``fastavro.writer`` into a ``BytesIO`` (the archive's own Avro schema, codec null);
* ``parquet``: ``pyarrow.Table.from_pylist`` + ``pyarrow.parquet.write_table`` into a
  ``BytesIO`` (the archive's own Arrow schema, snappy, one row group per file);

and one ``pipe_file`` of the bytes through the same fsspec/s3fs filesystem the connector uses,
so the ratio measures Conveyor's overhead over the library. Files hold ``--file-records``
(100,000) records: ``flush.size`` for the connector.

Records: key a string (``STRING`` schema); value a struct of 8 fields (int64 id, string
customer, int32 qty, float64 price, boolean paid, ``Decimal`` amount (scale 2),
``Timestamp`` at, optional string note); one header.

The input records are built once and moved out of the garbage collector's way
(``gc.freeze()``), so neither side pays for traversing them in its collections. The library
path builds all rows of a file at once (what a one-shot writer does); Conveyor encodes the
records batch by batch as ``put`` receives them.

The machine's speed drifts (shared cores), so every measurement runs ``--rounds`` times (3),
interleaved (Conveyor and library alternating which goes first), and the medians are
compared; each round's ratios are printed too. Target: Conveyor >= 0.7x the library.

Run: ``python benchmarks/archive_throughput.py [--records N] [--rounds R] [--formats jsonl,avro,parquet]``
(needs Java 17+ and Maven for S3Proxy, the ``archive`` extra for fastavro/pyarrow/s3fs).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import decimal
import gc
import io
import statistics
import time
import uuid
from typing import Any

import fastavro
import fsspec
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from conveyor.api import Header, Schema, SchemaType, SinkRecord, TopicPartition
from conveyor.connectors.archive import ArchiveSinkTask
from conveyor.connectors.archive.formats import AvroLayout
from conveyor.connectors.archive.parquet_format import ParquetLayout
from conveyor.testing.contexts import StubSinkTaskContext
from conveyor.testing.s3 import S3Server

TOPIC = "bench"
BATCH = 500
FORMATS = ("jsonl", "avro", "parquet")
TARGET = 0.7

KEY_SCHEMA = Schema(SchemaType.STRING)
VALUE_SCHEMA = Schema.struct(
    ("id", Schema(SchemaType.INT64)),
    ("customer", Schema(SchemaType.STRING)),
    ("qty", Schema(SchemaType.INT32)),
    ("price", Schema(SchemaType.FLOAT64)),
    ("paid", Schema(SchemaType.BOOLEAN)),
    ("amount", Schema(SchemaType.BYTES, name="org.apache.kafka.connect.data.Decimal", parameters={"scale": "2"})),
    ("at", Schema(SchemaType.INT64, name="org.apache.kafka.connect.data.Timestamp")),
    ("note", Schema(SchemaType.STRING, optional=True)),
    name="bench.Order",
)
EPOCH = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)


def make_records(n: int) -> list[SinkRecord]:
    headers = (Header("source", b"bench"),)
    return [
        SinkRecord(
            topic=TOPIC,
            kafka_partition=0,
            key=f"order-{i}",
            value={
                "id": i,
                "customer": f"customer-{i % 1000}",
                "qty": i % 17,
                "price": i * 0.25,
                "paid": i % 2 == 0,
                "amount": decimal.Decimal(i % 100_000) / 100,
                "at": EPOCH + dt.timedelta(milliseconds=i),
                "note": None if i % 3 else f"note {i}",
            },
            kafka_offset=i,
            timestamp=1_700_000_000_000 + i,
            headers=headers,
            key_schema=KEY_SCHEMA,
            value_schema=VALUE_SCHEMA,
        )
        for i in range(n)
    ]


# -- Conveyor ----------------------------------------------------------------------------------


def run_conveyor(fmt: str, records: list[SinkRecord], config: dict[str, Any]) -> float:
    """Seconds to archive ``records`` through the task (files of ``flush.size``, then the
    closing commit's partial file, if any)."""
    task = ArchiveSinkTask()
    context = StubSinkTaskContext(config)
    task.initialize(context)
    task.start(config)
    tp = TopicPartition(TOPIC, 0)
    task.open([tp])
    started = time.perf_counter()
    for i in range(0, len(records), BATCH):
        task.put(records[i : i + BATCH])
    context.closing = True
    committed = task.pre_commit({tp: len(records)})
    elapsed = time.perf_counter() - started
    assert committed == {tp: len(records)}, committed
    task.stop()
    return elapsed


# -- the library alone -------------------------------------------------------------------------


def _rows(records: list[SinkRecord]) -> list[dict[str, Any]]:
    return [
        {
            "topic": r.topic,
            "partition": r.kafka_partition,
            "offset": r.kafka_offset,
            "timestamp": r.timestamp,
            "key": r.key,
            "value": r.value,
            "headers": [{"key": h.key, "value": h.value} for h in r.headers],
        }
        for r in records
    ]


def _orjson_default(obj: Any) -> Any:
    if isinstance(obj, decimal.Decimal):
        return str(obj)
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode("ascii")
    raise TypeError


def encode_jsonl(records: list[SinkRecord]) -> bytes:
    dumps = orjson.dumps
    return b"".join(dumps(row, default=_orjson_default) + b"\n" for row in _rows(records))


_AVRO = AvroLayout(KEY_SCHEMA, VALUE_SCHEMA).parsed


def encode_avro(records: list[SinkRecord]) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, _AVRO, _rows(records), codec="null")
    return out.getvalue()


_ARROW = ParquetLayout(KEY_SCHEMA, VALUE_SCHEMA).schema


def encode_parquet(records: list[SinkRecord]) -> bytes:
    table = pa.Table.from_pylist(_rows(records), schema=_ARROW)
    out = io.BytesIO()
    pq.write_table(table, out, compression="snappy", row_group_size=len(records))
    return out.getvalue()


ENCODERS = {"jsonl": encode_jsonl, "avro": encode_avro, "parquet": encode_parquet}


def run_library(fmt: str, records: list[SinkRecord], fs: Any, prefix: str, file_records: int) -> float:
    """Seconds to write the same files with the format library and one PUT each."""
    encode = ENCODERS[fmt]
    started = time.perf_counter()
    for i in range(0, len(records), file_records):
        data = encode(records[i : i + file_records])
        fs.pipe_file(f"{prefix}/{TOPIC}+0+{i:010d}.{fmt}", data)
    return time.perf_counter() - started


# -- driver ------------------------------------------------------------------------------------


def one_round(s3: S3Server, bucket: str, formats: list[str], records: list[SinkRecord], file_records: int,
              flip: bool) -> dict[str, float]:
    n = len(records)
    fs = fsspec.filesystem(
        "s3", endpoint_url=s3.endpoint_url, key=S3Server.ACCESS_KEY, secret=S3Server.SECRET_KEY,
        skip_instance_cache=True,
    )
    result: dict[str, float] = {}
    for fmt in formats:
        run = uuid.uuid4().hex[:8]
        config = {
            "name": "bench",
            "archive.url": f"s3://{bucket}/conveyor-{run}",
            "archive.s3.endpoint.url": s3.endpoint_url,
            "archive.s3.key": S3Server.ACCESS_KEY,
            "archive.s3.secret": S3Server.SECRET_KEY,
            "format": fmt,
            "flush.size": file_records,
        }
        order = ["library", "conveyor"] if flip else ["conveyor", "library"]
        for who in order:
            if who == "conveyor":
                result[f"{fmt}.conveyor"] = n / run_conveyor(fmt, records, config)
            else:
                result[f"{fmt}.library"] = n / run_library(fmt, records, fs, f"{bucket}/library-{run}", file_records)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000, help="records per measurement")
    parser.add_argument("--file-records", type=int, default=100_000, help="records per file (flush.size)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of every measurement, interleaved; the medians are compared")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated: jsonl,avro,parquet")
    args = parser.parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        parser.error(f"unknown format(s) {', '.join(unknown)}; use {', '.join(FORMATS)}")
    print(f"building {args.records:,} records ...", flush=True)
    records = make_records(args.records)
    gc.freeze()  # the input records out of the collector's way: neither side pays for traversing them
    rounds: list[dict[str, float]] = []
    with S3Server() as s3:
        bucket = s3.create_bucket(f"bench-{uuid.uuid4().hex[:8]}")
        print(f"S3Proxy at {s3.endpoint_url}, bucket {bucket}; files of {args.file_records:,} records", flush=True)
        for i in range(args.rounds):
            rounds.append(one_round(s3, bucket, formats, records, args.file_records, flip=i % 2 == 1))
            print(f"round {i + 1}/{args.rounds}: " + ", ".join(f"{k} {v:,.0f}" for k, v in rounds[-1].items()),
                  flush=True)
    print()
    print(f"records/s, median of {len(rounds)} interleaved rounds; ratio = Conveyor / library alone")
    print(f"{'format':<10}{'Conveyor':>12}{'library':>12}{'ratio':>8}  target      rounds' ratios")
    for fmt in formats:
        conveyor = statistics.median(r[f"{fmt}.conveyor"] for r in rounds)
        library = statistics.median(r[f"{fmt}.library"] for r in rounds)
        verdict = "PASS" if conveyor / library >= TARGET else "MISS"
        each = " ".join(f"{r[f'{fmt}.conveyor'] / r[f'{fmt}.library']:.2f}" for r in rounds)
        print(f"{fmt:<10}{conveyor:>12,.0f}{library:>12,.0f}{conveyor / library:>8.2f}  >= {TARGET:.2f} {verdict}   {each}")


if __name__ == "__main__":
    main()
