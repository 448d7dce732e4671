"""Java regular expressions and replacement strings, on Python's :mod:`re`.

:func:`compile_java_regex` accepts the Java syntax Kafka Connect users write, mapping
what Python spells differently:

* named groups ``(?<name>...)`` → ``(?P<name>...)``, back-references ``\\k<name>`` →
  ``(?P=name)``;
* quoting ``\\Q...\\E`` → the escaped literal;
* ``\\z`` (end of input) → ``\\Z``; ``\\Z`` (before a final line terminator) → ``(?=\\n?\\Z)``.

Everything else is passed to :mod:`re` unchanged (Java's common syntax, including
possessive quantifiers and atomic groups, is the same in Python 3.11).

:class:`JavaReplacement` is ``Matcher.appendReplacement``'s template language: ``$n``
(greedy over digits while the group exists), ``${name}``, and ``\\`` escaping the next
character; a group that did not participate expands to nothing.
"""

from __future__ import annotations

import re

_GROUP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def translate(pattern: str) -> str:
    """A Java regex → the equivalent Python regex source."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    in_class = 0
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if nxt == "z" and not in_class:
                out.append(r"\Z")
            elif nxt == "Z" and not in_class:
                out.append(r"(?=\n?\Z)")
            elif nxt == "k" and i + 2 < n and pattern[i + 2] == "<" and not in_class:
                close = pattern.find(">", i + 3)
                if close < 0:
                    out.append(pattern[i : i + 2])
                else:
                    out.append(f"(?P={pattern[i + 3 : close]})")
                    i = close + 1
                    continue
            else:
                out.append(c + nxt)
            i += 2
            continue
        if in_class:
            if c == "[":
                in_class += 1
            elif c == "]":
                in_class -= 1
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = 1
            out.append(c)
            # a leading ']' (or '^]') is a literal in both dialects
            j = i + 1
            if j < n and pattern[j] == "^":
                out.append("^")
                j += 1
            if j < n and pattern[j] == "]":
                out.append("\\]")
                j += 1
            i = j
            continue
        if c == "(" and pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def compile_java_regex(pattern: str) -> re.Pattern[str]:
    """Compile a Java regex.

    Raises:
        re.error: the pattern is invalid.
    """
    return re.compile(translate(pattern))


class JavaReplacement:
    """A parsed Java replacement string, checked against a pattern's groups.

    Raises:
        ValueError: with Java's message for an invalid template (``Illegal group
            reference``, ``No group 3``, ``No group with name {x}``,
            ``character to be escaped is missing``).
    """

    __slots__ = ("literal", "parts")

    def __init__(self, replacement: str, pattern: re.Pattern[str]) -> None:
        groups = pattern.groups
        names = pattern.groupindex
        parts: list[str | int] = []
        buf: list[str] = []
        i = 0
        n = len(replacement)
        while i < n:
            c = replacement[i]
            if c == "\\":
                i += 1
                if i >= n:
                    raise ValueError("character to be escaped is missing")
                buf.append(replacement[i])
                i += 1
            elif c == "$":
                i += 1
                if i >= n:
                    raise ValueError("Illegal group reference: group index is missing")
                if replacement[i] == "{":
                    close = replacement.find("}", i + 1)
                    if close < 0:
                        raise ValueError("named capturing group is missing trailing '}'")
                    name = replacement[i + 1 : close]
                    if not _GROUP_NAME.fullmatch(name):
                        raise ValueError(f"named capturing group has an invalid name: {{{name}}}")
                    if name not in names:
                        raise ValueError(f"No group with name {{{name}}}")
                    ref = names[name]
                    i = close + 1
                else:
                    if not ("0" <= replacement[i] <= "9"):
                        raise ValueError("Illegal group reference")
                    ref = ord(replacement[i]) - 48
                    i += 1
                    while i < n and "0" <= replacement[i] <= "9":
                        longer = ref * 10 + ord(replacement[i]) - 48
                        if longer > groups:
                            break
                        ref = longer
                        i += 1
                    if ref > groups:
                        raise ValueError(f"No group {ref}")
                if buf:
                    parts.append("".join(buf))
                    buf = []
                parts.append(ref)
            else:
                buf.append(c)
                i += 1
        if buf:
            parts.append("".join(buf))
        self.parts = tuple(parts)
        self.literal = "".join(parts) if all(isinstance(p, str) for p in parts) else None  # type: ignore[arg-type]

    def expand(self, match: re.Match[str]) -> str:
        """The replacement text for ``match``."""
        if self.literal is not None:
            return self.literal
        group = match.group
        return "".join(p if isinstance(p, str) else (group(p) or "") for p in self.parts)
