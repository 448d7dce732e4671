"""Java's text for numbers, as ``String.valueOf`` prints a Connect value's boxed number.

* ``long`` (:func:`java_long`): Kafka Connect's ``JsonConverter`` reads a schemaless integral
  JSON number with Jackson's ``longValue()``, which keeps the low 64 bits of a larger one.
* ``double`` / ``float`` (:func:`double_to_string`, :func:`float_to_string`): the
  specification of ``Double.toString`` / ``Float.toString`` since JDK 19 (JDK-4511638): the
  shortest decimal that reads back as the same value (at least two digits when the shortest
  has one, the closest to the value among them, ties to an even last digit), written plain
  for magnitudes in [10^-3, 10^7) and as ``d.dddE<exp>`` outside; ``NaN``, ``Infinity``,
  ``-0.0``.
* ``BigDecimal`` (:func:`big_decimal_to_string`): ``BigDecimal.toString``, the same
  "to-scientific-string" rule as Python's ``str(Decimal)``, without a negative zero.

And the other way (for Kafka Connect's ``Values.parseString``): :func:`parse_big_decimal` is
``new BigDecimal(String)``, :func:`big_decimal_float_value` its ``floatValue()``,
:func:`to_float32` Java's ``(float)`` cast of a double, and :class:`Float32` a ``float`` that
stands for a Java ``Float``.
"""

from __future__ import annotations

import decimal
import math
import re
import struct
from collections.abc import Callable

_F32 = struct.Struct(">f")
_TWO_64 = 1 << 64
_TWO_63 = 1 << 63
_CONTEXTS: dict[tuple[int, str], decimal.Context] = {}


def java_long(value: int) -> int:
    """``value`` as a Java ``long``: its low 64 bits, two's complement."""
    if -_TWO_63 <= value < _TWO_63:
        return value
    return ((value + _TWO_63) % _TWO_64) - _TWO_63


def double_to_string(value: float) -> str:
    """``Double.toString(value)`` (JDK 19+)."""
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:  # plain notation: Python's repr has the same digits and layout
        return repr(value)
    special = _special(value)
    if special is not None:
        return special
    digits, exponent = _repr_digits(magnitude)
    if len(digits) == 1:  # Java considers two-digit decimals too and takes the closest
        digits, exponent = _closest_two_digit(magnitude, lambda d: float(d) == magnitude)
    return _layout("-" if value < 0 else "", digits, exponent)


def float_to_string(value: float) -> str:
    """``Float.toString((float) value)`` (JDK 19+); ``value`` is first rounded to 32 bits."""
    special = _special(value)
    if special is not None:
        return special
    try:
        packed = _F32.pack(value)
    except OverflowError:  # beyond float's range: Java's (float) cast gives an infinity
        return "Infinity" if value > 0 else "-Infinity"
    single = _F32.unpack(packed)[0]
    special = _special(single)  # a double too small for a float becomes a signed zero
    if special is not None:
        return special
    magnitude = abs(single)
    target = _F32.pack(magnitude)

    def reads_back(candidate: decimal.Decimal) -> bool:
        try:
            return _F32.pack(float(candidate)) == target
        except OverflowError:
            return False

    exact = decimal.Decimal(magnitude)
    for length in range(1, 10):
        found = _closest_of_length(exact, length, reads_back)
        if found is not None:
            if length == 1:
                found = _closest_of_length(exact, 2, reads_back) or found
            digits, exponent = _digits_of(found)
            return _layout("-" if single < 0 else "", digits, exponent)
    digits, exponent = _repr_digits(magnitude)  # unreachable: 9 digits always identify a float
    return _layout("-" if single < 0 else "", digits, exponent)


def big_decimal_to_string(value: decimal.Decimal) -> str:
    """``BigDecimal.toString()``: plain unless the scale is negative or the adjusted exponent
    is below -6 (``1E+3``, ``1E-7``); Java has no negative zero."""
    if not value.is_finite():
        return str(value)  # no BigDecimal is NaN or infinite
    if value.is_zero():
        value = value.copy_abs()
    return str(value)


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return None


def _repr_digits(magnitude: float) -> tuple[str, int]:
    """Python's shortest round-tripping digits of a positive double (the closest such decimal)
    and the decimal exponent of the first digit."""
    return _digits_of(decimal.Decimal(repr(magnitude)))


def _digits_of(number: decimal.Decimal) -> tuple[str, int]:
    _sign, digit_tuple, exp = number.as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digit_tuple))
    exponent = len(digits) - 1 + exp
    return digits.rstrip("0") or "0", exponent


def _context(precision: int, rounding: str) -> decimal.Context:
    ctx = _CONTEXTS.get((precision, rounding))
    if ctx is None:
        ctx = _CONTEXTS[(precision, rounding)] = decimal.Context(prec=precision, rounding=rounding,
                                                                 Emin=-999999, Emax=999999)
    return ctx


def _closest_of_length(exact: decimal.Decimal, length: int,
                       reads_back: Callable[[decimal.Decimal], bool]) -> decimal.Decimal | None:
    """The decimal of at most ``length`` significant digits closest to ``exact`` that reads back
    as the same binary value (ties: even last digit), or ``None``. Only the two neighbours
    that bracket ``exact`` can be the closest."""
    below = _context(length, decimal.ROUND_FLOOR).plus(exact)
    above = _context(length, decimal.ROUND_CEILING).plus(exact)
    candidates = [c for c in {below, above} if reads_back(c)]
    if not candidates:
        return None

    def rank(candidate: decimal.Decimal) -> tuple[decimal.Decimal, int]:
        last = candidate.as_tuple().digits[-1] if length == len(candidate.as_tuple().digits) else 0
        return abs(candidate - exact), last % 2

    return min(candidates, key=rank)


def _closest_two_digit(magnitude: float, reads_back: Callable[[decimal.Decimal], bool]) -> tuple[str, int]:
    exact = decimal.Decimal(magnitude)
    found = _closest_of_length(exact, 2, reads_back)
    return _digits_of(found) if found is not None else _repr_digits(magnitude)


def _layout(sign: str, digits: str, exponent: int) -> str:
    """Java's layout of ``0.d1d2... x 10^(exponent+1)``: plain in [10^-3, 10^7), else
    computerized scientific notation; at least one digit after the point."""
    if -3 <= exponent < 7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1:] or "0"
            return f"{sign}{whole}.{fraction}"
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


# --- parsing -------------------------------------------------------------------------

_BIG_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?)(\d+))?")  # \d: any Unicode digit
_INT32 = range(-(1 << 31), 1 << 31)
_FLOAT32_MAX = 3.4028234663852886e38


class Float32(float):
    """A Java ``Float``: a ``float`` whose value is a 32-bit float."""

    __slots__ = ()
    __repr__ = float.__repr__


def to_float32(value: float) -> float:
    """Java's ``(float) value``: the nearest 32-bit float (ties to even), infinite beyond its range."""
    try:
        return _F32.unpack(_F32.pack(value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def parse_big_decimal(text: str) -> tuple[int, int] | None:
    """``new BigDecimal(text)`` as (unscaled value, scale), or ``None`` where Java throws
    NumberFormatException: an optional sign, digits with at most one point, an optional
    exponent of at most 10 digits; exponent and scale within an int."""
    match = _BIG_DECIMAL.fullmatch(text)
    if not match or any(ord(c) > 0xFFFF for c in text):  # Java reads UTF-16 units: no astral digits
        return None
    sign, whole, fraction, exp_sign, exp_digits = match.groups()
    fraction = fraction or ""
    if not whole and not fraction:
        return None
    exponent = 0
    if exp_digits is not None:
        exponent = int(exp_digits)
        if len(str(exponent)) > 10:
            return None
        exponent = -exponent if exp_sign == "-" else exponent
        if exponent not in _INT32:
            return None
    scale = len(fraction) - exponent
    if scale not in _INT32:
        return None
    unscaled = int(whole + fraction)
    return (-unscaled if sign == "-" else unscaled), scale


def big_decimal_float_value(unscaled: int, scale: int) -> float:
    """``BigDecimal.floatValue()`` of ``unscaled × 10^-scale``: the nearest float, ties to even."""
    sign = -1.0 if unscaled < 0 else 1.0
    n = abs(unscaled)
    adjusted = len(str(n)) - 1 - scale
    if n == 0 or adjusted < -46:  # below half the smallest float
        return sign * 0.0
    if adjusted > 39:
        return sign * math.inf
    num, den = (n * 10**-scale, 1) if scale <= 0 else (n, 10**scale)
    e2 = max(num.bit_length() - den.bit_length() - 24, -149)  # 24 bits of mantissa, or subnormal
    while True:
        a, b = (num, den << e2) if e2 >= 0 else (num << -e2, den)
        mantissa, remainder = divmod(a, b)
        if mantissa < 1 << 24:
            break
        e2 += 1
    if 2 * remainder > b or (2 * remainder == b and mantissa & 1):
        mantissa += 1
    result = math.ldexp(mantissa, e2)
    return sign * (math.inf if result > _FLOAT32_MAX else result)
