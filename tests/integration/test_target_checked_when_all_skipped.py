"""When partitions are committed, the target is checked, not assumed.

A dropped or truncated target (or a manifest pointed at a fresh chDB directory) used to print "nothing to
do" and exit 0 with no table; with a new partition to move, the target was created anew holding only it
(the history gone, exit 0). Black-box: ``dpone run`` on a SQLite source into chDB, each checkpoint store.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from tests.builders import chdb_endpoint
from tests.integration.route_rig import (
    TARGET,
    add_a_new_day,
    add_source_rows,
    chdb_command,
    dpone,
    source_rows,
    target_rows,
    write_manifest,
)

STRATEGIES = ["incremental_append", "replace_partition"]


#: Ways a target loses what the route committed: dropped, truncated, or a manifest at a fresh chDB folder.
LOSSES = [
    pytest.param(lambda b: chdb_command(b, f"DROP TABLE {TARGET}"), id="dropped"),
    pytest.param(lambda b: chdb_command(b, f"TRUNCATE TABLE {TARGET}"), id="truncated"),
    pytest.param(lambda b: shutil.rmtree(b / "clickhouse"), id="new-chdb-directory"),
]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_intact_target_still_skips_every_committed_partition(
    base: Path,
    store_url: str,
    strategy: str,
) -> None:
    manifest = write_manifest(base, "orders", store_url, strategy=strategy)
    assert dpone("run", str(manifest)).exit_code == 0

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert target_rows(base) == source_rows(base)


def _rows_if_exists(root: Path) -> list[object] | None:
    """The target's rows, or None when the table does not exist."""
    client = open_client(chdb_endpoint(root / "clickhouse"))
    try:
        if not int(client.query(f"EXISTS TABLE {TARGET}").result_rows[0][0]):
            return None
        return list(client.query(f"SELECT id FROM {TARGET}").result_rows)
    finally:
        client.close()


def _lost_rows_stop(manifest: Path) -> dict[str, Any]:
    """Run ``manifest``; it must stop with exit 3 and ``target_lost_committed_rows``: the error's JSON."""
    result = dpone("run", "--json", str(manifest))
    assert result.exit_code == 3, result.output
    error: dict[str, Any] = json.loads(result.output)
    assert error["error"] == "native_transfer_target_lost_committed_rows"
    return error


def _dpone_process(*args: str) -> int:
    """``dpone`` in a process of its own: chDB opens one data directory per process, and these tests
    replace the directory between runs."""
    return subprocess.run([str(Path(sys.executable).with_name("dpone")), *args], check=False).returncode


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("new_day", [False, True], ids=["nothing-due", "a-new-day-due"])
def test_a_target_that_lost_committed_rows_stops_the_run_with_exit_3(
    base: Path,
    store_url: str,
    strategy: str,
    loss: object,
    new_day: bool,
) -> None:
    """With a new day due, red before: the target was created anew holding that day alone (exit 0)."""
    manifest = write_manifest(base, "orders", store_url, strategy=strategy)
    assert dpone("run", str(manifest)).exit_code == 0
    committed = len(source_rows(base))
    loss(base)  # type: ignore[operator]
    if new_day:
        add_a_new_day(base)

    error = _lost_rows_stop(manifest)

    assert error["details"]["committed_rows"] == committed
    assert error["details"]["target_rows"] == 0
    assert "nothing to do" not in error["message"]
    assert _rows_if_exists(base) in (None, [])  # nothing was written, nothing created


def test_a_target_that_shrank_by_retention_still_takes_new_partitions(
    base: Path,
    store_url: str,
) -> None:
    """Rows removed on purpose (an older day deleted): the run with a new day goes on and loads it, and
    says the table holds fewer rows than were committed (red before: said only by a run moving nothing,
    which a daily route never is)."""
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    oldest = min(r[1] for r in source_rows(base))
    chdb_command(
        base, f"ALTER TABLE {TARGET} DELETE WHERE order_date = '{oldest}' SETTINGS mutations_sync = 2"
    )
    add_a_new_day(base)

    result = dpone("run", str(manifest))
    assert result.exit_code == 0, result.output
    assert "rows were removed from the table (a retention job, a TTL, deletes)" in result.output

    assert target_rows(base) == [r for r in source_rows(base) if r[1] != oldest]


def test_a_target_kept_short_by_a_ttl_runs_with_nothing_due_and_says_so(
    base: Path,
    store_url: str,
) -> None:
    """Red before: a table with a TTL (retention in ClickHouse) stopped every run that had nothing new to
    move (`target_lost_committed_rows`, exit 3), though the newest partitions were all there."""
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    days = sorted({r[1] for r in source_rows(base)})
    kept_from = days[2]
    # expired (a TTL date in the past) for the days before ``kept_from``, whatever today's date is
    chdb_command(
        base,
        f"ALTER TABLE {TARGET} MODIFY TTL if(order_date < toDate('{kept_from}'), "
        "toDate('2000-01-01'), toDate('2100-01-01'))",
    )
    chdb_command(base, f"OPTIMIZE TABLE {TARGET} FINAL")
    assert target_rows(base) == [r for r in source_rows(base) if r[1] >= kept_from]

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert "rows were removed from the table (a retention job, a TTL, deletes)" in result.output
    assert target_rows(base) == [r for r in source_rows(base) if r[1] >= kept_from]  # nothing reloaded


def test_a_ttl_added_after_the_commits_that_expired_every_row_is_named_by_the_stop(
    base: Path,
    store_url: str,
) -> None:
    """A DBA adds a row-deleting TTL and it expires every committed row: the stop named a drop, a truncate
    or a restore and sent on-call to restore or reload, which the TTL expires again (red before: no word of
    the TTL; its own refusal, ``table_ttl``, comes later, in the target's preparation)."""
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)
    # expired whatever today's date is: every day of the demo lies after 1970-01-02
    chdb_command(
        base,
        f"ALTER TABLE {TARGET} MODIFY TTL if(order_date > toDate('1970-01-02'), "
        "toDate('2000-01-01'), toDate('2100-01-01'))",
    )
    chdb_command(base, f"OPTIMIZE TABLE {TARGET} FINAL")
    assert target_rows(base) == []

    error = _lost_rows_stop(manifest)

    assert error["details"]["deleting_ttl"] is True
    assert "the table has a TTL that deletes rows" in error["message"]
    text = dpone("run", str(manifest))
    assert text.exit_code == 3
    assert f"target table {TARGET} has a TTL that deletes rows once they expire" in text.output
    assert "runbook:  dpone runbook guard (section 'A TTL on the target')" in text.output
    assert target_rows(base) == []  # nothing written


@pytest.mark.parametrize("new_day", [False, True], ids=["nothing-due", "a-new-day-due"])
def test_a_newest_committed_day_missing_from_the_target_stops_the_run_and_deleted_rows_do_not(
    base: Path,
    store_url: str,
    new_day: bool,
) -> None:
    """Retention and row deletes leave the newest committed day holding rows; a target restored from a
    backup older than that commit holds none of it: stop, never reload on a guess."""
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    newest = max(r[1] for r in source_rows(base))
    chdb_command(
        base,
        f"ALTER TABLE {TARGET} DELETE WHERE order_date = '{newest}' AND id % 2 = 0 SETTINGS mutations_sync = 2",
    )
    assert dpone("run", str(manifest)).exit_code == 0  # some of its rows deleted: still there
    chdb_command(
        base, f"ALTER TABLE {TARGET} DELETE WHERE order_date = '{newest}' SETTINGS mutations_sync = 2"
    )
    left = target_rows(base)
    if new_day:
        add_a_new_day(base)

    error = _lost_rows_stop(manifest)

    assert error["details"]["newest_committed"]["bounds"] == f"order_date={newest}"
    assert target_rows(base) == left  # nothing written


def test_a_run_into_another_target_through_a_shared_store_stops_before_it_commits_a_day_there(
    base: Path,
    store_url: str,
) -> None:
    """Seen before: a staging environment cloned with the production checkpoint store (its own chDB, a copy
    of the production table) moved a new day into its table and committed it in the shared store; the
    production run with the next day due skipped that day and moved the next (exit 0): the day was lost.
    The lost-rows check caught it only while that day was the newest committed; a late day committed there
    was lost for good. The route remembers its target connection (ADR 0088): the staging run stops before
    anything, and production then moves every day."""
    production = write_manifest(base, "orders", store_url)
    assert dpone("run", str(production)).exit_code == 0
    shutil.copytree(base / "clickhouse", base / "staging_clickhouse", symlinks=True)
    staging = base / "staging.yaml"
    staging.write_text(production.read_text().replace("chdb:///clickhouse", "chdb:///staging_clickhouse"))
    add_a_new_day(base)

    staged = subprocess.run(
        [str(Path(sys.executable).with_name("dpone")), "run", "--json", str(staging)],
        check=False,
        capture_output=True,
        text=True,
    )

    assert staged.returncode == 3, staged.stdout + staged.stderr
    error = json.loads(staged.stdout)
    assert error["error"] == "native_transfer_route_identity_changed"
    assert error["details"]["changed"] == ["target"]
    add_a_new_day(base)
    assert dpone("run", str(production)).exit_code == 0
    assert target_rows(base) == source_rows(base)  # both new days, in production


def test_a_target_restored_from_a_backup_older_than_a_commit_stops_instead_of_skipping_the_lost_day(
    base: Path,
    store_url: str,
) -> None:
    """Seen before: the target directory restored from a backup taken before the last run, the next run
    (a new day due) skipped the day that backup lacks and moved the new one, exit 0: the day was lost."""
    manifest = write_manifest(base, "orders", store_url)
    assert _dpone_process("run", str(manifest)) == 0
    shutil.copytree(base / "clickhouse", base / "backup", symlinks=True)
    add_a_new_day(base)
    assert _dpone_process("run", str(manifest)) == 0  # the day is committed, then the disk is lost
    shutil.rmtree(base / "clickhouse")
    shutil.copytree(base / "backup", base / "clickhouse", symlinks=True)
    restored = target_rows(base)
    add_a_new_day(base)

    assert _dpone_process("run", str(manifest)) == 3

    assert target_rows(base) == restored  # nothing written


def _with_lookback(manifest: Path, days: int) -> Path:
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace("column: order_date}", f"column: order_date, lookback: {days}}}"), "utf-8"
    )
    return manifest


def _target_restored_from_backup(base: Path) -> list[Any]:
    """The chDB folder replaced by the copy in ``base/backup``; the rows it holds then."""
    shutil.rmtree(base / "clickhouse")
    shutil.copytree(base / "backup", base / "clickhouse", symlinks=True)
    return target_rows(base)


def _newest_day_a_day_later(base: Path) -> str:
    """The source's newest day moved one day on: the day it held has no rows now (a late day to come)."""
    with sqlite3.connect(base / "source.sqlite") as db:
        (gap,) = db.execute("SELECT max(order_date) FROM orders").fetchone()
        db.execute("UPDATE orders SET order_date = date(order_date, '+1 day') WHERE order_date = ?", (gap,))
    return str(gap)


def _stops_naming(base: Path, manifest: Path, label: str, restored: list[Any]) -> None:
    """The run stops with ``target_lost_committed_rows`` naming ``label`` and writes nothing."""
    result = dpone("run", "--json", str(manifest))
    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["error"] == "native_transfer_target_lost_committed_rows"
    assert error["details"]["newest_committed"]["bounds"] == label
    assert target_rows(base) == restored


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_target_restored_from_before_a_late_days_commit_stops_instead_of_skipping_that_day(
    base: Path, store_url: str, strategy: str
) -> None:
    """A late day, older than the newest, committed after the target's backup was taken: restored, the
    target lacked it while the newest day still held rows, and every run took that for retention and skipped
    the day for good (exit 0, 4 rows against 6)."""
    gap = _newest_day_a_day_later(base)
    manifest = write_manifest(base, "orders", store_url, strategy=strategy)
    assert _dpone_process("run", str(manifest)) == 0
    shutil.copytree(base / "clickhouse", base / "backup", symlinks=True)
    add_source_rows(base, [(900_001, gap), (900_002, gap)])  # a late day between committed ones
    assert _dpone_process("run", str(manifest)) == 0  # committed, then the disk is lost
    restored = _target_restored_from_backup(base)

    _stops_naming(base, manifest, f"order_date={gap}", restored)


@pytest.mark.parametrize(
    ("days_after", "lookback"), [(0, 1), (2, 2)], ids=["restored-right-after", "restored-two-days-later"]
)
def test_a_lookback_route_whose_target_lost_a_late_days_commit_stops(
    base: Path, store_url: str, days_after: int, lookback: int
) -> None:
    """``replace_partition`` with ``lookback``: red before, the restored lookback day made up the count
    (exit 0, no note), and once new days had run, the lookback's commits of the newest skipped day came
    after the late day's, so it was no late commit any more (exit 0, the day lost for good)."""
    gap = _newest_day_a_day_later(base)
    manifest = _with_lookback(
        write_manifest(base, "orders", store_url, strategy="replace_partition"), lookback
    )
    assert _dpone_process("run", str(manifest)) == 0
    shutil.copytree(base / "clickhouse", base / "backup", symlinks=True)
    add_source_rows(base, [(900_001, gap), (900_002, gap)])  # late rows of a day between committed ones
    assert _dpone_process("run", str(manifest)) == 0
    for _ in range(days_after):
        add_a_new_day(base)
        assert _dpone_process("run", str(manifest)) == 0
    restored = _target_restored_from_backup(base)

    _stops_naming(base, manifest, f"order_date={gap}", restored)


def test_a_long_lookbacks_days_leaving_its_window_do_not_hide_a_late_day_a_restored_target_lost(
    base: Path, store_url: str
) -> None:
    """``lookback: 22`` over 25 days: the days leaving the window were committed again by the run before,
    so 21 new days pushed a late day (older than the window) out of the 20 latest commits counted; red
    before, the restored target lost it, exit 0, with a note blaming retention."""
    with sqlite3.connect(base / "source.sqlite") as db:  # every day begun by the end: none ahead of the clock
        db.execute("UPDATE orders SET order_date = date(order_date, '-200 days')")
    for _ in range(21):  # 25 days
        add_a_new_day(base)
    with sqlite3.connect(base / "source.sqlite") as db:  # the second day: no rows until a late correction
        (late_day,) = db.execute(
            "SELECT DISTINCT order_date FROM orders ORDER BY 1 LIMIT 1 OFFSET 1"
        ).fetchone()
        late = db.execute("SELECT * FROM orders WHERE order_date = ?", (late_day,)).fetchall()
        db.execute("DELETE FROM orders WHERE order_date = ?", (late_day,))
    manifest = _with_lookback(write_manifest(base, "orders", store_url, strategy="replace_partition"), 22)
    assert _dpone_process("run", str(manifest)) == 0
    shutil.copytree(base / "clickhouse", base / "backup", symlinks=True)
    with sqlite3.connect(base / "source.sqlite") as db:
        db.executemany(f"INSERT INTO orders VALUES ({', '.join('?' * len(late[0]))})", late)
    assert _dpone_process("run", str(manifest)) == 0  # the late day, committed after the backup
    for _ in range(21):
        add_a_new_day(base)
    assert _dpone_process("run", str(manifest)) == 0
    restored = _target_restored_from_backup(base)

    _stops_naming(base, manifest, f"order_date={late_day}", restored)


def test_a_late_day_older_than_every_other_that_retention_removed_stops_nothing(
    base: Path, store_url: str
) -> None:
    """A late correction of an old day, committed alone, then removed by the nightly retention with the
    oldest days: red with the first form of the late-day count, every later run stopped, and no dpone
    command cleared it (a TTL even drops such rows on insert). Retention removes the oldest days first: an
    empty day older than every other one is left to the notice."""
    manifest = write_manifest(base, "orders", store_url)
    assert _dpone_process("run", str(manifest)) == 0
    add_source_rows(base, [(900_001, "2020-01-01"), (900_002, "2020-01-01")])
    assert _dpone_process("run", str(manifest)) == 0  # the late day, committed alone
    oldest_demo_day = min(str(r[1]) for r in source_rows(base) if str(r[1]) > "2020-01-01")
    chdb_command(base, f"ALTER TABLE {TARGET} DELETE WHERE order_date <= '{oldest_demo_day}'")
    add_a_new_day(base)

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 0, result.output
    assert "fewer than" in result.output  # the retention notice


def test_a_target_with_retention_restored_from_before_a_late_days_commit_stops_instead_of_skipping_it(
    base: Path, store_url: str
) -> None:
    """Retention empties the oldest day, and the check asked whether that oldest day still held rows: on any
    table with a retention job or a TTL it never stopped, and a target restored from a backup taken before a
    late day's commit lost that day for good (red before: exit 0, a note blaming retention)."""
    gap = _newest_day_a_day_later(base)
    manifest = write_manifest(base, "orders", store_url)
    assert _dpone_process("run", str(manifest)) == 0
    oldest_day = min(str(r[1]) for r in source_rows(base))
    chdb_command(base, f"ALTER TABLE {TARGET} DELETE WHERE order_date <= '{oldest_day}'")  # retention
    shutil.copytree(base / "clickhouse", base / "backup", symlinks=True)
    add_source_rows(base, [(900_001, gap), (900_002, gap)])  # a late day between committed ones
    assert _dpone_process("run", str(manifest)) == 0  # committed, then the disk is lost
    restored = _target_restored_from_backup(base)

    _stops_naming(base, manifest, f"order_date={gap}", restored)


def test_a_late_day_committed_below_days_retention_emptied_stops_nothing(base: Path, store_url: str) -> None:
    """A retention pass empties the oldest days; a late day then committed lies below days it emptied. Red with
    a first form of the restore check (every row below an empty late commit counted): the next run stopped
    (`target_lost_committed_rows`, "restored from a backup") although nothing was lost. Only the nearest
    partition below the empty one *committed before it* counts."""
    manifest = write_manifest(base, "orders", store_url)
    assert _dpone_process("run", str(manifest)) == 0
    days = sorted({str(r[1]) for r in source_rows(base)})
    chdb_command(base, f"ALTER TABLE {TARGET} DELETE WHERE order_date <= '{days[-2]}'")  # retention
    add_source_rows(base, [(900_001, "2020-01-01"), (900_002, "2020-01-01")])  # a late day, far below
    assert _dpone_process("run", str(manifest)) == 0
    add_a_new_day(base)

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 0, result.output
    kept = [r for r in source_rows(base) if str(r[1]) > days[-2] or str(r[1]) == "2020-01-01"]
    assert target_rows(base) == kept


def test_a_store_restored_from_before_a_commit_never_appends_the_committed_rows_again(
    base: Path,
    store_url: str,
) -> None:
    """The store loses its newest checkpoints (restored from an older backup): red before, the next run
    appended the day committed since a second time (exit 0). Now it stops before any target I/O."""
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        restore_point = conn.execute(sa.text("SELECT max(id) FROM dpone_partition_checkpoints")).scalar_one()
    add_a_new_day(base)
    assert dpone("run", str(manifest)).exit_code == 0  # the new day, committed
    with engine.begin() as conn:  # the backup taken before it
        conn.execute(sa.text("DELETE FROM dpone_partition_checkpoints WHERE id > :id"), {"id": restore_point})
    engine.dispose()

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["error"] == "native_transfer_target_not_empty"
    assert len(error["details"]["partitions"]) == 1
    assert target_rows(base) == source_rows(base)  # once each


def test_a_store_that_lost_a_commit_but_kept_the_days_earlier_records_never_appends_it_again(
    base: Path,
    store_url: str,
) -> None:
    """The lost suffix of a store most often leaves an older record of the day behind: red before, a day
    whose latest surviving record was its own PLANNED row (the armed and committed rows lost, as after an
    asynchronous failover), or a failure before the target (a store restored from a backup taken after a
    failed run), was planned as "run again" without a count and appended a second time, exit 0."""
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        before = conn.execute(sa.text("SELECT max(id) FROM dpone_partition_checkpoints")).scalar_one()
    add_a_new_day(base)
    assert dpone("run", str(manifest)).exit_code == 0  # the new day: PLANNED, armed, committed
    with engine.begin() as conn:  # the newest records lost; the day's PLANNED row survives
        statuses = (
            conn.execute(
                sa.text("SELECT status FROM dpone_partition_checkpoints WHERE id > :id ORDER BY id"),
                {"id": before},
            )
            .scalars()
            .all()
        )
        assert statuses[0] == "PLANNED"
        conn.execute(
            sa.text("DELETE FROM dpone_partition_checkpoints WHERE id > :id AND status <> 'PLANNED'"),
            {"id": before},
        )
    engine.dispose()

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["error"] == "native_transfer_target_not_empty"
    assert len(error["details"]["partitions"]) == 1
    assert target_rows(base) == source_rows(base)  # once each


def test_a_store_restored_to_a_failed_attempt_of_a_committed_day_never_appends_it_again(
    base: Path,
    store_url: str,
) -> None:
    """The backup was taken while the day's latest record was a failure before the target (its quality
    check failed); the day was fixed and committed after it. Red before: restored, the store planned the
    day as a failure to run again, and it was appended a second time, exit 0."""
    with sqlite3.connect(base / "source.sqlite") as db:  # the demo table, its customer column nullable
        db.executescript(
            "ALTER TABLE orders RENAME TO demo_orders;"
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, customer TEXT,"
            " amount NUMERIC(12,2) NOT NULL, updated_at DATETIME NOT NULL);"
            "INSERT INTO orders SELECT * FROM demo_orders; DROP TABLE demo_orders;"
        )
    manifest = write_manifest(base, "orders", store_url)
    manifest.write_text(
        manifest.read_text(encoding="utf-8")
        + "quality:\n  checks:\n    - {type: not_null, columns: [customer]}\n",
        encoding="utf-8",
    )
    assert dpone("run", str(manifest)).exit_code == 0
    add_a_new_day(base)
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("UPDATE orders SET customer = NULL WHERE id = (SELECT max(id) FROM orders)")
    failed = dpone("run", "--json", str(manifest))
    assert failed.exit_code != 0 and json.loads(failed.output)["error"] == "quality_check_failed", (
        failed.output
    )
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:  # the nightly backup
        backup = conn.execute(sa.text("SELECT max(id) FROM dpone_partition_checkpoints")).scalar_one()
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("UPDATE orders SET customer = 'fixed' WHERE customer IS NULL")
    assert dpone("run", str(manifest)).exit_code == 0  # the day, committed
    with engine.begin() as conn:  # restored from the backup
        conn.execute(sa.text("DELETE FROM dpone_partition_checkpoints WHERE id > :id"), {"id": backup})
    engine.dispose()

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["error"] == "native_transfer_target_not_empty"
    assert target_rows(base) == source_rows(base)  # once each
