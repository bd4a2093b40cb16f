"""A replacing route whose ``source.query`` is templated per run with windows of whole UTC days.

The Airflow guide's rule for a query templated per run on ``replace_partition``: the window selects whole
partitions. Then each run replaces only what its own query selects again, the lookback re-runs the days
it shares with the previous window, and a filter on another column (a region) leaves the rows it selected
alone. Black-box ``dpone`` runs: SQLite source, chDB target; target values compared with the source.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from tests.integration.windowed_rig import ev_route, ran, target, window, write_source

START = dt.datetime(2026, 3, 6)
ROWS = [(i, (START + dt.timedelta(hours=3 * i)).isoformat(sep=" "), i) for i in range(32)]


def _window(base: Path, low: str, high: str, *, also: str = "") -> Path:
    """The route with its query selecting [low, high) (and ``also``), as a DAG renders its data interval."""
    return ev_route(base, window(low, high) + also, lookback=2, state="sqlite:///state.sqlite")


def _expected(low: str, high: str) -> list[tuple[int, str, int]]:
    return [r for r in ROWS if low <= r[1] < high]


def test_windows_of_whole_utc_days_replace_nothing_another_window_loaded(tmp_path: Path) -> None:
    write_source(tmp_path, ROWS)
    for low, high in [
        ("2026-03-06", "2026-03-07"),
        ("2026-03-07", "2026-03-08"),
        ("2026-03-08", "2026-03-09"),
    ]:
        ran(_window(tmp_path, low, high))
    assert target(tmp_path) == _expected("2026-03-06", "2026-03-09")


def test_whole_day_windows_with_a_selective_filter_replace_the_same_rows(
    tmp_path: Path,
) -> None:
    """Both queries select the same third of each shared day (a region): the lookback re-runs the day
    with the same rows, every run, exit 0."""
    write_source(tmp_path, ROWS)
    for low, high in [
        ("2026-03-06", "2026-03-08"),
        ("2026-03-07", "2026-03-09"),
        ("2026-03-08", "2026-03-10"),
    ]:
        ran(_window(tmp_path, low, high, also=" AND v % 3 = 0"))
    assert target(tmp_path) == [r for r in _expected("2026-03-06", "2026-03-10") if r[2] % 3 == 0]
