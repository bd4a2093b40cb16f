"""A replacing route's lookback with a checkpoint store that lost its newest commits never keeps deleted rows.

The store restored from an older backup (or copied to another worker) does not know a day committed since.
When the source then deletes that day, or moves its rows to another day, no partition is planned there and
no recorded commit names it: red before, its rows stayed in the target for good, exit 0 (15 rows in the
source, 18 in the target). Now the run stops before the target, naming the day; the operator's
``--allow-nonempty-target`` empties it. Black-box ``dpone`` runs on a SQLite source into chDB, checkpoints
in SQLite and PostgreSQL; every target compared with the source value by value.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.route_rig import (
    TARGET,
    add_a_new_day,
    append_armed,
    chdb_command,
    dpone,
    latest_of,
    manifest_at,
    source_rows,
    target_rows,
)


def _lookback_route(base: Path) -> Path:
    manifest = manifest_at(base, strategy="replace_partition")
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace("column: order_date}", "column: order_date, lookback: 2}"), encoding="utf-8"
    )
    return manifest


def _newest_day(base: Path) -> str:
    with sqlite3.connect(base / "source.sqlite") as db:
        (newest,) = db.execute("SELECT max(order_date) FROM orders").fetchone()
    return str(newest)


def _deleted(base: Path, day: str) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE order_date = ?", (day,))


def _moved_to_the_next_day(base: Path, day: str) -> None:
    following = (dt.date.fromisoformat(day) + dt.timedelta(days=1)).isoformat()
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("UPDATE orders SET order_date = ? WHERE order_date = ?", (following, day))


def _store_restored_to(store_url: str, restore_point: int) -> None:
    """The store as its backup held it: every record written after ``restore_point`` lost."""
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM dpone_partition_checkpoints WHERE id > :id"), {"id": restore_point})
    engine.dispose()


def _restore_point(store_url: str) -> int:
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        point = int(conn.execute(sa.text("SELECT max(id) FROM dpone_partition_checkpoints")).scalar_one())
    engine.dispose()
    return point


@pytest.mark.parametrize(
    "change", [pytest.param(_deleted, id="deleted"), pytest.param(_moved_to_the_next_day, id="moved")]
)
def test_a_day_committed_after_the_stores_backup_and_then_deleted_in_the_source_stops_the_run_then_is_emptied(
    base: Path, store_url: str, change: Callable[[Path, str], None]
) -> None:
    manifest = _lookback_route(base)
    assert dpone("run", str(manifest)).exit_code == 0
    restore_point = _restore_point(store_url)  # the nightly backup of the store
    add_a_new_day(base)
    assert dpone("run", str(manifest)).exit_code == 0  # the new day, committed after the backup
    day = _newest_day(base)
    change(base, day)
    _store_restored_to(store_url, restore_point)
    held = target_rows(base)

    stopped = dpone("run", "--json", str(manifest))

    assert stopped.exit_code == 3, stopped.output
    error = json.loads(stopped.output)
    assert error["error"] == "native_transfer_target_not_empty"
    assert error["details"]["problem"] == "unrecorded_rows_in_lookback"
    assert error["details"]["partitions"] == [f"order_date={day}"]
    assert target_rows(base) == held  # nothing written

    allowed = dpone("run", "--json", "--allow-nonempty-target", str(manifest))

    assert allowed.exit_code == 0, allowed.output
    assert target_rows(base) == source_rows(base)  # the day's rows gone (moved: once, under the new day)
    again = dpone("run", "--json", str(manifest))
    assert again.exit_code == 0, again.output
    assert target_rows(base) == source_rows(base)


def test_days_the_source_never_held_between_committed_days_stop_nothing(base: Path, store_url: str) -> None:
    """Gaps between planned days (a weekend) and the days past the newest hold no row: the check counts
    them and finds nothing, run after run."""
    manifest = _lookback_route(base)
    assert dpone("run", str(manifest)).exit_code == 0
    newest = _newest_day(base)
    later = (dt.date.fromisoformat(newest) + dt.timedelta(days=3)).isoformat()  # two days with no row
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(
            "INSERT INTO orders SELECT id + 100000, ?, customer, amount, updated_at FROM orders "
            "WHERE order_date = ?",
            (later, newest),
        )

    for _ in range(2):
        result = dpone("run", "--json", str(manifest))
        assert result.exit_code == 0, result.output
        assert target_rows(base) == source_rows(base)


def test_a_route_that_once_moved_the_whole_table_still_finds_the_day_a_restored_store_lost(
    base: Path, store_url: str
) -> None:
    """A commit of the whole table (``full_refresh`` without partitioning, before the switch to days and a
    lookback) switched the check off for good: after a store restore the deleted day stayed, exit 0 (source
    1,200 rows, target 1,500), with no notice."""
    whole = manifest_at(base, strategy="full_refresh", file="whole.yaml")
    whole.write_text(
        whole.read_text(encoding="utf-8").replace("  partitioning: {kind: day, column: order_date}\n", ""),
        encoding="utf-8",
    )
    assert dpone("run", str(whole)).exit_code == 0
    manifest = _lookback_route(base)
    assert dpone("run", str(manifest)).exit_code == 0
    restore_point = _restore_point(store_url)
    add_a_new_day(base)
    assert dpone("run", str(manifest)).exit_code == 0
    day = _newest_day(base)
    _deleted(base, day)
    _store_restored_to(store_url, restore_point)

    stopped = dpone("run", "--json", str(manifest))

    assert stopped.exit_code == 3, stopped.output
    assert json.loads(stopped.output)["details"]["partitions"] == [f"order_date={day}"]
    assert dpone("run", "--allow-nonempty-target", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_a_strategy_switchs_first_run_stops_on_a_day_the_source_deleted_before_it(
    base: Path, store_url: str
) -> None:
    """Red before: the check waited for the route's own commits, so the switched route's first run exited 0
    with the deleted day's rows in the target (8 rows against 10) and only the second one stopped."""
    whole = manifest_at(base, strategy="full_refresh", file="whole.yaml")
    whole.write_text(
        whole.read_text(encoding="utf-8").replace("  partitioning: {kind: day, column: order_date}\n", ""),
        encoding="utf-8",
    )
    assert dpone("run", str(whole)).exit_code == 0
    add_a_new_day(base)
    assert dpone("run", str(whole)).exit_code == 0
    day = _newest_day(base)
    _deleted(base, day)
    held = target_rows(base)

    first = dpone("run", "--json", str(_lookback_route(base)))

    assert first.exit_code == 3, first.output
    assert json.loads(first.output)["details"]["partitions"] == [f"order_date={day}"]
    assert target_rows(base) == held


def test_a_take_over_with_allow_nonempty_target_empties_the_days_the_source_no_longer_holds(
    base: Path, store_url: str
) -> None:
    """Another loader filled the table (here: a route of another checkpoint store); the source deleted its
    newest day since. Red before: the take-over run exited 0 keeping that day's rows, the next run stopped."""
    other = manifest_at(
        base, strategy="incremental_append", state="sqlite:///other-state.sqlite", file="o.yaml"
    )
    add_a_new_day(base)
    assert dpone("run", str(other)).exit_code == 0
    _deleted(base, _newest_day(base))

    taken = dpone("run", "--json", "--allow-nonempty-target", str(_lookback_route(base)))

    assert taken.exit_code == 0, taken.output
    assert target_rows(base) == source_rows(base)
    assert dpone("run", str(_lookback_route(base))).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_a_retry_after_a_run_that_failed_before_the_target_still_empties_the_day_the_source_deleted(
    base: Path, store_url: str
) -> None:
    """The run that was to empty a deleted day (beside the lookback) failed before the target: a required
    quality check failed on the source. Its records became the day's latest over the day's commit, and red
    before, the retry stopped with ``unrecorded_rows_in_lookback`` ("the store may have been restored from an
    older backup"), exit 3 on every retry, over rows this very store had committed (150 source rows, 180 in
    the target). The commit still stands under an attempt that never reached the target."""
    manifest = _lookback_route(base)
    assert dpone("run", str(manifest)).exit_code == 0
    add_a_new_day(base)
    assert dpone("run", str(manifest)).exit_code == 0
    _deleted(base, _newest_day(base))
    checked = manifest.with_name("checked.yaml")
    checked.write_text(
        manifest.read_text(encoding="utf-8")
        + "quality:\n  checks:\n    - {type: unique, columns: [customer]}\n",
        encoding="utf-8",
    )
    held = target_rows(base)

    failed = dpone("run", "--json", str(checked))

    assert failed.exit_code == 1, failed.output
    assert json.loads(failed.output)["error"] == "quality_check_failed"
    assert target_rows(base) == held  # failed before the target

    retried = dpone("run", "--json", str(manifest))

    assert retried.exit_code == 0, retried.output
    assert target_rows(base) == source_rows(base)
    again = dpone("run", "--json", str(manifest))
    assert again.exit_code == 0, again.output
    assert target_rows(base) == source_rows(base)


def _a_second_source_table_beside(base: Path) -> None:
    """``orders_us``: a second source table of the same shape, its days after ``orders``' (a fan-in)."""
    with sqlite3.connect(base / "source.sqlite") as db:
        (declared,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'orders'").fetchone()
        db.execute(declared.replace("orders", "orders_us", 1))
        db.execute(
            "INSERT INTO orders_us SELECT id + 100000, date(order_date, '+30 days'), customer, amount, "
            "updated_at FROM orders"
        )


def _a_new_us_day(base: Path) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(
            "INSERT INTO orders_us SELECT id + 1000, date(order_date, '+1 day'), customer, amount, updated_at "
            "FROM orders_us WHERE order_date = (SELECT max(order_date) FROM orders_us)"
        )


def test_in_a_fan_in_a_restored_store_never_leads_one_route_to_empty_or_hide_the_others_rows(
    base: Path, store_url: str
) -> None:
    """Two source tables into one table through one store; the store restored to before the second route's
    newest day. Red before: the append route's stop advised a new, empty store (its rows then hidden from
    the other route, which named them as its own), and the lookback route's stop named the other route's
    rows as its own and offered ``--allow-nonempty-target``, which deleted them for good, exit 0."""
    _a_second_source_table_beside(base)
    eu = _lookback_route(base)
    us = manifest_at(base, table="orders_us", file="us.yaml")
    assert dpone("run", str(eu)).exit_code == 0
    first_us = dpone("run", "--allow-nonempty-target", str(us))  # its first run, as printed
    assert first_us.exit_code == 0, first_us.output
    restore_point = _restore_point(store_url)
    _a_new_us_day(base)
    assert dpone("run", str(us)).exit_code == 0
    _store_restored_to(store_url, restore_point)
    held = target_rows(base)

    appending = dpone("run", str(us))  # the text: its hint lines
    replacing = dpone("run", "--json", str(eu))

    assert appending.exit_code == 3, appending.output
    assert "fan-in" in appending.output and "new, empty store" not in appending.output
    assert replacing.exit_code == 3, replacing.output
    stop = json.loads(replacing.output)
    assert stop["details"]["problem"] == "unrecorded_rows_in_lookback"
    assert "other source tables' routes write too" in stop["message"]
    assert target_rows(base) == held


@pytest.mark.parametrize("forced", [(), ("--force",)], ids=["plain", "forced"])
def test_a_day_resolved_not_applied_after_a_crash_and_then_deleted_in_the_source_is_emptied(
    base: Path, store_url: str, forced: tuple[str, ...]
) -> None:
    """The newest day's attempt crashed in the target; on-call resolved it ``not-applied`` as the runbook
    says for a replacing route (``--force`` too, over the route's own earlier commit); then the source
    deleted the day. Red before: every run stopped with ``unrecorded_rows_in_lookback`` ("the store may have
    been restored"), or, forced, kept the day for good with exit 0; whatever rows are there are this route's."""
    manifest = _lookback_route(base)
    assert dpone("run", str(manifest)).exit_code == 0
    newest = max(latest_of(store_url, load_manifest(manifest).route), key=lambda c: c.bounds.lower or "")
    append_armed(store_url, [newest])  # a crash inside the target call
    resolved = dpone(
        "guard",
        "resolve",
        str(manifest),
        "--all-blocked",
        "--as",
        "not-applied",
        *forced,
        "--reason",
        "crashed",
    )
    assert resolved.exit_code == 0, resolved.output
    _deleted(base, _newest_day(base))

    emptied = dpone("run", "--json", str(manifest))

    assert emptied.exit_code == 0, emptied.output
    assert target_rows(base) == source_rows(base)


def test_a_partly_rewritten_day_the_source_then_dropped_is_named_not_kept_as_a_whole_commit(
    base: Path, store_url: str
) -> None:
    """A worker killed mid-insert left part of the oldest day's rows; on-call resolved it not-applied (a re-run
    replaces it); then the source's retention dropped that day. Red before: the run kept it as a whole commit
    "rolled out of a windowed source", rows short for good; now no commit stands there, and the run says the
    day is partly rewritten and no run will replace it."""
    manifest = _lookback_route(base)
    assert dpone("run", str(manifest)).exit_code == 0
    oldest = min(latest_of(store_url, load_manifest(manifest).route), key=lambda c: c.bounds.lower or "")
    append_armed(store_url, [oldest])  # killed inside the target call ...
    chdb_command(  # ... after the delete of the day and part of its insert
        base,
        f"ALTER TABLE {TARGET} DELETE WHERE order_date = '{oldest.bounds.lower}' AND id % 2 = 0 "
        "SETTINGS mutations_sync = 2",
    )
    resolved = dpone(
        "guard", "resolve", str(manifest), "--all-blocked", "--as", "not-applied", "--reason", "killed"
    )
    assert resolved.exit_code == 0, resolved.output
    _deleted(base, str(oldest.bounds.lower))

    kept = dpone("run", str(manifest))

    assert kept.exit_code == 0, kept.output
    assert "partly rewritten" in kept.output and str(oldest.bounds.label) in kept.output
    assert "rolled out" not in kept.output
