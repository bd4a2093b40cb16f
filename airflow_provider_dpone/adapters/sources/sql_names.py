"""Qualified SQL names (``schema.table``) split at dots outside quoting — one scanner for every dialect."""

from __future__ import annotations

from collections.abc import Collection, Mapping


class SqlBuildError(ValueError):
    """A name or a bound that cannot become SQL; the reason never repeats the value."""


def split_qualified_name(text: str, quotes: Mapping[str, str], doubled: Collection[str]) -> list[str]:
    """Split at dots outside quoting and unquote each part.

    ``quotes`` maps each opening quote to its closer; a closer in ``doubled`` written twice inside a
    quoted part stands for itself (T-SQL ``]]``, ``""``); other closers always end the part.
    """
    parts: list[str] = []
    current: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in quotes:
            closer = quotes[ch]
            i += 1
            while True:
                if i >= n:
                    raise SqlBuildError("a quoted name part is not closed")
                if text[i] == closer:
                    if closer in doubled and i + 1 < n and text[i + 1] == closer:
                        current.append(closer)
                        i += 2
                        continue
                    i += 1
                    break
                current.append(text[i])
                i += 1
            continue
        if ch == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts
