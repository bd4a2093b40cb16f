"""``--allow-nonempty-target`` never appends a route's own rows a second time.

Found following the runbook: a checkpoint store restored from a backup older than the last run stops the
next run (``native_transfer_target_not_empty``, "has no commit of N partition(s)"); its hint offered the
flag "if the rows are another writer's", and taken, it appended every lost day again (exit 0) although the
target held exactly the source's rows in each of them. A run with the flag now stops before arming where a
partition to append holds as many of this source's rows as the source holds there, and names
``dpone guard rebaseline --adopt-target``; beside another writer's rows it still appends. Black-box
``dpone`` runs on the demo SQLite source into chDB, checkpoints in SQLite (a restore is a file copy);
every target value compared with the source.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.integration.route_rig import (
    TARGET,
    chdb_command,
    dpone,
    manifest_at,
    source_rows,
    target_rows,
)

DAYS = ("2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30")
#: Rows another writer put into the table by hand (ids the source never holds), in the route's days.
BACKFILL = [(900_001, DAYS[3], "backfill", "1.00"), (900_002, DAYS[3], "backfill", "2.00")]
SECTION = "'--allow-nonempty-target over this route's own rows'"


@pytest.fixture
def base(tmp_path: Path) -> Path:
    create_demo_source(tmp_path / "full.sqlite", 1_200, days=4)  # 300 rows a day
    shutil.copy(tmp_path / "full.sqlite", tmp_path / "source.sqlite")
    return tmp_path


def route(base: Path, store: str = "state.sqlite") -> Path:
    return manifest_at(base, state=f"sqlite:///{base / store}", file=f"route-{store}.yaml")


def without_last_days(base: Path, days: int) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE order_date >= ?", (DAYS[-days],))


def with_backfill(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows`` (as ``source_rows`` prints them) with the hand-made rows added."""
    return sorted([*rows, *((i, d, c, Decimal(a), f"{d} 09:00:00") for i, d, c, a in BACKFILL)])


def backfill(base: Path) -> None:
    values = ", ".join(f"({i}, '{d}', '{c}', {a}, '{d} 09:00:00')" for i, d, c, a in BACKFILL)
    chdb_command(base, f"INSERT INTO {TARGET} (id, order_date, customer, amount, updated_at) VALUES {values}")


def restored_store(base: Path) -> Path:
    """Days 1-2 committed, the store backed up, days 3-4 committed, the store restored from the backup."""
    manifest = route(base)
    without_last_days(base, 2)
    assert dpone("run", str(manifest)).exit_code == 0
    shutil.copy(base / "state.sqlite", base / "state.backup")
    shutil.copy(base / "full.sqlite", base / "source.sqlite")
    assert dpone("run", str(manifest)).exit_code == 0
    shutil.copy(base / "state.backup", base / "state.sqlite")
    stopped = dpone("run", str(manifest))
    assert stopped.exit_code == 3 and "has no commit of 2 partition(s)" in stopped.output
    return manifest


def test_the_flag_over_a_restored_stores_lost_days_stops_naming_them_and_the_adoption_that_fits(
    base: Path,
) -> None:
    """Red before: exit 0, days 3-4 twice (1,800 rows for the source's 1,200)."""
    manifest = restored_store(base)

    refused = dpone("run", str(manifest), "--allow-nonempty-target")

    assert refused.exit_code == 3, refused.output
    assert target_rows(base) == source_rows(base)  # nothing written
    assert "refused for route" in refused.output and "exactly as many" in refused.output
    assert (
        f"point checkpoints.connection at a new, empty store (keep the old one for audit), then record what "
        f"the target holds: dpone guard rebaseline {manifest} --adopt-target --reason" in refused.output
    )
    assert SECTION in refused.output
    error = json.loads(dpone("run", str(manifest), "--allow-nonempty-target", "--json").stdout)
    assert error["error"] == "native_transfer_target_not_empty"
    assert error["details"]["problem"] == "own_rows_under_allow_flag"
    assert error["details"]["partitions"] == [f"order_date={d}" for d in DAYS[2:]]
    assert error["details"]["target_rows"] == 600
    # the way the hint names: a new store, what the target holds adopted, then a plain run
    adopted = route(base, "new.sqlite")
    assert dpone("guard", "rebaseline", str(adopted), "--adopt-target", "--reason", "restored").exit_code == 0
    assert dpone("run", str(adopted)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_the_flag_in_front_of_a_lost_stores_rows_stops_and_names_the_adoption(base: Path) -> None:
    """The store lost for good (a new, empty one): the route's first run with the flag appended the whole
    source beside its own rows, exit 0. Red before."""
    assert dpone("run", str(route(base))).exit_code == 0
    manifest = route(base, "new.sqlite")

    refused = dpone("run", str(manifest), "--allow-nonempty-target")

    assert refused.exit_code == 3, refused.output
    assert target_rows(base) == source_rows(base)
    assert f"dpone guard rebaseline {manifest} --adopt-target --reason" in refused.output
    assert "a lost or new checkpoint store" in refused.output and SECTION in refused.output
    assert dpone("guard", "rebaseline", str(manifest), "--adopt-target", "--reason", "lost").exit_code == 0
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_the_flag_still_appends_a_new_day_beside_another_writers_rows_in_it(base: Path) -> None:
    """The route has checkpoints; another writer put two rows of its own into a day the route never
    committed: the run stops, and the flag appends the day beside them (their count is not the source's)."""
    manifest = route(base)
    without_last_days(base, 1)
    assert dpone("run", str(manifest)).exit_code == 0
    backfill(base)
    shutil.copy(base / "full.sqlite", base / "source.sqlite")  # the day reaches the source
    assert dpone("run", str(manifest)).exit_code == 3

    allowed = dpone("run", str(manifest), "--allow-nonempty-target")

    assert allowed.exit_code == 0, allowed.output
    assert target_rows(base) == with_backfill(source_rows(base))
    assert dpone("run", str(manifest)).exit_code == 0  # committed now: nothing moved again
    assert target_rows(base) == with_backfill(source_rows(base))


def test_the_flag_still_appends_a_new_route_beside_another_writers_rows_in_its_days(base: Path) -> None:
    """A route with no checkpoint in front of a table holding only another writer's rows within its days:
    appended beside them."""
    assert dpone("run", str(route(base))).exit_code == 0
    chdb_command(base, f"TRUNCATE TABLE {TARGET}")  # the table as another loader left it
    backfill(base)
    manifest = route(base, "new.sqlite")
    assert dpone("run", str(manifest)).exit_code == 3

    allowed = dpone("run", str(manifest), "--allow-nonempty-target")

    assert allowed.exit_code == 0, allowed.output
    assert target_rows(base) == with_backfill(source_rows(base))


def test_the_flag_appends_a_new_route_beside_another_shard_of_as_many_rows_a_day_and_other_ids(
    base: Path,
) -> None:
    """Another loader (a store of its own) filled the table with the other shard of the same generator: as
    many rows a day as this source, ids from another range. Red before: the flag was refused for every day
    as this route's own rows, and only moving the shard's rows out got past it. No id the target holds
    within a day lies within the source's ids there: none of them is this source's row."""
    shutil.copy(base / "source.sqlite", base / "shard.sqlite")
    with sqlite3.connect(base / "shard.sqlite") as db:
        db.execute("UPDATE orders SET id = id + 5000000")
    shard = manifest_at(
        base, connection=f"sqlite:///{base / 'shard.sqlite'}", state=f"sqlite:///{base / 'other.sqlite'}"
    )
    assert dpone("run", str(shard)).exit_code == 0
    theirs = target_rows(base)
    manifest = route(base)
    assert dpone("run", str(manifest)).exit_code == 3

    allowed = dpone("run", str(manifest), "--allow-nonempty-target")

    assert allowed.exit_code == 0, allowed.output
    assert target_rows(base) == sorted([*theirs, *source_rows(base)])


def restored_store_whose_day_changed(base: Path, since: str) -> tuple[Path, list[tuple[Any, ...]]]:
    """Days 1-3 committed, the store backed up, day 4 committed as the source held it then, the store
    restored from the backup; since that commit, ``late_rows``: the day's last 50 rows reached the source
    (it was still filling when committed); ``rows_deleted``: 20 of its rows left the source. Returns the
    manifest and the target's rows."""
    manifest = route(base)
    without_last_days(base, 1)
    assert dpone("run", str(manifest)).exit_code == 0
    shutil.copy(base / "state.sqlite", base / "state.backup")
    shutil.copy(base / "full.sqlite", base / "source.sqlite")
    if since == "late_rows":
        with sqlite3.connect(base / "source.sqlite") as db:
            db.execute("DELETE FROM orders WHERE id > 1150")
    assert dpone("run", str(manifest)).exit_code == 0
    shutil.copy(base / "full.sqlite", base / "source.sqlite")
    if since == "rows_deleted":
        with sqlite3.connect(base / "source.sqlite") as db:
            db.execute("DELETE FROM orders WHERE id BETWEEN 1001 AND 1020")
    shutil.copy(base / "state.backup", base / "state.sqlite")
    stopped = dpone("run", str(manifest))
    assert stopped.exit_code == 3 and "has no commit of 1 partition(s)" in stopped.output
    return manifest, target_rows(base)


@pytest.mark.parametrize(("since", "held"), [("late_rows", 250), ("rows_deleted", 300)])
def test_the_flag_over_a_restored_stores_day_whose_count_changed_since_its_lost_commit_stops(
    base: Path, since: str, held: int
) -> None:
    """The gap ADR 0092 left: counts differ, so the day was taken for another writer's and appended again,
    exit 0 (late rows: 250 ids twice; deleted rows: 280 twice). Red before. Its ids lie within the source's
    range: the route has an integer key, and a partition whose keys are not apart from the source's stops."""
    manifest, before = restored_store_whose_day_changed(base, since)

    refused = dpone("run", str(manifest), "--allow-nonempty-target")

    assert refused.exit_code == 3, refused.output
    assert target_rows(base) == before  # nothing written
    assert "holds another number of this source's rows than the source holds there now" in refused.output
    assert (
        f"delete this source's rows of those partitions from {TARGET} by this source's own key (never by "
        "the bounds alone) and run again without the flag" in refused.output
    )
    assert "their id values among the source's" in refused.output and SECTION in refused.output
    error = json.loads(dpone("run", str(manifest), "--allow-nonempty-target", "--json").stdout)
    assert error["details"]["problem"] == "own_rows_under_allow_flag"
    assert (
        error["details"]["partitions"]
        == error["details"]["partitions_counts_differ"]
        == [f"order_date={DAYS[3]}"]
    )
    assert error["details"]["key_columns"] == ["id"]
    assert error["details"]["target_rows"] == held
    # the way the hint names: this source's rows of the day out of the target by its key, a plain run
    delete = f"ALTER TABLE {TARGET} DELETE WHERE id BETWEEN 901 AND 1200 SETTINGS mutations_sync = 2"
    chdb_command(base, delete)
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_the_flag_stops_beside_another_writers_rows_whose_ids_interleave_with_the_sources(base: Path) -> None:
    """Fail closed: another writer's rows of other ids within the source's id range, fewer than the source's
    in the day, cannot be told from this route's own rows of a day that kept filling; the run stops and
    names the way past (move them out for one run), and after it the day is appended beside them."""
    manifest = route(base)
    without_last_days(base, 1)
    assert dpone("run", str(manifest)).exit_code == 0
    with sqlite3.connect(base / "full.sqlite") as db:  # the source leaves ids 1101 and 1102 unused
        db.execute("DELETE FROM orders WHERE id IN (1101, 1102)")
    shutil.copy(base / "full.sqlite", base / "source.sqlite")
    theirs = [(1101, DAYS[3], "backfill", "1.00"), (1102, DAYS[3], "backfill", "2.00")]
    values = ", ".join(f"({i}, '{d}', '{c}', {a}, '{d} 09:00:00')" for i, d, c, a in theirs)
    chdb_command(base, f"INSERT INTO {TARGET} (id, order_date, customer, amount, updated_at) VALUES {values}")
    before = target_rows(base)

    refused = dpone("run", str(manifest), "--allow-nonempty-target")

    assert refused.exit_code == 3, refused.output
    assert target_rows(base) == before
    assert f"move them out of {TARGET} for one run and back after it" in refused.output
    # moved out for one run and back after it, as the hint says
    chdb_command(base, f"CREATE TABLE demo.aside AS {TARGET}")
    chdb_command(base, f"INSERT INTO demo.aside SELECT * FROM {TARGET} WHERE id IN (1101, 1102)")
    chdb_command(base, f"ALTER TABLE {TARGET} DELETE WHERE id IN (1101, 1102) SETTINGS mutations_sync = 2")
    assert dpone("run", str(manifest)).exit_code == 0
    chdb_command(base, f"INSERT INTO {TARGET} SELECT * FROM demo.aside")
    assert target_rows(base) == sorted(
        [*source_rows(base), *((i, d, c, Decimal(a), f"{d} 09:00:00") for i, d, c, a in theirs)]
    )


def test_the_flag_in_front_of_a_lost_stores_rows_names_the_day_that_kept_filling_too(base: Path) -> None:
    """The store lost for good after day 4 was committed while still filling: the flag stopped naming only
    the three settled days, and the adoption its hint named then refused day 4 (a count other than the
    source's). Day 4 is named now, and the hint says to take its rows out before adopting. Red before."""
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE id > 1150")
    assert dpone("run", str(route(base))).exit_code == 0
    shutil.copy(base / "full.sqlite", base / "source.sqlite")
    manifest = route(base, "new.sqlite")
    before = target_rows(base)

    refused = dpone("run", str(manifest), "--allow-nonempty-target")

    assert refused.exit_code == 3, refused.output
    assert target_rows(base) == before
    assert (
        f"first delete this source's rows of the partitions whose count differs (order_date={DAYS[3]}) from "
        f"{TARGET} by this source's own key (never by the bounds alone)" in refused.output
    )
    error = json.loads(dpone("run", str(manifest), "--allow-nonempty-target", "--json").stdout)
    assert error["details"]["partitions"] == [f"order_date={d}" for d in DAYS]
    assert error["details"]["partitions_counts_differ"] == [f"order_date={DAYS[3]}"]
    assert error["details"]["target_rows"] == 1_150
    # the way the hint names: the day's rows out by this source's key, the rest adopted, a plain run
    chdb_command(
        base, f"ALTER TABLE {TARGET} DELETE WHERE id BETWEEN 901 AND 1200 SETTINGS mutations_sync = 2"
    )
    assert dpone("guard", "rebaseline", str(manifest), "--adopt-target", "--reason", "lost").exit_code == 0
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_without_an_integer_key_the_flag_keeps_counts_alone_and_says_so(base: Path) -> None:
    """A route whose key is text: no key range can tell whose rows a day of another count holds, so the
    flag appends beside them as before (the gap ADR 0092 documents for such routes: here the restored
    day's 250 rows twice), and says in a note that their keys could not be compared."""
    for file in ("full.sqlite", "source.sqlite"):
        with sqlite3.connect(base / file) as db:
            db.execute(
                "CREATE TABLE orders_t (id TEXT PRIMARY KEY, order_date DATE NOT NULL, customer TEXT NOT NULL, "
                "amount NUMERIC(12,2) NOT NULL, updated_at DATETIME NOT NULL)"
            )
            db.execute(
                "INSERT INTO orders_t SELECT 'o' || id, order_date, customer, amount, updated_at FROM orders"
            )
    manifest = manifest_at(base, table="orders_t", state=f"sqlite:///{base / 'state.sqlite'}")
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("DELETE FROM orders_t WHERE order_date >= ?", (DAYS[3],))
    assert dpone("run", str(manifest)).exit_code == 0
    shutil.copy(base / "state.sqlite", base / "state.backup")
    shutil.copy(base / "full.sqlite", base / "source.sqlite")
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("DELETE FROM orders_t WHERE CAST(substr(id, 2) AS INTEGER) > 1150")
    assert dpone("run", str(manifest)).exit_code == 0
    restored_day = [r for r in source_rows(base, "orders_t") if r[1] == DAYS[3]]
    shutil.copy(base / "full.sqlite", base / "source.sqlite")
    shutil.copy(base / "state.backup", base / "state.sqlite")

    allowed = dpone("run", str(manifest), "--allow-nonempty-target")

    assert allowed.exit_code == 0, allowed.output
    assert (
        "1 partition(s) of route" in allowed.output
        and "their keys could not tell whether they are its own (no integer key column" in allowed.output
    )
    assert target_rows(base) == sorted([*source_rows(base, "orders_t"), *restored_day])
