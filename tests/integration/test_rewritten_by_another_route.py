"""An append route whose committed days another route of the table replaced since does not say "nothing to do".

An ``incremental_append`` route never moves a committed partition again. When another route of the same
target that *replaces* rows (the same source table under ``replace_partition`` or ``full_refresh``: a
one-day repair, a refresh) deletes within its committed days and does not put every row back, the rows are
gone: a repair that failed after its delete and was resolved ``not-applied``, or a refresh whose query
filtered. The append route then reported "nothing to do", exit 0, and a notice blamed retention. It stops
now (``native_transfer_target_lost_committed_rows``, ``details.problem: rewritten_by_another_route``),
naming the partitions and the other route, before it reads or writes anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from tests.integration.route_rig import (
    ROWS,
    add_source_rows,
    chdb_command,
    chdb_query,
    dpone,
    manifest_at,
    source_rows,
    target_rows,
)

pytestmark = pytest.mark.service


@pytest.fixture
def appended(base: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AIRFLOW_CONN_SPELLING_STATE", f"sqlite:///{base / 'state.sqlite'}")
    manifest = manifest_at(base, name="daily")
    assert dpone("run", str(manifest)).exit_code == 0
    assert len(target_rows(base)) == ROWS
    return manifest


def lost(result: Any) -> dict[str, Any]:
    assert result.exit_code == 3, result.output
    error: dict[str, Any] = json.loads(result.stdout)
    assert error["error"] == "native_transfer_target_lost_committed_rows", error
    return error["details"]


def test_a_filtering_full_refresh_then_the_append_route_stops_naming_the_refresh(
    base: Path, appended: Path
) -> None:
    first_day = min(row[1] for row in source_rows(base))
    query = f"  query: \"SELECT * FROM orders WHERE order_date = '{first_day}'\"\n"
    refresh = manifest_at(base, name="refresh", strategy="full_refresh", extra=query, file="refresh.yaml")
    assert dpone("run", str(refresh), "--allow-nonempty-target").exit_code == 0

    details = lost(dpone("run", str(appended), "--json"))  # red: exit 0, "nothing to do"

    assert details["problem"] == "rewritten_by_another_route"
    assert details["other_routes"] == ["main.orders -> demo.orders (full_refresh)"]
    # a refresh empties the whole table: every committed day it did not load again is short
    assert len(details["partitions"]) == 3 and f"order_date={first_day}" not in details["partitions"]
    assert details["target_rows"] == [0, 0, 0]


def test_late_rows_of_another_day_do_not_hide_a_day_a_refresh_left_out(base: Path, appended: Path) -> None:
    """Counted per partition: a refresh that also loaded rows the append never committed (late rows of a
    committed day) keeps the table's total above the committed rows while a day it left out is empty."""
    days = sorted({row[1] for row in source_rows(base)})
    add_source_rows(base, [(100_000 + i, days[1]) for i in range(400)])  # late rows of a committed day
    query = f"  query: \"SELECT * FROM orders WHERE order_date <> '{days[0]}'\"\n"
    refresh = manifest_at(base, name="refresh", strategy="full_refresh", extra=query, file="refresh.yaml")
    assert dpone("run", str(refresh), "--allow-nonempty-target").exit_code == 0
    assert chdb_query(base, "SELECT count() FROM demo.orders")[0][0] > ROWS

    details = lost(dpone("run", str(appended), "--json"))  # red: exit 0, the first day empty

    assert details["partitions"] == [f"order_date={days[0]}"]


def test_a_replace_that_put_every_row_back_never_stops_the_append_route_even_beside_retention(
    base: Path, appended: Path
) -> None:
    days = sorted({row[1] for row in source_rows(base)})
    query = f"  query: \"SELECT * FROM orders WHERE order_date = '{days[2]}'\"\n"
    repair = manifest_at(base, name="repair", strategy="replace_partition", extra=query, file="repair.yaml")
    assert dpone("run", str(repair), "--allow-nonempty-target").exit_code == 0
    chdb_command(  # retention removes the oldest day from the table: tolerated, with a notice
        base, f"ALTER TABLE demo.orders DELETE WHERE order_date = '{days[0]}' SETTINGS mutations_sync = 2"
    )

    result = dpone("run", str(appended), "--json")

    assert result.exit_code == 0, result.output  # before: exit 3, the repaired day named


def test_a_repair_that_failed_after_its_delete_and_was_resolved_not_applied_stops_the_append_route(
    base: Path, appended: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    day = max(row[1] for row in source_rows(base))
    query = f"  query: \"SELECT * FROM orders WHERE order_date = '{day}'\"\n"
    repair = manifest_at(base, name="repair", strategy="replace_partition", extra=query, file="repair.yaml")

    def fail_to_insert(*_: Any, **__: Any) -> int:
        raise DponeError(ErrorCode.TARGET_LOAD_FAILED, "inserting failed")

    with monkeypatch.context() as patched:  # the delete ran, the insert failed: the day is empty
        patched.setattr(ClickHouseSink, "_insert_block", fail_to_insert)
        assert dpone("run", str(repair), "--allow-nonempty-target").exit_code != 0
    assert chdb_query(base, f"SELECT count() FROM demo.orders WHERE order_date = '{day}'") == [(0,)]
    resolved = dpone("guard", "resolve", str(repair), "--all-blocked", "--as", "not-applied", "--reason", "x")
    assert resolved.exit_code == 0, resolved.output  # allowed: a replace re-run replaces the day

    details = lost(dpone("run", str(appended), "--json"))  # red: exit 0 with the day's rows missing

    assert details["partitions"] == [f"order_date={day}"]
    assert details["other_routes"] == ["main.orders -> demo.orders (replace_partition)"]
    # the repair run to completion puts the day back; its query is not the append route's, so dpone cannot
    # tell it reads the same rows: without the flag it stops before deleting them, saying so
    assert dpone("run", str(repair)).exit_code == 3
    assert dpone("run", str(repair), "--allow-nonempty-target").exit_code == 0
    assert dpone("run", str(appended)).exit_code == 0 and target_rows(base) == source_rows(base)


@pytest.mark.parametrize(
    ("partitioning", "extra"),
    [("day", ""), ("month", ""), ("day", '  query: "SELECT * FROM orders"\n')],
    ids=["same-bounds-and-query", "by-month", "another-spelling-of-the-query"],
)
def test_a_replace_that_mirrored_deletes_at_the_source_never_stops_the_append_route(
    base: Path, appended: Path, partitioning: str, extra: str
) -> None:
    """Rows deleted at the source, a ``replace_partition`` route run to mirror that (the target now holds
    exactly the source), then back to the append route. Red before: it compared the day with what the
    append had committed, stopped ``rewritten_by_another_route`` naming rows missing that no source holds,
    and did so on every run: the route was blocked for good. By month, or by day under a query spelled
    otherwise (the same rows), the mirror's count is not this route's count of the day, so the day is held
    to what the source holds now (red before: "90 of 100" on every run, ``--verify`` finding no drift)."""
    import sqlite3

    first_day = min(row[1] for row in source_rows(base))
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(
            "DELETE FROM orders WHERE id IN (SELECT id FROM orders WHERE order_date = ? LIMIT 3)",
            (first_day,),
        )
    mirror = manifest_at(
        base, name="mirror", strategy="replace_partition", extra=extra, kind=partitioning, file="mirror.yaml"
    )
    assert dpone("run", str(mirror), "--allow-nonempty-target").exit_code == 0
    assert target_rows(base) == source_rows(base)
    add_source_rows(base, [(900_001, "2026-12-01")])

    result = dpone("run", str(appended), "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows_committed"] == 1
    assert target_rows(base) == source_rows(base)
