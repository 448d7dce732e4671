"""Typed columns through a running connector: keys and values written by the Schema Registry
converters (Avro, Protobuf, JSON Schema, against the real registry) and by ``JsonConverter``
with schemas reach the archive sink's ``parquet`` batch path as Arrow columns of their
schemas' types; the files, the dead letters and the committed offsets are those of the
record path, across a change of schema, tombstones and records no converter can read."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest

from conveyor.api import Schema, SchemaType
from conveyor.converters.logical import decimal_schema, timestamp_schema
from conveyor.testing.runs import (
    committed_offsets,
    connector_manifest,
    consume_all,
    dead_letter_context,
    produce,
    running_connector,
    wait_until,
)

pytestmark = pytest.mark.integration

ARCHIVE_SINK = "conveyor.connectors.archive.sink:ArchiveSinkConnector"
AVRO = "io.confluent.connect.avro.AvroConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"
S = SchemaType

LINE = Schema.struct(("sku", Schema(S.STRING)), ("qty", Schema(S.INT32)), optional=True, name="shop.Line")
V1_FIELDS = [("id", Schema(S.INT64)), ("name", Schema(S.STRING, optional=True)), ("ok", Schema(S.BOOLEAN)),
             ("score", Schema(S.FLOAT64)), ("tags", Schema(S.ARRAY, value_schema=Schema(S.STRING))),
             ("line", LINE)]
LOGICAL = [("price", decimal_schema(2, optional=True)), ("at", timestamp_schema(optional=True))]


def _schemas(logical: bool) -> tuple[Schema, Schema]:
    fields = [*V1_FIELDS, *(LOGICAL if logical else ())]
    extra = ("extra", Schema(S.STRING, optional=True))
    return Schema.struct(*fields, name="shop.Order"), Schema.struct(*fields, extra, name="shop.Order")


def _value(i: int, partition: int, logical: bool, v2: bool) -> dict:
    value = {"id": i, "name": None if i % 4 == 0 else f"n-{partition}-{i}", "ok": bool(i % 2), "score": i / 3,
             "tags": [f"t{i}"] * (i % 3), "line": {"sku": f"s{i}", "qty": i} if i % 5 else None}
    if logical:
        value["price"] = decimal.Decimal(i * 37 - 400).scaleb(-2)
        value["at"] = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=i)
    if v2:
        value["extra"] = f"x{i}" if i % 2 else None
    return value


TRANSFORMS = {  # typed batch forms, and rows a transformation fails (partition 1's v1 values have no "extra")
    "transforms": "toKey,offset,drop,extra", "transforms.toKey.type": "ValueToKey", "transforms.toKey.fields": "id,ok",
    "transforms.toKey.predicate": "tombstone", "transforms.toKey.negate": "true",
    "transforms.offset.type": "InsertField$Value", "transforms.offset.offset.field": "kafka_offset",
    "transforms.drop.type": "ReplaceField$Value", "transforms.drop.exclude": "tags",
    "transforms.extra.type": "ExtractField$Value", "transforms.extra.field": "extra",
    "transforms.extra.predicate": "fromP1", "predicates": "tombstone,fromP1",
    "predicates.tombstone.type": "RecordIsTombstone", "predicates.fromP1.type": "HasHeaderKey",
    "predicates.fromP1.name": "p1",
}
CASES = {  # key converter, value converter, whether the value schema has Decimal and Timestamp fields, transforms
    "avro-keys-protobuf-values": (AVRO, PROTOBUF, False, {}),
    "json-schema-keys-json-values": (JSON_SCHEMA, JSON, True, {}),
    "json-keys-avro-values-through-transforms": (JSON, AVRO, True, TRANSFORMS),
}


def _converter(schema_registry, class_name: str, side: str):
    if class_name == JSON:
        from conveyor.converters import load_converter

        return load_converter({f"{side}.converter": JSON}, side, JSON)
    return schema_registry.converter(class_name, side)


def _settings(schema_registry, class_name: str, side: str) -> dict[str, str]:
    if class_name == JSON:
        return {f"{side}.converter": JSON}
    return {f"{side}.converter": class_name, f"{side}.converter.schema.registry.url": schema_registry.url}


@pytest.mark.parametrize("case", CASES)
def test_the_archive_writes_the_same_parquet_files_from_typed_batches_as_from_records(
    kafka_bootstrap, topic_factory, spark, schema_registry, tmp_path, case
):
    key_class, value_class, logical, transforms = CASES[case]
    topic = topic_factory(partitions=2)
    keys, values = _converter(schema_registry, key_class, "key"), _converter(schema_registry, value_class, "value")
    v1, v2 = _schemas(logical)
    key_schema = Schema(S.INT64)
    poison = 0
    for partition in range(2):
        items = []
        for i in range(160):
            key = keys.from_connect_data(topic, (), key_schema, i) if i % 6 else None
            if partition == 0 and i in (37, 38, 120):
                value, poison = b"\x09not a framed record", poison + 1
            elif i % 29 == 0:
                value = None  # a tombstone
            else:
                v2_now = 80 <= i < 120 and partition == 0 or i >= 100 and partition == 1
                value = values.from_connect_data(topic, (), v2 if v2_now else v1, _value(i, partition, logical, v2_now))
            items.append((key, value))
        produce(kafka_bootstrap, topic, items, partition=partition, headers=[("p1", b"")] if partition else None)
    failing = sum(1 for i in range(100) if i % 29) if transforms else 0  # partition 1's v1 values, tombstones aside
    files, dead = {}, {}
    for path in ("records", "batches"):
        root, dlq, name = tmp_path / path, f"dlq-{uuid.uuid4().hex[:8]}", f"typed-{uuid.uuid4().hex[:8]}"
        config = {"topics": topic, "archive.url": str(root), "format": "parquet", "flush.size": "25",
                  **_settings(schema_registry, key_class, "key"), **_settings(schema_registry, value_class, "value"),
                  "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                  "errors.deadletterqueue.topic.replication.factor": "1",
                  "errors.deadletterqueue.context.headers.enable": "true", **transforms,
                  "offset.flush.interval.ms": "300", "conveyor.batch.path.enable": str(path == "batches").lower()}
        with running_connector(connector_manifest(name, ARCHIVE_SINK, kafka_bootstrap, config), spark) as d:
            task = wait_until(lambda: next((t for t in d.status()["tasks"]
                                            if t.get("records_read") == 320
                                            and t.get("records_skipped") == poison + failing),
                                           None), message=f"every record read, {poison + failing} skipped, through {path}")
            assert task["batch_path"] is (path == "batches")
        wait_until(lambda: committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 2)  # noqa: B023
                   == {0: 160, 1: 160}, message="every offset committed (the closing commit writes the rest)")
        files[path] = {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*.parquet"))}
        letters = [(dead_letter_context(m.headers()), m.key(), m.value())
                   for m in consume_all(kafka_bootstrap, dlq, expected=poison + failing)]
        dead[path] = sorted(letters, key=lambda d: (int(d[0]["__connect.errors.partition"]),
                                                    int(d[0]["__connect.errors.offset"])))
    assert files["batches"] == files["records"]
    assert len(files["records"]) >= (320 - failing) // 25
    assert dead["batches"] == dead["records"]
    stages = [d[0]["__connect.errors.stage"] for d in dead["records"]]
    assert stages.count("VALUE_CONVERTER") == poison and stages.count("TRANSFORMATION") == failing
