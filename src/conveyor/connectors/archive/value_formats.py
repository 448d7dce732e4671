"""Files of record values only, byte-compatible with Confluent's S3 sink (``format.class``).

Conveyor's own formats (``format``: :mod:`.formats`) archive each record with its Kafka
coordinates, key and headers. Readers of buckets written by Confluent's S3 sink expect the
values alone; ``format.class`` selects that, with Confluent's class names:

``io.confluent.connect.s3.format.avro.AvroFormat`` (``.avro``)
    An Avro object container file whose schema is the value's Connect schema mapped as
    Confluent's ``AvroData`` maps it (:mod:`conveyor.converters._avro_data`, the same mapping
    as the ``AvroConverter``), whose records are the values. Needs a value schema (a
    schemaless value is a :class:`~conveyor.api.DataError`); a schema change starts a new
    file. Compressed per ``avro.codec``.
``io.confluent.connect.s3.format.json.JsonFormat`` (``.json``)
    One value per line as Kafka Connect's ``JsonConverter`` writes it with
    ``schemas.enable=false`` (Decimal per ``json.decimal.format``, ``BASE64`` default or
    ``NUMERIC``; bytes as base64; Date/Time/Timestamp as their integers).
``io.confluent.connect.s3.format.bytearray.ByteArrayFormat`` (``format.bytearray.extension``, default ``.bin``)
    The value bytes (use ``value.converter=org.apache.kafka.connect.converters.ByteArrayConverter``),
    each followed by ``format.bytearray.separator`` (default ``\\n``). A value that is not
    bytes is a ``DataError``.

A record with a null value follows ``behavior.on.null.values`` (Confluent's key): ``fail``
(default; a ``DataError``, i.e. the dead-letter queue per ``errors.tolerance``) or
``ignore`` (skipped; its offset still commits).
"""

from __future__ import annotations

from typing import Any

import fastavro

from conveyor.api import DataError, Schema, SinkRecord
from conveyor.connectors.archive.config import ArchiveSinkConfig, NullValues
from conveyor.connectors.archive.formats import AvroBuffer, FileBuffer, JsonlBuffer
from conveyor.converters import _avro_data
from conveyor.converters.json_converter import JsonConverter

AVRO_FORMAT = "io.confluent.connect.s3.format.avro.AvroFormat"
JSON_FORMAT = "io.confluent.connect.s3.format.json.JsonFormat"
BYTEARRAY_FORMAT = "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"


class ValueAvroLayout:
    """The Avro schema of files of values with one Connect schema (duck-types
    :class:`~conveyor.connectors.archive.formats.AvroLayout` for ``AvroBuffer``).

    Raises:
        DataError: no value schema, or one Avro cannot express.
    """

    def __init__(self, value_schema: Schema | None) -> None:
        if value_schema is None:
            raise DataError(f"{AVRO_FORMAT} needs records with a value schema (a schemaless value cannot be archived)")
        self.value_schema = value_schema
        self.schema: Any = _avro_data.to_avro_schema(value_schema)
        try:
            self.parsed = fastavro.parse_schema(self.schema)
        except Exception as exc:  # noqa: BLE001 - fastavro's SchemaParseException and friends
            raise DataError(f"cannot derive an Avro schema from the value schema: {exc}") from None
        self._reshape = _avro_data.needs_value_reshaping(value_schema)

    def matches(self, key_schema: Schema | None, value_schema: Schema | None) -> bool:
        return value_schema is self.value_schema or value_schema == self.value_schema

    def datum(self, record: SinkRecord, offset: int) -> Any:
        if not self._reshape:
            return record.value
        try:
            return _avro_data.value_to_avro(self.value_schema, record.value)
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - a value not shaped like its schema
            raise DataError(f"value does not match its Connect schema: {type(exc).__name__}: {exc}") from None


class ValueAvroLayouts:
    """A small cache of :class:`ValueAvroLayout` by value schema."""

    def __init__(self, limit: int = 64) -> None:
        self._layouts: list[ValueAvroLayout] = []
        self._limit = limit

    def get(self, key_schema: Schema | None, value_schema: Schema | None) -> ValueAvroLayout:
        for layout in self._layouts:
            if layout.matches(key_schema, value_schema):
                return layout
        layout = ValueAvroLayout(value_schema)
        self._layouts.insert(0, layout)
        del self._layouts[self._limit :]
        return layout


class ValueJsonBuffer(JsonlBuffer):
    """Lines of a Confluent ``JsonFormat`` file: each value as ``JsonConverter`` writes it."""

    def __init__(self, start: int, opened: float, converter: JsonConverter) -> None:
        super().__init__(start, opened)
        self._converter = converter

    def append(self, record: SinkRecord, offset: int) -> None:
        line = self._converter.from_connect_data(record.topic, (), record.value_schema, record.value)
        self._add_line(line or b"null", offset)


class ByteArrayBuffer(JsonlBuffer):
    """A Confluent ``ByteArrayFormat`` file: each value's bytes, then the separator."""

    def __init__(self, start: int, opened: float, separator: bytes) -> None:
        super().__init__(start, opened)
        self._separator = separator

    def append(self, record: SinkRecord, offset: int) -> None:
        value = record.value
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataError(
                f"{BYTEARRAY_FORMAT} archives bytes values, got {type(value).__name__}"
                " (set value.converter=org.apache.kafka.connect.converters.ByteArrayConverter)"
            )
        self._add_line(bytes(value), offset, self._separator)


class ValueFiles:
    """Makes the buffers of the ``format.class`` chosen (one per task)."""

    def __init__(self, config: ArchiveSinkConfig) -> None:
        self.format_class = (config.format_class or "").strip()
        self.skip_nulls = config.behavior_on_null_values is NullValues.IGNORE
        self._config = config
        self._layouts = ValueAvroLayouts()
        self._json = JsonConverter()
        self._json.configure({"schemas.enable": False, "decimal.format": config.json_decimal_format.value}, False)
        self._separator = config.bytearray_separator.encode("utf-8")

    def null_value(self, record: SinkRecord) -> DataError:
        """The error of a null value under ``behavior.on.null.values=fail``."""
        return DataError(
            f"record {record.topic}-{record.kafka_partition}@{record.kafka_offset} has a null value, which"
            f" {self.format_class.rsplit('.', 1)[-1]} cannot archive (behavior.on.null.values=fail;"
            " set it to ignore to skip such records)"
        )

    def new(self, record: SinkRecord, offset: int, now: float) -> FileBuffer:
        """A buffer for the file starting with ``record``.

        Raises:
            DataError: AvroFormat and the record's value schema cannot be used.
        """
        if self.format_class == AVRO_FORMAT:
            layout = self._layouts.get(record.key_schema, record.value_schema)
            return AvroBuffer(offset, now, layout, self._config.avro_codec)  # type: ignore[arg-type]
        if self.format_class == JSON_FORMAT:
            return ValueJsonBuffer(offset, now, self._json)
        return ByteArrayBuffer(offset, now, self._separator)
