"""Days a ``replace_partition`` lookback emptied while the source lacked them are moved again once they are back.

A re-sync job that deletes then inserts, rows flipped for a while to a status the route's query filters, a
truncate-and-reload landing between runs: for one run the source holds no row of some days. The lookback
empties them in the target as vanished and commits each with 0 rows. Red before: once the rows were back, the
planner skipped those commits, the lookback moved only its N newest days again, and the others stayed empty in
the target for good (9 of 30 rows; 18 after a reload), exit 0, no note. Now a day whose commit recorded 0 rows
runs again whenever the source plans it (reason ``empty_when_committed``), taking no lookback slot; a day the
source no longer holds is never planned, so it is not moved on every run.

Black-box ``dpone`` on a SQLite source into chDB, on each export and load path; every target is compared with
the source value by value.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.integration.route_rig import chdb_query, dpone

TARGET = "demo.orders"
#: The columns both sides print alike.
COLUMNS = "id, toString(order_date), status, amount"


def _days(count: int) -> list[str]:
    """``count`` settled days ending 11 days ago (UTC), oldest first: each has begun, so each takes a slot."""
    last = dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=11)
    return [(last - dt.timedelta(days=n)).isoformat() for n in range(count - 1, -1, -1)]


def _source(base: Path, days: list[str]) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, status TEXT NOT NULL, "
            "amount INTEGER NOT NULL)"
        )
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, 'final', ?)",
            [(d * 10 + k, day, d * 100 + k) for d, day in enumerate(days, start=1) for k in range(3)],
        )


def _manifest(base: Path, *, lookback: int, export: str, load: str, filtered: bool) -> Path:
    query = "  query: \"SELECT * FROM orders WHERE status = 'final'\"\n" if filtered else ""
    path = base / "route.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: emptied_days
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
{query}  partitioning: {{kind: day, column: order_date, lookback: {lookback}}}
  export: {export}
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: {TARGET}
  strategy: replace_partition
  load: {load}
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return path


def _run(manifest: Path, run_id: str) -> dict[str, tuple[str, str, int | None]]:
    """One exit-0 run: each partition's label -> (decision, reason, rows)."""
    result = dpone("run", str(manifest), "--run-id", run_id, "--json")
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.output)
    return {p["label"]: (p["decision"], p["reason"], p["rows"]) for p in report["partitions"]}


def _source_rows(base: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        return sorted(db.execute("SELECT id, order_date, status, amount FROM orders WHERE status = 'final'"))


def _target_rows(base: Path) -> list[tuple[Any, ...]]:
    return sorted(chdb_query(base, f"SELECT {COLUMNS} FROM {TARGET}"))


def _take_out(base: Path, mode: str, days: list[str]) -> None:
    """The source holds no row of ``days`` for a while (``mode``: how a reprocessing job takes them out)."""
    marks = ", ".join("?" for _ in days)
    with sqlite3.connect(base / "source.sqlite") as db:
        if mode == "filter":  # flipped to a status the route's query filters
            db.execute(f"UPDATE orders SET status = 'reprocessing' WHERE order_date IN ({marks})", days)
        else:  # deleted, to be inserted again (a re-sync, or a table emptied and reloaded day by day)
            db.execute("CREATE TABLE IF NOT EXISTS hold AS SELECT * FROM orders WHERE 0")
            db.execute(f"INSERT INTO hold SELECT * FROM orders WHERE order_date IN ({marks})", days)
            db.execute(f"DELETE FROM orders WHERE order_date IN ({marks})", days)


def _put_back(base: Path, mode: str) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        if mode == "filter":
            db.execute("UPDATE orders SET status = 'final'")
        else:
            db.execute("INSERT INTO orders SELECT * FROM hold")
            db.execute("DROP TABLE hold")


def _label(day: str) -> str:
    return f"order_date={day}"


@pytest.mark.parametrize(
    ("mode", "export", "load"),
    [
        ("filter", "lazy_plan", "direct"),
        ("delete", "lazy_plan", "direct"),
        ("delete", "file_artifact", "staged"),
        ("reload", "lazy_plan", "staged"),
        ("reload", "file_artifact", "direct"),
    ],
)
def test_days_emptied_while_the_source_lacked_them_are_moved_again_once_they_are_back(
    tmp_path: Path, mode: str, export: str, load: str
) -> None:
    days = _days(10)
    _source(tmp_path, days)
    manifest = _manifest(tmp_path, lookback=3, export=export, load=load, filtered=mode == "filter")
    _run(manifest, "r1")
    out = days[1:] if mode == "reload" else days[4:]  # a reload: run 2 lands after its first day is back
    _take_out(tmp_path, mode, out)

    during = _run(manifest, "r2")

    assert {during[_label(d)] for d in out} == {("run", "lookback", 0)}  # emptied as vanished
    assert _target_rows(tmp_path) == _source_rows(tmp_path)
    _put_back(tmp_path, mode)

    after = _run(manifest, "r3")

    assert _target_rows(tmp_path) == _source_rows(tmp_path)  # every value of every day that came back
    assert len(_target_rows(tmp_path)) == 30
    again = {label for label, (_, reason, _) in after.items() if reason == "empty_when_committed"}
    assert again == {_label(d) for d in out}
    assert all(after[_label(d)] == ("run", "empty_when_committed", 3) for d in out)
    kept = [d for d in days if d not in out]
    # the lookback's 3 slots go to the newest days committed with rows: an emptied day takes none
    assert {label for label, (_, reason, _) in after.items() if reason == "lookback"} == {
        _label(d) for d in kept[-3:]
    }

    settled = _run(manifest, "r4")

    assert {label for label, (decision, _, _) in settled.items() if decision == "run"} == {
        _label(d) for d in days[-3:]
    }  # the lookback alone: no day is moved again for having once been empty
    assert _target_rows(tmp_path) == _source_rows(tmp_path)


def test_a_day_the_source_no_longer_holds_is_not_moved_again_on_every_run(tmp_path: Path) -> None:
    days = _days(6)
    _source(tmp_path, days)
    manifest = _manifest(tmp_path, lookback=2, export="lazy_plan", load="direct", filtered=False)
    _run(manifest, "r1")
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE order_date = ?", (days[4],))

    emptied = _run(manifest, "r2")

    assert emptied[_label(days[4])] == ("run", "lookback", 0)
    for run_id in ("r3", "r4"):
        later = _run(manifest, run_id)
        assert _label(days[4]) not in later  # not planned: nothing moves it, nothing counts it
        assert {label for label, (decision, _, _) in later.items() if decision == "run"} == {
            _label(days[3]),
            _label(days[5]),
        }
    assert _target_rows(tmp_path) == _source_rows(tmp_path)


def test_a_day_deleted_below_days_that_came_back_is_emptied_as_the_lookback_ranks_them(
    tmp_path: Path,
) -> None:
    """The days that came back take no slot, so the lookback reaches further down, and the vanished days
    counted on the target are those above its oldest day then (before, one between was kept, exit 0)."""
    days = _days(6)
    _source(tmp_path, days)
    manifest = _manifest(tmp_path, lookback=2, export="lazy_plan", load="direct", filtered=False)
    _run(manifest, "r1")
    _take_out(tmp_path, "delete", days[4:])
    _run(manifest, "r2")  # the two newest days emptied
    _put_back(tmp_path, "delete")
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE order_date = ?", (days[3],))

    after = _run(manifest, "r3")

    assert _target_rows(tmp_path) == _source_rows(tmp_path)  # the deleted day's rows are gone
    assert after[_label(days[3])] == ("run", "lookback", 0)  # emptied beside the lookback
    assert after[_label(days[4])] == after[_label(days[5])] == ("run", "empty_when_committed", 3)
    assert after[_label(days[1])][1] == after[_label(days[2])][1] == "lookback"
