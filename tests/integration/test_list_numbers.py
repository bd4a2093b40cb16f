"""``list`` values of a ``Decimal`` column select rows by their number, on the source and in the target.

Found trying it: ``values: ["10.5", "10.50"]`` were two partitions that each selected the same rows (SQLite
compares numbers), and an append moved them twice (4 rows for 2, exit 0); ``values: [" 10.5"]`` under
``replace_partition`` armed, then its delete failed inside the target call (the engine cannot read
`` 10.5`` as a Decimal) and the route blocked. Values now fold by their number, and the target compares the
number the source compared. chDB, every row compared with the source.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from airflow_provider_dpone.adapters.clickhouse.predicates import predicate
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    chdb_at,
    checkpoints,
    create_target,
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
    so the first run's delete failed inside the target call and the route blocked on every run; then
    ``toFloat64('2.994')`` parsed to a neighbouring double there, the delete missed the rows, and each run
    appended them again. The value's own bits compare exactly."""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE sales (id INTEGER PRIMARY KEY, ratio REAL NOT NULL)")
        db.executemany(
            "INSERT INTO sales VALUES (?, ?)", [(i, (10.5, 7.0, 2.994)[i % 3]) for i in range(1, 31)]
        )
    endpoint, connection, table = target_for(target, tmp_path, request, monkeypatch, "ratios")
    manifest = write_manifest(
        tmp_path,
        source=SOURCE,
        partitioning='{kind: list, column: ratio, values: ["10.5", "2.994"], lookback: 2}',
        connection=connection,
        table=table,
        strategy="replace_partition",
    )
    for run_id in ("r1", "r2"):
        assert run(manifest, run_id).rows_committed == 20
        rows = query_rows(endpoint, f"SELECT id, ratio FROM {table} ORDER BY id")
        assert rows == [(i, 10.5 if i % 3 == 0 else 2.994) for i in range(1, 31) if i % 3 != 1]


@pytest.mark.parametrize(
    ("declared", "stored", "source_query", "values"),
    [
        ("", lambda i: i % 3, None, "[0, 1, 2]"),  # no declared type, integers: nothing selected
        (
            "",
            lambda i: i % 3,
            "SELECT id, CASE WHEN code >= 1 THEN code ELSE 0 END AS code FROM sales",
            "[0, 1, 2]",
        ),
        (
            "",
            lambda i: i % 3,
            "SELECT id, CAST(code AS INTEGER) AS code FROM sales",
            '["0", "1", "01"]',
        ),  # twice
        ("BLOB", lambda i: str(i % 3).encode(), None, "[0, 1, 2]"),  # bytes: nothing selected
        ("TIME", lambda i: ("1.0", "2")[i % 2], None, '["1.0"]'),  # numeric affinity: stored as 1
    ],
    ids=["untyped-column", "case-expression", "cast-as-integer", "blob-column", "time-column"],
)
def test_a_list_column_without_text_affinity_holding_numbers_or_bytes_stops_before_arming(
    tmp_path: Path, declared: str, stored: Callable[[int], object], source_query: str | None, values: str
) -> None:
    """Red before: SQLite compares a listed value by the column's affinity, not as the text the target
    keeps: text never equals a number or bytes stored without affinity (0 of 30 rows moved, every value
    committed empty, exit 0, ``--verify`` clean), and under a numeric affinity ``1`` and ``01`` selected the
    same rows (moved twice). Now the run stops before anything is written, naming the column; the
    ``CAST(... AS TEXT)`` it advises moves each row once, as its text."""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute(f"CREATE TABLE sales (id INTEGER PRIMARY KEY, code {declared})")
        db.executemany("INSERT INTO sales VALUES (?, ?)", [(i, stored(i)) for i in range(1, 31)])
        expected = sorted(
            (i, text)
            for i, text in db.execute("SELECT id, CAST(code AS TEXT) FROM sales")
            if text in {"0", "1", "01", "2", "1.0"}
        )
    query = f"\n  query: {source_query}" if source_query else ""
    manifest = write_manifest(
        tmp_path,
        source=SOURCE + query,
        partitioning=f"{{kind: list, column: code, values: {values}}}",
        connection=CHDB_CONNECTION,
        table="demo.sales",
    )
    with pytest.raises(DponeError) as stopped:
        run(manifest, "r1")
    assert stopped.value.code is ErrorCode.MANIFEST_INVALID
    assert stopped.value.details["problem"] == "list_column_holds_non_text"
    assert checkpoints(manifest) == []

    fixed = write_manifest(
        tmp_path,
        source=SOURCE + "\n  query: SELECT id, CAST(code AS TEXT) AS code FROM sales",
        partitioning=f"{{kind: list, column: code, values: {values}}}",
        connection=CHDB_CONNECTION,
        table="demo.sales",
    )
    run(fixed, "r2")
    listed = {str(v) for v in yaml.safe_load(values)}
    assert query_rows(chdb_at(tmp_path), "SELECT id, code FROM demo.sales ORDER BY id") == [
        row for row in expected if row[1] in listed
    ]


def test_a_float_value_sqlite_reads_as_another_double_stops_before_arming(tmp_path: Path) -> None:
    """SQLite's number parsing is not correctly rounded: ``4912.446821`` is a neighbouring double there.
    Red before: rows written as that text moved again on every run (the target's delete, comparing the
    correctly rounded double, missed them), rows written from a program were never selected; exit 0."""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE sales (id INTEGER PRIMARY KEY, ratio REAL NOT NULL)")
        db.executemany("INSERT INTO sales VALUES (?, 7.5)", [(i,) for i in range(1, 16)])
        db.executemany("INSERT INTO sales VALUES (?, 4912.446821)", [(i,) for i in range(16, 31)])
    manifest = write_manifest(
        tmp_path,
        source=SOURCE,
        partitioning='{kind: list, column: ratio, values: ["7.5", "4912.446821"], lookback: 2}',
        connection=CHDB_CONNECTION,
        table="demo.sales",
        strategy="replace_partition",
    )

    with pytest.raises(DponeError) as stopped:
        run(manifest, "r1")

    assert stopped.value.code is ErrorCode.MANIFEST_INVALID
    assert stopped.value.details == {
        "column": "ratio",
        "position": 2,
        "problem": "float_value_read_otherwise",
    }
    assert "4912" not in stopped.value.render()
    assert checkpoints(manifest) == []


def test_a_listed_zero_selects_negative_zero_in_the_target_as_sources_do(tmp_path: Path) -> None:
    """IN compares a float's bits, = its value: a source (SQL equality) selects -0.0 rows for a listed 0,
    and the target's delete missed them (a SQL Server float column served -0.0: each run appended them
    again, exit 0). The target's condition for a float column lists both zeros."""
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, "demo.zeros", "id Int64, amount Nullable(Float64)", "id")
    query_rows(
        endpoint,
        "INSERT INTO demo.zeros SELECT number, if(number = 0, 0.0, if(number = 1, -0.0, 1.5)) FROM numbers(3)",
    )
    bounds = PartitionBounds(kind=BoundsKind.VALUES, column="amount", values=("0",), label="amount=0")
    condition = predicate(bounds, {"amount": "Nullable(Float64)"})

    assert query_rows(endpoint, f"SELECT id FROM demo.zeros WHERE {condition} ORDER BY id") == [(0,), (1,)]


@pytest.mark.parametrize("target", ["chdb", "server"])
def test_a_listed_value_of_a_float32_column_selects_its_single_precision_rows(
    tmp_path: Path, target: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQL Server's ``real`` lands in a ``Float32`` column and compares a listed ``10.1`` as single
    precision. Red before: the target's condition was the Float64 pattern of 10.1, which no Float32 row
    equals: the replace's delete removed nothing and each run appended the rows again (exit 0)."""
    endpoint, _, table = target_for(target, tmp_path, request, monkeypatch, "singles")
    create_target(endpoint, table, "id Int64, ratio Nullable(Float32)", "id")
    query_rows(
        endpoint,
        f"INSERT INTO {table} SELECT number, if(number % 3 = 0, 10.1, 2.5) FROM system.numbers LIMIT 30",
    )
    listed = PartitionBounds(kind=BoundsKind.VALUES, column="ratio", values=("10.1", "0"), label="ratio=10.1")

    condition = predicate(listed, {"ratio": "Nullable(Float32)"})

    assert query_rows(endpoint, f"SELECT count() FROM {table} WHERE {condition}") == [(10,)]
