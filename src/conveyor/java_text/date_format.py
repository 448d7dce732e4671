"""``java.text.SimpleDateFormat`` patterns, formatted in UTC with English names.

Supported letters (the count of repeated letters matters as in Java):

=======  ===================================  ==========================
letter   meaning                              examples
=======  ===================================  ==========================
``G``    era                                  ``AD``
``y``    year (``yy``: two digits)            ``2024``, ``24``
``Y``    week year                            ``2024``
``M``    month (``MMM`` short, ``MMMM`` long) ``07``, ``Jul``, ``July``
``L``    month, standalone form               as ``M``
``w``    week of year                         ``27``
``W``    week of month                        ``2``
``D``    day of year                          ``189``
``d``    day of month                         ``07``
``F``    day of week in month                 ``1``
``E``    day name (``EEEE`` long)             ``Sun``, ``Sunday``
``u``    day number of week (1 = Monday)      ``7``
``a``    AM/PM marker                         ``PM``
``H``    hour 0-23, ``k`` hour 1-24           ``00``, ``24``
``K``    hour 0-11, ``h`` hour 1-12           ``0``, ``12``
``m``    minute, ``s`` second                 ``05``
``S``    millisecond                          ``007``
``z``    time zone (``zzzz`` long)            ``UTC``
``Z``    RFC 822 zone                         ``+0000``
``X``    ISO 8601 zone                        ``Z``
=======  ===================================  ==========================

Text between single quotes is literal (``''`` is a quote); other non-letters are
literal; any other ASCII letter is an error, as in Java. Weeks follow Java's default
(US) rules: weeks start on Sunday and week 1 is the week containing January 1.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_LETTERS = set("GyYMLwWDdFEuaHkKhmsSzZX")

Piece = Callable[[_dt.datetime, int], str]


def _num(value: int, count: int) -> str:
    return str(value).zfill(count) if value >= 0 else "-" + str(-value).zfill(count)


def _week_start(year: int) -> _dt.date:
    """The Sunday starting week 1 of ``year`` (the week containing January 1)."""
    jan1 = _dt.date(year, 1, 1)
    return jan1 - _dt.timedelta(days=(jan1.weekday() + 1) % 7)


def _week_of_year(d: _dt.datetime) -> tuple[int, int]:
    day = d.date()
    if day >= _week_start(d.year + 1):
        return d.year + 1, 1
    return d.year, (day - _week_start(d.year)).days // 7 + 1


def _year(d: _dt.datetime, count: int) -> str:
    return _num(d.year % 100, 2) if count == 2 else _num(d.year, count)


def _week_year(d: _dt.datetime, count: int) -> str:
    year = _week_of_year(d)[0]
    return _num(year % 100, 2) if count == 2 else _num(year, count)


def _month(d: _dt.datetime, count: int) -> str:
    if count >= 4:
        return _MONTHS[d.month - 1]
    if count == 3:
        return _MONTHS[d.month - 1][:3]
    return _num(d.month, count)


def _week_of_month(d: _dt.datetime, count: int) -> str:
    first = d.replace(day=1)
    offset = (first.weekday() + 1) % 7
    return _num((d.day - 1 + offset) // 7 + 1, count)


_PIECES: dict[str, Piece] = {
    "G": lambda d, c: "AD",
    "y": _year,
    "Y": _week_year,
    "M": _month,
    "L": _month,
    "w": lambda d, c: _num(_week_of_year(d)[1], c),
    "W": _week_of_month,
    "D": lambda d, c: _num(d.timetuple().tm_yday, c),
    "d": lambda d, c: _num(d.day, c),
    "F": lambda d, c: _num((d.day - 1) // 7 + 1, c),
    "E": lambda d, c: _DAYS[d.weekday()] if c >= 4 else _DAYS[d.weekday()][:3],
    "u": lambda d, c: _num(d.isoweekday(), c),
    "a": lambda d, c: "AM" if d.hour < 12 else "PM",
    "H": lambda d, c: _num(d.hour, c),
    "k": lambda d, c: _num(d.hour or 24, c),
    "K": lambda d, c: _num(d.hour % 12, c),
    "h": lambda d, c: _num(d.hour % 12 or 12, c),
    "m": lambda d, c: _num(d.minute, c),
    "s": lambda d, c: _num(d.second, c),
    "S": lambda d, c: _num(d.microsecond // 1000, c),
    "z": lambda d, c: "Coordinated Universal Time" if c >= 4 else "UTC",
    "Z": lambda d, c: "+0000",
    "X": lambda d, c: "Z",
}

#: Milliseconds over which a letter's output cannot change (UTC has no DST), so a
#: formatted timestamp can be reused for every instant in the same slot.
_GRANULARITY = {
    "S": 1,
    "s": 1000,
    "m": 60_000,
    "H": 3_600_000,
    "k": 3_600_000,
    "K": 3_600_000,
    "h": 3_600_000,
    "a": 3_600_000,
}
_DAY = 86_400_000


def _joined_literals(items: list[str | tuple[Piece, int]], fields: list[tuple[str, int]]
                     ) -> list[str | tuple[str, int]]:
    """The pattern as literal text and ``(letter, count)`` fields, adjacent literals joined."""
    out: list[str | tuple[str, int]] = []
    next_field = iter(fields)
    for item in items:
        if isinstance(item, str):
            if out and isinstance(out[-1], str):
                out[-1] += item
            else:
                out.append(item)
        else:
            out.append(next(next_field))
    return out


class JavaDateFormat:
    """A compiled ``SimpleDateFormat`` pattern; :meth:`format` takes epoch milliseconds.
    ``tokens`` is the pattern as literal text and ``(letter, count)`` fields, in order.

    Raises:
        ValueError: ``Illegal pattern character 'x'`` or ``Unterminated quote``.
    """

    __slots__ = ("_cache", "_items", "granularity", "pattern", "tokens")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        items: list[str | tuple[Piece, int]] = []
        tokens: list[str | tuple[str, int]] = []
        granularity = _DAY
        i = 0
        n = len(pattern)
        while i < n:
            c = pattern[i]
            if c == "'":
                if i + 1 < n and pattern[i + 1] == "'":  # '' outside quotes: one quote
                    items.append("'")
                    i += 2
                    continue
                j = i + 1
                text = []
                while True:
                    if j >= n:
                        raise ValueError("Unterminated quote")
                    if pattern[j] == "'":
                        if j + 1 < n and pattern[j + 1] == "'":
                            text.append("'")
                            j += 2
                            continue
                        break
                    text.append(pattern[j])
                    j += 1
                items.append("".join(text))
                i = j + 1
                continue
            if ("a" <= c <= "z") or ("A" <= c <= "Z"):
                if c not in _LETTERS:
                    raise ValueError(f"Illegal pattern character '{c}'")
                j = i
                while j < n and pattern[j] == c:
                    j += 1
                items.append((_PIECES[c], j - i))
                tokens.append((c, j - i))
                granularity = min(granularity, _GRANULARITY.get(c, _DAY))
                i = j
                continue
            items.append(c)
            i += 1
        self._items = tuple(items)
        self.tokens = tuple(_joined_literals(items, tokens))
        self.granularity = granularity
        self._cache: dict[int, str] = {}

    def format_datetime(self, d: _dt.datetime) -> str:
        return "".join(item if isinstance(item, str) else item[0](d, item[1]) for item in self._items)

    def format(self, millis: int) -> str:
        """``millis`` (since the epoch) formatted in UTC."""
        slot = millis // self.granularity
        cache = self._cache
        text = cache.get(slot)
        if text is None:
            text = self.format_datetime(_EPOCH + _dt.timedelta(milliseconds=millis))
            if len(cache) >= 1024:
                cache.clear()
            cache[slot] = text
        return text
