"""A replacing route whose ``source.query`` is templated per run with windows of whole UTC days.

The Airflow guide's rule for a query templated per run on ``replace_partition``: the window selects whole
partitions. Then each run replaces only what its own query selects again, the lookback re-runs the days
it shares with the previous window, and a filter on another column (a region) leaves the rows it selected
alone. Black-box ``dpone`` runs: SQLite source, chDB target; target values compared with the source.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

from tests.integration.route_rig import chdb_query, dpone

START = dt.datetime(2026, 3, 6)
ROWS = [(i, (START + dt.timedelta(hours=3 * i)).isoformat(sep=" "), i) for i in range(32)]


def _source(base: Path) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, ts DATETIME NOT NULL, v INTEGER)")
        db.executemany("INSERT INTO ev VALUES (?, ?, ?)", ROWS)


def _window(base: Path, low: str, high: str) -> Path:
    """The route with its query selecting [low, high), as a DAG renders its data interval."""
    manifest = base / f"ev_{low[:10]}.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: ev
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: ev
  query: "SELECT * FROM ev WHERE ts >= '{low}' AND ts < '{high}'"
  partitioning: {{kind: day, column: ts, lookback: 2}}
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: demo.ev
  strategy: replace_partition
  order_by: [ts, id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return manifest


def _target(base: Path) -> list[tuple[int, str, int]]:
    rows = chdb_query(base, "SELECT id, toString(ts), v FROM demo.ev ORDER BY id")
    return [(int(i), str(ts), int(v)) for i, ts, v in rows]


def _expected(low: str, high: str) -> list[tuple[int, str, int]]:
    return [r for r in ROWS if low <= r[1] < high]


def test_windows_of_whole_utc_days_replace_nothing_another_window_loaded(tmp_path: Path) -> None:
    _source(tmp_path)
    for low, high in [
        ("2026-03-06", "2026-03-07"),
        ("2026-03-07", "2026-03-08"),
        ("2026-03-08", "2026-03-09"),
    ]:
        result = dpone("run", str(_window(tmp_path, low, high)))
        assert result.exit_code == 0, result.output
    assert _target(tmp_path) == _expected("2026-03-06", "2026-03-09")


def test_whole_day_windows_with_a_selective_filter_replace_the_same_rows(
    tmp_path: Path,
) -> None:
    """Both queries select the same third of each shared day (a region): the lookback re-runs the day
    with the same rows, every run, exit 0."""
    _source(tmp_path)
    for low, high in [
        ("2026-03-06", "2026-03-08"),
        ("2026-03-07", "2026-03-09"),
        ("2026-03-08", "2026-03-10"),
    ]:
        manifest = _window(tmp_path, low, high)
        manifest.write_text(
            manifest.read_text(encoding="utf-8").replace(f"'{high}'", f"'{high}' AND v % 3 = 0")
        )
        result = dpone("run", str(manifest))
        assert result.exit_code == 0, result.output
    assert _target(tmp_path) == [r for r in _expected("2026-03-06", "2026-03-10") if r[2] % 3 == 0]
