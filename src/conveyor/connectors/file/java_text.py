"""``String.valueOf(value)`` of a Connect value, as Kafka Connect's ``FileStreamSinkTask`` prints
it with ``PrintStream.println(record.value())``.

What Kafka Connect's converters hand a sink task, and how Java prints it:

==============================  ===============================  =================================
Connect value (Java)            Conveyor value (Python)          text
==============================  ===============================  =================================
``null``                        ``None``                         ``null``
``String``                      ``str``                          the string itself
``Boolean``                     ``bool``                         ``true`` / ``false``
``Byte``…``Long``               ``int``                          decimal (a schemaless JSON
                                                                 integer keeps its low 64 bits,
                                                                 as Jackson's ``longValue()``)
``Double`` / ``Float``          ``float`` (``FLOAT32`` schema:   ``Double.toString`` /
                                a float)                         ``Float.toString``
                                                                 (``converters.java_numbers``)
``BigDecimal`` (Decimal)        ``decimal.Decimal``              ``BigDecimal.toString``
``java.util.Date`` (Timestamp,  ``datetime`` / ``date`` /        ``Thu Jan 01 00:00:00 UTC 1970``
Date, Time)                     ``time``                         (the JVM's zone taken as UTC;
                                                                 Julian before 1582-10-15)
``byte[]``                      ``bytes``                        ``[B@<identity hash>``: Java
                                                                 prints the array's identity,
                                                                 not its content; so does this
``ArrayList``                   ``list``                         ``[a, b]``
``HashMap`` (schemaless JSON    ``dict``                         ``{k=v, k2=v2}`` in ``HashMap``
object, ``MAP``)                                                 iteration order (see below)
``Struct`` (``STRUCT``)         ``dict`` + STRUCT schema         ``Struct{a=1,b=x}``: schema
                                                                 order, null fields left out
==============================  ===============================  =================================

``HashMap`` order: ``JsonConverter`` builds a ``java.util.HashMap``, whose ``toString`` walks its
buckets in index order. :func:`hash_map_order` replays the insertions (default capacity 16, load
factor 0.75, resizing when a bucket reaches 9 entries below capacity 64) with the Java
``hashCode`` of each key (``String``, boxed numbers, ``Boolean``, ``Date``), so the order is
Java's. Not replayed: a bucket turned into a red-black tree (9+ keys in one bucket of a table of
64 or more, practically only with crafted keys), printed in insertion order; and keys whose Java
hash is not derived here (``BigDecimal``, lists, maps, structs, bytes): such a map prints in
insertion order.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from conveyor.api import Schema, SchemaType
from conveyor.java_text.numbers import (
    big_decimal_to_string,
    double_to_string,
    float_to_string,
    java_long,
)

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_TWO_63 = 1 << 63
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_GREGORIAN_CUTOVER = _dt.datetime(1582, 10, 15)
_TIMESTAMP_NAMES = frozenset({"org.apache.kafka.connect.data.Timestamp", "org.apache.kafka.connect.data.Date",
                              "org.apache.kafka.connect.data.Time"})
_INT_TYPES = frozenset({SchemaType.INT8, SchemaType.INT16, SchemaType.INT32})
#: Remembered HashMap orders of string-key sequences (cleared when full).
_STRING_KEY_ORDERS: dict[tuple[str, ...], tuple[int, ...]] = {}
_ORDER_CACHE_SIZE = 4096


def java_string(value: Any, schema: Schema | None = None) -> str:
    """``String.valueOf(value)`` for a Connect value with its schema (``None``: schemaless)."""
    if type(value) is str:
        return value
    if type(value) is dict and schema is None and (text := _flat_dict_string(value)) is not None:
        return text
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(java_long(value))
    if isinstance(value, float):
        if schema is not None and schema.type is SchemaType.FLOAT32:
            return float_to_string(value)
        return double_to_string(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return big_decimal_to_string(value)
    if isinstance(value, (_dt.date, _dt.time)):
        return java_date_string(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"[B@{id(value) & 0x7FFFFFFF:x}"
    if isinstance(value, (list, tuple)):
        element = schema.value_schema if schema is not None else None
        return "[" + ", ".join(java_string(item, element) for item in value) + "]"
    if isinstance(value, Mapping):
        if schema is not None and schema.type is SchemaType.STRUCT:
            return _struct_string(value, schema)
        key_schema = schema.key_schema if schema is not None else None
        value_schema = schema.value_schema if schema is not None else None
        return "{" + ", ".join(
            [f"{java_string(k, key_schema)}={java_string(v, value_schema)}" for k, v in _map_items(value, key_schema)]
        ) + "}"
    return str(value)


def _flat_dict_string(value: dict[Any, Any]) -> str | None:
    """The common case, fast: a schemaless JSON object whose key sequence was seen before (its
    ``HashMap`` order remembered); ``None`` for anything else (the general path handles it)."""
    keys = tuple(value)
    order = _STRING_KEY_ORDERS.get(keys)
    if order is None:
        return None
    values = list(value.values())
    parts = []
    for i in order:
        item = values[i]
        kind = type(item)
        if kind is str:
            text = item
        elif kind is int and -_TWO_63 <= item < _TWO_63:
            text = str(item)
        else:
            text = java_string(item)
        parts.append(f"{keys[i]}={text}")
    return "{" + ", ".join(parts) + "}"


def _map_items(value: Mapping[Any, Any], key_schema: Schema | None) -> list[tuple[Any, Any]]:
    """``value``'s items in ``HashMap`` order. The order of string keys depends on the keys
    alone, so it is remembered per key sequence (records of a topic mostly share one)."""
    items = list(value.items())
    keys = tuple(value)
    if not all(type(k) is str for k in keys):
        return hash_map_order(items, key_schema)
    order = _STRING_KEY_ORDERS.get(keys)
    if order is None:
        if len(_STRING_KEY_ORDERS) >= _ORDER_CACHE_SIZE:
            _STRING_KEY_ORDERS.clear()
        position = {k: i for i, k in enumerate(keys)}
        order = _STRING_KEY_ORDERS[keys] = tuple(position[k] for k, _v in hash_map_order(items, key_schema))
    return [items[i] for i in order]


def _struct_string(value: Mapping[str, Any], schema: Schema) -> str:
    """``Struct.toString()``: ``Struct{`` + ``name=value`` of each non-null field in schema
    order, comma-separated without spaces, + ``}``."""
    parts = []
    for field in schema.fields:
        item = value.get(field.name)
        if item is not None:
            parts.append(f"{field.name}={java_string(item, field.schema)}")
    return "Struct{" + ",".join(parts) + "}"


def java_date_string(value: _dt.date | _dt.time) -> str:
    """``java.util.Date.toString()`` in UTC (``EEE MMM dd HH:mm:ss zzz yyyy``); a ``time`` is
    that time on 1970-01-01 (Connect's Time), a ``date`` its midnight, a naive ``datetime`` UTC."""
    if isinstance(value, _dt.datetime):
        moment = value.astimezone(_dt.timezone.utc).replace(tzinfo=None) if value.tzinfo is not None else value
    elif isinstance(value, _dt.date):
        moment = _dt.datetime(value.year, value.month, value.day)
    else:
        moment = _dt.datetime(1970, 1, 1, value.hour, value.minute, value.second)
    year, month, day = moment.year, moment.month, moment.day
    if moment < _GREGORIAN_CUTOVER:  # java.util.Date is Julian before 1582-10-15
        year, month, day = _julian(moment.toordinal())
    return (f"{_DAYS[moment.weekday()]} {_MONTHS[month - 1]} {day:02d} "
            f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} UTC {year}")


def _julian(ordinal: int) -> tuple[int, int, int]:
    """The Julian-calendar date of a proleptic Gregorian ordinal (``date.toordinal()``)."""
    c = ordinal + 1721425 + 32082  # the Julian day number, shifted
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return d - 4800 + m // 10, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1


def java_hash(key: Any, schema: Schema | None = None) -> int | None:
    """The Java ``hashCode()`` (as an unsigned 32-bit int) of a map key, or ``None`` when not
    derived here. ``None`` (Java's null key) hashes to 0, as in ``HashMap.hash``."""
    if type(key) is str:
        return string_hash(key)
    if key is None:
        return 0
    if key is True or key is False:
        return 1231 if key else 1237
    stype = schema.type if schema is not None else None
    if isinstance(key, int):
        if stype in _INT_TYPES:
            return key & _MASK32  # Byte, Short and Integer hash to their value
        bits = java_long(key) & _MASK64  # Long: (int) (value ^ (value >>> 32))
        return (bits ^ (bits >> 32)) & _MASK32
    if isinstance(key, float):
        if stype is SchemaType.FLOAT32:
            return 0x7FC00000 if math.isnan(key) else struct.unpack(">I", struct.pack(">f", key))[0]
        bits = 0x7FF8000000000000 if math.isnan(key) else struct.unpack(">Q", struct.pack(">d", key))[0]
        return (bits ^ (bits >> 32)) & _MASK32
    if isinstance(key, (_dt.date, _dt.time)) and (schema is None or schema.name in _TIMESTAMP_NAMES):
        bits = _epoch_millis(key) & _MASK64  # Date: (int) ht ^ (int) (ht >> 32)
        return (bits ^ (bits >> 32)) & _MASK32
    if isinstance(key, str):
        return string_hash(str(key))
    return None


def string_hash(text: str) -> int:
    """``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, 32 bits."""
    h = 0
    if text.isascii():
        for ch in text.encode("ascii"):
            h = (31 * h + ch) & _MASK32
        return h
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _MASK32
    return h


def hash_map_order(items: Iterable[tuple[Any, Any]], key_schema: Schema | None = None) -> list[tuple[Any, Any]]:
    """``items`` in the iteration order of a ``java.util.HashMap`` they were put into, in order.

    Falls back to the given order when a key's Java hash is unknown (:func:`java_hash`)."""
    given = list(items)
    entries: list[tuple[int, Any, Any]] = []
    for key, value in given:
        h = java_hash(key, key_schema)
        if h is None:
            return given
        entries.append((h ^ (h >> 16), key, value))  # HashMap.hash spreads the high bits
    capacity, threshold = 16, 12
    buckets: list[list[tuple[int, Any, Any]]] = [[] for _ in range(capacity)]
    for size, entry in enumerate(entries, start=1):
        chain = buckets[entry[0] & (capacity - 1)]
        chain.append(entry)
        if len(chain) >= 9 and capacity < 64:  # treeifyBin below MIN_TREEIFY_CAPACITY resizes
            capacity, threshold, buckets = _resize(buckets, capacity, threshold)
        if size > threshold:
            capacity, threshold, buckets = _resize(buckets, capacity, threshold)
    return [(k, v) for chain in buckets for _h, k, v in chain]


def _resize(buckets: list[list[tuple[int, Any, Any]]], capacity: int,
            threshold: int) -> tuple[int, int, list[list[tuple[int, Any, Any]]]]:
    """Double the table; each bucket splits in two, keeping its entries' order."""
    capacity *= 2
    grown: list[list[tuple[int, Any, Any]]] = [[] for _ in range(capacity)]
    for chain in buckets:
        for entry in chain:
            grown[entry[0] & (capacity - 1)].append(entry)
    return capacity, threshold * 2, grown


def _epoch_millis(value: _dt.date | _dt.time) -> int:
    if isinstance(value, _dt.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=_dt.timezone.utc)
    elif isinstance(value, _dt.date):
        moment = _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.timezone.utc)
    else:
        moment = _dt.datetime(1970, 1, 1, value.hour, value.minute, value.second, value.microsecond,
                              tzinfo=_dt.timezone.utc)
    return (moment - _EPOCH) // _dt.timedelta(milliseconds=1)
