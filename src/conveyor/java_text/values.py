"""Java's primitive conversions, for ``Cast``.

* :func:`narrow` — ``Number.byteValue()``/``shortValue()``/``intValue()``/``longValue()``:
  integers wrap around; floating-point values truncate toward zero and saturate at
  the int (or long) bounds first, NaN giving 0; decimals drop the fraction and wrap.
* :func:`parse_integer` — ``Byte.parseByte``/``Short.parseShort``/``Integer.parseInt``/
  ``Long.parseLong``: an optional sign and ASCII digits, within range.
* :func:`parse_floating` — ``Float.parseFloat``/``Double.parseDouble``.
* :func:`double_to_string` / :func:`float_to_string` — ``Double.toString`` /
  ``Float.toString`` (``1.0E10``, ``1.5``, ``NaN``), from :mod:`conveyor.java_text.numbers`.
"""

from __future__ import annotations

import decimal as _decimal
import math
import re

from conveyor.java_text.numbers import double_to_string, float_to_string, to_float32

__all__ = ["double_to_string", "float_to_string", "narrow", "parse_floating", "parse_integer", "to_float32"]

_INTEGER = re.compile(r"[+-]?[0-9]+")
_FLOATING = re.compile(r"\s*[+-]?(NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?\s*")


def _wrap(value: int, bits: int) -> int:
    mask = (1 << bits) - 1
    value &= mask
    return value - (1 << bits) if value >> (bits - 1) else value


def narrow(value: object, bits: int) -> int:
    """A Java ``Number`` narrowed to a ``bits``-wide integer."""
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        wide = 64 if bits == 64 else 32
        low, high = -(1 << (wide - 1)), (1 << (wide - 1)) - 1
        if math.isinf(value):
            truncated = high if value > 0 else low
        else:
            truncated = max(low, min(high, int(value)))
        return _wrap(truncated, bits)
    if isinstance(value, _decimal.Decimal):
        if not value.is_finite():
            return 0
        return _wrap(int(value), bits)
    return _wrap(int(value), bits)  # type: ignore[call-overload]


def parse_integer(text: str, bits: int) -> int:
    """Parse as Java's ``parseInt`` family; ``ValueError`` when invalid or out of range."""
    if not _INTEGER.fullmatch(text):
        raise ValueError(f'For input string: "{text}"')
    value = int(text)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f'Value out of range. Value:"{text}"')
    return value


def parse_floating(text: str) -> float:
    """Parse as ``Double.parseDouble``; ``ValueError`` when invalid."""
    match = _FLOATING.fullmatch(text)
    if not match:
        raise ValueError(f'For input string: "{text}"')
    body = match.group(1)
    if body == "NaN":
        return math.nan
    if body == "Infinity":
        return -math.inf if text.strip().startswith("-") else math.inf
    return float(text.strip().rstrip("fFdD"))


