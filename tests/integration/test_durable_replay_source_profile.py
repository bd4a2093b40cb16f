"""Source profiles (the source scope of quality checks) on real SQLite files and the TDS emulator.

The profile must equal what the rows a read returns would give, computed independently here, over the
exact union of the batch's partitions; strings compare byte for byte, as ClickHouse's ``uniqExact`` does.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources import profiling
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from tests.builders import day


def sqlite_spec(table: str = "orders") -> SourceSpec:
    return SourceSpec(type=SourceType.SQLITE, connection="sqlite:///x", table=table)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[SqliteSource, Path]]:
    path = tmp_path / "source.sqlite"
    create_demo_source(path, 500, days=5)
    source = SqliteSource(path, sqlite_spec())
    yield source, path
    source.close()


def expected(path: Path, where: str, columns: list[str]) -> dict[str, Any]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(f"SELECT {', '.join(columns)} FROM orders WHERE {where}").fetchall()
    finally:
        db.close()
    return {
        "rows": len(rows),
        "null_counts": {c: sum(1 for r in rows if r[i] is None) for i, c in enumerate(columns)},
        "distinct_counts": {c: len({r[i] for r in rows if r[i] is not None}) for i, c in enumerate(columns)},
    }


def test_sqlite_profile_is_exact_over_the_union_of_the_batch(demo: tuple[SqliteSource, Path]) -> None:
    source, path = demo
    columns = ["id", "customer", "amount", "order_date"]
    bounds = [day("2026-11-26", "2026-11-27"), day("2026-11-28", "2026-11-30")]
    profile = source.profile(bounds, columns)
    where = "(order_date >= '2026-11-26' AND order_date < '2026-11-27') OR (order_date >= '2026-11-28' AND order_date < '2026-11-30')"
    assert profile == expected(path, where, columns)
    assert profile["rows"] == 300


def test_sqlite_profile_of_adjacent_days_is_one_range_scan_and_still_exact(
    demo: tuple[SqliteSource, Path],
) -> None:
    source, path = demo
    columns = ["id", "customer", "amount", "order_date"]
    days = ["2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30", "2026-12-01"]
    bounds = [day(low, high) for low, high in itertools.pairwise(days)]
    text, params = profiling.sqlite_profile("orders", bounds, columns)
    assert " OR " not in text  # one index range, not SQLite's multi-index OR (it keeps every rowid)
    with sqlite3.connect(path) as db:
        plan = " ".join(str(row[-1]) for row in db.execute(f"EXPLAIN QUERY PLAN {text}", params))
    assert "MULTI-INDEX OR" not in plan
    profile = source.profile(bounds, columns)
    assert profile == expected(path, "order_date >= '2026-11-26' AND order_date < '2026-12-01'", columns)
    assert profile["rows"] == 500


def test_sqlite_distinct_counts_compare_bytes_whatever_the_declared_collation(tmp_path: Path) -> None:
    path = tmp_path / "nocase.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE people (name TEXT COLLATE NOCASE, d DATE)")
    db.executemany(
        "INSERT INTO people VALUES (?, ?)",
        [("ann", "2026-01-01"), ("ANN", "2026-01-01"), (None, "2026-01-01")],
    )
    db.commit()
    db.close()
    source = SqliteSource(path, sqlite_spec("people"))
    try:
        profile = source.profile([PartitionBounds(kind=BoundsKind.ALL, label="all")], ["name"])
    finally:
        source.close()
    assert profile == {"rows": 3, "null_counts": {"name": 1}, "distinct_counts": {"name": 2}}


def test_sqlite_profile_refuses_a_column_the_read_does_not_return(demo: tuple[SqliteSource, Path]) -> None:
    source, _ = demo
    with pytest.raises(DponeError) as caught:
        source.profile([day("2026-11-26", "2026-11-27")], ["nope"])
    assert caught.value.code is ErrorCode.MANIFEST_INVALID


@pytest.mark.service
def test_mssql_profile_over_the_tds_wire(
    tds_emulator: EndpointDescriptor, tds_orders: list[dict[str, Any]]
) -> None:
    spec = SourceSpec(type=SourceType.MSSQL, connection="mssql_test", table="dbo.orders")
    source = MssqlSource(tds_emulator, spec)
    try:
        bounds = [day("2026-11-26", "2026-11-27"), day("2026-11-28", "2026-11-29")]
        profile = source.profile(bounds, ["id", "amount"])
        picked = [r for r in tds_orders if r["order_date"] in (date(2026, 11, 26), date(2026, 11, 28))]
        assert profile == {
            "rows": len(picked),
            "null_counts": {"id": 0, "amount": 0},
            "distinct_counts": {"id": len(picked), "amount": len({r["amount"] for r in picked})},
        }
        # Exact string distinct counts compare CAST(c AS VARBINARY(MAX)), which the emulator cannot run:
        # it refuses, and a required metric is never replaced by an inexact one.
        with pytest.raises(DponeError) as caught:
            source.profile(bounds, ["customer"])
        assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
    finally:
        source.close()
