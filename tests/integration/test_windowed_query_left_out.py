"""A replacing route whose ``source.query`` window covers part of a partition stops before it deletes rows.

An hourly Airflow schedule on day partitions renders ``WHERE ts >= '<hour>' AND ts < '<next hour>'``: each run
is another read definition. Red before: the second hour's run replaced the whole day with its hour and
deleted the first hour's rows, exit 0, a note the only trace. Now each definition a run commits under is kept
in the checkpoint store, and the next definition's run compares the two reads on the source before arming:
rows only the earlier read returns stop it (``native_transfer_target_not_empty``), unless the operator says
they are to go (``--allow-nonempty-target``). Windows of whole days, a reformatted query, a soft delete and a
pinned ``source.columns`` never stop. Black-box ``dpone`` runs: SQLite source, chDB target, the checkpoint
store on SQLite and PostgreSQL; target values compared with the source's.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.checkpoint_sql import DEFINITIONS_TABLE
from airflow_provider_dpone.contracts.read_definition import NotCompared
from tests.integration.route_rig import chdb_query, dpone
from tests.integration.windowed_rig import (
    UNIQUE_V,
    ev_route,
    ran,
    refusal,
    source,
    target,
    window,
    write_source,
)

START = dt.datetime(2026, 3, 6)
#: a row every 30 minutes over three days: (id, ts, v, deleted)
ROWS = [(i, (START + dt.timedelta(minutes=30 * i)).isoformat(sep=" "), i * 7, 0) for i in range(144)]
#: in every query, never in an error, a notice or ``dpone checkpoints``
MARKER = "/* window-marker-5c1e */"


@pytest.fixture
def root(tmp_path: Path, store_url: str) -> Path:
    """The source; manifests reach the store (SQLite or PostgreSQL) as connection ``spelling_state``."""
    return write_source(tmp_path, ROWS)


def manifest(root: Path, where: str, **route: Any) -> Path:
    """The route with ``source.query`` selecting ``where`` (and the marker), as a DAG renders its data
    interval; ``route``: the rest of :func:`ev_route`'s choices."""
    return ev_route(root, f"{where} {MARKER}", **route)


def test_hourly_windows_on_day_partitions_stop_at_the_second_run_and_go_on_when_allowed(root: Path) -> None:
    first = window("2026-03-06 09:00:00", "2026-03-06 10:00:00")
    second = window("2026-03-06 10:00:00", "2026-03-06 11:00:00")
    ran(manifest(root, first))

    stopped = dpone("run", str(manifest(root, second)), "--json")

    error = refusal(stopped)
    assert error["error"] == "native_transfer_target_not_empty"
    assert error["details"]["problem"] == "rows_left_out_by_new_definition"
    assert error["details"]["partitions"] == ["ts=2026-03-06"] and error["details"]["rows"] == 2
    assert target(root) == source(root, first)  # nothing deleted
    text = dpone("run", str(manifest(root, second))).output
    assert "--allow-nonempty-target" in text and "data_interval_start" in text

    notes = ran(manifest(root, second), "--allow-nonempty-target")

    assert "2 of them in 1 partition(s) (ts=2026-03-06) not returned by this definition's read" in notes
    assert target(root) == source(root, second)
    listed = dpone("checkpoints", str(manifest(root, second)), "--json").output
    for output in (stopped.output, text, notes, listed):
        assert "window-marker" not in output and "SELECT" not in output  # the query is kept, never shown


def test_whole_day_windows_sharing_a_day_are_compared_and_never_stop(root: Path) -> None:
    for low, high in [("2026-03-06", "2026-03-08"), ("2026-03-07", "2026-03-09")]:
        notes = ran(manifest(root, window(low, high), lookback=2))
    assert "compared on the source, this definition's read returns every row" in notes
    assert target(root) == source(root, window("2026-03-06", "2026-03-09"))


def test_a_query_reformatted_to_select_the_same_rows_never_stops(root: Path) -> None:
    ran(manifest(root, window("2026-03-06", "2026-03-08")))

    notes = ran(manifest(root, "ts < '2026-03-08'   AND   ts >= '2026-03-06' AND 1 = 1"))

    assert "compared on the source" in notes
    assert target(root) == source(root, window("2026-03-06", "2026-03-08"))


@pytest.mark.parametrize("change", ["UPDATE ev SET deleted = 1", "DELETE FROM ev"])
def test_a_row_soft_deleted_or_deleted_between_windows_never_stops_and_leaves_the_target(
    root: Path, change: str
) -> None:
    live = "deleted = 0 AND "
    ran(manifest(root, live + window("2026-03-06", "2026-03-08"), lookback=2))
    with sqlite3.connect(root / "source.sqlite") as db:
        db.execute(f"{change} WHERE id = 60")  # 2026-03-07 06:00, within both windows

    ran(manifest(root, live + window("2026-03-07", "2026-03-09"), lookback=2))

    assert target(root) == source(root, live + window("2026-03-06", "2026-03-09"))
    assert 60 not in {i for i, _, _ in target(root)}


def test_pinning_the_columns_never_stops(root: Path) -> None:
    ran(manifest(root, window("2026-03-06", "2026-03-08")))

    notes = ran(manifest(root, window("2026-03-06", "2026-03-08"), columns=("id", "ts", "v", "deleted")))

    assert "compared on the source" in notes
    assert target(root) == source(root, window("2026-03-06", "2026-03-08"))


def test_a_day_only_the_earlier_definition_reads_is_not_emptied_by_the_lookback(root: Path) -> None:
    """The lookback empties units of an earlier definition's commits the source no longer plans: a day the
    new filter leaves out was emptied, exit 0. Now it stops like a partition to move; allowed, it goes."""
    ran(manifest(root, window("2026-03-06", "2026-03-09"), lookback=3))
    narrower = manifest(
        root, window("2026-03-06", "2026-03-09") + " AND ts NOT LIKE '2026-03-07%'", lookback=3
    )

    stopped = dpone("run", str(narrower))

    assert stopped.exit_code == 3, stopped.output
    assert "native_transfer_target_not_empty" in stopped.output and "ts=2026-03-07" in stopped.output
    assert target(root) == source(root, window("2026-03-06", "2026-03-09"))
    ran(narrower, "--allow-nonempty-target")
    assert target(root) == source(root, window("2026-03-06", "2026-03-09") + " AND ts NOT LIKE '2026-03-07%'")


def test_a_store_made_before_the_definitions_table_gets_it_and_its_first_run_falls_back_to_the_notice(
    root: Path, store_url: str
) -> None:
    hours = [f"2026-03-06 {h:02d}:00:00" for h in (9, 10, 11, 12)]
    ran(manifest(root, window(hours[0], hours[1])))
    engine = sa.create_engine(store_url)
    try:
        with engine.begin() as conn:  # the store as a release before this table left it
            conn.execute(sa.text(f"DROP TABLE {DEFINITIONS_TABLE}"))
    finally:
        engine.dispose()

    notes = ran(manifest(root, window(hours[1], hours[2])))  # nothing to compare with: as before, said

    assert "could not be compared" in notes and NotCompared.NOT_RECORDED.phrase in notes
    assert target(root) == source(root, window(hours[1], hours[2]))
    stopped = dpone("run", str(manifest(root, window(hours[2], hours[3]))))  # the second one's was kept
    assert stopped.exit_code == 3, stopped.output
    assert target(root) == source(root, window(hours[1], hours[2]))


def test_an_earlier_query_whose_table_is_gone_falls_back_to_the_notice(root: Path) -> None:
    with sqlite3.connect(root / "source.sqlite") as db:
        db.execute("CREATE TABLE keep (id INTEGER)")
        db.executemany("INSERT INTO keep VALUES (?)", [(i,) for i in range(144)])
    ran(manifest(root, "id IN (SELECT id FROM keep) AND " + window("2026-03-06 09:00", "2026-03-06 10:00")))
    with sqlite3.connect(root / "source.sqlite") as db:
        db.execute("DROP TABLE keep")

    notes = ran(manifest(root, window("2026-03-06 10:00", "2026-03-06 11:00")))

    assert NotCompared.EARLIER_READ_FAILS.phrase in notes
    assert target(root) == source(root, window("2026-03-06 10:00", "2026-03-06 11:00"))


def test_an_earlier_windows_commit_under_its_failed_retry_is_still_compared(root: Path) -> None:
    """Red before: the first hour's retry (the lookback moves its day again) failed before the target, its
    record became the day's latest and hid the commit: the next hour's run deleted the first hour's rows,
    exit 0, without a comparison (``route_family.other_identity_standing``)."""
    first = manifest(root, window("2026-03-06 09:00", "2026-03-06 10:00"), lookback=1, quality=UNIQUE_V)
    ran(first)
    with sqlite3.connect(root / "source.sqlite") as db:
        db.execute("UPDATE ev SET v = 126 WHERE id = 19")  # a duplicate v: the retry's quality check fails
    failed = dpone("run", str(first))
    assert failed.exit_code != 0 and "quality_check_failed" in failed.output, failed.output
    with sqlite3.connect(root / "source.sqlite") as db:
        db.execute("UPDATE ev SET v = 133 WHERE id = 19")

    second = manifest(root, window("2026-03-06 10:00", "2026-03-06 11:00"), lookback=1)
    error = refusal(dpone("run", str(second), "--json"))

    assert error["details"]["problem"] == "rows_left_out_by_new_definition" and error["details"]["rows"] == 2
    assert target(root) == source(root, window("2026-03-06 09:00", "2026-03-06 10:00"))


def test_an_earlier_windows_commit_under_an_attempt_resolved_not_applied_is_still_compared(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red before: the first hour's retry lost its connection in the target call, the operator resolved it
    ``not-applied`` (the target unchanged), and the resolved record hid the commit: the next hour's run
    deleted the first hour's rows, exit 0."""
    from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink

    first = manifest(root, window("2026-03-06 09:00", "2026-03-06 10:00"), lookback=1)
    ran(first)
    with monkeypatch.context() as patch:

        def dropped(*args: object, **kwargs: object) -> int:
            raise ConnectionResetError("connection reset by peer")

        patch.setattr(ClickHouseSink, "load", dropped)
        assert dpone("run", str(first)).exit_code != 0
    assert target(root) == source(root, window("2026-03-06 09:00", "2026-03-06 10:00"))
    resolved = dpone(
        "guard", "resolve", str(first), "--all-blocked", "--as", "not-applied", "--reason", "target unchanged"
    )
    assert resolved.exit_code == 0, resolved.output

    stopped = dpone("run", str(manifest(root, window("2026-03-06 10:00", "2026-03-06 11:00"), lookback=1)))

    assert stopped.exit_code == 3, stopped.output
    assert "native_transfer_target_not_empty" in stopped.output
    assert target(root) == source(root, window("2026-03-06 09:00", "2026-03-06 10:00"))


def copies_of_row_20(root: Path, copies: int) -> None:
    """Rows equal to row 20 (2026-03-06 10:00) in every column but ``id``: a log that holds one event twice."""
    with sqlite3.connect(root / "source.sqlite") as db:
        db.executemany(
            "INSERT INTO ev VALUES (?, ?, ?, ?)", [(1000 + n, *ROWS[20][1:]) for n in range(copies)]
        )


def target_values(root: Path) -> list[tuple[str, int]]:
    """(ts, v) of every target row, duplicates kept."""
    rows = chdb_query(root, "SELECT toString(ts), v FROM demo.ev ORDER BY ts, v")
    return [(str(ts), int(v)) for ts, v in rows]


def source_values(root: Path, where: str) -> list[tuple[str, int]]:
    with sqlite3.connect(root / "source.sqlite") as db:
        rows = db.execute(f"SELECT ts, v FROM ev WHERE {where} ORDER BY ts, v").fetchall()
    return [(str(ts), int(v)) for ts, v in rows]


def test_a_new_query_that_drops_the_key_stops_on_a_left_out_row_equal_to_a_kept_one(root: Path) -> None:
    """Red before: ``EXCEPT`` compared distinct rows over the columns both reads return, so the row the new
    filter leaves out (id 1000) matched the kept row 20 on (ts, v, deleted) and went unseen: the run deleted
    it, exit 0. Now the reads are compared as multisets: the earlier one returns that row twice, this one
    once."""
    copies_of_row_20(root, 1)
    day = window("2026-03-06", "2026-03-07")
    ran(manifest(root, day))

    dropped = manifest(root, day + " AND id <> 1000", select="ts, v, deleted", order_by=["ts"])
    error = refusal(dpone("run", "--json", str(dropped)))

    assert error["details"]["problem"] == "rows_left_out_by_new_definition"
    assert error["details"]["partitions"] == ["ts=2026-03-06"] and error["details"]["rows"] == 1
    assert target(root) == source(root, day)  # row 1000 still there


def test_a_row_the_earlier_read_returned_three_times_and_the_new_one_once_stops_on_two(root: Path) -> None:
    """Red before: ``EXCEPT`` saw one distinct row on each side, and the ``DISTINCT`` read deleted two of
    the three copies the earlier read had loaded, exit 0. Allowed, the note counts the two."""
    copies_of_row_20(root, 2)
    day = window("2026-03-06", "2026-03-07")
    columns = "ts, v, deleted"
    ran(manifest(root, day, select=columns, order_by=["ts"]))
    assert target_values(root).count((ROWS[20][1], ROWS[20][2])) == 3

    distinct = manifest(root, day, select="DISTINCT " + columns, order_by=["ts"])
    error = refusal(dpone("run", "--json", str(distinct)))

    assert error["details"]["problem"] == "rows_left_out_by_new_definition"
    assert error["details"]["partitions"] == ["ts=2026-03-06"] and error["details"]["rows"] == 2
    assert target_values(root) == source_values(root, day)
    notes = ran(distinct, "--allow-nonempty-target")
    assert "2 of them in 1 partition(s) (ts=2026-03-06) not returned by this definition's read" in notes
    assert target_values(root) == sorted(set(source_values(root, day)))


def test_a_new_query_returning_the_same_copies_again_never_stops(root: Path) -> None:
    """Copies are counted on both sides: a read that returns each copy again leaves none out."""
    copies_of_row_20(root, 2)
    columns = "ts, v, deleted"
    ran(manifest(root, window("2026-03-06", "2026-03-07"), select=columns, order_by=["ts"]))

    reformatted = "ts < '2026-03-07' AND 1 = 1 AND " + window("2026-03-06", "2026-03-09")
    notes = ran(manifest(root, reformatted, select=columns, order_by=["ts"]))

    assert "compared on the source, this definition's read returns every row" in notes
    assert target_values(root) == source_values(root, window("2026-03-06", "2026-03-07"))
