"""What a SQLite table declares is what it holds: generated columns move, and a key is a rowid alias only
when SQLite makes it one.

SQLite's ``PRAGMA table_info`` leaves out generated columns (``GENERATED ALWAYS AS (...) VIRTUAL`` or
``STORED``), though ``SELECT *`` returns them. Found trying it: a table with two generated columns arrived
in the target without them (exit 0), and ``source.columns`` naming one was refused as "a column the source
does not have". The source now describes ``table_xinfo`` (a virtual table's hidden columns stay out, as
``SELECT *`` leaves them out). ``INTEGER PRIMARY KEY DESC`` reads like a rowid alias and is none (SQLite keeps
text, reals and NULL there): it is audited and nullable like any column. Every path on chDB, a day
partition on a generated column, every target value compared with SQLite's own reading of the table.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from airflow_provider_dpone.adapters.sources import open_source
from airflow_provider_dpone.cli.main import cli
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


def key_table(base: Path, rows: list[tuple[object, str]], columns: str) -> Path:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(f"CREATE TABLE keyed ({columns})")
        db.executemany("INSERT INTO keyed VALUES (?, ?)", rows)
    path = base / "keyed.yaml"
    path.write_text(
        """
kind: native_transfer
name: keyed
source: {type: sqlite, connection: "sqlite:///source.sqlite", table: keyed}
sink: {type: clickhouse, connection: "chdb:///ch", table: demo.keyed, strategy: full_refresh}
checkpoints: {connection: "sqlite:///state.sqlite"}
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    "key", ["id INTEGER PRIMARY KEY DESC", "id INT PRIMARY KEY"], ids=["integer-desc", "int"]
)
def test_a_key_that_reads_like_a_rowid_alias_but_is_none_is_audited_and_may_hold_null(
    tmp_path: Path, key: str
) -> None:
    """SQLite's quirk: ``INTEGER PRIMARY KEY DESC`` is an ordinary column (it has an index of its own), so
    it keeps ``'abc'``, 2.5 and NULL. Red before: taken for the rowid alias, it was neither audited nor
    nullable, and both runs stopped inside the target call (``target_outcome_unknown``, route blocked)."""
    refused = key_table(tmp_path, [(1, "a"), ("abc", "b"), (2.5, "c")], f"{key}, v TEXT NOT NULL")
    result = CliRunner().invoke(cli, ["run", str(refused)], catch_exceptions=False)
    assert result.exit_code == 2 and "column 'id' (Int64) holds values that are not integers" in result.output
    assert "target_outcome_unknown" not in result.output

    other = tmp_path / "nulls"
    other.mkdir()
    manifest = key_table(other, [(1, "a"), (None, "b"), (3, "c")], f"{key}, v TEXT NOT NULL")
    assert run(manifest, "r1").rows_committed == 3
    rows = query_rows(chdb_at(other), "SELECT id, v, toTypeName(id) FROM demo.keyed ORDER BY v")
    assert rows == [(1, "a", "Nullable(Int64)"), (None, "b", "Nullable(Int64)"), (3, "c", "Nullable(Int64)")]


def test_a_true_rowid_alias_stays_not_null_and_unaudited(tmp_path: Path) -> None:
    manifest = key_table(tmp_path, [(1, "a"), (2, "b")], "id INTEGER, v TEXT NOT NULL, PRIMARY KEY (id DESC)")
    assert run(manifest, "r1").rows_committed == 2
    rows = query_rows(chdb_at(tmp_path), "SELECT id, toTypeName(id) FROM demo.keyed ORDER BY id")
    assert rows == [(1, "Int64"), (2, "Int64")]
