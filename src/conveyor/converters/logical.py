"""Kafka Connect's logical types and their Python values.

===========================================  =======  ==========================  ==========================
logical name                                 type     encoded as                  Python value
===========================================  =======  ==========================  ==========================
``org.apache.kafka.connect.data.Decimal``    bytes    unscaled two's complement,  :class:`decimal.Decimal`
                                                      big-endian; ``scale``
                                                      parameter
``org.apache.kafka.connect.data.Date``       int32    days since 1970-01-01       :class:`datetime.date`
``org.apache.kafka.connect.data.Time``       int32    ms since midnight           :class:`datetime.time`
``org.apache.kafka.connect.data.Timestamp``  int64    ms since the epoch (UTC)    :class:`datetime.datetime`
                                                                                  (UTC, tz-aware)
===========================================  =======  ==========================  ==========================

As ``org.apache.kafka.connect.data.{Decimal,Date,Time,Timestamp}`` (``toLogical`` /
``fromLogical``); each schema has ``version`` 1, as Kafka Connect's builders set.
``from_logical`` functions also accept the already-encoded integer, so values built
without the logical objects still convert.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from typing import Any

from conveyor.api.errors import DataError
from conveyor.api.schema import DATE, DECIMAL, TIME, TIMESTAMP, Schema, SchemaType

SCALE_FIELD = "scale"
LOGICAL_NAMES = frozenset({DECIMAL, DATE, TIME, TIMESTAMP})

MILLIS_PER_DAY = 86_400_000
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
EPOCH_DATE = _dt.date(1970, 1, 1)
_ONE_MS = _dt.timedelta(milliseconds=1)


def decimal_schema(scale: int, optional: bool = False) -> Schema:
    """``Decimal.builder(scale)``."""
    return Schema(SchemaType.BYTES, optional=optional, name=DECIMAL, version=1, parameters={SCALE_FIELD: str(scale)})


def date_schema(optional: bool = False) -> Schema:
    """``Date.SCHEMA`` (or its optional twin)."""
    return Schema(SchemaType.INT32, optional=optional, name=DATE, version=1)


def time_schema(optional: bool = False) -> Schema:
    """``Time.SCHEMA`` (or its optional twin)."""
    return Schema(SchemaType.INT32, optional=optional, name=TIME, version=1)


def timestamp_schema(optional: bool = False) -> Schema:
    """``Timestamp.SCHEMA`` (or its optional twin)."""
    return Schema(SchemaType.INT64, optional=optional, name=TIMESTAMP, version=1)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- Timestamp ---------------------------------------------------------------------


def timestamp_to_logical(millis: int) -> _dt.datetime:
    """Milliseconds since the epoch → UTC ``datetime``."""
    try:
        return EPOCH + _dt.timedelta(milliseconds=millis)
    except OverflowError:
        raise DataError(f"Timestamp {millis} ms is outside the range Python datetimes can hold") from None


def timestamp_from_logical(value: Any) -> int:
    """``datetime`` (naive means UTC) → milliseconds since the epoch."""
    if _is_int(value):
        return value
    if not isinstance(value, _dt.datetime):
        raise DataError(f"Invalid type for Timestamp, expected datetime but was {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.timezone.utc)
    return (value - EPOCH) // _ONE_MS


# --- Date ----------------------------------------------------------------------------


def date_to_logical(days: int) -> _dt.date:
    """Days since the epoch → ``date``."""
    try:
        return EPOCH_DATE + _dt.timedelta(days=days)
    except OverflowError:
        raise DataError(f"Date {days} days is outside the range Python dates can hold") from None


def date_from_logical(value: Any) -> int:
    """``date`` (or a ``datetime`` at midnight UTC) → days since the epoch."""
    if _is_int(value):
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc)
        if value.time() != _dt.time(0):
            raise DataError("Kafka Connect Date type should not have any time fields set to non-zero values.")
        value = value.date()
    if not isinstance(value, _dt.date):
        raise DataError(f"Invalid type for Date, expected date but was {type(value).__name__}")
    return (value - EPOCH_DATE).days


# --- Time ----------------------------------------------------------------------------


def time_to_logical(millis: int) -> _dt.time:
    """Milliseconds since midnight → ``time``."""
    if not 0 <= millis < MILLIS_PER_DAY:
        raise DataError("Time values must use number of milliseconds greater than 0 and less than 86400000")
    seconds, ms = divmod(millis, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return _dt.time(hour, minute, second, ms * 1000)


def time_from_logical(value: Any) -> int:
    """``time`` (or a ``datetime`` on 1970-01-01 UTC) → milliseconds since midnight."""
    if _is_int(value):
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc)
        if value.date() != EPOCH_DATE:
            raise DataError("Kafka Connect Time type should not have any date fields set to non-zero values.")
        value = value.time()
    if not isinstance(value, _dt.time):
        raise DataError(f"Invalid type for Time, expected time but was {type(value).__name__}")
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


# --- Decimal -------------------------------------------------------------------------


def decimal_scale(schema: Schema) -> int:
    """The ``scale`` parameter of a Decimal schema."""
    text = (schema.parameters or {}).get(SCALE_FIELD)
    if text is None:
        raise DataError("Invalid Decimal schema: scale parameter not found.")
    try:
        return int(text)
    except ValueError:
        raise DataError(f"Invalid Decimal schema: scale parameter {text!r} is not an integer.") from None


def decimal_to_logical(schema: Schema, data: bytes) -> _decimal.Decimal:
    """Unscaled two's-complement big-endian bytes → ``Decimal`` with the schema's scale."""
    unscaled = int.from_bytes(data, "big", signed=True)
    return make_decimal(unscaled, decimal_scale(schema))


def make_decimal(unscaled: int, scale: int) -> _decimal.Decimal:
    """``unscaled × 10^-scale`` exactly (no context rounding)."""
    digits = tuple(int(c) for c in str(abs(unscaled)))
    return _decimal.Decimal((1 if unscaled < 0 else 0, digits, -scale))


def rescale(schema: Schema, value: Any) -> _decimal.Decimal:
    """``value`` as a ``Decimal`` with exactly the schema's scale.

    Kafka Connect requires the value's scale to equal the schema's; Conveyor also
    accepts a value that rescales without loss (``Decimal("1.5")`` for scale 2).
    """
    scale = decimal_scale(schema)
    if _is_int(value):
        value = _decimal.Decimal(value)
    if not isinstance(value, _decimal.Decimal):
        raise DataError(f"Invalid type for Decimal, expected Decimal but was {type(value).__name__}")
    if not value.is_finite():
        raise DataError(f"Invalid value for Decimal: {value}")
    exponent = value.as_tuple().exponent
    if exponent == -scale:
        return value
    with _decimal.localcontext() as ctx:
        ctx.prec = max(len(value.as_tuple().digits) + abs(scale) + abs(int(exponent)) + 2, 28)
        rescaled = value.quantize(_decimal.Decimal((0, (1,), -scale)))
    if rescaled != value:
        raise DataError(
            f"Decimal value has mismatching scale. Expected scale is {scale}, but the value {value} has scale "
            f"{-int(exponent)} and cannot be rescaled without loss."
        )
    return rescaled


def decimal_unscaled(schema: Schema, value: Any) -> int:
    """The unscaled integer of ``value`` at the schema's scale."""
    rescaled = rescale(schema, value)
    sign, digits, _ = rescaled.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0")
    return -unscaled if sign else unscaled


def decimal_from_logical(schema: Schema, value: Any) -> bytes:
    """``Decimal`` → unscaled two's-complement big-endian bytes (``BigInteger.toByteArray``)."""
    unscaled = decimal_unscaled(schema, value)
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)
