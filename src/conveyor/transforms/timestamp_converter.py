"""``TimestampConverter``: convert a timestamp between Unix time, a string and Connect's
``Date``, ``Time`` and ``Timestamp``, for the whole key/value or one field of it.

Kafka Connect: ``org.apache.kafka.connect.transforms.TimestampConverter$Key`` /
``org.apache.kafka.connect.transforms.TimestampConverter$Value``.

Configuration (Connect 4.1's keys):

``target.type`` (required)          ``string``, ``unix``, ``Date``, ``Time`` or ``Timestamp``.
``field`` (default empty)           the field holding the timestamp; empty: the whole key/value.
``format`` (default empty)          a ``SimpleDateFormat`` pattern, in UTC: the output for
                                    ``string`` (then required) and how a string input is read
                                    (:mod:`conveyor.java_text.date_parse`).
``unix.precision``                  ``seconds``, ``milliseconds`` (default), ``microseconds``
                                    or ``nanoseconds``: of a Unix input and output. Finer than
                                    a millisecond is truncated, as in Connect.
``replace.null.with.default``       (default ``true``) a struct's null field reads as its
                                    schema's default.

The input's kind comes from its schema (``Timestamp``/``Date``/``Time`` logical types, ``string``,
``int64`` as Unix time; anything else fails), or without a schema from the value (an ``int`` is
Unix time, a ``str`` a string, a ``datetime`` a Timestamp). ``Date`` keeps the day (midnight
UTC), ``Time`` the time of day. A null stays null. Records only (no batch form). Checked case by
case against Connect's own class: ``tests/integration/test_transform_oracle.py``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Mapping
from typing import Any

from conveyor.api.errors import ConfigError, DataError
from conveyor.api.schema import DATE, TIME, TIMESTAMP, Field, Schema, SchemaType
from conveyor.converters._config import get_bool, get_choice, get_string
from conveyor.java_text.date_format import JavaDateFormat
from conveyor.java_text.date_parse import DateParser, UnsupportedPattern
from conveyor.java_text.dates import MILLIS_PER_DAY, Unrepresentable, to_millis, to_python
from conveyor.transforms._base import (
    KeyOrValueTransformation,
    SchemaCache,
    copy_schema_basics,
    key_and_value_variants,
    require_map,
    require_struct_or_null,
    struct_get,
)

STRING, UNIX = "string", "unix"
TYPES = (STRING, UNIX, "Date", "Time", "Timestamp")
_LOGICAL = {TIMESTAMP: "Timestamp", DATE: "Date", TIME: "Time"}
_PRECISION_MS = {"seconds": 1000, "milliseconds": 1, "microseconds": 1 / 1000, "nanoseconds": 1 / 1_000_000}
PRECISIONS = ("nanoseconds", "microseconds", "milliseconds", "seconds")
_PURPOSE = "converting timestamp formats"
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def _saturated(value: int) -> int:
    return max(_LONG_MIN, min(_LONG_MAX, value))


def _truncated_div(value: int, divisor: int) -> int:
    """Java's ``long`` division: toward zero."""
    quotient = abs(value) // divisor
    return quotient if value >= 0 else -quotient


class TimestampConverter(KeyOrValueTransformation):
    """A timestamp converted; use :class:`TimestampConverterKey` or :class:`TimestampConverterValue`."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.field = get_string(config, "field", "")
        self.target = get_choice(config, "target.type", TYPES, case_sensitive=True)
        pattern = get_string(config, "format", "")
        self.precision = get_choice(config, "unix.precision", PRECISIONS, "milliseconds", case_sensitive=True)
        self.replace_null_with_default = get_bool(config, "replace.null.with.default", True)
        if self.target == STRING and not pattern.strip():
            raise ConfigError({"format": "TimestampConverter requires format option to be specified when using "
                                         "string timestamps"})
        self.format: JavaDateFormat | None = None
        self._parser: DateParser | None = None
        self._unparsable = ""
        if pattern.strip():
            try:
                self.format = JavaDateFormat(pattern)
            except ValueError as exc:  # Connect's ConfigException(name, value): its words, in that order
                raise ConfigError({"format": f"Invalid value java.lang.IllegalArgumentException: {exc} for "
                                             "configuration TimestampConverter requires a SimpleDateFormat-compatible "
                                             f"pattern for string timestamps: {pattern}"}) from None
            try:
                self._parser = DateParser(pattern)
            except UnsupportedPattern as exc:
                self._unparsable = str(exc)
        self._schemas = SchemaCache()

    def apply(self, record: Any) -> Any:
        schema, value = self.operating_schema(record), self.operating_value(record)
        if schema is None:
            if value is None or not self.field:
                return self.new_record(record, None, self._convert(value, None))
            updated = dict(require_map(value, _PURPOSE))
            updated[self.field] = self._convert(updated.get(self.field), None)
            return self.new_record(record, None, updated)
        if not self.field:
            return self.new_record(record, self._type_schema(schema.optional), self._convert(value, _kind_of(schema)))
        struct = require_struct_or_null(value, _PURPOSE)
        updated_schema = self._schemas.get(schema, self._updated_schema)
        return self.new_record(record, updated_schema, self._struct(struct, schema))

    # ---------------------------------------------------------------- schemas

    def _type_schema(self, optional: bool) -> Schema:
        if self.target == STRING:
            return Schema(SchemaType.STRING, optional=optional)
        if self.target == UNIX:
            return Schema(SchemaType.INT64, optional=optional)
        name = {"Date": DATE, "Time": TIME, "Timestamp": TIMESTAMP}[self.target]
        return Schema(SchemaType.INT64 if name == TIMESTAMP else SchemaType.INT32, optional=optional, name=name,
                      version=1)

    def _updated_schema(self, schema: Schema) -> Schema:
        fields = tuple(Field(f.name, self._type_schema(f.schema.optional)) if f.name == self.field else f
                       for f in schema.fields or ())
        basics = copy_schema_basics(schema, SchemaType.STRUCT, fields)
        default = None if schema.default is None else self._struct(schema.default, schema)
        return dataclasses.replace(basics, optional=schema.optional, default=default)

    def _struct(self, struct: Mapping[str, Any] | None, schema: Schema) -> dict[str, Any] | None:
        if struct is None:
            return None
        out: dict[str, Any] = {}
        for f in schema.fields or ():
            value = struct_get(struct, f, self.replace_null_with_default)
            out[f.name] = self._convert(value, _kind_of(f.schema)) if f.name == self.field else value
        return out

    # ---------------------------------------------------------------- values

    def _convert(self, value: Any, kind: str | None) -> Any:
        if value is None:
            return None
        return self._to_type(self._to_raw(value, kind or _inferred(value)))

    def _to_raw(self, value: Any, kind: str) -> int:
        """The instant, in milliseconds since the epoch (Java's ``Date``)."""
        if kind == STRING:
            if not isinstance(value, str):
                raise DataError(f"Expected string timestamp to be a String, but found {type(value).__name__}")
            if self._parser is None:
                pattern = self.format.pattern if self.format is not None else ""
                raise DataError(f"Could not parse timestamp: value ({value}) with pattern ({pattern}): "
                                f"{self._unparsable or 'no format given'}")
            millis = self._parser.parse(value)
            if millis is None:
                raise DataError(f"Could not parse timestamp: value ({value}) does not match pattern "
                                f"({self.format.pattern})")
            return millis
        if kind == UNIX:
            if not isinstance(value, int) or isinstance(value, bool):
                raise DataError(f"Expected Unix timestamp to be a Long, but found {type(value).__name__}")
            factor = _PRECISION_MS[self.precision]
            if factor >= 1:
                return _saturated(value * int(factor))
            return _truncated_div(value, int(round(1 / factor)))
        if not isinstance(value, (_dt.date, _dt.time)):
            raise DataError(f"Expected {kind} to be a java.util.Date, but found {type(value).__name__}")
        return to_millis(value)

    def _to_type(self, millis: int) -> Any:
        if self.target == STRING:
            assert self.format is not None
            return self.format.format(millis)
        if self.target == UNIX:
            factor = _PRECISION_MS[self.precision]
            if factor >= 1:
                return _truncated_div(millis, int(factor))
            return _saturated(millis * int(round(1 / factor)))
        try:
            if self.target == "Date":
                return to_python("date", millis // MILLIS_PER_DAY * MILLIS_PER_DAY)
            if self.target == "Time":
                return to_python("time", millis % MILLIS_PER_DAY)
            return to_python("timestamp", millis)
        except Unrepresentable as exc:
            raise DataError(str(exc)) from None


def _kind_of(schema: Schema) -> str:
    """``timestampTypeFromSchema``."""
    if schema.name in _LOGICAL:
        return _LOGICAL[schema.name]
    if schema.type is SchemaType.STRING:
        return STRING
    if schema.type is SchemaType.INT64:
        return UNIX
    raise DataError(f"Schema Schema{{{schema.type.name}}} does not correspond to a known timestamp type format")


def _inferred(value: Any) -> str:
    """``inferTimestampType``: a date/time is a Timestamp, an int Unix time, a str a string."""
    if isinstance(value, (_dt.date, _dt.time)):
        return "Timestamp"
    if isinstance(value, int) and not isinstance(value, bool):
        return UNIX
    if isinstance(value, str):
        return STRING
    raise DataError(f"TimestampConverter does not support {type(value).__name__} objects as timestamps")


TimestampConverterKey, TimestampConverterValue = key_and_value_variants(TimestampConverter)
