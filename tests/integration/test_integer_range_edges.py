"""``integer_range`` partitions at the ends of a 64-bit key move every row once, and replace exactly.

Found by hand: with ids up to ``2**63 - 1`` and ``size: 1000`` the last range's upper bound is past 64 bits;
SQLite cannot bind such a number, and every run stopped with ``unexpected_error`` (an ``OverflowError``)
before anything was written. A bound past 64 bits is now bound as a REAL, which lies past every value the
column holds, so each comparison keeps its answer. ``replace_partition`` with a lookback re-runs the edge
ranges: the target's deletes and counts select them exactly too. Real SQLite, into chDB and the 18.16
server, every id compared.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.hand_made_target_rig import PATHS, query_rows, run, target_for, write_manifest

IDS = [-(2**63), -(2**63) + 999, -1500, -1000, -5, 0, 5, 999, 1000, 2**63 - 1000, 2**63 - 1]
SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: keys"


def make_source(base: Path) -> None:
    with sqlite3.connect(base / "source.sqlite") as conn:
        conn.execute("CREATE TABLE keys (id INTEGER PRIMARY KEY, label TEXT NOT NULL)")
        conn.executemany("INSERT INTO keys VALUES (?, ?)", [(i, f"k{i}") for i in IDS])


@pytest.mark.parametrize(("export", "load"), PATHS)
@pytest.mark.parametrize("target", ["chdb", "server"])
def test_ranges_at_both_ends_of_64_bits_move_and_replace_every_row_once(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    export: str,
    load: str,
) -> None:
    make_source(tmp_path)
    endpoint, connection, table = target_for(target, tmp_path, request, monkeypatch, "keys")
    manifest = write_manifest(
        tmp_path,
        source=SOURCE,
        partitioning="{kind: integer_range, column: id, size: 1000, lookback: 4}",
        connection=connection,
        table=table,
        export=export,
        load=load,
        strategy="replace_partition",
    )

    for attempt in ("r1", "r2"):  # the second run replaces the four newest ranges, the top edge among them
        run(manifest, attempt)
        rows = query_rows(endpoint, f"SELECT id, label FROM {table} ORDER BY id")
        assert rows == [(i, f"k{i}") for i in IDS]


@pytest.mark.parametrize("size", [1050, 1085])
def test_the_range_holding_minus_2_63_is_planned_where_its_rows_are_for_any_size(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """Red before: the range start was computed in SQL as ``id - id mod size``, which overflowed below
    -2**63 to a REAL rounded to 2,048; for most sizes (1050, 1085, ...) the planned range missed -2**63 and
    its neighbours: committed with 0 rows, exit 0, and ``--verify`` agreed."""
    make_source(tmp_path)
    endpoint, connection, table = target_for("chdb", tmp_path, request, monkeypatch, "keys")
    manifest = write_manifest(
        tmp_path,
        source=SOURCE,
        partitioning=f"{{kind: integer_range, column: id, size: {size}}}",
        connection=connection,
        table=table,
        export="lazy_plan",
        load="direct",
        strategy="incremental_append",
    )

    run(manifest, "r1")

    assert query_rows(endpoint, f"SELECT id, label FROM {table} ORDER BY id") == [(i, f"k{i}") for i in IDS]


def test_a_range_size_past_62_bits_is_refused_by_the_manifest(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        source=SOURCE,
        partitioning=f"{{kind: integer_range, column: id, size: {2**62 + 1}}}",
        connection="chdb:///ch",
        table="demo.keys",
    )
    with pytest.raises(DponeError) as refused:
        load_manifest(manifest)
    assert "source.partitioning.size" in refused.value.safe_message + str(refused.value.details)
