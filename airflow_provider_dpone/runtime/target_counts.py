"""The target's rows within a partition's bounds, where the target table can select them.

A partitioned ``full_refresh`` route may leave its partition column out of ``source.columns``
(``partition_column``): its target table then has no column to select a partition's rows by. Counting them
by that column failed (``target_load_failed``) in ``guard inspect``, ``guard resolve`` and both
``guard rebaseline --source-moved``/``--target-moved``, so such a route, once blocked or moved, had no way
out without ``--force``. Those counts are unknown (``None``) instead: every decision takes an unknown count
as it takes one that failed under ``--force`` (it proves nothing), and a ``full_refresh``, which replaces the
whole table, needs none.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.runtime.key_fingerprint import disjoint_batches


class TargetCounts:
    """Counts of one target table within partition bounds; the table is described once, when first needed."""

    def __init__(self, sink: Sink, table: str) -> None:
        self._sink = sink
        self._table = table
        self._columns: frozenset[str] | None = None
        self._described = False

    def lacks_column_of(self, bounds: PartitionBounds | None) -> bool:
        """Whether the target table exists and lacks the column ``bounds`` select by (read-only)."""
        if bounds is None or bounds.column is None:
            return False
        if not self._described:
            describe = getattr(self._sink, "target_schema", None)
            schema = describe(self._table) if callable(describe) else None
            self._columns = None if schema is None else frozenset(schema.names)
            self._described = True
        return self._columns is not None and bounds.column not in self._columns

    def within(self, bounds: PartitionBounds | None) -> int | None:
        """The table's rows within ``bounds`` (0 before it exists); ``None`` where it cannot select them."""
        if self.lacks_column_of(bounds):
            return None
        return self._sink.count_rows(self._table, bounds)


def rows_within_each(sink: Sink, table: str, bounds: Sequence[PartitionBounds]) -> list[int]:
    """``count_rows`` of each of ``bounds``, in order: one statement per batch of pairwise disjoint bounds
    (``key_fingerprint.disjoint_batches``: one for up to ``BATCH_PARTITIONS`` days) where the sink counts
    them grouped (``GroupedCountingSink``), else one statement each (the 62 partitions a replacing run
    counts on 18.16 were 62 round trips)."""
    grouped = getattr(sink, "count_rows_each", None)
    if not callable(grouped):
        return [sink.count_rows(table, one) for one in bounds]
    found: dict[PartitionBounds, int] = {}
    for batch in disjoint_batches(list(dict.fromkeys(bounds))):
        found.update(zip(batch, grouped(table, batch), strict=True))
    return [found[one] for one in bounds]
