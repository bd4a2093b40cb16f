"""``list`` values of a ``Decimal`` column select rows by their number, on the source and in the target.

Found trying it: ``values: ["10.5", "10.50"]`` were two partitions that each selected the same rows (SQLite
compares numbers), and an append moved them twice (4 rows for 2, exit 0); ``values: [" 10.5"]`` under
``replace_partition`` armed, then its delete failed inside the target call (the engine cannot read
`` 10.5`` as a Decimal) and the route blocked. Values now fold by their number, and the target compares the
number the source compared. chDB, every row compared with the source.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    chdb_at,
    checkpoints,
    query_rows,
    run,
    target_for,
    write_manifest,
)

SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: sales"


def make_source(base: Path) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("CREATE TABLE sales (id INTEGER PRIMARY KEY, amount NUMERIC(12, 2) NOT NULL)")
        db.executemany("INSERT INTO sales VALUES (?, ?)", [(i, (10.5, 7, 3.25)[i % 3]) for i in range(1, 31)])


def route(base: Path, values: str, strategy: str) -> Path:
    lookback = ", lookback: 2" if strategy == "replace_partition" else ""
    return write_manifest(
        base,
        source=SOURCE,
        partitioning=f"{{kind: list, column: amount, values: {values}{lookback}}}",
        connection=CHDB_CONNECTION,
        table="demo.sales",
        strategy=strategy,
    )


def target(base: Path) -> list[tuple[object, ...]]:
    return query_rows(chdb_at(base), "SELECT id, toString(amount) FROM demo.sales ORDER BY id")


def test_two_spellings_of_one_number_move_its_rows_once(tmp_path: Path) -> None:
    make_source(tmp_path)
    report = run(route(tmp_path, '["10.5", "10.50", 7]', "incremental_append"), "r1")
    assert report.rows_committed == 20
    assert target(tmp_path) == [(i, "10.5" if i % 3 == 0 else "7") for i in range(1, 31) if i % 3 != 2]


def test_a_spaced_number_is_replaced_run_after_run_without_blocking(tmp_path: Path) -> None:
    make_source(tmp_path)
    manifest = route(tmp_path, '[" 10.5"]', "replace_partition")
    for run_id in ("r1", "r2", "r3"):  # each run deletes the value's rows and inserts them again
        assert run(manifest, run_id).rows_committed == 10
        assert target(tmp_path) == [(i, "10.5") for i in range(3, 31, 3)]


@pytest.mark.parametrize("target", ["chdb", "server"])
def test_a_float_columns_values_are_replaced_run_after_run_on_every_target(
    tmp_path: Path, target: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red before on the 18.16 server: ``c IN ('10.5','7')`` on a Float64 column is a type mismatch there,
    so the first run's delete failed inside the target call and the route blocked on every run."""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE sales (id INTEGER PRIMARY KEY, ratio REAL NOT NULL)")
        db.executemany(
            "INSERT INTO sales VALUES (?, ?)", [(i, (10.5, 7.0, 3.25)[i % 3]) for i in range(1, 31)]
        )
    endpoint, connection, table = target_for(target, tmp_path, request, monkeypatch, "ratios")
    manifest = write_manifest(
        tmp_path,
        source=SOURCE,
        partitioning='{kind: list, column: ratio, values: ["10.5", "7"], lookback: 2}',
        connection=connection,
        table=table,
        strategy="replace_partition",
    )
    for run_id in ("r1", "r2"):
        assert run(manifest, run_id).rows_committed == 20
        rows = query_rows(endpoint, f"SELECT id, ratio FROM {table} ORDER BY id")
        assert rows == [(i, 10.5 if i % 3 == 0 else 7.0) for i in range(1, 31) if i % 3 != 2]


@pytest.mark.parametrize(
    "source_query",
    [
        None,  # a column declared with no type holding integers
        "SELECT id, CASE WHEN code >= 2 THEN 2 WHEN code = 1 THEN 1 ELSE 0 END AS code FROM sales",
    ],
    ids=["untyped-column", "query-expression"],
)
def test_listed_values_a_column_holds_as_numbers_without_a_type_stop_before_arming(
    tmp_path: Path, source_query: str | None
) -> None:
    """Red before: a listed value is bound as text and SQLite's text never equals a number stored without
    affinity: every value committed 0 rows (0 of 30 moved, exit 0, ``--verify`` clean). Now the run stops
    before anything is written, naming the column; the CAST it advises moves every row."""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE sales (id INTEGER PRIMARY KEY, code)")
        db.executemany("INSERT INTO sales VALUES (?, ?)", [(i, i % 3) for i in range(1, 31)])
    query = f"\n  query: {source_query}" if source_query else ""
    manifest = write_manifest(
        tmp_path,
        source=SOURCE + query,
        partitioning="{kind: list, column: code, values: [0, 1, 2]}",
        connection=CHDB_CONNECTION,
        table="demo.sales",
    )
    with pytest.raises(DponeError) as stopped:
        run(manifest, "r1")
    assert stopped.value.code is ErrorCode.MANIFEST_INVALID
    assert stopped.value.details["problem"] == "list_value_stored_as_number"
    assert checkpoints(manifest) == []

    casted = "SELECT id, CAST(code AS INTEGER) AS code FROM sales"
    fixed = write_manifest(
        tmp_path,
        source=SOURCE + f"\n  query: {casted}",
        partitioning="{kind: list, column: code, values: [0, 1, 2]}",
        connection=CHDB_CONNECTION,
        table="demo.sales",
    )
    assert run(fixed, "r2").rows_committed == 30
    assert query_rows(chdb_at(tmp_path), "SELECT id, code FROM demo.sales ORDER BY id") == [
        (i, str(i % 3))
        for i in range(1, 31)  # an expression has no declared type: the target keeps text
    ]
