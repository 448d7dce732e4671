"""Kafka Connect's ``org.apache.kafka.connect.data.Values`` (4.1.1): ``parseString`` and
``convertToString``, the text of header values (``SimpleHeaderConverter``).

:func:`parse_string` infers a schema from text, as Kafka Connect's ``Values.parseString``:

* ``null`` → ``None``; ``true`` / ``false`` (in lower case only) → ``BOOLEAN``;
* a number (``BigDecimal``'s syntax) that is whole, at most 10^19 and within a long → the
  narrowest of ``INT8``…``INT64`` (``1.0``, ``1e3``, ``-0`` are integers); else, if it has a
  scale, ``FLOAT32`` unless a float overflows (``1e-50`` is ``0.0``), then ``FLOAT64``; else a
  Decimal of the number's scale (``9223372036854775808``, ``1e400``);
* ``yyyy-MM-dd`` / ``HH:mm:ss.SSS'Z'`` / ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'``, told apart by length
  and read leniently (:mod:`.java_dates`: ``2024-13-45`` is 2025-02-14) → Date/Time/Timestamp;
* ``[...]`` / ``{...}`` → ``ARRAY`` / ``MAP``. Elements may be quoted strings, kept as written
  (backslashes and all); their schemas merge into a common one (:mod:`._values_elements`), to
  which every element is converted; without one, no element schema;
* anything else, a malformed array or map included, is a ``STRING`` of the whole text. A
  number is read from the first token only: ``1,2`` is ``INT8`` 1, as in Connect.

Values keep Java's types: ``int`` for Byte…Long, :class:`Float32` (a ``float`` holding a
32-bit value) for Float, ``float`` for Double, ``decimal.Decimal`` for BigDecimal, ``date``/
``time``/``datetime`` (UTC) for Date/Time/Timestamp, ``list``, ``dict``.

:func:`convert_to_string` is ``Values.convertToString``: numbers as Java prints them, strings
as they are (quoted, ``\\`` and ``"`` escaped, inside lists and maps), bytes in base64, dates
as ``Values.dateFormatFor`` says (an instant before 1970-01-02 as a time of day).

A few values Connect parses, Python cannot hold: instants outside Python's years 1-9999
(``0001-01-01``, a Julian date, is one), a ``24:00:00.000Z`` Time, and maps whose keys a dict
cannot take (a list; keys Python finds equal and Java does not, ``{1:"a",true:"b"}``);
:func:`parse_string` raises :class:`Unrepresentable` for them.
"""

from __future__ import annotations

import base64
import decimal
import math
import re
from collections.abc import Mapping
from typing import Any

from conveyor.api.errors import DataError
from conveyor.api.schema import Field, Schema, SchemaAndValue, SchemaType
from conveyor.converters import logical
from conveyor.converters._values_elements import SchemaMerger, Unheld, convert_to, instant, is_instant, java_map, wrap
from conveyor.java_text import dates as java_dates
from conveyor.java_text.dates import Unrepresentable
from conveyor.java_text.numbers import (
    Float32,
    big_decimal_float_value,
    big_decimal_to_string,
    double_to_string,
    float_to_string,
    parse_big_decimal,
)

__all__ = ["Float32", "Unrepresentable", "convert_to_string", "parse_string"]

T = SchemaType
STRING_SCHEMA = Schema(T.STRING)
BOOLEAN_SCHEMA = Schema(T.BOOLEAN)
_INT_SCHEMAS = [(Schema(T.INT8), 8), (Schema(T.INT16), 16), (Schema(T.INT32), 32), (Schema(T.INT64), 64)]
_FLOAT32_SCHEMA, _FLOAT64_SCHEMA = Schema(T.FLOAT32), Schema(T.FLOAT64)
_TEMPORAL = {13: (java_dates.TIME_PATTERN, "time", logical.time_schema()),  # by String.length()
             24: (java_dates.TIMESTAMP_PATTERN, "timestamp", logical.timestamp_schema()),
             10: (java_dates.DATE_PATTERN, "date", logical.date_schema())}
_LITERALS = {"null": None, "true": SchemaAndValue(BOOLEAN_SCHEMA, True), "false": SchemaAndValue(BOOLEAN_SCHEMA, False)}
_DELIMITERS = frozenset(':,{}[]"')
_TOKEN = re.compile(r'(?:[^\\:,{}\[\]"]|\\.|\\\Z)+', re.DOTALL)  # a backslash escapes the next character
_JAVA_WHITESPACE = "".join(map(chr, range(33)))  # String.trim() strips U+0000..U+0020
_LONG = range(-(1 << 63), 1 << 63)


def _trim(text: str) -> str:
    return text.strip(_JAVA_WHITESPACE)


def _java_length(text: str) -> int:
    """``String.length()``: UTF-16 units."""
    return len(text) + sum(ord(c) > 0xFFFF for c in text)


def _exact_integer(unscaled: int, scale: int) -> SchemaAndValue | None:
    """``parseAsExactDecimal``: a whole number of at most 10^19 within a long → INT8…INT64."""
    if unscaled == 0:
        return SchemaAndValue(_INT_SCHEMAS[0][0], 0)
    adjusted = len(str(abs(unscaled))) - 1 - scale
    if not 0 <= adjusted <= 19:
        return None
    if scale <= 0:
        value = unscaled * 10**-scale
    else:
        quotient, remainder = divmod(abs(unscaled), 10**scale)
        if remainder:
            return None
        value = quotient if unscaled > 0 else -quotient
    if abs(value) > 10**19 or value not in _LONG:
        return None
    return next(SchemaAndValue(s, value) for s, bits in _INT_SCHEMAS if wrap(value, bits) == value)


def _parse_number(token: str) -> SchemaAndValue | None:
    """``parseAsNumber``, or ``None`` where Java throws NumberFormatException."""
    parsed = parse_big_decimal(token)
    if parsed is None:
        return None
    unscaled, scale = parsed
    exact = _exact_integer(unscaled, scale)
    if exact is not None:
        return exact
    single = big_decimal_float_value(unscaled, scale)
    if scale != 0 and single not in (math.inf, -math.inf):
        return SchemaAndValue(_FLOAT32_SCHEMA, Float32(single))
    value = logical.make_decimal(unscaled, scale)
    double = float(value)
    if scale != 0 and double not in (math.inf, -math.inf):
        return SchemaAndValue(_FLOAT64_SCHEMA, double)
    return SchemaAndValue(logical.decimal_schema(scale), value)


def _parse_temporal(token: str | None) -> SchemaAndValue | None:
    """``parseAsTemporal``: by length (escaped colons unescaped first), leniently."""
    if token is None:
        return None
    token = token.replace("\\:", ":")
    found = _TEMPORAL.get(_java_length(token))
    if found is None:
        return None
    pattern, kind, schema = found
    millis = java_dates.parse(token, pattern)
    return None if millis is None else SchemaAndValue(schema, instant(kind, millis))


class _Tokens:
    """``Values.Parser``: splits on unescaped ``:,{}[]"``, which are tokens themselves."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.next_token: str | None = None
        self.previous: str | None = None

    def mark(self) -> int:
        return self.pos - (len(self.next_token) if self.next_token is not None else 0)

    def rewind_to(self, position: int) -> None:
        self.pos = position
        self.next_token = self.previous = None

    def can_consume_next(self) -> bool:
        return self.pos < len(self.text)

    def has_next(self) -> bool:
        return self.next_token is not None or self.can_consume_next()

    def next(self) -> str:
        if self.next_token is not None:
            self.previous, self.next_token = self.next_token, None
        else:
            self.previous = self._consume()
        return self.previous

    def next_n(self, n: int) -> str | None:
        start = self.mark()
        for _ in range(n):
            if not self.has_next():
                self.rewind_to(start)
                return None
            self.next()
        return self.text[start:self.pos]

    def _consume(self) -> str:
        """``consumeNextToken``: a delimiter alone, or up to the next unescaped delimiter."""
        start = self.pos
        if start < len(self.text) and self.text[start] in _DELIMITERS:
            self.pos += 1
            return self.text[start]
        match = _TOKEN.match(self.text, start)
        self.pos = match.end() if match else start
        return self.text[start:self.pos]

    def peek(self) -> str | None:
        """The next non-blank token, trimmed (``None`` at the end), kept as the next token."""
        if self.next_token is None:
            if not self.has_next():
                return None
            self.next_token = self._consume()
        while not _trim(self.next_token) and self.can_consume_next():
            self.next_token = self._consume()
        return _trim(self.next_token)

    def can_consume(self, expected: str) -> bool:
        """``canConsume``: if the next non-blank token, trimmed, is ``expected``, consume it."""
        if self.peek() == expected:
            self.next_token = None
            return True
        return False


class _ValueParser:
    """``Values.ValueParser``."""

    def __init__(self, text: str) -> None:
        self.tokens = _Tokens(text)

    def parse(self, embedded: bool) -> SchemaAndValue | None:
        tokens = self.tokens
        if not tokens.has_next():
            return None
        if embedded and tokens.can_consume('"'):
            return self._quoted_string()
        start = tokens.mark()  # null, true, false: alone at the top level, or embedded
        literal = tokens.peek()
        if literal in _LITERALS:
            tokens.next_token = None
            if embedded or not tokens.has_next():
                return _LITERALS[literal]
        tokens.rewind_to(start)
        try:
            if tokens.can_consume("["):
                return self._array()
            if tokens.can_consume("{"):
                return self._map()
        except DataError:
            tokens.rewind_to(start)
        token = tokens.next()
        if not _trim(token):
            return SchemaAndValue(STRING_SCHEMA, token)
        return self._next_token(embedded, _trim(token))

    def _next_token(self, embedded: bool, token: str) -> SchemaAndValue:
        first = token[0]
        is_digit = ord(first) <= 0xFFFF and first.isdecimal()  # Character.isDigit(char)
        if is_digit:
            position = self.tokens.mark()  # a time or timestamp spans five tokens (its colons)
            remainder = self.tokens.next_n(4)
            temporal = _parse_temporal(token + remainder) if remainder is not None else None
            if temporal is None:
                self.tokens.rewind_to(position)
                temporal = _parse_temporal(token)
            if temporal is not None:
                return temporal
        if is_digit or first in "+-":
            number = _parse_number(token)
            if number is not None:
                return number
        if embedded:
            raise DataError("Failed to parse embedded value")
        return SchemaAndValue(STRING_SCHEMA, self.tokens.text)

    def _quoted_string(self) -> SchemaAndValue:
        parts = []
        while self.tokens.has_next() and not self.tokens.can_consume('"'):
            parts.append(self.tokens.next())
        content = "".join(parts)
        return _parse_temporal(content) or SchemaAndValue(STRING_SCHEMA, content)

    def _array(self) -> SchemaAndValue:
        tokens, result, merger = self.tokens, [], SchemaMerger()
        while tokens.has_next():
            if tokens.can_consume("]"):
                if merger.common is None:  # every element null, or no common schema
                    return SchemaAndValue(Schema(T.ARRAY), result)
                return SchemaAndValue(Schema(T.ARRAY, value_schema=merger.common),
                                      [convert_to(merger.common, v) for v in result])
            if tokens.can_consume(","):
                raise DataError(f"Unable to parse an empty array element: {tokens.text}")
            element = self.parse(True)
            merger.merge(element)
            result.append(element.value if element is not None else None)
            position = tokens.mark()
            if tokens.can_consume("]"):
                tokens.rewind_to(position)
            elif not tokens.can_consume(","):
                raise DataError("Array elements missing ',' delimiter")
        if tokens.previous == ",":
            raise DataError(f"Array is missing element after ',': {tokens.text}")
        raise DataError(f"Array is missing terminating ']': {tokens.text}")

    def _map(self) -> SchemaAndValue:
        tokens, pairs, keys, values = self.tokens, [], SchemaMerger(), SchemaMerger()
        while tokens.has_next():
            if tokens.can_consume("}"):
                result = java_map(pairs)
                if keys.common is None:  # no common key schema: no schema, no conversion
                    return SchemaAndValue(Schema(T.MAP), result)
                aligned = [(convert_to(keys.common, k), v if values.common is None else convert_to(values.common, v))
                           for k, v in (pairs if isinstance(result, Unheld) else result.items())]
                return SchemaAndValue(Schema(T.MAP, key_schema=keys.common, value_schema=values.common),
                                      result if isinstance(result, Unheld) else java_map(aligned))
            if tokens.can_consume(","):
                raise DataError(f"Unable to parse a map entry with no key or value: {tokens.text}")
            key = self.parse(True)
            if key is None or key.value is None:
                raise DataError(f"Map entry may not have a null key: {tokens.text}")
            if not tokens.can_consume(":"):
                raise DataError(f"Map entry is missing ':' at {tokens.pos} in {tokens.text}")
            value = self.parse(True)
            pairs.append((key.value, value.value if value is not None else None))
            tokens.can_consume(",")
            keys.merge(key)
            values.merge(value)
        if tokens.previous == ",":
            raise DataError(f"Map is missing element after ',': {tokens.text}")
        raise DataError(f"Map is missing terminating '}}': {tokens.text}")


def parse_string(text: str | None) -> SchemaAndValue:
    """The schema and value that ``text`` denotes, as Kafka Connect's ``Values.parseString``.

    ``None`` and ``"null"`` give ``(None, None)`` (Java returns ``null`` for the latter); an
    empty string is an empty ``STRING``. Never raises :class:`DataError`: what does not parse
    is a ``STRING``.

    Raises:
        Unrepresentable: Connect would return a value Python cannot hold (see the module).
    """
    if text is None:
        return SchemaAndValue(None, None)
    if not text:
        return SchemaAndValue(STRING_SCHEMA, text)
    parsed = _ValueParser(text).parse(False)
    if parsed is None:
        return SchemaAndValue(None, None)
    unheld = Unheld.find(parsed.value)
    if unheld is not None:
        raise Unrepresentable(unheld.reason)
    return parsed


def convert_to_string(schema: Schema | None, value: Any) -> str | None:
    """``value`` as text, as Kafka Connect's ``Values.convertToString``; ``None`` for ``None``.

    Java prints by the value's class, so the schema only says which floats are Java
    ``Float``\\ s (a :class:`Float32`, or a ``float`` where the schema is ``FLOAT32``) and the
    field order of a ``STRUCT`` (a ``dict``).

    Raises:
        DataError: a value of a type Connect has no text for.
    """
    if value is None:
        return None
    out: list[str] = []
    _append(out, schema, value, False)
    return "".join(out)


def _append(out: list[str], schema: Schema | None, value: Any, embedded: bool) -> None:
    """``Values.append``."""
    if value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        single = isinstance(value, Float32) or (schema is not None and schema.type is T.FLOAT32)
        out.append(float_to_string(value) if single else double_to_string(value))
    elif isinstance(value, decimal.Decimal):
        out.append(big_decimal_to_string(value))
    elif isinstance(value, str):
        out.append('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' if embedded else value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        encoded = base64.b64encode(bytes(value)).decode("ascii")
        out.append(f'"{encoded}"' if embedded else encoded)
    elif isinstance(value, (list, tuple)):
        element = schema.value_schema if schema is not None and schema.type is T.ARRAY else None
        out.append("[")
        for i, item in enumerate(value):
            out.append("," if i else "")
            _append(out, element, item, True)
        out.append("]")
    elif isinstance(value, Mapping):
        _append_map(out, schema, value)
    elif is_instant(value):
        out.append(java_dates.format_millis(java_dates.to_millis(value)))
    else:
        raise DataError(f"Failed to serialize unexpected value type {type(value).__name__}: {value}")


def _append_map(out: list[str], schema: Schema | None, value: Mapping[Any, Any]) -> None:
    if schema is not None and schema.type is T.STRUCT:  # a Struct: every field, in order
        entries = [(f.name, STRING_SCHEMA, _field_value(value, f), f.schema) for f in schema.fields]
    else:
        is_map = schema is not None and schema.type is T.MAP
        key_schema, value_schema = (schema.key_schema, schema.value_schema) if is_map else (None, None)
        entries = [(k, key_schema, v, value_schema) for k, v in value.items()]
    out.append("{")
    for i, (k, k_schema, v, v_schema) in enumerate(entries):
        out.append("," if i else "")
        _append(out, k_schema, k, True)
        out.append(":")
        _append(out, v_schema, v, True)
    out.append("}")


def _field_value(struct_value: Mapping[str, Any], field: Field) -> Any:
    """``Struct.get(field)``: the field's default stands in for a missing or null value."""
    value = struct_value.get(field.name)
    return field.schema.default if value is None else value
