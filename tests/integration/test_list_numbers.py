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

from tests.integration.hand_made_target_rig import CHDB_CONNECTION, chdb_at, query_rows, run, write_manifest

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
