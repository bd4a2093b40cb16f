"""Integers that SQLite turns into doubles when it reads a compound query as a subquery.

A compound ``SELECT`` (``UNION``, ``INTERSECT``, ``EXCEPT``) gives each column the affinity of its first
arm. Run alone it returns each arm's values as stored; read as a subquery, as every read of dpone is (its
partition predicates wrap the query), a column whose first arm has ``REAL`` affinity (a ``REAL`` column,
``CAST(... AS REAL)``) turns the integers of the other arms into doubles: past 2**53 they round
(9007199254740993 arrived as 9007199254740992, exit 0), and a text column's 123 arrived as ``'123.0'``.
The pre-arm audit and the converters only ever see the double. So where a query (or a view) may be
compound, the integers each column delivers are counted twice, once running its own text unwrapped and
once through a subquery; a column with fewer through the subquery stops the run before arming, naming it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from airflow_provider_dpone.contracts.query_text import code_mask, statement_text

_COMPOUND = re.compile(r"\b(?:UNION|INTERSECT|EXCEPT)\b", re.IGNORECASE)
#: the SELECT of a view's stored definition
_VIEW = re.compile(
    r"^\s*CREATE\s+(?:TEMP\s+|TEMPORARY\s+)?VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?.+?\s+AS\s+(.*)$",
    re.IGNORECASE | re.DOTALL,
)
_BATCH = 10_000
_EXACT = 2**53


def is_compound(sql: str) -> bool:
    """Whether ``sql`` may be a compound SELECT: a compound keyword outside literals, quoted names and
    comments (errs toward yes: a keyword used as a bare name costs one more read)."""
    return _COMPOUND.search(code_mask(sql)) is not None


def view_select(definition: str) -> str | None:
    """The SELECT of a stored ``CREATE VIEW`` statement, or None where it cannot be told."""
    match = _VIEW.match(definition)
    return statement_text(match.group(1)) if match else None


def converted_column(connection: sqlite3.Connection, select: str, kinds: Sequence[str]) -> int | None:
    """The position of the first of ``select``'s columns (``kinds``: their target types, in order) whose
    integers SQLite turns into doubles read through a subquery, where that changes a value: past 2**53 in a
    ``Float64`` column, any integer in another (its text would read ``123.0``); None when none does. Two
    whole reads of the query: run alone, and counted through a subquery."""
    alone = [0] * len(kinds)
    past = [False] * len(kinds)
    cursor = connection.execute(select)
    try:
        while batch := cursor.fetchmany(_BATCH):
            for row in batch:
                for i, value in enumerate(row):
                    if type(value) is int:
                        alone[i] += 1
                        past[i] = past[i] or not -_EXACT <= value <= _EXACT
    finally:
        cursor.close()
    if not any(alone):
        return None
    names = [f"dpone_c{i}" for i in range(len(kinds))]  # by position: a view's column list renames them
    counts = ", ".join(f"coalesce(sum(typeof({n}) = 'integer'), 0)" for n in names)
    # on lines of their own: a query ending in a -- comment would comment out the closing parenthesis
    wrapped = connection.execute(
        f"WITH s({', '.join(names)}) AS (\n{select}\n)\nSELECT {counts} FROM s"
    ).fetchone()
    for i, (kind, count) in enumerate(zip(kinds, wrapped, strict=True)):
        if int(count) < alone[i] and (past[i] or not kind.startswith("Float")):
            return i
    return None
