"""A SQLite table's generated columns move like any other column.

SQLite's ``PRAGMA table_info`` leaves out generated columns (``GENERATED ALWAYS AS (...) VIRTUAL`` or
``STORED``), though ``SELECT *`` returns them. Found trying it: a table with two generated columns arrived
in the target without them (exit 0), and ``source.columns`` naming one was refused as "a column the source
does not have". The source now describes ``table_xinfo`` (a virtual table's hidden columns stay out, as
``SELECT *`` leaves them out). Every path on chDB, a day partition on a generated column, every target value
compared with SQLite's own reading of the table.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources import open_source
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType
from tests.integration.hand_made_target_rig import PATHS, chdb_at, query_rows, run

TABLE = (
    "CREATE TABLE events (id INTEGER PRIMARY KEY, at TEXT NOT NULL, amount INTEGER NOT NULL, "
    "day TEXT GENERATED ALWAYS AS (substr(at, 1, 10)) VIRTUAL, "
    "doubled INTEGER GENERATED ALWAYS AS (amount * 2) STORED, "
    "label TEXT GENERATED ALWAYS AS ('e-' || id) VIRTUAL)"
)


def make_source(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        db.execute(TABLE)
        db.executemany(
            "INSERT INTO events (id, at, amount) VALUES (?, ?, ?)",
            [(i, f"2026-11-{1 + i % 3:02d} 10:{i % 60:02d}:00", i * 7) for i in range(1, 61)],
        )
        return db.execute("SELECT id, at, amount, day, doubled, label FROM events ORDER BY id").fetchall()


def write_manifest(base: Path, *, export: str, load: str, extra: str = "") -> Path:
    path = base / "manifest.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: generated
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: events{extra}
  partitioning: {{kind: day, column: day}}
  export: {export}
sink:
  type: clickhouse
  connection: chdb:///ch
  table: demo.events
  strategy: incremental_append
  load: {load}
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_generated_columns_arrive_with_their_values_on_every_path(
    tmp_path: Path, export: str, load: str
) -> None:
    """Red with ``table_info``: the target had ``id, at, amount`` only (and no day column to partition on)."""
    source = make_source(tmp_path / "source.sqlite")
    manifest = write_manifest(tmp_path, export=export, load=load)

    assert run(manifest, "r1").rows_committed == len(source)
    rows = query_rows(
        chdb_at(tmp_path), "SELECT id, at, amount, toString(day), doubled, label FROM demo.events ORDER BY id"
    )
    assert rows == source
    assert run(manifest, "r2").rows_committed == 0


def test_source_columns_may_name_a_generated_column(tmp_path: Path) -> None:
    source = make_source(tmp_path / "source.sqlite")
    manifest = write_manifest(
        tmp_path, export="lazy_plan", load="direct", extra="\n  columns: [id, day, doubled]"
    )

    assert run(manifest, "r1").rows_committed == len(source)
    rows = query_rows(chdb_at(tmp_path), "SELECT id, toString(day), doubled FROM demo.events ORDER BY id")
    assert rows == [(i, day, doubled) for i, _, _, day, doubled, _ in source]


def test_a_virtual_tables_hidden_columns_are_not_described(tmp_path: Path) -> None:
    """An FTS5 table's own hidden columns (its name, ``rank``) are not returned by ``SELECT *``."""
    path = tmp_path / "fts.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE VIRTUAL TABLE notes USING fts5(body)")
    endpoint = EndpointDescriptor(name="s", kind=EndpointKind.SQLITE, path=str(path))
    source = open_source(SourceSpec(type=SourceType.SQLITE, connection="s", table="notes"), endpoint)
    try:
        assert source.describe().names == ("body",)
    finally:
        source.close()
