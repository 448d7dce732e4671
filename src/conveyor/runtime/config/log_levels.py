"""Log levels changed at run time, as Kafka Connect's ``/admin/loggers`` (KIP-495, KIP-976):
Python's loggers under Log4j's level names. Called on the driver's REST worker threads and
on an executor's control-link thread; :mod:`logging` takes its own lock for each change.

Log4j's levels map to Python's: ``OFF`` above ``CRITICAL``, ``FATAL`` to ``CRITICAL``,
``ERROR``, ``WARN`` to ``WARNING``, ``INFO``, ``DEBUG``, ``TRACE`` to 5 (below ``DEBUG``;
Python has none) and ``ALL`` to 1. A level is read back under its Log4j name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

ROOT = "root"
"""Connect's name of the root logger."""
TRACE = 5
LEVELS = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR,
          "WARN": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE, "ALL": 1}
_NAMES = {number: name for name, number in LEVELS.items()}
_lock = threading.Lock()
_last_modified: dict[str, int] = {}  # logger name -> epoch ms of its last change here
_overrides: dict[str, str] = {}  # logger name -> Log4j level, in the order they were set


class UnknownLogger(LookupError):
    """No logger of that name exists in this process."""


class InvalidLevel(ValueError):
    """The level is none of Log4j's names."""


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


def _name_of(level: int) -> str:
    return _NAMES.get(level) or logging.getLevelName(level)


def _known() -> dict[str, logging.Logger]:
    return {name: logger for name, logger in logging.root.manager.loggerDict.items()
            if isinstance(logger, logging.Logger)}


def all_levels() -> dict[str, dict[str, str | int | None]]:
    """``{logger: {"level", "last_modified"}}`` of the root logger and every logger with a
    level of its own, as Connect's ``GET /admin/loggers`` (``last_modified``: epoch ms of the
    last change through :func:`set_level`, or ``None``)."""
    out = {ROOT: level(ROOT)}
    for name, logger in sorted(_known().items()):
        if logger.level != logging.NOTSET:
            out[name] = {"level": _name_of(logger.level), "last_modified": _last_modified.get(name)}
    return out


def level(name: str) -> dict[str, str | int | None]:
    """``{"level", "last_modified"}`` of logger ``name`` (its effective level).

    Raises:
        UnknownLogger: no logger of that name exists in this process.
    """
    if name != ROOT and name not in _known():
        raise UnknownLogger(name)
    return {"level": _name_of(_logger(name).getEffectiveLevel()), "last_modified": _last_modified.get(name)}


def parse_level(text: str) -> int:
    """The Python level of a Log4j level name (any case).

    Raises:
        InvalidLevel: ``text`` is none of :data:`LEVELS`.
    """
    number = LEVELS.get(text.strip().upper()) if isinstance(text, str) else None
    if number is None:
        raise InvalidLevel(text)
    return number


def set_level(name: str, text: str) -> list[str]:
    """Set logger ``name`` and every logger below it to the Log4j level ``text``, as Connect's
    ``PUT /admin/loggers/{name}`` (``root``: every logger); a logger of that name is made if
    none exists yet. Returns the names of the loggers whose level changed, sorted (as Connect:
    one already at that level is not named).

    Raises:
        InvalidLevel: ``text`` is none of :data:`LEVELS`.
    """
    number = parse_level(text)
    with _lock:
        changed = [name] if name == ROOT or name in _known() else []
        prefix = "" if name == ROOT else name + "."
        changed += [other for other in _known() if other.startswith(prefix) and other != name]
        if name != ROOT and name not in changed:
            changed.append(name)
        changed = [other for other in changed if _logger(other).level != number]
        now = int(time.time() * 1000)
        for other in changed:
            _logger(other).setLevel(number)
            _last_modified[other] = now
            _overrides.pop(other, None)
            _overrides[other] = _name_of(number)
    return sorted(changed)


def overrides() -> dict[str, str]:
    """Every level set through :func:`set_level` in this process, ``{logger: Log4j level}``
    in the order set: what an executor applies to follow the driver."""
    with _lock:
        return dict(_overrides)


def directive() -> tuple[tuple[str, str], ...]:
    """:func:`overrides` as a :class:`~conveyor.control.protocol.Directive`'s ``log_levels``."""
    return tuple(overrides().items())


def apply(levels: Mapping[str, str]) -> None:
    """Set each logger of ``levels`` (as :func:`overrides` gives them) to its level, in order;
    a level that is none of Log4j's is skipped."""
    for name, text in levels.items():
        try:
            _logger(name).setLevel(parse_level(text))
        except InvalidLevel:
            continue
