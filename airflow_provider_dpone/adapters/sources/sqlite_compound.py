"""Integers that SQLite rounds when it reads a compound query's ``REAL`` column as a subquery.

A compound ``SELECT`` (``UNION``, ``INTERSECT``, ``EXCEPT``) gives each column the affinity of its first
arm. Run alone it returns each arm's values as stored; read as a subquery, as every read of dpone is (its
partition predicates wrap the query), a column whose first arm is ``REAL`` turns the integers of the other
arms into doubles: past 2**53 they round (9007199254740993 arrived as 9007199254740992, exit 0, on every
path). The pre-arm audit and the converters only ever see the rounded double. So where a query (or a view)
is compound and has a ``Float64`` column, its own text is read once, unwrapped and whole, and an integer past
2**53 in such a column stops the run before arming, naming it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

#: a text literal (quotes doubled inside), blanked before looking for keywords
_LITERAL = re.compile(r"'(?:[^']|'')*'")
_COMPOUND = re.compile(r"\b(?:UNION|INTERSECT|EXCEPT)\b", re.IGNORECASE)
#: the SELECT of a view's stored definition
_VIEW = re.compile(
    r"^\s*CREATE\s+(?:TEMP\s+|TEMPORARY\s+)?VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?.+?\s+AS\s+(.*)$",
    re.IGNORECASE | re.DOTALL,
)
_FLOAT_TYPES = frozenset({"Float64", "Float32"})
_BATCH = 10_000
_EXACT = 2**53


def is_compound(sql: str) -> bool:
    """Whether ``sql`` may be a compound SELECT (a keyword outside text literals; errs toward yes)."""
    return _COMPOUND.search(_LITERAL.sub("''", sql)) is not None


def view_select(definition: str) -> str | None:
    """The SELECT of a stored ``CREATE VIEW`` statement, or None where it cannot be told."""
    match = _VIEW.match(definition)
    return match.group(1).strip().rstrip(";") if match else None


def first_rounded_column(
    connection: sqlite3.Connection, select: str, columns: Sequence[tuple[str, str]]
) -> str | None:
    """The first ``Float64`` column (of ``columns``: name and target type, in the SELECT's order) to which
    ``select``, run unwrapped, delivers an integer past 2**53; None when it delivers none."""
    positions = [i for i, (_, kind) in enumerate(columns) if kind in _FLOAT_TYPES]
    if not positions:
        return None
    cursor = connection.execute(select)
    try:
        while batch := cursor.fetchmany(_BATCH):
            for row in batch:
                for i in positions:
                    value = row[i]
                    if type(value) is int and not -_EXACT <= value <= _EXACT:
                        return columns[i][0]
        return None
    finally:
        cursor.close()
