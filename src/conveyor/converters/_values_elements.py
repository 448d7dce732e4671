"""The elements of arrays and maps that Kafka Connect's ``Values.parseString`` reads.

* :class:`SchemaMerger` is ``Values.SchemaMerger`` / ``mergeSchemas``: numbers widen to the
  widest integer or float seen (a float beats any integer, a logical Date/Time/Timestamp counts
  as its INT32/INT64); two schemas of one type give the later one; anything else has no common
  schema.
* :func:`convert_to` is ``Values.convertTo(schema, null, value)``, which then converts every
  element to the common schema (for the schemas a merge can produce).
* :func:`java_map` is a ``LinkedHashMap`` built by ``put``: keys equal as Java compares them.
* :class:`Unheld` stands for a value Java holds and Python cannot (see :func:`instant`).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import struct
from typing import Any

from conveyor.api.errors import DataError
from conveyor.api.schema import Schema, SchemaAndValue, SchemaType
from conveyor.converters import logical
from conveyor.java_text import dates as java_dates
from conveyor.java_text.dates import Unrepresentable
from conveyor.java_text.numbers import Float32, to_float32

T = SchemaType
_WIDTH = {T.INT8: 0, T.INT16: 1, T.INT32: 2, T.INT64: 3, T.FLOAT32: 4, T.FLOAT64: 5}
_BITS = {T.INT8: 8, T.INT16: 16, T.INT32: 32, T.INT64: 64}
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


class Unheld:
    """A value Connect's parser makes that Python cannot hold: an instant outside Python's dates
    (``millis`` set; a ``java.util.Date`` to the parser) or a map a dict cannot be. It stands in
    while parsing goes on (an enclosing array may still turn out malformed, making all of it a
    string); ``parse_string`` raises :class:`Unrepresentable` if one is left in its result."""

    __slots__ = ("millis", "reason")

    def __init__(self, reason: str, millis: int | None = None) -> None:
        self.reason, self.millis = reason, millis

    @staticmethod
    def find(value: Any) -> Unheld | None:
        """The first :class:`Unheld` in ``value`` (a parsed value, lists and dicts searched)."""
        if isinstance(value, Unheld):
            return value
        items = value if isinstance(value, list) else [*value, *value.values()] if isinstance(value, dict) else ()
        return next((u for u in map(Unheld.find, items) if u is not None), None)


def wrap(value: int, bits: int) -> int:
    """Java's narrowing of an integer to ``bits`` bits (two's complement)."""
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half


def instant(kind: str, millis: int) -> Any:
    """The ``date``/``time``/``datetime`` (``kind``: ``date``, ``time``, ``timestamp``) of an
    instant, or an :class:`Unheld` for one Python cannot hold."""
    try:
        return java_dates.to_python(kind, millis)
    except Unrepresentable as e:
        return Unheld(str(e), millis)


def is_instant(value: Any) -> bool:
    """``value instanceof java.util.Date``."""
    return isinstance(value, (_dt.date, _dt.time)) or (isinstance(value, Unheld) and value.millis is not None)


class SchemaMerger:
    """``Values.SchemaMerger``: the common schema of the elements seen so far, if any."""

    def __init__(self) -> None:
        self.common: Schema | None = None
        self.compatible = True

    def merge(self, latest: SchemaAndValue | None) -> None:
        if latest is None or latest.schema is None or not self.compatible:
            return
        if self.common is None:
            self.common = latest.schema
            return
        self.common = _merge(self.common, latest.schema)
        self.compatible = self.common is not None


def _merge(previous: Schema, new: Schema) -> Schema | None:
    if previous.type is not new.type:
        rank_previous, rank_new = _WIDTH.get(previous.type), _WIDTH.get(new.type)
        if rank_previous is None or rank_new is None:
            return None
        return new if rank_new > rank_previous else previous
    if previous.optional == new.optional:
        return previous if previous.optional else new
    return previous if previous == new else None


def _as_long(value: Any) -> int:
    """``Values.asLong`` without a schema: a Java ``Number``'s ``longValue()``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        return _LONG_MAX if value >= _LONG_MAX else _LONG_MIN if value <= _LONG_MIN else int(value)
    if isinstance(value, decimal.Decimal):
        return wrap(int(value), 64)
    raise DataError(f"Unable to convert {value} ({type(value).__name__}) to a number")


def convert_to(schema: Schema, value: Any) -> Any:
    """``Values.convertTo(schema, null, value)`` for a parsed element."""
    if value is None:
        if schema.optional:
            return None
        raise DataError("Unable to convert a null value to a schema that requires a value")
    t, name = schema.type, schema.name
    if name in (logical.DATE, logical.TIME, logical.TIMESTAMP):
        if is_instant(value):  # no conversion between Date, Time and Timestamp without a schema
            return value
        number = _as_long(value)
        if name == logical.TIMESTAMP:
            return instant("timestamp", number)
        number = wrap(number, 32)
        if name == logical.DATE:
            return instant("date", number * java_dates.MILLIS_PER_DAY)
        if not 0 <= number <= java_dates.MILLIS_PER_DAY:
            raise DataError("Time values must use number of milliseconds greater than 0 and less than 86400000")
        return instant("time", number)
    if isinstance(value, bool) or is_instant(value):
        pass
    elif t is T.FLOAT32:
        return value if isinstance(value, Float32) else Float32(to_float32(float(_number(value))))
    elif t is T.FLOAT64:
        return float(_number(value))
    elif t in _BITS:
        return wrap(_as_long(value), _BITS[t])
    kinds = {T.STRING: str, T.BOOLEAN: bool, T.BYTES: decimal.Decimal, T.ARRAY: list, T.MAP: (dict, Unheld)}
    if t in kinds and isinstance(value, kinds[t]) and not is_instant(value):
        return value
    raise DataError(f"Unable to convert {value} ({type(value).__name__}) to {t.name}")


def _number(value: Any) -> int | float | decimal.Decimal:
    if isinstance(value, (int, float, decimal.Decimal)):
        return value
    return _as_long(value)  # raises


def _java_key(value: Any) -> tuple[Any, ...] | None:
    """What ``equals``/``hashCode`` compare for a parsed map key; ``None`` for a list or map."""
    if is_instant(value):  # Date, Time and Timestamp are all java.util.Date, equal by instant
        return ("date", value.millis if isinstance(value, Unheld) else java_dates.to_millis(value))
    if isinstance(value, float):  # Float and Double compare bits: 0.0 is not -0.0
        return (type(value) is Float32, struct.pack("<d", value))
    if isinstance(value, decimal.Decimal):  # BigDecimal.equals compares the scale too
        return ("decimal", value.as_tuple())
    if isinstance(value, (list, dict, Unheld)):
        return None
    return (type(value), value)


def java_map(pairs: list[tuple[Any, Any]]) -> dict[Any, Any] | Unheld:
    """``LinkedHashMap.put`` of each pair in turn, or an :class:`Unheld` where a dict would differ
    (a list or map as a key; keys Python finds equal and Java does not, as ``1`` and ``true``)."""
    result: dict[Any, Any] = {}
    keys: dict[tuple[Any, ...], Any] = {}
    for key, value in pairs:
        java_key = _java_key(key)
        if java_key is None or (java_key not in keys and key in result):
            return Unheld(f"Map key {key!r} cannot be a key of a Python dict here")
        result[keys.setdefault(java_key, key)] = value
    return result
