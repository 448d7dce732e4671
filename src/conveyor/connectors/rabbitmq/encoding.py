"""Sink records → AMQP message bodies and properties.

Body, from the record's value:

* ``bytes`` / ``bytearray`` / ``memoryview``: as is (no ``content_type``);
* ``str``: UTF-8, ``content_type`` ``text/plain; charset=utf-8``;
* anything else (``dict`` / Connect struct, ``list``, numbers, booleans): compact JSON,
  ``content_type`` ``application/json``; inside it, ``bytes`` become base64 strings (as Kafka
  Connect's ``JsonConverter`` writes them), ``Decimal`` a string, dates and times ISO 8601;
* ``None`` (a tombstone): per ``behavior.on.null.values``.

Properties: ``delivery_mode`` (``rabbitmq.delivery.mode``), ``message_id``
``<topic>-<partition>-<offset>`` of the Kafka record (for consumers that deduplicate; the
sink delivers at least once), ``timestamp`` (seconds) from the record's timestamp, and
``headers``: the Kafka headers (raw bytes; a key repeated in Kafka becomes an array) plus
``x-kafka-topic``, ``x-kafka-partition``, ``x-kafka-offset`` (where the record was consumed),
``x-kafka-key`` (``str`` or ``bytes`` as is, an integer as an integer, anything else as JSON
text; absent for a null key) and ``x-kafka-timestamp`` (milliseconds; absent when unknown).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid
from typing import Any

import pika

from conveyor.api import DataError, SinkRecord

JSON_CONTENT_TYPE = "application/json"
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def to_json(value: Any) -> bytes:
    """Compact UTF-8 JSON of ``value``.

    Raises:
        DataError: ``value`` holds something JSON cannot represent.
    """
    try:
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, default=_json_default, allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise DataError(f"the value cannot be written as JSON: {exc}") from None


def body_of(value: Any) -> tuple[bytes, str | None]:
    """``(body, content_type)`` for a non-null record value."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value), None
    if isinstance(value, str):
        return value.encode("utf-8"), TEXT_CONTENT_TYPE
    return to_json(value), JSON_CONTENT_TYPE


def _header_key(key: Any) -> Any:
    if isinstance(key, (str, bytes)):
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    if isinstance(key, int) and not isinstance(key, bool) and -(2**63) <= key < 2**63:
        return key
    return to_json(key).decode("utf-8")


def headers_of(record: SinkRecord) -> dict[str, Any]:
    """The AMQP headers table of ``record`` (see the module docstring)."""
    return table_of([{"key": h.key, "value": h.value} for h in record.headers], record.original_topic,
                    record.original_kafka_partition, record.original_kafka_offset, record.key, record.timestamp)


def table_of(kafka_headers: list[dict[str, Any]] | None, topic: str, partition: int | None, offset: int | None,
             key: Any, timestamp: int | None) -> dict[str, Any]:
    """The AMQP headers table of a record read at ``topic``/``partition``/``offset``, from its
    Kafka headers (``{"key", "value"}`` in order, as a record batch's ``headers`` column holds
    them), key and timestamp (milliseconds): see the module docstring."""
    headers: dict[str, Any] = {}
    for header in kafka_headers or ():
        value = bytes(header["value"]) if header["value"] is not None else None
        name = header["key"]
        if name in headers:
            previous = headers[name]
            headers[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            headers[name] = value
    headers["x-kafka-topic"] = topic
    headers["x-kafka-partition"] = partition
    headers["x-kafka-offset"] = offset
    if key is not None:
        headers["x-kafka-key"] = _header_key(key)
    else:
        headers.pop("x-kafka-key", None)
    if timestamp is not None:
        headers["x-kafka-timestamp"] = int(timestamp)
    else:
        headers.pop("x-kafka-timestamp", None)
    return headers


def message_id(record: SinkRecord) -> str:
    return f"{record.original_topic}-{record.original_kafka_partition}-{record.original_kafka_offset}"


def properties_of(record: SinkRecord, content_type: str | None, delivery_mode: int) -> pika.BasicProperties:
    return pika.BasicProperties(
        content_type=content_type,
        delivery_mode=delivery_mode,
        message_id=message_id(record),
        timestamp=int(record.timestamp // 1000) if record.timestamp is not None and record.timestamp >= 0 else None,
        headers=headers_of(record),
    )
