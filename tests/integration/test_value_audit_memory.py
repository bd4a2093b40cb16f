"""The pre-arm value audit runs in memory that does not grow with the table (issue 16, flat memory).

An ``OR`` of the partitions' indexed ranges makes SQLite use its multi-index OR plan, which keeps the rowid
of every row it visits until the statement ends (117 MB at 5M demo rows, measured). The audit therefore
merges adjacent ranges and runs one statement per run of them. Measured here on real SQLite files with
SQLite's own allocator high-water mark (``sqlite3_memory_highwater``: SQLite allocates outside Python, so
tracemalloc does not see it) and, for what Python holds, tracemalloc.
"""

from __future__ import annotations

import ctypes
import sqlite3
import tracemalloc
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources import value_audit
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from tests.builders import day
from tests.integration.sqlite_audit_rig import FIRST, MANY_ORDERS_DAYS, many_orders, orders_spec


def _highwater() -> Callable[[], int]:
    """SQLite's allocator high-water mark (bytes), reset by each call; the library ``sqlite3`` uses."""
    import _sqlite3

    try:
        function = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_highwater
    except (OSError, AttributeError):
        pytest.skip("this Python's SQLite does not export sqlite3_memory_highwater")
    function.restype = ctypes.c_int64
    function.argtypes = [ctypes.c_int]
    return lambda: int(function(1))


@pytest.fixture
def audited(tmp_path: Path) -> Callable[[int, int], tuple[int, int]]:
    """``audit(rows, connections)``: (SQLite's high-water bytes, Python's traced peak bytes) of one audit of
    all the day partitions of a fresh ``rows``-row table, which is clean (the audit passes)."""
    highwater = _highwater()

    def audit(rows: int, connections: int) -> tuple[int, int]:
        path = tmp_path / f"orders_{rows}.sqlite"
        many_orders(path, rows)
        # the SQL audit
        source = SqliteSource(path, orders_spec(), audit_connections=connections, arrow_read=False)
        try:
            bounds = source.plan_partitions()
            assert len(bounds) == MANY_ORDERS_DAYS
            source.describe()
            highwater()
            tracemalloc.start()
            try:
                source.audit_values(bounds, None)
                traced = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            return highwater(), traced
        finally:
            source.close()

    return audit


@pytest.mark.parametrize("connections", [1, 2])
def test_the_audit_of_all_partitions_holds_no_more_at_five_times_the_rows(
    audited: Callable[[int, int], tuple[int, int]], connections: int
) -> None:
    # the part of the file each connection scans is larger than its page cache (2 MB by default) at both
    # sizes, so every cache is full at both; an OR of the ten ranges adds ~20 bytes per row visited
    small_sqlite, small_python = audited(40_000 * connections, connections)
    large_sqlite, large_python = audited(200_000 * connections, connections)
    assert large_sqlite - small_sqlite < 1_000_000, (small_sqlite, large_sqlite)
    assert large_python < 1_000_000 and large_python - small_python < 200_000, (small_python, large_python)


def test_adjacent_day_partitions_are_one_statement_and_a_gap_splits_them(tmp_path: Path) -> None:
    days = [
        day((FIRST + timedelta(days=d)).isoformat(), (FIRST + timedelta(days=d + 1)).isoformat())
        for d in range(6)
    ]
    merged = value_audit.merged_ranges(days)
    assert [(b.lower, b.upper) for b in merged] == [("2026-11-01", "2026-11-07")]
    gapped = value_audit.merged_ranges([*days[:2], *days[3:]])
    assert [(b.lower, b.upper) for b in gapped] == [
        ("2026-11-01", "2026-11-03"),
        ("2026-11-04", "2026-11-07"),
    ]


def _integers(*edges: tuple[int | None, int | None]) -> list[PartitionBounds]:
    return [
        PartitionBounds(
            kind=BoundsKind.RANGE,
            column="id",
            lower=None if low is None else str(low),
            upper=None if high is None else str(high),
            value_type="integer",
            label=f"{low}-{high}",
        )
        for low, high in edges
    ]


def test_only_ranges_ordered_in_every_comparison_the_engine_may_use_are_merged() -> None:
    # numeric and text order agree: one range, open at both ends
    assert [
        (b.lower, b.upper) for b in value_audit.merged_ranges(_integers((None, 4), (4, 8), (8, None)))
    ] == [(None, None)]
    # [8, 12) is empty in text order ('8' > '12'): merging it with [12, 16) on a TEXT column would add rows
    assert len(value_audit.merged_ranges(_integers((8, 12), (12, 16)))) == 2
    strings = [
        PartitionBounds(kind=BoundsKind.RANGE, column="c", lower=lo, upper=hi, value_type="string", label=lo)
        for lo, hi in (("a", "b"), ("b", "c"))
    ]
    assert len(value_audit.merged_ranges(strings)) == 2  # a column collation may order text otherwise
    listed = PartitionBounds(
        kind=BoundsKind.VALUES, column="c", values=("x",), value_type="string", label="x"
    )
    assert value_audit.merged_ranges([listed, listed]) == [listed, listed]


def test_a_refusal_counts_the_rows_of_every_statement(tmp_path: Path) -> None:
    """The counts of the per-run statements add up: a bad value on each side of a gap, both counted."""
    path = tmp_path / "orders.sqlite"
    many_orders(path, 1_000)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE orders SET amount = 'x' WHERE id IN (5, 905)")
    source = SqliteSource(path, orders_spec())
    try:
        bounds = source.plan_partitions()
        with pytest.raises(DponeError) as raised:
            source.audit_values([*bounds[:4], *bounds[6:]], None)
    finally:
        source.close()
    assert raised.value.code is ErrorCode.MANIFEST_INVALID
    assert raised.value.details["column"] == "amount" and raised.value.details["rows"] == 2
