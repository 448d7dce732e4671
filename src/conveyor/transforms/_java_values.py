"""Java's primitive conversions, for ``Cast``.

* :func:`narrow` — ``Number.byteValue()``/``shortValue()``/``intValue()``/``longValue()``:
  integers wrap around; floating-point values truncate toward zero and saturate at
  the int (or long) bounds first, NaN giving 0; decimals drop the fraction and wrap.
* :func:`parse_integer` — ``Byte.parseByte``/``Short.parseShort``/``Integer.parseInt``/
  ``Long.parseLong``: an optional sign and ASCII digits, within range.
* :func:`parse_floating` — ``Float.parseFloat``/``Double.parseDouble``.
* :func:`double_to_string` / :func:`float_to_string` — ``Double.toString`` /
  ``Float.toString`` (``1.0E10``, ``1.5``, ``NaN``).
"""

from __future__ import annotations

import decimal as _decimal
import math
import re
import struct

_F32 = struct.Struct("<f")
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


def to_float32(value: float) -> float:
    """``value`` rounded to the nearest 32-bit float (infinite beyond its range)."""
    if not math.isfinite(value):
        return value
    try:
        return _F32.unpack(_F32.pack(value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def _java_digits(value: float, shortest: str) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = _decimal.Decimal(shortest).as_tuple()
    digit_text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    # value = 0.d1d2... × 10^point
    point = len(digits) + exponent
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return prefix + "0." + "0" * (-point) + digit_text
        whole = digit_text[:point].ljust(point, "0")
        fraction = digit_text[point:] or "0"
        return prefix + whole + "." + fraction
    mantissa = digit_text[0] + "." + (digit_text[1:] or "0")
    return f"{prefix}{mantissa}E{point - 1}"


def double_to_string(value: float) -> str:
    """``Double.toString(value)``."""
    return _java_digits(value, repr(value))


def float_to_string(value: float) -> str:
    """``Float.toString((float) value)``: the shortest text that reads back as the float."""
    single = to_float32(value)
    if not math.isfinite(single) or single == 0:
        return _java_digits(single, "0")
    packed = _F32.pack(single)
    for precision in range(1, 10):
        text = f"{single:.{precision}g}"
        if _F32.pack(float(text)) == packed:
            return _java_digits(single, text)
    return _java_digits(single, repr(single))
