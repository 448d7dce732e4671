"""Java's ``SimpleDateFormat`` for Kafka Connect's ISO-8601 patterns, as ``Values`` uses it.

Kafka Connect's ``Values`` parses and formats dates with ``new SimpleDateFormat(pattern)``:
lenient, in the JVM's default time zone (taken here as UTC, the zone Connect workers are
normally run in), on Java's ``GregorianCalendar`` (Julian before 1582-10-15). So:

* a field holds any integer ``DecimalFormat`` reads: ``2024-13-45`` is 2025-02-14, ``25:00``
  the next day's 01:00; a field may start with spaces or tabs, a ``-`` sign, Unicode digits,
  an ``E`` exponent (``1E1`` is 10), or be ``NaN`` (0); ``.`` ends it;
* text after the last field is ignored (``2024-01-1x`` is 2024-01-01), other literals must match;
* years before 1582 are Julian: ``1000-01-01`` is the proleptic Gregorian 1000-01-06;
* :func:`format_millis` is ``Values.dateFormatFor``: an instant before 1970-01-02 prints as a
  time of day (``1969-12-31`` as ``00:00:00.000Z``), one at midnight as a date, anything else
  as a timestamp.

Instants are milliseconds since the epoch (Java's ``Date.getTime()``); :func:`to_python`
turns one into the ``date``/``time``/``datetime`` of Conveyor's logical types.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import unicodedata

MILLIS_PER_DAY = 86_400_000
_EPOCH_FIXED = 719_163  # 1970-01-01 as a fixed date (days counted from 0001-01-01 Gregorian, day 1)
_CUTOVER_FIXED = 577_736  # 1582-10-15, the first Gregorian day
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1

# Values' three patterns, their quotes left out: ``HH:mm:ss.SSS'Z'`` and ``yyyy-MM-dd'T'...``.
# The letters below are fields; any other character is a literal.
DATE_PATTERN = "yyyy-MM-dd"
TIME_PATTERN = "HH:mm:ss.SSSZ"
TIMESTAMP_PATTERN = "yyyy-MM-ddTHH:mm:ss.SSSZ"
_FIELDS = {"yyyy": "y", "MM": "M", "dd": "d", "HH": "H", "mm": "m", "ss": "s", "SSS": "S"}


class Unrepresentable(ValueError):
    """An instant Java holds but Python's ``date``/``time``/``datetime`` cannot."""


def _compile(pattern: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        for letters, field in _FIELDS.items():
            if pattern.startswith(letters, i):
                out.append(field)
                i += len(letters)
                break
        else:
            out.append("'" + pattern[i])
            i += 1
    return out


_COMPILED = {p: _compile(p) for p in (DATE_PATTERN, TIME_PATTERN, TIMESTAMP_PATTERN)}


def _digit(ch: str) -> int | None:
    """``Character.digit(ch, 10)`` for a UTF-16 unit: a Unicode decimal digit of the BMP."""
    return unicodedata.decimal(ch, None) if ord(ch) <= 0xFFFF else None


def _java_int(value: float) -> int:
    """``Number.intValue()`` of DecimalFormat's ``Long`` (low 32 bits) or ``Double`` (saturating)."""
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        return _INT_MAX if value >= _INT_MAX else _INT_MIN if value <= _INT_MIN else int(value)
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value > _INT_MAX else value


def _digits(text: str, pos: int) -> tuple[str, bool, int]:
    """Digits from ``pos``: (the digits from the first non-zero one, whether there were any, end)."""
    significant, seen = "", False
    while pos < len(text) and (d := _digit(text[pos])) is not None:
        if significant or d:
            significant += str(d)
        seen = True
        pos += 1
    return significant, seen, pos


def _parse_int(text: str, pos: int) -> tuple[int, int] | None:
    """``DecimalFormat.parse`` (integer only, no grouping) of one field, then ``intValue()``."""
    if text.startswith("NaN", pos):
        return 0, pos + 3
    negative = text.startswith("-", pos)
    pos += negative
    if text.startswith("\u221e", pos):  # DecimalFormatSymbols' infinity
        return (_INT_MIN if negative else _INT_MAX), pos + 1
    significant, seen, pos = _digits(text, pos)
    if not seen:
        return None
    exponent = 0
    if text.startswith("E", pos):  # an exponent only counts when it has digits that fit a long
        start = pos + 1 + text.startswith("-", pos + 1)
        exp_digits, exp_seen, end = _digits(text, start)
        if exp_seen and int(exp_digits or "0") < (1 << 63):
            exponent = _java_int(int(exp_digits or "0")) * (-1 if text[start - 1] == "-" else 1)
            pos = end
    value = decimal.Decimal(f"{'-' if negative else ''}0.{significant or '0'}E{len(significant) + exponent}")
    if value == value.to_integral_value() and -(1 << 63) <= value < (1 << 63):
        return _java_int(int(value)), pos
    return _java_int(float(value)), pos


def parse(text: str, pattern: str) -> int | None:
    """``new SimpleDateFormat(pattern).parse(text, new ParsePosition(0))`` in UTC: the instant in
    milliseconds, or ``None`` when it fails."""
    fields: dict[str, int] = {}
    pos = 0
    for element in _COMPILED[pattern]:
        if element[0] == "'":
            if pos >= len(text) or text[pos] != element[1]:
                return None
            pos += 1
            continue
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos >= len(text):
            return None
        parsed = _parse_int(text, pos)
        if parsed is None:
            return None
        fields[element], pos = parsed
    return _compute_millis(fields)


def _fixed_gregorian(year: int, month: int, day: int) -> int:
    prior = year - 1
    days = 365 * prior + prior // 4 - prior // 100 + prior // 400 + (367 * month - 362) // 12 + day
    if month > 2:
        days -= 1 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 2
    return days


def _fixed_julian(year: int, month: int, day: int) -> int:
    days = -2 + 365 * (year - 1) + (year - 1) // 4 + (367 * month - 362) // 12 + day
    if month > 2:
        days -= 1 if year % 4 == 0 else 2
    return days


def _compute_millis(fields: dict[str, int]) -> int:
    """``GregorianCalendar.computeTime`` (lenient, UTC) of the parsed fields."""
    year = fields.get("y", 1970)
    month0 = _java_int(fields["M"] - 1) if "M" in fields else 0
    time_of_day = ((fields.get("H", 0) * 60 + fields.get("m", 0)) * 60 + fields.get("s", 0)) * 1000 + fields.get("S", 0)
    days, time_of_day = divmod(time_of_day, MILLIS_PER_DAY)
    month_year, month0 = year + month0 // 12, month0 % 12
    day = fields.get("d", 1)
    gregorian = days + _fixed_gregorian(month_year, month0 + 1, day)
    julian = days + _fixed_julian(month_year, month0 + 1, day)
    fixed = gregorian if year >= 1582 and gregorian >= _CUTOVER_FIXED else julian
    millis = (fixed - _EPOCH_FIXED) * MILLIS_PER_DAY + time_of_day
    return ((millis + (1 << 63)) % (1 << 64)) - (1 << 63)  # Java's long arithmetic


def format_millis(millis: int) -> str:
    """``Values.dateFormatFor(date).format(date)`` in UTC: a time of day before 1970-01-02 (so
    never a Julian date), a date at midnight, a timestamp otherwise."""
    days, ms = divmod(millis, MILLIS_PER_DAY)
    seconds, ms = divmod(ms, 1000)
    time = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{ms:03d}Z"
    if millis < MILLIS_PER_DAY:
        return time
    date = _dt.date.fromordinal(days + _EPOCH_FIXED).isoformat()
    return date if ms == seconds == 0 else f"{date}T{time}"


def to_millis(value: _dt.date | _dt.time) -> int:
    """Java's ``Date.getTime()`` of a Conveyor Date (``date``), Time (``time``) or Timestamp
    (``datetime``, naive meaning UTC)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return (value - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)) // _dt.timedelta(milliseconds=1)
    if isinstance(value, _dt.date):
        return (value.toordinal() - _EPOCH_FIXED) * MILLIS_PER_DAY
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def to_python(kind: str, millis: int) -> _dt.date | _dt.time:
    """The Python value of an instant for the logical type ``kind`` (``date``, ``time`` or
    ``timestamp``); :class:`Unrepresentable` when Python has no such value."""
    days, ms = divmod(millis, MILLIS_PER_DAY)
    if kind == "time":
        if days != 0:
            raise Unrepresentable(f"Time of {millis} ms is not within one day")
        seconds, ms = divmod(ms, 1000)
        return _dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, ms * 1000)
    if not 1 <= days + _EPOCH_FIXED <= _dt.date.max.toordinal():
        raise Unrepresentable(f"{kind.capitalize()} of {millis} ms is outside the years 1 to 9999")
    date = _dt.date.fromordinal(days + _EPOCH_FIXED)
    if kind == "date":
        return date
    return _dt.datetime.combine(date, _dt.time(), _dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
