"""What every source shares to compare an earlier read definition of its route with its own
(``DefinitionComparingSource``): the columns both reads return, the batches of regions, and which engine
errors mean the comparison cannot be made (rather than a failed read).

The count is ``SELECT COUNT(*) FROM (<earlier> WHERE r EXCEPT <current> WHERE r)``: the distinct rows the
earlier read returns within the regions ``r`` that the current read does not, over the columns both return
(a ``source.columns`` pinned since, or dropped from a query, is no difference). ``EXCEPT`` compares NULLs as
equal in SQLite and T-SQL alike. A soft-deleted or deleted row is left out by both reads, so it is never
counted; a row the earlier read returns with other values (an expression changed) is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.read_definition import NotCompared
from airflow_provider_dpone.ports.source import DefinitionsNotComparable

#: Regions one statement counts (each a partition's bounds, or its intersection with an earlier commit's),
#: as many as a delete of the ClickHouse sink lists (``predicates.RANGES_PER_DELETE``): a day route's first
#: run after a query edit compares every day it replaces in statements of 100 days.
REGIONS_PER_STATEMENT = 100

Region = Sequence[PartitionBounds]


def shared_columns(
    current: Sequence[str], earlier: Sequence[str], pinned: Sequence[str] | None
) -> list[tuple[str, str]]:
    """(current spelling, earlier spelling) of each column both reads return, in the current read's order.
    Names compare case-insensitively, as both engines compare unquoted names; ``pinned``: the earlier
    definition's ``source.columns``, the only ones its read returned."""
    kept = None if pinned is None else {name.casefold() for name in pinned}
    spelled = {name.casefold(): name for name in earlier if kept is None or name.casefold() in kept}
    pairs = [(name, spelled[name.casefold()]) for name in current if name.casefold() in spelled]
    if not pairs:
        raise DefinitionsNotComparable(NotCompared.NO_SHARED_COLUMNS)
    return pairs


def counts_per_region(regions: Sequence[Region], count: Callable[[Sequence[Region]], int]) -> list[int]:
    """The rows left out within each region, in order: ``count`` (one statement) over each batch of
    :data:`REGIONS_PER_STATEMENT` regions, and region by region only within a batch that found rows (a
    stop: rare, and it names the partitions)."""
    counts = [0] * len(regions)
    for start in range(0, len(regions), REGIONS_PER_STATEMENT):
        batch = regions[start : start + REGIONS_PER_STATEMENT]
        total = count(batch)
        if total == 0:
            continue
        if len(batch) == 1:
            counts[start] = total
            continue
        for offset, region in enumerate(batch):
            counts[start + offset] = count([region])
    return counts


#: What SQLite says when the earlier read names something the file no longer holds (the message's start).
_SQLITE_GONE = (
    "no such table",
    "no such column",
    "no such function",
    "no such collation",
    "ambiguous column",
)


def sqlite_reason(exc: sqlite3.Error) -> NotCompared | None:
    """Why the comparison cannot be made, from SQLite's error (None: a failed read, not the definition's)."""
    message = str(exc).casefold()  # classified only; never shown
    return NotCompared.EARLIER_READ_FAILS if message.startswith(_SQLITE_GONE) else None


#: SQL Server errors of an earlier read that names what the database no longer holds, or cannot be a
#: derived table now: invalid column (207), object (208), ambiguous (209), unbound name (4104), a column
#: without a name (8155) or named twice (8156), an ORDER BY (1033), a syntax the server no longer takes
#: (102, 156).
_TSQL_GONE = frozenset({102, 156, 207, 208, 209, 1033, 4104, 8155, 8156})
#: ... and of a column ``EXCEPT`` cannot compare: text, ntext, image or xml (421, 8163, 306), or two types
#: that do not convert into each other, or collations that conflict (206, 245, 402, 457, 8114).
_TSQL_INCOMPARABLE = frozenset({206, 245, 306, 402, 421, 457, 8114, 8163})
#: SQL Server types ``EXCEPT`` refuses to compare (``xml`` is no column a route reads).
TSQL_INCOMPARABLE_TYPES = frozenset({"text", "ntext", "image", "xml"})


def mssql_reason(number: int | None) -> NotCompared | None:
    """Why the comparison cannot be made, from SQL Server's message number (None: a failed read)."""
    if number in _TSQL_GONE:
        return NotCompared.EARLIER_READ_FAILS
    if number in _TSQL_INCOMPARABLE:
        return NotCompared.TYPE_NOT_COMPARABLE
    return None
