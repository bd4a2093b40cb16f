"""A TEXT column of a view or a query holds text only where a table stored it: numbers arrive as their text.

SQLite's TEXT affinity turns a number into text when a *table* stores it, so a table's TEXT column holds
text (or a blob). A view's or a query's column takes its declared type from the first arm of a UNION (or
from the column a CASE names), and later arms hand a REAL over as a REAL. The Arrow read, pinned to text,
printed it as ``1.234568e+02`` (``0.1`` as ``1.000000e-01``), exit 0 on every path. Such columns are now
counted like untyped ones: a number takes the row read's exact text of it (Python's shortest round trip,
what an untyped expression already got). Every path, a view and a query, every value compared.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec, SourceType
from tests.integration.hand_made_target_rig import PATHS, chdb_at, query_rows, run

REALS = [123.456789012345, 0.1, 0.1 + 0.2, 299792458.5, 7.0, -0.0, 1e300]
UNION = "SELECT id, d, val FROM notes UNION ALL SELECT id, d, val FROM readings"


def make_source(path: Path) -> dict[int, str | None]:
    """The source, and each id's value as its text should arrive."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, d DATE NOT NULL, val TEXT)")
        db.execute("CREATE TABLE readings (id INTEGER PRIMARY KEY, d DATE NOT NULL, val REAL)")
        db.executemany("INSERT INTO notes VALUES (?, '2026-01-01', ?)", [(1, "ok"), (2, None)])
        db.executemany(
            "INSERT INTO readings VALUES (?, ?, ?)",
            [(10 + i, f"2026-01-0{1 + i % 2}", value) for i, value in enumerate(REALS)],
        )
        db.execute(f"CREATE VIEW all_vals AS {UNION}")
        held = db.execute("SELECT id, val, typeof(val) FROM all_vals").fetchall()
    assert {kind for _, _, kind in held} == {"text", "null", "real"}
    # as SQLite holds them (it keeps -0.0 as 0.0), each number as its shortest exact text
    return {i: value if value is None or isinstance(value, str) else repr(value) for i, value, _ in held}


@pytest.mark.parametrize("source", ["view", "view-as-MAIN", "query"])
@pytest.mark.parametrize(("export", "load"), PATHS)
def test_numbers_in_a_text_column_of_a_view_or_query_arrive_as_their_exact_text(
    tmp_path: Path, source: str, export: str, load: str
) -> None:
    """``view-as-MAIN``: the schema spelled as SQLite allows (names compare without case)."""
    expected = make_source(tmp_path / "source.sqlite")
    table = {
        "view": "table: all_vals",
        "view-as-MAIN": "table: MAIN.all_vals",
        "query": f"table: notes\n  query: '{UNION}'",
    }[source]
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: texts
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  {table}
  partitioning: {{kind: day, column: d}}
  export: {export}
sink: {{type: clickhouse, connection: chdb:///ch, table: demo.vals, strategy: incremental_append, load: {load}}}
checkpoints: {{connection: sqlite:///state.sqlite}}
""",
        encoding="utf-8",
    )

    assert run(manifest, "r1").rows_committed == len(expected)

    landed = dict(query_rows(chdb_at(tmp_path), "SELECT id, val FROM demo.vals"))
    assert landed == expected  # red before: '1.234568e+02', '1.000000e-01', ...


class _NoTableList:
    """A connection of SQLite before 3.37, as far as the source can tell: no ``pragma_table_list``."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if "pragma_table_list" in sql:
            raise sqlite3.OperationalError("no such table-valued function: pragma_table_list")
        return self._connection.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._connection, name)


@pytest.mark.parametrize("arrow_read", [True, False])
def test_a_view_is_known_where_sqlite_has_no_table_list(tmp_path: Path, arrow_read: bool) -> None:
    """The view check falls back to the catalog (``sqlite_master``) where ``pragma_table_list`` is missing."""
    expected = make_source(tmp_path / "source.sqlite")
    spec = SourceSpec(
        type=SourceType.SQLITE,
        connection="src",
        table="all_vals",
        partitioning=Partitioning(kind=PartitionKind.DAY, column="d"),
    )
    source = SqliteSource(tmp_path / "source.sqlite", spec, arrow_read=arrow_read)
    source._connection = _NoTableList(source._db())  # type: ignore[assignment]
    try:
        source.describe()
        landed: dict[int, str | None] = {}
        for bounds in source.plan_partitions():
            for chunk in source.read("p", bounds, 1000):
                columns = dict(zip(chunk.names, chunk.columns, strict=True))
                landed.update(zip(columns["id"], columns["val"], strict=True))
    finally:
        source.close()
    assert landed == expected
