"""What every source shares to compare an earlier read definition of its route with its own
(``DefinitionComparingSource``): the columns both reads return, the batches of regions, and which engine
errors mean the comparison cannot be made (rather than a failed read).

The count compares the two reads within the regions ``r`` as multisets, over the columns both return (a
``source.columns`` pinned since, or dropped from a query, is no difference): ``<earlier> WHERE r`` as +1 and
``<current> WHERE r`` as -1 in one ``UNION ALL``, grouped once by those columns (``GROUP BY`` puts NULLs in
one group, in SQLite and T-SQL alike), and each group's surplus (``SUM(sign) > 0``) summed: a row the earlier
read returns more often than the current one counts as often as it is missing. ``EXCEPT``, counted before,
saw distinct rows only: a row the earlier read returned twice and the current once, or a row a new filter
left out that equals a kept one on the columns a new query still returns (its key dropped), went unseen
and was deleted, exit 0. A soft-deleted or deleted row is left out by both reads, so it is never counted;
a row the earlier read returns with other values (an expression changed) is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from airflow_provider_dpone.adapters.bounds_sql import merge_adjacent
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.read_definition import PARTITIONS_NAMED, LeftOutCounts, NotCompared
from airflow_provider_dpone.contracts.schema import TableSchema
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


def counts_per_region(regions: Sequence[Region], count: Callable[[Sequence[Region]], int]) -> LeftOutCounts:
    """The rows left out in all and within each region, in order: ``count`` (one statement) over each batch
    of :data:`REGIONS_PER_STATEMENT` regions (the total), then region by region only within batches that
    found rows, in order, until regions of :data:`PARTITIONS_NAMED` partitions (a region's first bounds)
    hold rows: a stop names no more. Counting every region of an edit that touched a year of days one by
    one took 220 s on a 1M-row table without an index on the partition column."""
    batches = [
        (start, regions[start : start + REGIONS_PER_STATEMENT])
        for start in range(0, len(regions), REGIONS_PER_STATEMENT)
    ]
    totals = [count(batch) for _, batch in batches]
    counts: list[int | None] = [0] * len(regions)
    found: set[PartitionBounds] = set()
    for (start, batch), total in zip(batches, totals, strict=True):
        if total == 0:
            continue
        for offset, region in enumerate(batch):
            if len(found) >= PARTITIONS_NAMED:
                counts[start + offset] = None
                continue
            rows = total if len(batch) == 1 else count([region])
            counts[start + offset] = rows
            if rows:
                found.add(region[0])
    return LeftOutCounts(total=sum(totals), regions=tuple(counts))


#: Characters of an ISO date or datetime whose text order is its time order (``T`` and `` `` never mixed
#: within one planner's bounds).
_ISO_CHARACTERS = frozenset("0123456789-:. T")


def _ordered(low: str | None, high: str | None, value_type: str) -> bool:
    """``low <= high`` in every order either engine may compare a bound with: as text (SQLite compares a
    TEXT column's values so) and as the typed value (SQL Server casts the bound to the column's type);
    ``None``: an open side."""
    if low is None or high is None:
        return True
    try:
        if value_type == "integer":
            return int(low) <= int(high) and str(int(low)) <= str(int(high))
        if value_type in ("date", "datetime"):
            plain = all(set(v) <= _ISO_CHARACTERS and not v.endswith(" ") for v in (low, high))
            return plain and low <= high and datetime.fromisoformat(low) <= datetime.fromisoformat(high)
    except ValueError:
        return False
    return False


def merged_regions(regions: Sequence[Region]) -> list[Region]:
    """The same rows as the union of ``regions``, each run of adjacent one-range regions as one range
    (``bounds_sql.merge_adjacent``): a batch of 100 consecutive days is one ``BETWEEN``-like condition, not
    an ``OR`` of 100 ranges each row of both reads is tested against (48x slower on a 1M-row SQLite table
    without an index). Regions of two bounds (within an earlier commit of other bounds) stay as they are."""
    merged: list[Region] = []
    run: list[PartitionBounds] = []
    for region in regions:
        if len(region) == 1 and region[0].kind is BoundsKind.RANGE:
            run.append(region[0])
            continue
        merged.extend((one,) for one in merge_adjacent(run, _ordered))
        run = []
        merged.append(region)
    merged.extend((one,) for one in merge_adjacent(run, _ordered))
    return merged


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
#: ... and of a column ``GROUP BY`` cannot group: text, ntext or image (306), xml (305), geography or
#: geometry (249), one selected as DISTINCT (421, 8163), or two types that do not convert into each other,
#: explicitly too, or collations that conflict (206, 245, 402, 457, 529, 8114).
_TSQL_INCOMPARABLE = frozenset({206, 245, 249, 305, 306, 402, 421, 457, 529, 8114, 8163})
#: SQL Server types ``GROUP BY`` refuses, and the type each is compared as: the same characters under the
#: same collation (``CAST`` keeps a string's), ``GROUP BY`` takes them. ``image`` converts only to
#: ``varbinary(max)``, which the TDS emulator cannot check: it is left out of the comparison instead (a
#: blob is rarely what tells two rows apart; the partition column and the rest still do).
TSQL_COMPARED_AS: Mapping[str, str | None] = {
    "text": "varchar(max)",
    "ntext": "nvarchar(max)",
    "xml": "nvarchar(max)",
    "image": None,
}


def tsql_comparable(
    columns: Sequence[tuple[str, str]], schema: TableSchema, partition_column: str | None
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The columns SQL Server's ``GROUP BY`` compares, and the ``CAST`` each of them needs, by its current
    spelling: a ``text``, ``ntext`` or ``xml`` column (by this read's description) as ``(n)varchar(max)``,
    an ``image`` one left out. One such column used to turn the comparison off for the whole route, so an
    hourly window lost rows with exit 0. ``DefinitionsNotComparable`` only when no column is left to
    compare, or the partition column would be left out."""
    kept: list[tuple[str, str]] = []
    casts: dict[str, str] = {}
    for new, old in columns:
        source_type = (schema.column(new).source_type or "").lower()
        if source_type not in TSQL_COMPARED_AS:
            kept.append((new, old))
            continue
        target = TSQL_COMPARED_AS[source_type]
        if target is None:
            if partition_column is not None and new.casefold() == partition_column.casefold():
                raise DefinitionsNotComparable(NotCompared.TYPE_NOT_COMPARABLE)
            continue
        kept.append((new, old))
        casts[new] = target
    if not kept:
        raise DefinitionsNotComparable(NotCompared.TYPE_NOT_COMPARABLE)
    return kept, casts


def mssql_reason(number: int | None) -> NotCompared | None:
    """Why the comparison cannot be made, from SQL Server's message number (None: a failed read)."""
    if number in _TSQL_GONE:
        return NotCompared.EARLIER_READ_FAILS
    if number in _TSQL_INCOMPARABLE:
        return NotCompared.TYPE_NOT_COMPARABLE
    return None
