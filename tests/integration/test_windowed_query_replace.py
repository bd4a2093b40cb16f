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

from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.manifest import SourceSpec
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


def test_a_later_window_selecting_more_rows_of_the_shared_day_stops_too(tmp_path: Path) -> None:
    """Red before (counts alone): the second window selected more rows of 03-06 than the first had loaded,
    so it passed and deleted the first window's rows of that day, exit 0."""
    _source(tmp_path)
    with sqlite3.connect(tmp_path / "source.sqlite") as db:  # 03-06: two rows before 18:30, more after
        db.executemany(
            "INSERT INTO ev VALUES (?, ?, ?)", [(100 + i, "2026-03-06 20:00:00", i) for i in range(5)]
        )
    assert dpone("run", str(_window(tmp_path, "2026-03-05 18:30:00", "2026-03-06 18:30:00"))).exit_code == 0
    loaded = _target(tmp_path)

    second = dpone("run", "--json", str(_window(tmp_path, "2026-03-06 18:30:00", "2026-03-07 18:30:00")))

    assert second.exit_code == 3, second.output
    assert _target(tmp_path) == loaded


def test_a_computed_partition_column_is_not_counted_in_the_table(tmp_path: Path) -> None:
    """SQLite reads a double-quoted name its table lacks as a text literal: counted, the table's "day" (the
    query's ``date(ts) AS day``) held 0 rows. It is unknown instead, and the run decides nothing from it."""

    _source(tmp_path)
    spec = SourceSpec.model_validate_json(
        json.dumps(
            {
                "type": "sqlite",
                "connection": "src",
                "table": "ev",
                "query": "SELECT id, date(ts) AS day, ts, v FROM ev",
                "partitioning": {"kind": "day", "column": "day"},
            }
        )
    )
    source = SqliteSource(str(tmp_path / "source.sqlite"), spec)
    (day,) = day_partitions("day", [dt.date(2026, 3, 6)])
    assert source.count(day) == 8
    assert source.count_table(day) is None


def test_a_row_leaving_another_filter_of_whole_day_windows_just_leaves(tmp_path: Path) -> None:
    """A whole-day window re-run by the lookback, with a filter on another column (a soft delete): the two
    queries select the same rows but one, which goes, as with a query that never changes."""
    _source(tmp_path)
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("ALTER TABLE ev ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0")
    first = _window(tmp_path, "2026-03-06", "2026-03-08")
    first.write_text(
        first.read_text(encoding="utf-8").replace("SELECT *", "SELECT id, ts, v"), encoding="utf-8"
    )
    first.write_text(
        first.read_text(encoding="utf-8").replace("'2026-03-08'", "'2026-03-08' AND deleted = 0")
    )
    assert dpone("run", str(first)).exit_code == 0
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("UPDATE ev SET deleted = 1 WHERE id = 12")  # 2026-03-07 12:00
    second = _window(tmp_path, "2026-03-07", "2026-03-09")
    second.write_text(
        first.read_text(encoding="utf-8")
        .replace("'2026-03-06'", "'2026-03-07'")
        .replace("'2026-03-08'", "'2026-03-09'"),
        encoding="utf-8",
    )

    result = dpone("run", str(second))

    assert result.exit_code == 0, result.output
    assert _target(tmp_path) == [r for r in _expected("2026-03-06", "2026-03-09") if r[0] != 12]


def test_a_filter_switched_to_other_rows_of_the_same_days_replaces_them_once_allowed(tmp_path: Path) -> None:
    _source(tmp_path)
    assert dpone("run", str(_window(tmp_path, "2026-03-06 00:00:00", "2026-03-06 09:00:00"))).exit_code == 0
    switched = _window(tmp_path, "2026-03-06 09:00:00", "2026-03-07 00:00:00")
    assert dpone("run", str(switched)).exit_code == 3

    allowed = dpone("run", "--allow-nonempty-target", str(switched))

    assert allowed.exit_code == 0, allowed.output
    assert _target(tmp_path) == _expected("2026-03-06 09:00:00", "2026-03-07 00:00:00")


def test_whole_day_windows_with_a_selective_filter_replace_the_same_rows_without_a_stop(
    tmp_path: Path,
) -> None:
    """Both queries select the same third of each shared day (a region): held and selected are equal, and
    the lookback re-runs the day, every run, exit 0 (before the narrow rule, each run after the first
    stopped)."""
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
