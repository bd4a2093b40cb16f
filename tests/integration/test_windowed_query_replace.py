"""A replacing route whose ``source.query`` selects a window that does not line up with its partitions stops
before deleting rows the source still holds.

An Airflow DAG templating its data interval into ``source.query`` is a new definition every run. In a zone
other than UTC (or hourly) its window covers parts of two UTC days; red before, each run replaced a whole day
with its part and deleted what the previous run had loaded there: three green runs, 9 of 23 rows left, a note
each time. Black-box ``dpone`` runs: SQLite source, chDB target; target values compared with the source.
"""

from __future__ import annotations

import datetime as dt
import json
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


def test_a_window_across_two_days_stops_before_deleting_what_the_previous_window_loaded(
    tmp_path: Path,
) -> None:
    _source(tmp_path)
    first = dpone("run", str(_window(tmp_path, "2026-03-05 18:30:00", "2026-03-06 18:30:00")))
    assert first.exit_code == 0, first.output
    loaded = _target(tmp_path)
    assert loaded == _expected("2026-03-05 18:30:00", "2026-03-06 18:30:00")

    second = dpone("run", "--json", str(_window(tmp_path, "2026-03-06 18:30:00", "2026-03-07 18:30:00")))

    assert second.exit_code == 3, second.output
    stop = json.loads(second.output)
    assert stop["error"] == "native_transfer_target_not_empty"
    assert stop["details"]["problem"] == "replaced_rows_not_selected_again"
    assert stop["details"]["partitions"] == ["ts=2026-03-06"]
    assert _target(tmp_path) == loaded  # nothing deleted


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


def test_a_window_narrowed_on_purpose_replaces_the_rows_it_drops_once_allowed(tmp_path: Path) -> None:
    _source(tmp_path)
    assert dpone("run", str(_window(tmp_path, "2026-03-06 00:00:00", "2026-03-07 00:00:00"))).exit_code == 0
    narrowed = _window(tmp_path, "2026-03-06 12:00:00", "2026-03-07 00:00:00")
    assert dpone("run", str(narrowed)).exit_code == 3

    allowed = dpone("run", "--allow-nonempty-target", str(narrowed))

    assert allowed.exit_code == 0, allowed.output
    assert _target(tmp_path) == _expected("2026-03-06 12:00:00", "2026-03-07 00:00:00")
