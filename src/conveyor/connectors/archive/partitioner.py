"""Which folder a record's file goes to: Confluent's storage partitioners.

``partitioner.class`` (default ``io.confluent.connect.storage.partitioner.DefaultPartitioner``;
the short class names work too)

``DefaultPartitioner``
    ``<topics.dir>/<topic>/partition=<kafka partition>/``.
``TimeBasedPartitioner``
    ``<topics.dir>/<topic>/<path.format of the record's time>/``: the time, floored to a
    multiple of ``partition.duration.ms`` in ``timezone``, printed with ``path.format``.
    Kafka partitions share these folders; file names keep them apart
    (``<topic>+<partition>+<start offset>``).
``HourlyPartitioner`` / ``DailyPartitioner``
    ``TimeBasedPartitioner`` with ``path.format`` ``'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH``
    and ``partition.duration.ms`` 3600000 (daily: without the hour, 86400000); the two keys
    are ignored.

Keys of the time-based partitioners, Confluent's:

``path.format`` (required for ``TimeBasedPartitioner``)
    a Joda-Time ``DateTimeFormat`` pattern, e.g. ``'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH``:
    ``'...'`` is literal text (``''`` a quote), ``YYYY``/``yyyy`` year, ``YY``/``yy``
    two-digit year, ``MM`` month, ``dd`` day, ``HH`` hour (00-23), ``mm`` minute, ``ss``
    second, ``DDD`` day of the year; single letters (``M``, ``d``, ``H``) print without
    padding. Other letters are refused. ``/`` separates folders.
``partition.duration.ms`` (int > 0, required for ``TimeBasedPartitioner``)
    the width of one time folder, in milliseconds.
``timezone`` (IANA name, default ``UTC``; Confluent requires it to be set)
``locale`` (accepted for compatibility; the supported patterns print no names, so it
    changes nothing)
``timestamp.extractor`` (``Wallclock`` default, ``Record``, ``RecordField``)
    whose time: the time of the ``put`` call (replays can land in other folders, as in
    Confluent's sink: not exactly-once), the record's Kafka timestamp, or a field of the
    record value (``timestamp.field``).
``timestamp.field`` (default ``timestamp``; dotted for nested structs)
    the value field holding the time: an int (milliseconds since the epoch), a
    ``datetime`` (Connect Timestamp; naive means UTC), a ``date``, or ISO-8601 text.

A record whose time cannot be determined is a :class:`~conveyor.api.DataError` (dead-letter
queue per ``errors.tolerance``), as Confluent's "Unable to determine timestamp".
"""

from __future__ import annotations

import datetime as dt
import re
import time
import zoneinfo
from collections.abc import Callable
from typing import Any

from conveyor.api import ConfigError, DataError, SinkRecord

PACKAGE = "io.confluent.connect.storage.partitioner."
DEFAULT = "DefaultPartitioner"
TIME_BASED = "TimeBasedPartitioner"
HOURLY = "HourlyPartitioner"
DAILY = "DailyPartitioner"
PARTITIONERS = (DEFAULT, TIME_BASED, HOURLY, DAILY)
EXTRACTORS = ("Wallclock", "Record", "RecordField")
_PRESETS = {
    HOURLY: ("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", 3_600_000),
    DAILY: ("'year'=YYYY/'month'=MM/'day'=dd", 86_400_000),
}
_TOKENS = {
    "yyyy": "%Y", "YYYY": "%Y", "yy": "%y", "YY": "%y", "MM": "%m", "dd": "%d", "HH": "%H",
    "mm": "%M", "ss": "%S", "DDD": "%j", "M": "\x01M", "d": "\x01d", "H": "\x01H",
}
_LEXEME = re.compile(r"'((?:[^']|'')*)'|([A-Za-z])\2*|([^A-Za-z']+)|(')")
_EPOCH = dt.datetime(1970, 1, 1)


def short_name(name: str) -> str:
    return name.strip().removeprefix(PACKAGE)


def joda_to_strftime(pattern: str) -> str:
    """A Joda-Time pattern (subset, see the module docstring) as a ``strftime`` format
    (with ``\\x01M``/``\\x01d``/``\\x01H`` marking the unpadded fields, filled in after it).

    Raises:
        ValueError: an unsupported letter or an unclosed quote.
    """
    out: list[str] = []
    pos = 0
    while pos < len(pattern):
        match = _LEXEME.match(pattern, pos)
        if match is None or match.group(4):
            raise ValueError(f"unclosed quote at position {pos}")
        quoted, letters, other = match.group(1), match.group(0) if match.group(2) else None, match.group(3)
        if quoted is not None:
            out.append((quoted.replace("''", "'") or "'").replace("%", "%%"))
        elif letters is not None:
            if letters not in _TOKENS:
                known = ", ".join(_TOKENS)
                raise ValueError(f"unsupported pattern letters {letters!r} (supported: {known}; quote literal text)")
            out.append(_TOKENS[letters])
        else:
            out.append(other.replace("%", "%%"))
        pos = match.end()
    return "".join(out)


class TimeFolders:
    """Time-based folder names: ``folder(record)`` → e.g. ``year=2026/month=11/day=27/hour=08``."""

    def __init__(self, path_format: str, duration_ms: int, timezone: str, extractor: str, field: str) -> None:
        self._format = joda_to_strftime(path_format)
        self._duration = duration_ms
        self._zone = zoneinfo.ZoneInfo(timezone)
        self._time_of: Callable[[SinkRecord], int] = {
            "Wallclock": lambda record: time.time_ns() // 1_000_000,
            "Record": _record_time,
            "RecordField": lambda record: _field_time(record, field),
        }[extractor]
        self._window = (1, 0, "")  # [low, high) UTC ms known to print as the folder

    def folder(self, record: SinkRecord) -> str:
        """The record's time folder (no leading or trailing ``/``).

        Raises:
            DataError: the record's time cannot be determined.
        """
        millis = self._time_of(record)
        low, high, folder = self._window
        if low <= millis < high:
            return folder
        local = dt.datetime.fromtimestamp(millis / 1000, self._zone)
        offset_ms = int(local.utcoffset().total_seconds() * 1000)  # type: ignore[union-attr]
        floored = (millis + offset_ms) // self._duration * self._duration
        start = _EPOCH + dt.timedelta(milliseconds=floored)  # local wall time, naive
        text = start.strftime(self._format)
        if "\x01" in text:
            for mark, number in (("\x01M", start.month), ("\x01d", start.day), ("\x01H", start.hour)):
                text = text.replace(mark, str(number))
        low = floored - offset_ms
        end_local = dt.datetime.fromtimestamp((low + self._duration) / 1000, self._zone)
        if end_local.utcoffset() == local.utcoffset():  # no offset change inside: cache the window
            self._window = (low, low + self._duration, text)
        return text


def _record_time(record: SinkRecord) -> int:
    if record.timestamp is None or record.timestamp < 0:
        raise DataError(
            f"Unable to determine timestamp using timestamp.extractor Record for record"
            f" {record.topic}-{record.kafka_partition}@{record.kafka_offset}: it has no timestamp"
        )
    return record.timestamp


def _field_time(record: SinkRecord, field: str) -> int:
    value: Any = record.value
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    try:
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if isinstance(value, dt.datetime):
            aware = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
            return int(aware.timestamp() * 1000)
        if isinstance(value, dt.date):
            return (value - dt.date(1970, 1, 1)).days * 86_400_000
        raise TypeError
    except (TypeError, ValueError):
        raise DataError(
            f"Unable to determine timestamp using timestamp.extractor RecordField for record"
            f" {record.topic}-{record.kafka_partition}@{record.kafka_offset}: field {field!r} is"
            f" {type(value).__name__ if value is not None else 'missing'}, not epoch milliseconds,"
            " a timestamp, a date or ISO-8601 text"
        ) from None


def time_folders(
    partitioner: str, path_format: str | None, duration_ms: int, timezone: str, extractor: str, field: str
) -> TimeFolders | None:
    """The time folders of ``partitioner.class`` (``None`` for ``DefaultPartitioner``).

    Raises:
        ConfigError: naming ``partitioner.class``, ``path.format``, ``partition.duration.ms``,
            ``timezone`` or ``timestamp.extractor``.
    """
    name = short_name(partitioner)
    if name not in PARTITIONERS:
        known = ", ".join(PACKAGE + p for p in PARTITIONERS)
        raise ConfigError({"partitioner.class": f"unsupported partitioner {partitioner!r}; supported: {known}"})
    if name == DEFAULT:
        return None
    errors: dict[str, str] = {}
    if name in _PRESETS:
        path_format, duration_ms = _PRESETS[name]
    else:
        if not path_format:
            errors["path.format"] = "required by TimeBasedPartitioner, e.g. 'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"
        if duration_ms <= 0:
            errors["partition.duration.ms"] = "required by TimeBasedPartitioner: a positive number of milliseconds"
    if path_format:
        try:
            joda_to_strftime(path_format)
        except ValueError as exc:
            errors["path.format"] = str(exc)
        if path_format.startswith("/") or path_format.rstrip().endswith("/"):
            errors["path.format"] = "must not start or end with '/'"
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        errors["timezone"] = f"unknown time zone {timezone!r} (use an IANA name such as UTC or Europe/Berlin)"
    if extractor not in EXTRACTORS:
        errors["timestamp.extractor"] = f"must be one of {', '.join(EXTRACTORS)} (got {extractor!r})"
    if errors:
        raise ConfigError(errors)
    assert path_format is not None
    return TimeFolders(path_format, duration_ms, timezone, extractor, field)
