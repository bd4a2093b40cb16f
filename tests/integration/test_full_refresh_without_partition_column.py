"""A ``full_refresh`` route whose ``source.columns`` leave its partition column out keeps its ways out.

Its target table has no column to select a partition's rows by. Before, every command that counted a
partition there failed (``target_load_failed``, exit 1): ``guard inspect`` and ``guard resolve`` over a
blocked attempt, ``guard rebaseline --source-moved`` (even with ``--force``) and ``--target-moved`` after a
move, so the route stayed stopped for good. Those counts are unknown now, as a count that fails under
``--force`` is. Black-box ``dpone`` runs, SQLite into chDB, checkpoints in SQLite; after each way out the
next run refreshes and the target is compared with the source value by value.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.builders import chdb_endpoint
from tests.integration.route_rig import append_armed, cents, dpone, latest_of

COLUMNS = "id, customer, amount, updated_at"


def _manifest(base: Path, connection: str, folder: str = "clickhouse", file: str = "refresh.yaml") -> Path:
    path = base / file
    path.write_text(
        f"""
kind: native_transfer
name: refresh
source:
  type: sqlite
  connection: {connection}
  table: orders
  columns: [{COLUMNS}]
  partitioning: {{kind: day, column: order_date}}
sink:
  type: clickhouse
  connection: chdb:///{folder}
  table: demo.refresh
  strategy: full_refresh
  order_by: [id]
checkpoints:
  connection: sqlite:///{base / "state.sqlite"}
""",
        encoding="utf-8",
    )
    return path


def _source(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        rows = db.execute(f"SELECT {COLUMNS} FROM orders").fetchall()
    return sorted((r[0], r[1], cents(str(r[2])), r[3]) for r in rows)


def _target(folder: Path) -> list[tuple[Any, ...]]:
    client = open_client(chdb_endpoint(folder))
    try:
        rows = client.query(
            "SELECT id, customer, toString(amount), toString(updated_at) FROM demo.refresh"
        ).result_rows
    finally:
        client.close()
    return sorted((r[0], r[1], cents(r[2]), r[3]) for r in rows)


def _add_row(path: Path, row_id: int) -> None:
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO orders (id, order_date, customer, amount, updated_at) SELECT ?, order_date, 'late', "
            "'1.25', updated_at FROM orders LIMIT 1",
            (row_id,),
        )


def test_a_blocked_refresh_is_inspected_resolved_not_applied_and_the_next_run_refreshes_every_row(
    base: Path,
) -> None:
    manifest = _manifest(base, "sqlite:///source.sqlite")
    assert dpone("run", str(manifest)).exit_code == 0
    route = load_manifest(manifest).route
    store = f"sqlite:///{base / 'state.sqlite'}"
    append_armed(store, sorted(latest_of(store, route), key=lambda c: str(c.bounds.lower)), how_many=2)

    inspected = dpone("guard", "inspect", str(manifest), "--json")
    resolved = dpone(
        "guard", "resolve", str(manifest), "--all-blocked", "--as", "not-applied", "--reason", "r"
    )

    assert inspected.exit_code == 0, inspected.output
    blocked = json.loads(inspected.stdout)["blocked"]
    assert [row["target_rows"] for row in blocked] == [None, None]  # no column to count a day by
    assert resolved.exit_code == 0, resolved.output
    _add_row(base / "source.sqlite", 10_000_001)
    assert dpone("run", str(manifest)).exit_code == 0
    assert _target(base / "clickhouse") == _source(base / "source.sqlite")


@pytest.mark.parametrize("force", [False, True])
def test_a_moved_source_file_is_recorded_and_the_next_run_refreshes_from_it(
    base: Path, monkeypatch: pytest.MonkeyPatch, force: bool
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SOURCE_A", f"sqlite:///{base / 'source.sqlite'}")
    monkeypatch.setenv("AIRFLOW_CONN_SOURCE_B", f"sqlite:///{base / 'moved.sqlite'}")
    assert dpone("run", str(_manifest(base, "source_a"))).exit_code == 0
    shutil.copy(base / "source.sqlite", base / "moved.sqlite")
    moved = _manifest(base, "source_b")
    assert dpone("run", str(moved)).exit_code == 3

    recorded = dpone(
        "guard", "rebaseline", str(moved), "--source-moved", *(["--force"] if force else []), "--reason", "r"
    )

    assert recorded.exit_code == 0, recorded.output
    assert "keys not compared: the target table does not hold the partition column" in recorded.output
    _add_row(base / "moved.sqlite", 10_000_001)
    assert dpone("run", str(moved)).exit_code == 0
    assert _target(base / "clickhouse") == _source(base / "moved.sqlite")


def test_a_moved_chdb_folder_is_recorded_and_the_next_run_refreshes_into_it(base: Path) -> None:
    """The folder is reached through a link (one chDB process cannot open a copy of a folder it has open);
    a real move looks the same to the route."""
    assert dpone("run", str(_manifest(base, "sqlite:///source.sqlite"))).exit_code == 0
    (base / "linked").symlink_to(base / "clickhouse")
    moved = _manifest(base, "sqlite:///source.sqlite", folder=str(base / "linked"))
    assert dpone("run", str(moved)).exit_code == 3

    recorded = dpone("guard", "rebaseline", str(moved), "--target-moved", "--reason", "r")

    assert recorded.exit_code == 0, recorded.output
    _add_row(base / "source.sqlite", 10_000_001)
    assert dpone("run", str(moved)).exit_code == 0
    assert _target(base / "clickhouse") == _source(base / "source.sqlite")
