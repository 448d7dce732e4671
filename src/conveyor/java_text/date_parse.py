"""``SimpleDateFormat.parse`` of any pattern of the letters below, lenient and in UTC, as Kafka
Connect's ``TimestampConverter`` parses a string timestamp (``new SimpleDateFormat(format)``,
time zone UTC, default locale English).

Parsed as Java parses them:

* numbers (``y M d H k K h m s S``; ``M``/``MM`` numeric): spaces and tabs before a field are
  skipped; a field followed directly by another numeric field reads exactly its letter count of
  characters (``yyyyMMdd``), otherwise every digit there is; values out of range roll over
  (``2024-13-01`` is 2025-01-01) as a lenient ``GregorianCalendar`` does (Julian before 1582);
  ``y``/``yy`` with exactly two digits is a year within 80 years before and 20 after now;
  ``h`` 12 and ``k`` 24 are hour 0;
* text (``MMM``/``MMMM`` month and ``E`` day names, long or short, and ``a``), case-insensitive,
  the longest name that matches; a day name is read and, as in Java when the date has a day of
  the month, does not move the date;
* zones: ``Z`` and ``z`` take ``+hhmm``/``-hhmm``, ``GMT``, ``GMT+h[h][:mm]`` and ``UTC``; ``X``
  takes ``Z`` and ``+hh``, ``+hhmm`` or ``+hh:mm`` for one, two or three ``X``;
* literal text must match exactly; text after the pattern's last field is ignored.

Not parsed: the letters ``G Y L w W D F u`` (:class:`UnsupportedPattern` names the letter) and
zone names other than ``UTC`` and ``GMT`` (``PST``), which fail to parse.
"""

from __future__ import annotations

import datetime as _dt

from conveyor.java_text.date_format import JavaDateFormat
from conveyor.java_text.dates import _compute_millis, _parse_int

_NUMERIC = frozenset("yMdHkKhmsS")
_SUPPORTED = _NUMERIC | frozenset("EaZzX")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTH_NAMES = [(name, i) for i, long in enumerate(_MONTHS) for name in (long, long[:3])]
_DAY_NAMES = [(name, i) for i, long in enumerate(_DAYS) for name in (long, long[:3])]
_AM_PM = [("AM", 0), ("PM", 1)]
_MILLIS_PER_MINUTE = 60_000


class UnsupportedPattern(ValueError):
    """The pattern has a letter this parser does not read; the message names it."""


def _numeric(token: str | tuple[str, int]) -> bool:
    return isinstance(token, tuple) and token[0] in _NUMERIC and not (token[0] == "M" and token[1] > 2)


def _match_name(text: str, pos: int, names: list[tuple[str, int]]) -> tuple[int, int] | None:
    """``matchString``: the longest name at ``pos`` (case-insensitive) and its index."""
    best: tuple[int, int] | None = None
    for name, index in names:
        if text[pos:pos + len(name)].lower() == name.lower() and (best is None or len(name) > best[1] - pos):
            best = (index, pos + len(name))
    return best


def _numeric_zone(text: str, pos: int, sign: int, count: int, colon: bool) -> tuple[int, int] | None:
    """``subParseNumericZone``: ``hh[[:]mm]`` after a sign, as an offset in milliseconds."""
    def digit(at: int) -> int | None:
        return int(text[at]) if at < len(text) and "0" <= text[at] <= "9" else None

    hours = digit(pos)
    if hours is None:
        return None
    pos += 1
    second = digit(pos)
    if second is not None:
        hours, pos = hours * 10 + second, pos + 1
    elif count > 0 or not colon or pos >= len(text):
        return None
    if hours > 23:
        return None
    minutes = 0
    if count != 1:
        if colon:
            if pos >= len(text) or text[pos] != ":":
                return None
            pos += 1
        tens, units = digit(pos), digit(pos + 1)
        if tens is None or units is None or tens * 10 + units > 59:
            return None
        minutes, pos = tens * 10 + units, pos + 2
    return sign * (hours * 60 + minutes) * _MILLIS_PER_MINUTE, pos


def _zone(text: str, pos: int, letter: str, count: int) -> tuple[int, int] | None:
    """An offset in milliseconds and the position after it, for ``z``/``Z`` or ``X``."""
    if pos >= len(text):
        return None
    c = text[pos]
    if letter == "X":
        if c == "Z":
            return 0, pos + 1
        if c not in "+-":
            return None
        return _numeric_zone(text, pos + 1, 1 if c == "+" else -1, count, count == 3)
    if c in "+-":
        return _numeric_zone(text, pos + 1, 1 if c == "+" else -1, 0, False)
    if text[pos:pos + 3].upper() == "GMT":
        pos += 3
        if pos < len(text) and text[pos] in "+-":
            return _numeric_zone(text, pos + 1, 1 if text[pos] == "+" else -1, 0, True)
        return 0, pos
    if text[pos:pos + 3].upper() == "UTC":
        return 0, pos + 3
    return None


class DateParser:
    """A ``SimpleDateFormat`` pattern compiled for :meth:`parse`.

    Raises:
        ValueError: an illegal pattern (as :class:`JavaDateFormat`).
        UnsupportedPattern: a letter this parser does not read (see the module).
    """

    def __init__(self, pattern: str, now: _dt.datetime | None = None) -> None:
        self.pattern = pattern
        self._tokens = JavaDateFormat(pattern).tokens
        for token in self._tokens:
            if isinstance(token, tuple) and token[0] not in _SUPPORTED:
                raise UnsupportedPattern(f"parsing the pattern letter '{token[0]}' is not supported")
        century_start = (now or _dt.datetime.now(_dt.timezone.utc)).replace(tzinfo=_dt.timezone.utc)
        self._century_start = century_start.replace(year=century_start.year - 80, day=min(century_start.day, 28))
        self._century_start_ms = int(self._century_start.timestamp() * 1000)

    def parse(self, text: str) -> int | None:
        """The instant (milliseconds since the epoch) ``text`` gives, or ``None`` when Java's
        ``parse`` throws a ``ParseException``."""
        fields: dict[str, int] = {}
        hour_of_day: tuple[int, int] | None = None  # (value, order set)
        hour: tuple[int, int] | None = None
        am_pm: tuple[int, int] | None = None
        offset, ambiguous_year, pos = 0, False, 0
        for i, token in enumerate(self._tokens):
            if isinstance(token, str):
                if not text.startswith(token, pos):
                    return None
                pos += len(token)
                continue
            letter, count = token
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text):
                return None
            if _numeric(token):
                abutting = i + 1 < len(self._tokens) and _numeric(self._tokens[i + 1])
                parsed = _parse_int(text[:pos + count] if abutting else text, pos)
                if parsed is None:
                    return None
                value, end = parsed
                if letter == "y" and count <= 2 and end - pos == 2 and text[pos:end].isdigit():
                    value, ambiguous_year = self._two_digit_year(value)
                elif letter == "h" and value == 12 or letter == "k" and value == 24:
                    value = 0
                if letter in "Hk":
                    hour_of_day = (value, i)
                elif letter in "hK":
                    hour = (value, i)
                else:
                    fields[letter] = value
                pos = end
            elif letter == "M":
                matched = _match_name(text, pos, _MONTH_NAMES)
                if matched is None:
                    return None
                fields["M"], pos = matched[0] + 1, matched[1]
            elif letter in "Ea":
                matched = _match_name(text, pos, _DAY_NAMES if letter == "E" else _AM_PM)
                if matched is None:
                    return None
                if letter == "a":
                    am_pm = (matched[0], i)
                pos = matched[1]
            else:
                zone = _zone(text, pos, letter, count)
                if zone is None:
                    return None
                offset, pos = zone
        fields["H"] = _hour(hour_of_day, hour, am_pm)
        millis = _compute_millis(fields) - offset
        if ambiguous_year and millis < self._century_start_ms:
            fields["y"] += 100
            millis = _compute_millis(fields) - offset
        return millis

    def _two_digit_year(self, value: int) -> tuple[int, bool]:
        start = self._century_start.year
        ambiguous = start % 100
        return value + start // 100 * 100 + (100 if value < ambiguous else 0), value == ambiguous


def _hour(hour_of_day: tuple[int, int] | None, hour: tuple[int, int] | None, am_pm: tuple[int, int] | None) -> int:
    """``GregorianCalendar``'s hour of the day: ``HOUR_OF_DAY`` or ``HOUR`` + 12 × ``AM_PM``,
    whichever was set last."""
    twelve = max(hour[1] if hour else -1, am_pm[1] if am_pm else -1)
    if hour_of_day is not None and hour_of_day[1] > twelve:
        return hour_of_day[0]
    if twelve < 0:
        return 0
    return (hour[0] if hour else 0) + 12 * (am_pm[0] if am_pm else 0)
