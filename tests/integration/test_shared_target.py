"""Two source tables into one target: a destructive strategy never deletes the other source's rows.

Found trying a fan-in as a user would: ``shard_a`` appends into ``demo.orders``; ``shard_b`` is pointed at
the same table with ``replace_partition`` (or ``full_refresh``). Its delete of each day removed
``shard_a``'s rows of that day, ``shard_a``'s checkpoints still said COMMITTED, and its next run skipped
every partition (exit 0): the rows were gone for good. The run now stops before any target I/O with
``native_transfer_target_not_empty`` unless ``allow_nonempty_target`` says the other source's rows are to
go. Real SQLite source and checkpoint store, real chDB target; every target value compared.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.builders import chdb_endpoint, sqlite_day_manifest
from tests.integration.route_rig import chdb_command

DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    """``shard_a`` and ``shard_b``: the same days, ids apart (rows of two sources never coincide)."""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        for table, first_id in (("shard_a", 1), ("shard_b", 1_000)):
            db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, day DATE NOT NULL, amount INTEGER)")
            db.executemany(
                f"INSERT INTO {table} VALUES (?, ?, ?)",
                [(first_id + i, DAYS[i % 3], i * 7) for i in range(30)],
            )
    yield tmp_path


def manifest(base: Path, table: str, strategy: str) -> Path:
    return sqlite_day_manifest(
        base, table, state="sqlite:///state.sqlite", target="demo.orders", strategy=strategy
    )


def run(path: Path, run_id: str, **options: Any) -> Any:
    with open_runtime(load_manifest(path)) as runtime:
        return runtime.run(run_id, **options)


def source(base: Path, *tables: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        rows = [r for t in tables for r in db.execute(f"SELECT id, day, amount FROM {t}").fetchall()]
    return sorted(rows)


def target(base: Path) -> list[tuple[Any, ...]]:
    client = open_client(chdb_endpoint(base / "clickhouse"))
    try:
        rows = client.query("SELECT id, toString(day), amount FROM demo.orders").result_rows
        return sorted(tuple(r) for r in rows)
    finally:
        client.close()


@pytest.mark.parametrize("strategy", ["replace_partition", "full_refresh"])
def test_a_second_source_that_would_delete_the_first_sources_rows_stops_before_the_target(
    base: Path, strategy: str
) -> None:
    assert run(manifest(base, "shard_a", "incremental_append"), "a-1").rows_committed == 30
    with pytest.raises(DponeError) as stopped:
        run(manifest(base, "shard_b", strategy), "b-1")
    assert stopped.value.code is ErrorCode.TARGET_NOT_EMPTY
    assert stopped.value.details["other_routes"] == ["main.shard_a -> demo.orders (incremental_append)"]
    assert "--allow-nonempty-target" in "\n".join(stopped.value.hint_lines)
    assert target(base) == source(base, "shard_a")  # untouched


def test_a_second_append_source_first_stops_naming_the_route_that_filled_the_table_and_the_fan_in_way(
    base: Path,
) -> None:
    """Its first run cannot tell a second source from a copy of the first: it stops, and says which."""
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    with pytest.raises(DponeError) as stopped:
        run(manifest(base, "shard_b", "incremental_append"), "b-1")
    assert stopped.value.code is ErrorCode.TARGET_NOT_EMPTY
    assert stopped.value.details["other_routes"] == ["main.shard_a -> demo.orders (incremental_append)"]
    hints = "\n".join(stopped.value.hint_lines)
    assert (
        "main.shard_a -> demo.orders" in hints and "a fan-in" in hints and "--allow-nonempty-target" in hints
    )
    assert "checkpoint store lost" not in hints  # the store is not lost: it knows who wrote the table
    assert target(base) == source(base, "shard_a")


def test_appending_a_second_source_beside_the_first_keeps_both(base: Path) -> None:
    """The fan-in that is safe (append deletes nothing), once the non-empty target is allowed."""
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    run(manifest(base, "shard_b", "incremental_append"), "b-1", allow_nonempty_target=True)
    assert target(base) == source(base, "shard_a", "shard_b")
    run(manifest(base, "shard_a", "incremental_append"), "a-2")  # the first source's next run
    assert target(base) == source(base, "shard_a", "shard_b")
    with sqlite3.connect(base / "source.sqlite") as db:  # a new day in both sources
        db.execute("INSERT INTO shard_a VALUES (500, '2026-12-01', 1)")
        db.execute("INSERT INTO shard_b VALUES (1500, '2026-12-01', 2)")
    # each finds the other's rows of the new day in the target: another route's, never taken for its own
    run(manifest(base, "shard_b", "incremental_append"), "b-2")
    run(manifest(base, "shard_a", "incremental_append"), "a-3")
    assert target(base) == source(base, "shard_a", "shard_b")


def test_allowed_deliberately_the_second_source_replaces_the_first_and_says_so(base: Path) -> None:
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    report = run(manifest(base, "shard_b", "full_refresh"), "b-1", allow_nonempty_target=True)
    assert report.rows_committed == 30
    assert any("allow_nonempty_target" in n and "main.shard_a" in n for n in report.notices)
    assert target(base) == source(base, "shard_b")


def test_a_full_refresh_of_the_same_source_replaces_its_own_append_routes_rows(base: Path) -> None:
    """Another strategy of the same source table is not another source: nothing stops it."""
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    assert run(manifest(base, "shard_a", "full_refresh"), "a-2").rows_committed == 30
    assert target(base) == source(base, "shard_a")


def test_two_definitions_of_one_replace_route_never_leave_the_target_short(base: Path) -> None:
    """Two manifests of one route (``source.query`` filters differ), or one edited back: each run leaves the
    target holding what its own definition selects. Red before: the first definition's second run skipped
    every day the other had replaced (exit 0), leaving the other's rows only. Each switch deletes rows the
    other filter selected: it stops first (``left_out_rows``, target unchanged) and goes on when allowed."""
    even = sqlite_day_manifest(
        base,
        "shard_a",
        state="sqlite:///state.sqlite",
        target="demo.orders",
        query="SELECT * FROM shard_a WHERE id % 2 = 0",
    )
    odd = sqlite_day_manifest(
        base,
        "shard_a",
        state="sqlite:///state.sqlite",
        target="demo.orders",
        query="SELECT * FROM shard_a WHERE id % 2 = 1",
    )
    evens = [r for r in source(base, "shard_a") if r[0] % 2 == 0]
    odds = [r for r in source(base, "shard_a") if r[0] % 2 == 1]
    run(even, "even-1")
    assert target(base) == evens
    with pytest.raises(DponeError) as stopped:
        run(odd, "odd-1")
    assert stopped.value.details["problem"] == "rows_left_out_by_new_definition"
    assert target(base) == evens
    run(odd, "odd-1", allow_nonempty_target=True)
    assert target(base) == odds
    again = run(even, "even-2", allow_nonempty_target=True)
    assert again.rows_committed == len(evens)
    assert target(base) == evens
    assert run(even, "even-3").rows_committed == 0  # nothing replaced it since: skipped as committed


def test_a_fan_in_store_that_lost_a_commit_never_appends_the_day_again(base: Path) -> None:
    """Two source tables append into one target; the store loses shard_b's newest armed and committed
    records of a day (its PLANNED row survives). Red before: a day within which another source had commits
    was not counted at all, and shard_b appended its rows a second time, exit 0. Now the other source's
    committed rows are subtracted from the day's count: what is left is shard_b's own, and the run stops."""
    import sqlalchemy as sa

    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    b = manifest(base, "shard_b", "incremental_append")
    run(b, "b-1", allow_nonempty_target=True)
    engine = sa.create_engine(f"sqlite:///{base / 'state.sqlite'}")
    with engine.begin() as conn:  # the store's lost suffix: shard_b's last day, armed and committed
        ids = (
            conn.execute(
                sa.text(
                    "SELECT id FROM dpone_partition_checkpoints WHERE source_table LIKE '%shard_b' "
                    "AND status IN ('EXPORTED', 'COMMITTED') ORDER BY id DESC"
                )
            )
            .scalars()
            .all()
        )
        assert ids
        conn.execute(
            sa.text(f"DELETE FROM dpone_partition_checkpoints WHERE id IN ({','.join(map(str, ids))})")
        )
    engine.dispose()

    with pytest.raises(DponeError) as stopped:
        run(b, "b-2")

    assert stopped.value.code is ErrorCode.TARGET_NOT_EMPTY
    assert target(base) == source(base, "shard_a", "shard_b")  # each row once


def test_a_finer_partitioning_of_one_source_in_a_fan_in_is_rebaselined(base: Path) -> None:
    """shard_b, partitioned by month, is edited to days. Red before: the rebaseline compared the target's
    whole count within each day (shard_a's committed rows included) with shard_b's source count, kept every
    day blocking, and printed "delete the target's rows within it": that deletes shard_a's committed rows,
    which nothing reloads. Other sources' committed rows are subtracted now."""
    from click.testing import CliRunner

    from airflow_provider_dpone.cli.main import cli

    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    b = manifest(base, "shard_b", "incremental_append")
    b.write_text(b.read_text(encoding="utf-8").replace("kind: day", "kind: month"), encoding="utf-8")
    run(b, "b-1", allow_nonempty_target=True)
    b.write_text(b.read_text(encoding="utf-8").replace("kind: month", "kind: day"), encoding="utf-8")

    rebased = CliRunner().invoke(cli, ["guard", "rebaseline", str(b), "--reason", "daily now", "--json"])

    assert rebased.exit_code == 0, rebased.output
    assert len(json.loads(rebased.output)["recorded"]) == len(DAYS)
    report = run(b, "b-2")
    assert report.rows_committed == 0
    assert target(base) == source(base, "shard_a", "shard_b")


def test_adopting_the_target_for_a_new_source_beside_a_committed_one_adopts_none_of_its_rows(
    base: Path,
) -> None:
    """shard_a has committed every day; shard_b is a new route into the same table, with as many rows per
    day. Red before: ``--adopt-target`` compared the whole target count within each day (shard_a's rows)
    with shard_b's source count, found them equal, recorded every day COMMITTED, and shard_b's next run
    skipped them all: its rows were never moved, exit 0. Other sources' committed rows are subtracted now."""
    from click.testing import CliRunner

    from airflow_provider_dpone.cli.main import cli

    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    b = manifest(base, "shard_b", "incremental_append")

    adopted = CliRunner().invoke(
        cli, ["guard", "rebaseline", str(b), "--adopt-target", "--reason", "new shard", "--json"]
    )

    assert adopted.exit_code == 0, adopted.output
    assert json.loads(adopted.output)["recorded"] == []
    report = run(b, "b-1", allow_nonempty_target=True)
    assert report.rows_committed == 30
    assert target(base) == source(base, "shard_a", "shard_b")


def test_adoption_beside_another_routes_commits_says_whose_rows_they_are_and_warns_of_a_respelled_table(
    base: Path,
) -> None:
    """A route whose table is spelled another way (``db.dbo.orders`` for ``dbo.orders``) is another source
    table: its adoption found the other route's rows only and printed "the target holds none of its rows"
    for every day, then named ``--allow-nonempty-target``, which moved every row a second time (exit 0)."""
    from click.testing import CliRunner

    from airflow_provider_dpone.cli.main import cli

    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    b = manifest(base, "shard_b", "incremental_append")

    adopted = CliRunner().invoke(cli, ["guard", "rebaseline", str(b), "--adopt-target", "--reason", "new"])

    assert adopted.exit_code == 0, adopted.output
    assert "row(s) there were committed by other source tables' routes" in adopted.stdout
    assert "spell the table as that route does" in adopted.stderr


def test_adoption_in_a_fan_in_of_another_partitioning_records_nothing_and_never_advises_deleting_by_bounds(
    base: Path,
) -> None:
    """shard_a committed by month: how many of a day's rows are shard_a's is unknown, so no day of shard_b
    is adopted (equal counts included) and the advice names the fan-in."""
    from click.testing import CliRunner

    from airflow_provider_dpone.cli.main import cli

    a = manifest(base, "shard_a", "incremental_append")
    a.write_text(a.read_text(encoding="utf-8").replace("kind: day", "kind: month"), encoding="utf-8")
    run(a, "a-1")
    b = manifest(base, "shard_b", "incremental_append")

    adopted = CliRunner().invoke(
        cli, ["guard", "rebaseline", str(b), "--adopt-target", "--reason", "new shard", "--json"]
    )

    assert adopted.exit_code == 3, adopted.output
    error = json.loads(adopted.stdout)
    assert error["error"] == "native_transfer_manual_reconciliation_required"
    assert [p["others_unknown"] for p in error["details"]["partitions"]] == [True] * len(DAYS)
    told = CliRunner().invoke(cli, ["guard", "rebaseline", str(b), "--adopt-target", "--reason", "new shard"])
    assert "never delete by bounds alone" in told.output
    report = run(b, "b-1", allow_nonempty_target=True)
    assert report.rows_committed == 30
    assert target(base) == source(base, "shard_a", "shard_b")


def test_a_fan_in_route_whose_rows_were_deleted_stops_although_the_table_holds_another_sources_rows(
    base: Path,
) -> None:
    """shard_a's rows are deleted from the target (shard_b's stay: as many). Red before: the table's whole
    count (shard_b's 30) covered shard_a's 30 committed rows, and shard_a's run said "nothing to do", exit
    0, for good (seen: another route refilling a truncated table). Other sources' commits are subtracted."""
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    run(manifest(base, "shard_b", "incremental_append"), "b-1", allow_nonempty_target=True)
    chdb_command(base, "ALTER TABLE demo.orders DELETE WHERE id < 1000 SETTINGS mutations_sync = 2")

    with pytest.raises(DponeError) as stopped:
        run(manifest(base, "shard_a", "incremental_append"), "a-2")

    assert stopped.value.code is ErrorCode.TARGET_LOST_COMMITTED_ROWS
    assert stopped.value.details["problem"] == "fan_in_undecidable"
    assert stopped.value.details["other_sources_rows"] == 30


def test_a_fan_in_route_whose_rows_are_intact_beside_another_sources_removed_ones_stops_and_can_go_on(
    base: Path,
) -> None:
    """The mirror of the test above: shard_a's rows are removed on purpose, shard_b's are all there. By
    counts the two cases are one (the table holds 30 rows, 10 in shard_b's newest day, as many as shard_a
    committed there), so shard_b stops too. Seen before: it said it held "30 rows, fewer than the 30" and
    "none of the newest", with no way out. It says now that counts cannot tell, and the runbook's way out
    (shard_a's commits, checked and retired from the store) lets shard_b go on with its rows intact."""
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    run(manifest(base, "shard_b", "incremental_append"), "b-1", allow_nonempty_target=True)
    chdb_command(base, "ALTER TABLE demo.orders DELETE WHERE id < 1000 SETTINGS mutations_sync = 2")

    with pytest.raises(DponeError) as stopped:
        run(manifest(base, "shard_b", "incremental_append"), "b-2")

    assert stopped.value.code is ErrorCode.TARGET_LOST_COMMITTED_ROWS
    assert stopped.value.details["problem"] == "fan_in_undecidable"
    assert "fewer than" not in stopped.value.safe_message and "counts cannot" in stopped.value.safe_message
    with sqlite3.connect(
        base / "state.sqlite"
    ) as db:  # the runbook: shard_a's history, exported, then retired
        retired = db.execute(
            "DELETE FROM dpone_partition_checkpoints WHERE source_table = 'main.shard_a'"
        ).rowcount
    assert retired > 0
    assert run(manifest(base, "shard_b", "incremental_append"), "b-3").rows_committed == 0
    assert target(base) == source(base, "shard_b")


def test_a_day_written_by_hand_beside_a_month_partitioned_source_is_never_appended_again(base: Path) -> None:
    """shard_b commits by month, shard_a by day: how many of a day's rows are shard_b's is unknown. Red
    before: such a day was not counted at all, and a day copied into the target by hand before shard_a's
    run was appended a second time, exit 0. The month's rows no commit explains are counted now; an
    ordinary new day still moves."""
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    b = manifest(base, "shard_b", "incremental_append")
    b.write_text(b.read_text(encoding="utf-8").replace("kind: day", "kind: month"), encoding="utf-8")
    run(b, "b-1", allow_nonempty_target=True)
    a = manifest(base, "shard_a", "incremental_append")
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("INSERT INTO shard_a VALUES (500, '2026-11-27', 1)")

    assert run(a, "a-2").rows_committed == 1  # an ordinary new day of the month: moved
    assert target(base) == source(base, "shard_a", "shard_b")

    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("INSERT INTO shard_a VALUES (501, '2026-11-26', 2)")
    chdb_command(base, "INSERT INTO demo.orders (id, day, amount) VALUES (501, '2026-11-26', 2)")  # by hand

    with pytest.raises(DponeError) as stopped:
        run(a, "a-3")

    assert stopped.value.code is ErrorCode.TARGET_NOT_EMPTY
    assert "around them" in stopped.value.safe_message
    assert target(base) == source(base, "shard_a", "shard_b")  # each row once


def test_a_new_day_holding_no_row_moves_although_the_month_holds_rows_no_commit_explains(base: Path) -> None:
    """Red before (this stop's first version): a row written by hand anywhere in another source's month
    stopped every new day of shard_a, although the day held no row in the target. A day whose bounds hold
    no row cannot be duplicated: it moves."""
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    b = manifest(base, "shard_b", "incremental_append")
    b.write_text(b.read_text(encoding="utf-8").replace("kind: day", "kind: month"), encoding="utf-8")
    run(b, "b-1", allow_nonempty_target=True)
    chdb_command(
        base, "INSERT INTO demo.orders (id, day, amount) VALUES (9000, '2026-11-28', 5)"
    )  # a correction
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("INSERT INTO shard_a VALUES (502, '2026-11-25', 3)")

    assert run(manifest(base, "shard_a", "incremental_append"), "a-2").rows_committed == 1


def test_a_restored_store_after_retention_in_a_fan_in_never_appends_a_day_again(base: Path) -> None:
    """shard_b commits by month; shard_a's store is restored from a copy taken before its newest day, and
    a retention job removed older rows meanwhile. Red before: the month's deficit (the deleted rows)
    cancelled the restored day's rows, and shard_a appended the day a second time, exit 0. Rows whose
    owner cannot be told now stop the run (``owner_unknown``)."""
    import shutil

    a = manifest(base, "shard_a", "incremental_append")
    run(a, "a-1")
    b = manifest(base, "shard_b", "incremental_append")
    b.write_text(b.read_text(encoding="utf-8").replace("kind: day", "kind: month"), encoding="utf-8")
    run(b, "b-1", allow_nonempty_target=True)
    shutil.copy(base / "state.sqlite", base / "state.backup")
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("INSERT INTO shard_a VALUES (503, '2026-11-27', 4)")
    assert run(a, "a-2").rows_committed == 1
    chdb_command(base, f"ALTER TABLE demo.orders DELETE WHERE day = '{DAYS[0]}' SETTINGS mutations_sync = 2")
    shutil.copy(base / "state.backup", base / "state.sqlite")  # the store is restored from the copy

    with pytest.raises(DponeError) as stopped:
        run(a, "a-3")

    assert stopped.value.code is ErrorCode.TARGET_NOT_EMPTY
    assert stopped.value.details["problem"] == "owner_unknown"
    held = [r for r in target(base) if r[0] == 503]
    assert len(held) == 1  # the restored day's row is there once


def test_retention_beside_a_source_partitioned_on_another_column_never_stops_a_new_day(base: Path) -> None:
    """shard_b commits integer ranges of ``id``, shard_a days; a retention job deletes the oldest day.
    Red before (this stop's second version): the whole table's rows less every commit went below zero,
    and each new day of shard_a holding shard_b's rows stopped (``owner_unknown``) on every run."""
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    b = manifest(base, "shard_b", "incremental_append")
    b.write_text(
        b.read_text(encoding="utf-8").replace(
            "{kind: day, column: day}", "{kind: integer_range, column: id, size: 100}"
        ),
        encoding="utf-8",
    )
    run(b, "b-1", allow_nonempty_target=True)
    chdb_command(base, f"ALTER TABLE demo.orders DELETE WHERE day = '{DAYS[0]}' SETTINGS mutations_sync = 2")
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("INSERT INTO shard_a VALUES (504, '2026-12-01', 1)")
        db.execute("INSERT INTO shard_b VALUES (1100, '2026-12-01', 2)")
    run(b, "b-2")

    assert run(manifest(base, "shard_a", "incremental_append"), "a-2").rows_committed == 1
    expected = [r for r in source(base, "shard_a", "shard_b") if r[1] != DAYS[0]]
    assert target(base) == expected


def test_durable_quality_replay_in_a_fan_in_stops_before_arming_instead_of_failing_after_publishing(
    base: Path,
) -> None:
    """The replay measures the target by partition bounds: with another source's rows in the same days its
    counts held both (source 30, target 60), ``row_count`` failed after publishing on correct data, and the
    route was blocked for good. It stops before arming now, blocking nothing; without replay the fan-in runs."""
    run(manifest(base, "shard_a", "incremental_append"), "a-1")
    replayed = manifest(base, "shard_b", "incremental_append")
    text = replayed.read_text(encoding="utf-8")
    replayed.write_text(
        text.replace("  order_by: [id]\n", "  order_by: [id]\n  options: {durable_quality_replay: true}\n")
        + "quality:\n  checks:\n    - {type: row_count}\n",
        encoding="utf-8",
    )
    assert "durable_quality_replay: true" in replayed.read_text(encoding="utf-8")

    with pytest.raises(DponeError) as info:
        run(replayed, "b-1", allow_nonempty_target=True)

    assert info.value.code is ErrorCode.MANIFEST_INVALID
    assert "durable_quality_replay" in info.value.safe_message
    assert info.value.details["other_routes"] == ["main.shard_a -> demo.orders (incremental_append)"]
    assert target(base) == source(base, "shard_a")  # nothing written
    run(manifest(base, "shard_b", "incremental_append"), "b-2", allow_nonempty_target=True)
    assert target(base) == source(base, "shard_a", "shard_b")


@pytest.mark.parametrize("strategy", ["replace_partition", "full_refresh"])
def test_a_replacing_manifest_of_another_filter_stops_before_deleting_an_append_manifests_rows(
    base: Path, strategy: str
) -> None:
    """One source table, one target: an appending manifest for one filter, a replacing one for another.
    Red before: the replacing run deleted the appended rows of its days, exit 0, and the append route skipped
    them for good (the counts passed: the other filter held as many rows per day). The replacing run now
    stops as for another source table's rows, nothing written; ``--allow-nonempty-target`` says to go on."""
    evens = sqlite_day_manifest(
        base,
        "shard_a",
        state="sqlite:///state.sqlite",
        target="demo.orders",
        strategy="incremental_append",
        query="SELECT * FROM shard_a WHERE id % 2 = 0",
    )
    odds = sqlite_day_manifest(
        base,
        "shard_a",
        state="sqlite:///state.sqlite",
        target="demo.orders",
        strategy=strategy,
        query="SELECT * FROM shard_a WHERE id % 2 = 1",
    )
    run(evens, "even-1")
    before = target(base)

    with pytest.raises(DponeError) as stopped:
        run(odds, "odd-1")

    assert stopped.value.code is ErrorCode.TARGET_NOT_EMPTY
    assert stopped.value.details["other_routes"] == ["main.shard_a -> demo.orders (incremental_append)"]
    assert target(base) == before == [r for r in source(base, "shard_a") if r[0] % 2 == 0]


@pytest.mark.parametrize("strategy", ["replace_partition", "full_refresh"])
def test_an_append_manifest_switched_to_replace_with_a_query_stops_once_and_then_runs(
    base: Path, strategy: str
) -> None:
    """The manifest itself switched from append to a replacing strategy, a query added in the same edit:
    its first run cannot tell the old route's rows from another filter's and stops; once it has replaced
    them (``--allow-nonempty-target``), they are its own. Red before: it stopped on every run, forever."""
    appending = sqlite_day_manifest(
        base, "shard_a", state="sqlite:///state.sqlite", target="demo.orders", strategy="incremental_append"
    )
    run(appending, "append-1")
    switched = sqlite_day_manifest(
        base,
        "shard_a",
        state="sqlite:///state.sqlite",
        target="demo.orders",
        strategy=strategy,
        query="SELECT *   FROM shard_a",
    )
    with pytest.raises(DponeError) as stopped:
        run(switched, "switched-1")
    assert stopped.value.code is ErrorCode.TARGET_NOT_EMPTY
    run(switched, "switched-2", allow_nonempty_target=True)
    for run_id in ("switched-3", "switched-4"):
        run(switched, run_id)
    assert target(base) == source(base, "shard_a")
