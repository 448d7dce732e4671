"""File formats of the archive: what one archived record looks like, and in-memory file buffers.

Every record is archived with its Kafka coordinates (the *original* topic, partition and
offset it was consumed from, which is also where its file lives), its timestamp, key,
value and headers.

``jsonl``
    One JSON object per line, UTF-8, each line ending in ``\\n``::

        {"topic":"orders","partition":0,"offset":42,"timestamp":1700000000000,
         "key":"k-42","value":{"id":42,"total":9.5},"headers":[{"key":"h","value":"aGk="}]}

    ``timestamp`` is milliseconds since the epoch or ``null``. Keys and values are written
    as their Python values (the Connect schema is not stored): ``dict``/``list``/``str``/
    numbers/``bool``/``None`` as JSON; ``bytes`` as base64 text; ``Decimal`` as a decimal
    string; ``datetime``/``date``/``time`` as ISO 8601 text; a NaN or infinite float as
    ``null`` (JSON has no such numbers). Header values are base64 (or ``null``). A value that cannot be written as JSON is a :class:`~conveyor.api.DataError`.

``avro``
    An Avro object container file (codec ``avro.codec``) whose records are::

        record ConveyorArchiveRecord {
          string topic; int partition; long offset; union {null, long} timestamp;
          union {null, K} key; union {null, V} value;
          array<record ConveyorArchiveHeader {string key; union {null, bytes} value;}> headers;
        }

    ``K`` / ``V`` are derived from the record's Connect key / value schema:
    ``int8``/``int16``/``int32`` → ``int`` (``connect.type`` attribute kept for the narrow
    ones), ``int64`` → ``long``, ``float`` → ``float``, ``double`` → ``double``,
    ``boolean``, ``string``, ``bytes``; ``array`` → ``array``; ``map`` with (non-optional)
    string keys → ``map``, other maps → ``array`` of ``record {key; value}``; ``struct`` →
    ``record`` (named after the Connect schema name, ``ConnectDefault`` when anonymous;
    names made unique and valid for Avro; field names that are not valid Avro names get
    ``_`` for invalid characters); optional → ``union {null, T}`` with default ``null``.
    Logical types: ``Decimal`` → ``bytes``/``decimal`` (precision from the
    ``connect.decimal.precision`` parameter, else 64), ``Date`` → ``int``/``date``,
    ``Time`` → ``int``/``time-millis``, ``Timestamp`` → ``long``/``timestamp-millis``.
    A **schemaless** key or value (no Connect schema) is stored as JSON text (encoded as
    for ``jsonl``) in a ``string``: read it back with ``json.loads``. One file has one Avro
    schema: when a partition's records change schema, the open buffer is written as a
    file first (like Confluent's S3 sink with ``schema.compatibility=NONE``).
    The file metadata also holds ``conveyor.topic``, ``conveyor.partition`` and
    ``conveyor.start.offset``. The sync marker is derived from those, so rewriting the
    same records gives byte-identical files.

Memory: buffers are in memory and keep each record already encoded (a JSON line; the
Avro binary datum), so a buffered record costs about its encoded size plus ~100 bytes of
bookkeeping. With the default ``flush.size`` of 100,000 records of 1 KiB that is ~110 MiB
per assigned partition at most, plus about twice the file's size while it is being
written (the assembled file, and for ``jsonl`` its text before encoding). Lower
``flush.size`` (or set ``rotate.interval.ms``) for tasks with many partitions.
"""

from __future__ import annotations

import abc
import base64
import bisect
import datetime as dt
import decimal
import hashlib
import io
import json
import re
import zlib
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import fastavro
import orjson
from fastavro.write import Writer

from conveyor.api import DataError, Schema, SchemaType, SinkRecord, TopicPartition
from conveyor.api.schema import DATE, DECIMAL, TIME, TIMESTAMP
from conveyor.connectors.archive.config import ArchiveFormat, AvroCodec
from conveyor.converters._avro_data import PRIMITIVE_TO_AVRO

if TYPE_CHECKING:
    import pyarrow as pa

DEFAULT_DECIMAL_PRECISION = 64
RECORD_NAME = "ConveyorArchiveRecord"
HEADER_NAME = "ConveyorArchiveHeader"
AVRO_BLOCK_BYTES = 256 * 1024

Convert = Callable[[Any], Any]


# -- JSON ---------------------------------------------------------------------------------


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if isinstance(obj, decimal.Decimal):
        return str(obj)
    if isinstance(obj, (dt.datetime, dt.date, dt.time)):
        return obj.isoformat()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


_json_encode = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, check_circular=False, default=_json_default
).encode


def json_bytes(value: Any) -> bytes:
    """:func:`json_text` as UTF-8 (one ``jsonl`` line), through orjson: 3.1 -> 0.4 us per record.

    The same text as :func:`json_text`, except that a NaN or infinite float becomes ``null``
    (as JavaScript's ``JSON.stringify`` does) where the stdlib wrote ``NaN`` / ``Infinity``,
    which are not JSON (RFC 8259 §6) and which JSON readers refuse. What orjson refuses
    (integers beyond 64 bits, non-string keys) goes through the stdlib.

    Raises:
        DataError: the value holds something JSON cannot represent, or a string that is
            not valid Unicode (a lone surrogate).
    """
    try:
        return orjson.dumps(value, default=_json_default)
    except orjson.JSONEncodeError:
        try:
            return json_text(value).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DataError(f"cannot encode as JSON: {exc.reason} in a string") from None


def json_text(value: Any) -> str:
    """``value`` as compact JSON text (the encoding ``jsonl`` and schemaless Avro fields use).

    Raises:
        DataError: the value holds something JSON cannot represent.
    """
    try:
        return _json_encode(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DataError(f"cannot encode as JSON: {exc}") from None


def _headers_json(record: SinkRecord) -> list[dict[str, Any]]:
    return [
        {"key": h.key, "value": None if h.value is None else base64.b64encode(h.value).decode("ascii")}
        for h in record.headers
    ]


# -- buffers ------------------------------------------------------------------------------


class FileBuffer(abc.ABC):
    """The records of one future file of one partition, already encoded.

    Attributes:
        start: offset of the first record processed into this buffer (names the file).
        last: offset of the last record processed (appended or rejected).
        opened: ``time.monotonic()`` seconds when the first record arrived.
        offsets: offsets of the records held, ascending.
    """

    def __init__(self, start: int, opened: float) -> None:
        self.start = start
        self.last = start - 1
        self.opened = opened
        self.offsets: list[int] = []

    @property
    def count(self) -> int:
        return len(self.offsets)

    def accepts(self, record: SinkRecord) -> bool:
        """Whether ``record`` can go into this file (Avro: same schemas)."""
        return True

    @abc.abstractmethod
    def append(self, record: SinkRecord, offset: int) -> None:
        """Encode and add ``record``. On :class:`DataError` nothing was added."""

    @abc.abstractmethod
    def payload(self, count: int, topic: str, partition: int) -> bytes:
        """The complete file holding the first ``count`` records."""

    @abc.abstractmethod
    def drop_first(self, count: int) -> None:
        """Forget the first ``count`` records (written); ``start`` moves to the next one."""


class BatchRows(Protocol):
    """How rows of a record batch (:mod:`conveyor.api.batches`) go into one format's
    buffers: the archive task's batch path."""

    def fits(self, buffer: FileBuffer) -> bool:
        """Whether these rows can go into ``buffer`` (same format and layout)."""
        ...

    def new(self, start: int, opened: float) -> FileBuffer:
        """An empty buffer for them, its first offset ``start``."""
        ...

    def add(self, buffer: FileBuffer, rows: pa.RecordBatch, offsets: list[int], tp: TopicPartition) -> None:
        """Append ``rows`` (records of ``tp`` at ``offsets``) to ``buffer``."""
        ...


class JsonlBuffer(FileBuffer):
    """Lines of a ``.jsonl`` file, in one growing ``bytearray`` with each line's end offset.

    One buffer rather than a ``bytes`` object per line: holding 100,000s of small objects made
    of orjson's output cost 4 us per record (allocation), against 0.3 us for appending them
    to one buffer.
    """

    def __init__(self, start: int, opened: float) -> None:
        super().__init__(start, opened)
        self._data = bytearray()
        self._ends = array("q")  # byte offset in _data after each line's newline

    def append(self, record: SinkRecord, offset: int) -> None:
        self._add_line(
            json_bytes(
                {
                    "topic": record.original_topic,
                    "partition": record.original_kafka_partition,
                    "offset": offset,
                    "timestamp": record.timestamp,
                    "key": record.key,
                    "value": record.value,
                    "headers": _headers_json(record) if record.headers else [],
                }
            ),
            offset,
        )

    @property
    def size(self) -> int:
        """Bytes held."""
        return len(self._data)

    def extend(self, data: memoryview, ends: array, offsets: list[int]) -> None:
        """Add complete lines (the batch path): ``data`` holds one line per offset, each with
        its newline, and ``ends`` the end of each line in the buffer once added."""
        self._data += data
        self._ends.extend(ends)
        self.offsets.extend(offsets)

    def _add_line(self, line: bytes, offset: int, terminator: bytes = b"\n") -> None:
        data = self._data
        data += line
        data += terminator
        self._ends.append(len(data))
        self.offsets.append(offset)

    def _end_of(self, count: int) -> int:
        return self._ends[count - 1] if count > 0 else 0

    def payload(self, count: int, topic: str, partition: int) -> bytes:
        return bytes(memoryview(self._data)[: self._end_of(count)])

    def drop_first(self, count: int) -> None:
        cut = self._end_of(count)
        del self._data[:cut]
        self._ends = array("q", [end - cut for end in self._ends[count:]])
        del self.offsets[:count]
        if self.offsets:
            self.start = self.offsets[0]


class AvroBuffer(FileBuffer):
    """Binary datums of an ``.avro`` file with one :class:`AvroLayout`."""

    def __init__(self, start: int, opened: float, layout: AvroLayout, codec: AvroCodec) -> None:
        super().__init__(start, opened)
        self.layout = layout
        self._codec = codec
        self._body = io.BytesIO()
        self._ends: list[int] = []

    def accepts(self, record: SinkRecord) -> bool:
        return self.layout.matches(record.key_schema, record.value_schema)

    def append(self, record: SinkRecord, offset: int) -> None:
        body = self._body
        mark = body.tell()
        try:
            datum = self.layout.datum(record, offset)
            fastavro.schemaless_writer(body, self.layout.parsed, datum)
        except DataError:
            body.seek(mark)
            body.truncate()
            raise
        except Exception as exc:  # noqa: BLE001 - fastavro raises TypeError/ValueError/... on bad data
            body.seek(mark)
            body.truncate()
            raise DataError(f"record does not match its Avro schema: {type(exc).__name__}: {exc}") from None
        self._ends.append(body.tell())
        self.offsets.append(offset)

    def payload(self, count: int, topic: str, partition: int) -> bytes:
        sync = hashlib.blake2b(f"{topic}\0{partition}\0{self.start}".encode(), digest_size=16).digest()
        out = io.BytesIO()
        Writer(
            out,
            self.layout.parsed,
            codec=self._codec.value,
            sync_marker=sync,
            metadata={
                "conveyor.topic": topic,
                "conveyor.partition": str(partition),
                "conveyor.start.offset": str(self.start),
            },
        )  # writes the header only
        view = self._body.getbuffer()
        try:
            ends = self._ends
            begin_index, begin_byte = 0, 0
            while begin_index < count:
                end_index = bisect.bisect_left(ends, begin_byte + AVRO_BLOCK_BYTES, begin_index, count - 1) + 1
                end_byte = ends[end_index - 1]
                data = bytes(view[begin_byte:end_byte])
                if self._codec is AvroCodec.DEFLATE:
                    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
                    data = compressor.compress(data) + compressor.flush()
                out.write(_avro_long(end_index - begin_index))
                out.write(_avro_long(len(data)))
                out.write(data)
                out.write(sync)
                begin_index, begin_byte = end_index, end_byte
        finally:
            view.release()  # the body must stay resizable for later appends
        return out.getvalue()

    def drop_first(self, count: int) -> None:
        if count <= 0:
            return
        cut = self._ends[count - 1]
        rest = self._body.getvalue()[cut:]
        self._body = io.BytesIO()
        self._body.write(rest)
        self._ends = [end - cut for end in self._ends[count:]]
        del self.offsets[:count]
        if self.offsets:
            self.start = self.offsets[0]


def _avro_long(n: int) -> bytes:
    """Avro's zig-zag varint encoding of a long."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def new_buffer(
    fmt: ArchiveFormat, start: int, opened: float, layout: AvroLayout | None, codec: AvroCodec
) -> FileBuffer:
    if fmt is ArchiveFormat.AVRO:
        assert layout is not None
        return AvroBuffer(start, opened, layout, codec)
    return JsonlBuffer(start, opened)


# -- Avro schema derivation ---------------------------------------------------------------

_INVALID = re.compile(r"[^A-Za-z0-9_]")


def _avro_name(text: str) -> str:
    name = _INVALID.sub("_", text) or "_"
    return "_" + name if name[0].isdigit() else name


class _Names:
    """Unique Avro full names within one schema."""

    def __init__(self) -> None:
        self.used = {RECORD_NAME, HEADER_NAME}

    def record(self, connect_name: str | None, fallback: str) -> tuple[str, str]:
        """``(name, namespace)`` for a new record; namespace ``""`` is the null namespace
        (explicit, so that nothing inherits an enclosing namespace)."""
        parts = [_avro_name(p) for p in (connect_name or fallback).split(".") if p] or [fallback]
        namespace, name = ".".join(parts[:-1]), parts[-1]
        base, n = name, 1
        while (f"{namespace}.{name}" if namespace else name) in self.used:
            n += 1
            name = f"{base}{n}"
        self.used.add(f"{namespace}.{name}" if namespace else name)
        return name, namespace


def _nullable(avro: Any) -> Any:
    return avro if isinstance(avro, list) else ["null", avro]


def _none_safe(conv: Convert) -> Convert:
    return lambda v: None if v is None else conv(v)


_PRIMITIVES: dict[SchemaType, Any] = {
    **PRIMITIVE_TO_AVRO,
    SchemaType.INT8: {"type": "int", "connect.type": "int8"},
    SchemaType.INT16: {"type": "int", "connect.type": "int16"},
}


def _derive(schema: Schema, names: _Names) -> tuple[Any, Convert | None]:
    """``(Avro type, converter or None for identity)`` of a Connect schema."""
    avro, conv = _derive_required(schema, names)
    if schema.optional:
        return _nullable(avro), (_none_safe(conv) if conv else None)
    return avro, conv


def _derive_required(schema: Schema, names: _Names) -> tuple[Any, Convert | None]:
    t = schema.type
    params = schema.parameters or {}
    if schema.name == DECIMAL and t is SchemaType.BYTES:
        precision = int(params.get("connect.decimal.precision", DEFAULT_DECIMAL_PRECISION))
        scale = int(params.get("scale", "0"))
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}, None
    if schema.name == DATE and t is SchemaType.INT32:
        return {"type": "int", "logicalType": "date"}, None
    if schema.name == TIME and t is SchemaType.INT32:
        return {"type": "int", "logicalType": "time-millis"}, None
    if schema.name == TIMESTAMP and t is SchemaType.INT64:
        return {"type": "long", "logicalType": "timestamp-millis"}, None
    if t in _PRIMITIVES:
        return _PRIMITIVES[t], None
    if t is SchemaType.ARRAY:
        if schema.value_schema is None:
            raise DataError("ARRAY schema without an element schema")
        items, item_conv = _derive(schema.value_schema, names)
        conv = (lambda v, c=item_conv: [c(x) for x in v]) if item_conv else None
        return {"type": "array", "items": items}, conv
    if t is SchemaType.MAP:
        if schema.key_schema is None or schema.value_schema is None:
            raise DataError("MAP schema without key and value schemas")
        values, value_conv = _derive(schema.value_schema, names)
        ks = schema.key_schema
        if ks.type is SchemaType.STRING and not ks.optional and ks.name is None:
            conv = (lambda m, c=value_conv: {k: c(v) for k, v in m.items()}) if value_conv else None
            return {"type": "map", "values": values}, conv
        keys, key_conv = _derive(ks, names)
        name, namespace = names.record(None, "MapEntry")
        entry = {
            "type": "record",
            "name": name,
            "namespace": namespace,
            "fields": [{"name": "key", "type": keys}, {"name": "value", "type": values}],
        }
        kc = key_conv or (lambda k: k)
        vc = value_conv or (lambda v: v)
        return {"type": "array", "items": entry}, lambda m: [{"key": kc(k), "value": vc(v)} for k, v in m.items()]
    if t is SchemaType.STRUCT:
        name, namespace = names.record(schema.name, "ConnectDefault")
        fields: list[dict[str, Any]] = []
        plan: list[tuple[str, str, Convert | None]] = []
        taken: set[str] = set()
        renamed = False
        for field in schema.fields:
            avro_name = base = _avro_name(field.name)
            n = 1
            while avro_name in taken:
                n += 1
                avro_name = f"{base}_{n}"
            taken.add(avro_name)
            renamed = renamed or avro_name != field.name
            ftype, fconv = _derive(field.schema, names)
            entry: dict[str, Any] = {"name": avro_name, "type": ftype}
            if avro_name != field.name:
                entry["connect.name"] = field.name
            if isinstance(ftype, list):
                entry["default"] = None
            if field.schema.doc:
                entry["doc"] = field.schema.doc
            fields.append(entry)
            plan.append((field.name, avro_name, fconv))
        record: dict[str, Any] = {"type": "record", "name": name, "namespace": namespace, "fields": fields}
        if schema.doc:
            record["doc"] = schema.doc
        if schema.name and schema.name != (f"{namespace}.{name}" if namespace else name):
            record["connect.name"] = schema.name
        if not renamed and all(c is None for _, _, c in plan):
            return record, None

        def struct_conv(value: Any, plan: list[tuple[str, str, Convert | None]] = plan) -> dict[str, Any]:
            get = value.get
            return {an: (c(get(cn)) if c else get(cn)) for cn, an, c in plan}

        return record, struct_conv
    raise DataError(f"unsupported Connect schema type {t!r}")


class AvroLayout:
    """The Avro schema of files whose records have these key and value schemas.

    Raises:
        DataError: a Connect schema cannot be expressed in Avro.
    """

    def __init__(self, key_schema: Schema | None, value_schema: Schema | None) -> None:
        self.key_schema = key_schema
        self.value_schema = value_schema
        names = _Names()
        key_type, key_conv = self._side(key_schema, names)
        value_type, value_conv = self._side(value_schema, names)
        self._key_conv = key_conv
        self._value_conv = value_conv
        self.schema: dict[str, Any] = {
            "type": "record",
            "name": RECORD_NAME,
            "namespace": "",
            "doc": "A Kafka record archived by conveyor's archive sink",
            "fields": [
                {"name": "topic", "type": "string"},
                {"name": "partition", "type": "int"},
                {"name": "offset", "type": "long"},
                {"name": "timestamp", "type": ["null", "long"], "default": None},
                {"name": "key", "type": key_type, "default": None},
                {"name": "value", "type": value_type, "default": None},
                {
                    "name": "headers",
                    "type": {
                        "type": "array",
                        "items": {
                            "type": "record",
                            "name": HEADER_NAME,
                            "namespace": "",
                            "fields": [
                                {"name": "key", "type": "string"},
                                {"name": "value", "type": ["null", "bytes"], "default": None},
                            ],
                        },
                    },
                    "default": [],
                },
            ],
        }
        try:
            self.parsed = fastavro.parse_schema(self.schema)
        except Exception as exc:  # noqa: BLE001 - fastavro's SchemaParseException and friends
            raise DataError(f"cannot derive an Avro schema from the Connect schemas: {exc}") from None

    @staticmethod
    def _side(schema: Schema | None, names: _Names) -> tuple[Any, Convert]:
        if schema is None:
            return ["null", "string"], lambda v: None if v is None else json_bytes(v).decode("utf-8")
        avro, conv = _derive(schema, names)
        return _nullable(avro), (_none_safe(conv) if conv else (lambda v: v))

    def matches(self, key_schema: Schema | None, value_schema: Schema | None) -> bool:
        return (key_schema is self.key_schema or key_schema == self.key_schema) and (
            value_schema is self.value_schema or value_schema == self.value_schema
        )

    def datum(self, record: SinkRecord, offset: int) -> dict[str, Any]:
        """The Avro datum of ``record``."""
        try:
            key = self._key_conv(record.key)
            value = self._value_conv(record.value)
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - a value not shaped like its schema
            raise DataError(f"record does not match its Connect schema: {type(exc).__name__}: {exc}") from None
        return {
            "topic": record.original_topic,
            "partition": record.original_kafka_partition,
            "offset": offset,
            "timestamp": record.timestamp,
            "key": key,
            "value": value,
            "headers": [{"key": h.key, "value": h.value} for h in record.headers],
        }


class AvroLayouts:
    """A small cache of :class:`AvroLayout` by (key schema, value schema)."""

    def __init__(self, limit: int = 64) -> None:
        self._layouts: list[AvroLayout] = []
        self._limit = limit

    def get(self, key_schema: Schema | None, value_schema: Schema | None) -> AvroLayout:
        for layout in self._layouts:
            if layout.matches(key_schema, value_schema):
                return layout
        layout = AvroLayout(key_schema, value_schema)
        self._layouts.insert(0, layout)
        del self._layouts[self._limit :]
        return layout
