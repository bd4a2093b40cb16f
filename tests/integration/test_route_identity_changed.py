"""A manifest edit never re-appends history; an unknown route never appends into a table that holds rows.

Black-box ``dpone`` runs on a SQLite source into chDB, checkpoints in SQLite and PostgreSQL. Pinning
``source.columns``, editing ``source.query`` or changing the partitioning gives every partition a new ID:
on ``incremental_append`` the run stops (exit 3) before any target I/O, and ``dpone guard rebaseline``
records the new partitions the old ones hold, so the next run moves only what is new. Every target is
compared with the source value by value.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.route_rig import (
    TARGET,
    add_source_rows,
    append_armed,
    chdb_command,
    chdb_query,
    dpone,
    latest_of,
    manifest_at,
    source_rows,
    target_rows,
)

COLUMNS = "[id, order_date, customer, amount, updated_at]"
EDITS = {
    "columns-pinned": f"  columns: {COLUMNS}\n",
    "query-edited": "  query: SELECT id, order_date, customer, amount, updated_at FROM orders WHERE id > 0\n",
    "partitioning-coarser": None,  # day -> month, below
}


def edited(root: Path, edit: str, strategy: str = "incremental_append") -> Path:
    if edit == "partitioning-coarser":
        return manifest_at(root, strategy=strategy, kind="month")
    return manifest_at(root, strategy=strategy, extra=EDITS[edit] or "")


@pytest.fixture
def routed(base: Path, store_url: str) -> Path:
    """The example moved once by the day route: every test starts from a loaded target and its checkpoints."""
    assert dpone("run", str(manifest_at(base))).exit_code == 0
    return base


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_append_route_stops_before_the_target_and_duplicates_nothing(
    routed: Path,
    edit: str,
) -> None:
    manifest = edited(routed, edit)

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["error"] == "native_transfer_route_identity_changed"
    expected = "partitioning" if edit == "partitioning-coarser" else "query"
    assert expected in error["details"]["changed"]
    assert error["details"]["overlaps"], error
    assert target_rows(routed) == source_rows(routed)  # nothing appended twice


@pytest.mark.parametrize(
    "edit", ["columns-pinned", "partitioning-coarser"]
)  # a query's columns turn nullable
def test_a_rebaseline_records_what_the_old_definition_holds_and_the_next_run_moves_only_new_rows(
    routed: Path,
    edit: str,
) -> None:
    manifest = edited(routed, edit)
    assert dpone("run", str(manifest)).exit_code == 3

    rebased = dpone("guard", "rebaseline", str(manifest), "--reason", "pinned the columns", "--json")

    assert rebased.exit_code == 0, rebased.output
    recorded = json.loads(rebased.output)["recorded"]
    assert recorded and all(r["status"] == "COMMITTED" for r in recorded)
    assert all(r["diagnostics"]["rebaseline"]["old_partitions"] for r in recorded)
    add_source_rows(routed, [(900_001, "2026-12-01"), (900_002, "2026-12-02")])  # a new day (a new month)

    after = dpone("run", "--json", str(manifest))

    assert after.exit_code == 0, after.output
    report = json.loads(after.output)
    assert report["rows_committed"] == 2
    assert target_rows(routed) == source_rows(routed)


def test_a_partly_covered_partition_stays_blocking_after_a_rebaseline(
    routed: Path,
) -> None:
    add_source_rows(routed, [(900_001, "2026-11-29")])  # a day of the same month no day partition committed
    manifest = edited(routed, "partitioning-coarser")

    rebased = dpone("guard", "rebaseline", str(manifest), "--reason", "months now")

    assert rebased.exit_code == 3, rebased.output
    assert "still blocking" in rebased.output
    again = dpone("run", "--json", str(manifest))
    assert again.exit_code == 3
    assert json.loads(again.output)["error"] == "native_transfer_route_identity_changed"
    assert len(target_rows(routed)) == len(source_rows(routed)) - 1  # the late row is not appended on a guess


def test_a_month_whose_committed_day_lost_a_row_as_a_new_day_gained_one_stays_blocking(
    routed: Path,
) -> None:
    """Red before: the month's source count equalled the days' committed rows (one row deleted in a
    committed day, one added on a day no partition held), the rebaseline recorded the month, and the new
    day's row never moved, every run exit 0. Each old day's own count is compared now."""
    with sqlite3.connect(routed / "source.sqlite") as db:
        (gone,) = db.execute(
            "SELECT max(id) FROM orders WHERE order_date >= '2026-11-01' AND order_date < '2026-11-29'"
        ).fetchone()
        db.execute("DELETE FROM orders WHERE id = ?", (gone,))
    add_source_rows(routed, [(900_001, "2026-11-29")])
    manifest = edited(routed, "partitioning-coarser")

    rebased = dpone("guard", "rebaseline", str(manifest), "--reason", "months now")

    assert rebased.exit_code == 3, rebased.output
    assert "still blocking" in rebased.output
    assert dpone("run", str(manifest)).exit_code == 3


def test_a_replacing_route_goes_on_after_an_edit_and_says_its_identity_changed(
    base: Path,
    store_url: str,
) -> None:
    assert dpone("run", str(manifest_at(base, strategy="replace_partition"))).exit_code == 0
    manifest = edited(base, "columns-pinned", strategy="replace_partition")

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert "note: the query of route" in result.output
    assert target_rows(base) == source_rows(base)


def test_a_replacing_route_says_a_query_edit_once_not_again_over_days_replaced_since(
    base: Path,
    store_url: str,
) -> None:
    """Red before: every run after the edit said "the query, schema ... changed: 2 partition(s) overlap
    partitions committed under the old definition" of the lookback's days, each replaced under the new query
    since; and it named the schema, which differed only as the query reads it (a table's NOT NULL columns are
    nullable through a query)."""
    assert dpone("run", str(_with_lookback(manifest_at(base, strategy="replace_partition")))).exit_code == 0
    manifest = _with_lookback(edited(base, "query-edited", strategy="replace_partition"))

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert "note: the query of route" in result.output  # not "the query, schema of route"
    for _ in range(2):
        later = dpone("run", str(manifest))
        assert later.exit_code == 0, later.output
        assert "committed under the old definition" not in later.output
        assert target_rows(base) == source_rows(base)


@pytest.mark.parametrize("strategy", ["replace_partition", "full_refresh"])
def test_a_rebaseline_of_a_replacing_route_is_refused_and_its_next_run_loads_the_new_definition(
    base: Path,
    store_url: str,
    strategy: str,
) -> None:
    """Before: the rebaseline recorded the edited query's partitions as committed, so the replacing route
    skipped them and the target kept the old query's rows (here: none of the rows the edit adds)."""
    narrow = "  query: SELECT id, order_date, customer, amount, updated_at FROM orders WHERE id % 2 = 0\n"
    assert dpone("run", str(manifest_at(base, strategy=strategy, extra=narrow))).exit_code == 0
    widened = manifest_at(base, strategy=strategy, extra=EDITS["query-edited"])

    refused = dpone("guard", "rebaseline", str(widened), "--reason", "widened the query", "--json")

    assert refused.exit_code == 2, refused.output
    assert json.loads(refused.output)["error"] == "usage_error"
    assert dpone("run", str(widened)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_an_unchanged_route_is_not_reported_as_changed(routed: Path) -> None:
    manifest = manifest_at(routed)  # the same definition the first run used
    add_source_rows(routed, [(900_001, "2026-12-01")])

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert "note:" not in result.output
    assert target_rows(routed) == source_rows(routed)


# -- an empty checkpoint store in front of a non-empty target -----------------------------------------


@pytest.fixture
def fresh_store(base: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A second, empty checkpoint store (a lost store replaced by a new one), as connection ``fresh_state``."""
    url = f"sqlite:///{base / 'fresh-state.sqlite'}"
    monkeypatch.setenv("AIRFLOW_CONN_FRESH_STATE", url)
    return url


def test_an_append_route_with_no_checkpoint_stops_in_front_of_a_non_empty_target(
    routed: Path,
    fresh_store: str,
) -> None:
    manifest = manifest_at(routed, state="fresh_state")

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["error"] == "native_transfer_target_not_empty"
    assert error["details"]["target_rows"] == len(source_rows(routed))
    assert target_rows(routed) == source_rows(routed)
    with SqlCheckpointStore(fresh_store) as store:
        assert store.list_latest(load_manifest(manifest).route) == []  # stopped before PLANNED was written


def test_allow_nonempty_target_appends_and_says_so(
    routed: Path,
    fresh_store: str,
) -> None:
    chdb_command(routed, f"TRUNCATE TABLE {TARGET}")
    chdb_command(
        routed, f"INSERT INTO {TARGET} VALUES (-1, '2020-01-01', 'other writer', 1.00, '2020-01-01 00:00:00')"
    )
    manifest = manifest_at(routed, state="fresh_state")

    result = dpone("run", str(manifest), "--allow-nonempty-target")

    assert result.exit_code == 0, result.output
    assert "note: the target table" in result.output
    rows = target_rows(routed)
    assert [r for r in rows if r[0] != -1] == source_rows(routed)


def test_adopting_a_target_that_holds_the_source_records_it_and_moves_only_new_rows(
    routed: Path,
    fresh_store: str,
) -> None:
    manifest = manifest_at(routed, state="fresh_state")
    add_source_rows(routed, [(900_001, "2026-12-01")])  # not in the target yet

    adopted = dpone(
        "guard", "rebaseline", str(manifest), "--adopt-target", "--reason", "store lost", "--json"
    )

    assert adopted.exit_code == 0, adopted.output
    payload = json.loads(adopted.output)
    assert len(payload["recorded"]) == 4
    assert [p["bounds"] for p in payload["left_to_run"]] == ["order_date=2026-12-01"]
    after = dpone("run", "--json", str(manifest))
    assert after.exit_code == 0, after.output
    assert json.loads(after.output)["rows_committed"] == 1
    assert target_rows(routed) == source_rows(routed)


def test_adoption_refuses_a_partition_the_target_holds_only_part_of_and_records_nothing(
    routed: Path,
    fresh_store: str,
) -> None:
    chdb_command(routed, f"DELETE FROM {TARGET} WHERE id = 1")
    manifest = manifest_at(routed, state="fresh_state")

    adopted = dpone("guard", "rebaseline", str(manifest), "--adopt-target", "--reason", "store lost")

    assert adopted.exit_code == 3, adopted.output
    with SqlCheckpointStore(fresh_store) as store:
        latest = store.list_latest(load_manifest(manifest).route)
    assert not [c for c in latest if c.status is CheckpointStatus.COMMITTED]
    assert dpone("run", str(manifest)).exit_code == 3  # still stopped in front of the non-empty target


EVEN_IDS = "  query: SELECT id, order_date, customer, amount, updated_at FROM orders WHERE id % 2 = 0\n"


@pytest.mark.parametrize(
    ("before", "after"), [(EVEN_IDS, ""), ("", EVEN_IDS)], ids=["filter-removed", "filter-added"]
)
def test_a_rebaseline_over_a_query_that_selects_other_rows_records_nothing_and_emptied_days_load_whole(
    base: Path, store_url: str, before: str, after: str
) -> None:
    """Found by hand: after a filter was removed from ``source.query``, the rebaseline the blocked run
    suggests recorded every day as committed with the old row counts, and the rows the filter had held back
    were never moved (exit 0 throughout). Each day's source rows under the new definition are now compared
    with what its old partition committed; a day that differs stays blocking until its rows are deleted
    from the target, and then loads whole, exactly as the new definition selects."""
    assert dpone("run", str(manifest_at(base, extra=before))).exit_code == 0
    manifest = manifest_at(base, extra=after)
    assert dpone("run", str(manifest)).exit_code == 3

    rebased = dpone("guard", "rebaseline", str(manifest), "--reason", "edited the filter", "--json")

    assert rebased.exit_code == 3, rebased.output
    payload = json.loads(rebased.output)
    assert payload["recorded"] == [] and len(payload["rows_differ"]) == len(payload["partially_covered"])
    wider = (
        (lambda d: d["source_rows"] > d["committed_rows"])
        if before
        else (lambda d: d["source_rows"] < d["committed_rows"])
    )
    assert payload["rows_differ"] and all(wider(d) for d in payload["rows_differ"])
    assert dpone("run", str(manifest)).exit_code == 3  # still stopped: nothing recorded on a guess
    chdb_command(base, f"DELETE FROM {TARGET} WHERE order_date >= '2000-01-01'")
    loaded = dpone("run", "--json", str(manifest))
    assert loaded.exit_code == 0, loaded.output
    expected = [r for r in source_rows(base) if not after or r[0] % 2 == 0]
    assert target_rows(base) == expected


def test_a_partly_covered_partition_emptied_in_the_target_is_loaded_whole_without_a_release(
    routed: Path,
) -> None:
    """``--release-partial`` refuses while the target holds rows within the partition; once the operator
    deleted them, the partition's bounds hold no row in the target, so it is no overlap any more and the
    next run loads it whole (nothing is left to release)."""
    add_source_rows(routed, [(900_001, "2026-11-29")])
    manifest = edited(routed, "partitioning-coarser")
    release = ("guard", "rebaseline", str(manifest), "--release-partial", "--reason", "late rows in November")

    refused = dpone(*release)

    assert refused.exit_code == 3, refused.output
    assert "still holds" in refused.output
    assert dpone("run", str(manifest)).exit_code == 3  # nothing was recorded
    chdb_command(
        routed, f"DELETE FROM {TARGET} WHERE order_date >= '2026-11-01' AND order_date < '2026-12-01'"
    )

    released = dpone(*release, "--json")

    assert released.exit_code == 0, released.output
    assert json.loads(released.output) == {
        "recorded": [],
        "partially_covered": [],
        "released": [],
        "rows_differ": [],
        "schema_unchecked": [],
        "notices": [],
    }
    after = dpone("run", "--json", str(manifest))
    assert after.exit_code == 0, after.output
    assert json.loads(after.output)["rows_committed"] == len(source_rows(routed))
    assert target_rows(routed) == source_rows(routed)


def test_pinned_columns_that_leave_out_a_target_column_stop_before_arming_instead_of_filling_it(
    routed: Path,
    store_url: str,
) -> None:
    """Before: after the rebaseline, every new row read ``customer = ''`` (its type's zero value) beside
    source rows whose customer was set, exit 0."""
    manifest = manifest_at(routed, extra="  columns: [id, order_date, amount, updated_at]\n")
    assert dpone("run", str(manifest)).exit_code == 3
    assert dpone("guard", "rebaseline", str(manifest), "--reason", "customer is not needed").exit_code == 0
    add_source_rows(routed, [(900_001, "2026-12-01")])
    before = target_rows(routed)

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 1, result.output
    error = json.loads(result.output)
    assert error["error"] == "target_table_incompatible"
    assert error["details"]["column"] == "customer"
    assert target_rows(routed) == before  # nothing written
    with SqlCheckpointStore(store_url) as store:  # the route stays clear: nothing armed
        latest = store.list_latest(load_manifest(manifest).route)
    assert latest and all(c.status is CheckpointStatus.COMMITTED for c in latest)


def test_a_column_added_to_the_source_says_so_instead_of_blaming_the_manifest(routed: Path) -> None:
    """Only the schema hash changed (the manifest was not edited): the stop names the source's columns as
    the change and the target's columns as the first thing to fix, not "revert the manifest change"."""
    import sqlite3

    with sqlite3.connect(routed / "source.sqlite") as db:
        db.execute("ALTER TABLE orders ADD COLUMN note TEXT")

    result = dpone("run", str(manifest_at(routed)))

    assert result.exit_code == 3, result.output
    assert "the source table's columns did" in result.output
    assert "revert the manifest change" not in result.output
    assert target_rows(routed) == source_rows(routed)


def test_a_replacing_route_edited_back_reloads_the_days_another_definitions_resolved_attempt_emptied(
    base: Path,
    store_url: str,
) -> None:
    """Definition B of a replace route (a reload of the first days through ``source.query``) died inside
    its target call after its delete; the operator resolved it ``not-applied``, the runbook's usual answer.
    Red before: definition A, edited back, skipped those days as committed (only another definition's
    *commits* made it run them again), exit 0, and the target kept missing their rows."""
    whole = manifest_at(base, strategy="replace_partition")
    assert dpone("run", str(whole)).exit_code == 0
    reload = "  query: SELECT id, order_date, customer, amount, updated_at FROM orders WHERE order_date < '2026-11-29'\n"
    narrow = manifest_at(base, strategy="replace_partition", extra=reload, file="reload.yaml")
    assert dpone("run", str(narrow)).exit_code == 0
    route = load_manifest(narrow).route
    latest = latest_of(store_url, route)  # both definitions' (one route)
    whole_hashes = {c.query_hash for c in latest if c.bounds.lower >= "2026-11-29"}  # A's alone
    reloaded = [c for c in latest if c.query_hash not in whole_hashes]
    assert len(reloaded) == 2 and all(c.status is CheckpointStatus.COMMITTED for c in reloaded)
    # its next attempt: armed, its delete ran, then the process died (what a crash there leaves)
    append_armed(store_url, reloaded, how_many=len(reloaded))
    chdb_command(
        base, f"ALTER TABLE {TARGET} DELETE WHERE order_date < '2026-11-29' SETTINGS mutations_sync = 2"
    )
    resolved = dpone("guard", "resolve", str(narrow), "--all-blocked", "--as", "not-applied", "--reason", "r")
    assert resolved.exit_code == 0, resolved.output
    assert len(target_rows(base)) < len(source_rows(base))

    result = dpone("run", str(whole))

    assert result.exit_code == 0, result.output
    assert target_rows(base) == source_rows(base)


def test_a_second_edit_is_rebaselined_too_and_the_next_run_moves_only_new_rows(routed: Path) -> None:
    """Two edits in turn, each rebaselined. Red before: the second rebaseline summed the rows of both
    earlier definitions' partitions of the same bounds (the original commit and the first rebaseline's
    record), refused every day as ``rows_differ`` and exited 3: the route stayed blocked."""
    pinned = edited(routed, "columns-pinned")
    assert dpone("guard", "rebaseline", str(pinned), "--reason", "pinned the columns").exit_code == 0
    spelled = manifest_at(routed, extra=f"  columns: {COLUMNS}\n" + EDITS["query-edited"])
    assert dpone("run", str(spelled)).exit_code == 3

    rebased = dpone("guard", "rebaseline", str(spelled), "--reason", "spelled the query out", "--json")

    assert rebased.exit_code == 0, rebased.output
    result = json.loads(rebased.output)
    assert result["recorded"] and not result["rows_differ"], result
    add_source_rows(routed, [(900_001, "2026-12-01")])
    after = dpone("run", "--json", str(spelled))
    assert after.exit_code == 0, after.output
    assert json.loads(after.output)["rows_committed"] == 1
    assert target_rows(routed) == source_rows(routed)


def test_a_rebaseline_that_records_a_month_still_filling_says_so(routed: Path) -> None:
    """After a day -> month edit, the rebaseline records the current month as committed: rows that reach
    it later are never moved, as after a run that commits it, which says so. Before: the rebaseline was
    silent about it."""
    import datetime as dt

    add_source_rows(routed, [(900_001, dt.date.today().isoformat())])
    assert dpone("run", str(manifest_at(routed))).exit_code == 0  # the day route moves today's row
    coarser = edited(routed, "partitioning-coarser")

    rebased = dpone("guard", "rebaseline", str(coarser), "--reason", "monthly now", "--json")

    assert rebased.exit_code == 0, rebased.output
    notices = json.loads(rebased.output)["notices"]
    assert len(notices) == 1 and "may still be filling" in notices[0] and "settle" in notices[0]
    text = dpone("guard", "rebaseline", str(coarser), "--reason", "again")
    assert "nothing to rebaseline" in text.output  # recorded once


@pytest.mark.parametrize("target_altered", ["before the rebaseline", "after it"])
def test_a_column_added_to_the_source_and_the_target_keeps_old_days_blocking_until_they_are_reloaded(
    routed: Path, target_altered: str
) -> None:
    """Red before: the hint's ``ADD COLUMN`` then rebaseline recorded every old day as committed by its row
    count, and every old row held the column's default ('') beside the source's 'EU', exit 0; so did a
    rebaseline before the ``ADD COLUMN`` (the target still matched the old definition then). Only a reload
    (or the operator's word that the values are right) records them now."""
    with sqlite3.connect(routed / "source.sqlite") as db:
        db.execute("ALTER TABLE orders ADD COLUMN region TEXT NOT NULL DEFAULT 'EU'")
    manifest = manifest_at(routed)
    assert dpone("run", str(manifest)).exit_code == 3  # only the schema changed
    if target_altered.startswith("before"):
        chdb_command(routed, f"ALTER TABLE {TARGET} ADD COLUMN region String")

    rebased = dpone("guard", "rebaseline", str(manifest), "--reason", "region added", "--json")

    assert rebased.exit_code == 3, rebased.output
    payload = json.loads(rebased.output)
    assert payload["recorded"] == [] and payload["schema_unchecked"]
    assert len(payload["schema_unchecked"]) == len(payload["partially_covered"])
    if not target_altered.startswith("before"):
        chdb_command(routed, f"ALTER TABLE {TARGET} ADD COLUMN region String")
    assert dpone("run", str(manifest)).exit_code == 3  # nothing recorded
    chdb_command(routed, f"DELETE FROM {TARGET} WHERE order_date >= '2000-01-01'")  # the reload it names
    assert dpone("run", str(manifest)).exit_code == 0
    assert chdb_query(routed, f"SELECT DISTINCT region FROM {TARGET}") == [("EU",)]
    assert target_rows(routed) == source_rows(routed)


def test_the_operators_word_that_the_values_are_right_records_a_changed_schema(routed: Path) -> None:
    """``--schema-checked``: the added column's target DEFAULT is what every old source row holds."""
    with sqlite3.connect(routed / "source.sqlite") as db:
        db.execute("ALTER TABLE orders ADD COLUMN region TEXT NOT NULL DEFAULT 'EU'")
    manifest = manifest_at(routed)
    chdb_command(routed, f"ALTER TABLE {TARGET} ADD COLUMN region String DEFAULT 'EU'")

    rebased = dpone("guard", "rebaseline", str(manifest), "--reason", "DEFAULT 'EU'", "--schema-checked")

    assert rebased.exit_code == 0, rebased.output
    assert dpone("run", str(manifest)).exit_code == 0
    assert chdb_query(routed, f"SELECT DISTINCT region FROM {TARGET}") == [("EU",)]
    assert target_rows(routed) == source_rows(routed)


def test_the_operators_word_is_refused_while_the_target_lacks_the_added_column(routed: Path) -> None:
    """Red before: ``--schema-checked`` was accepted while the target had no such column (no value of it
    can have been checked); the column was then added without the source's DEFAULT and every committed
    row read '' where the source holds 'web', exit 0 and ``--verify`` 0 drifted."""
    with sqlite3.connect(routed / "source.sqlite") as db:
        db.execute("ALTER TABLE orders ADD COLUMN channel TEXT NOT NULL DEFAULT 'web'")
    manifest = manifest_at(routed)

    refused = dpone("guard", "rebaseline", str(manifest), "--reason", "added channel", "--schema-checked")

    assert refused.exit_code == 2, refused.output
    assert "'channel'" in refused.output and "DEFAULT" in refused.output and "backfill" in refused.output
    assert dpone("run", str(manifest)).exit_code == 3  # nothing was recorded: the schema change still stops
    chdb_command(routed, f"ALTER TABLE {TARGET} ADD COLUMN channel String DEFAULT 'web'")
    rebased = dpone("guard", "rebaseline", str(manifest), "--reason", "DEFAULT 'web'", "--schema-checked")
    assert rebased.exit_code == 0, rebased.output
    assert dpone("run", str(manifest)).exit_code == 0
    with sqlite3.connect(routed / "source.sqlite") as db:
        channels = sorted(db.execute("SELECT id, channel FROM orders").fetchall())
    assert sorted(chdb_query(routed, f"SELECT id, channel FROM {TARGET}")) == channels
    assert target_rows(routed) == source_rows(routed)


def test_the_printed_next_step_names_a_manifest_path_with_blanks_so_that_it_can_be_pasted(
    routed: Path,
) -> None:
    """Red before: ``dpone guard rebaseline /a dir/route.yaml --reason ...`` pasted into a shell was three
    arguments (exit 2), and a ``$(...)`` in a folder's name would have run."""
    manifest_at(routed, extra=EDITS["columns-pinned"])
    spaced = routed.parent / f"{routed.name} with blanks"
    spaced.symlink_to(routed, target_is_directory=True)

    stopped = dpone("run", str(spaced / "route.yaml"))

    assert stopped.exit_code == 3, stopped.output
    assert f"dpone guard rebaseline {shlex.quote(str(spaced / 'route.yaml'))} --reason" in stopped.output
    listed = dpone("checkpoints", str(spaced / "route.yaml"))
    assert f"dpone checkpoints {shlex.quote(str(spaced / 'route.yaml'))} --json" in listed.output


def _repartitioned(manifest: Path, partitioning: str) -> Path:
    """``manifest`` with the rest of its ``partitioning`` mapping (after ``kind``) set to ``partitioning``."""
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("column: order_date}", partitioning + "}"), encoding="utf-8")
    return manifest


def _with_lookback(manifest: Path) -> Path:
    return _repartitioned(manifest, "column: order_date, lookback: 2")


def _delete_newest_day(base: Path) -> str:
    with sqlite3.connect(base / "source.sqlite") as db:
        (newest,) = db.execute("SELECT max(order_date) FROM orders").fetchone()
        db.execute("DELETE FROM orders WHERE order_date = ?", (newest,))
    return str(newest)


@pytest.mark.parametrize("edit", ["columns-pinned", "query-edited"])
def test_a_day_the_source_emptied_while_the_manifest_was_edited_is_emptied_below_the_newest_planned_day(
    base: Path, store_url: str, edit: str
) -> None:
    """The emptied day was committed only under the old definition: no new partition is planned there, and
    the old partition is no partition of the new one. It used to stay in the target for good, exit 0. New
    days that arrive with the edit take no lookback slot (they are new), so they must not hide it either."""
    assert dpone("run", str(_with_lookback(manifest_at(base, strategy="replace_partition")))).exit_code == 0
    emptied = _delete_newest_day(base)
    add_source_rows(base, [(900_000 + n, f"2026-12-0{n + 1}") for n in range(2)])
    manifest = _with_lookback(edited(base, edit, strategy="replace_partition"))

    for _ in range(2):  # the edit's run, then an ordinary one
        result = dpone("run", str(manifest))
        assert result.exit_code == 0, result.output
        assert sorted(target_rows(base)) == sorted(source_rows(base))
    assert chdb_query(base, f"SELECT count() FROM {TARGET} WHERE order_date = '{emptied}'") == [(0,)]


def test_a_day_of_an_earlier_definition_above_every_planned_day_is_kept_and_said(
    base: Path, store_url: str
) -> None:
    """Above everything the source plans now, a day of an earlier definition is kept, with a notice: emptying
    it took every newer day of a query templated per run for deleted (``test_a_query_templated_per_run...``),
    so a day the source deleted right after an edit, with no newer day, stays until removed by hand."""
    assert dpone("run", str(_with_lookback(manifest_at(base, strategy="replace_partition")))).exit_code == 0
    emptied = _delete_newest_day(base)
    manifest = _with_lookback(edited(base, "query-edited", strategy="replace_partition"))

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert (
        f"order_date={emptied}" in result.output and "newer than every partition the source" in result.output
    )
    assert chdb_query(base, f"SELECT count() > 0 FROM {TARGET} WHERE order_date = '{emptied}'") == [(1,)]


def test_a_query_templated_per_run_for_an_older_date_never_empties_the_newer_days(
    base: Path, store_url: str
) -> None:
    """``WHERE order_date = '{{ ds }}'`` rendered per run (the Airflow guide's templating), ``replace_partition``
    with ``lookback``: red before, re-running an older date (a clear, a backfill) took every newer day for
    deleted by the source and emptied it (exit 0, half the rows gone)."""
    with sqlite3.connect(base / "source.sqlite") as db:
        days = [str(d) for (d,) in db.execute("SELECT DISTINCT order_date FROM orders ORDER BY 1")]
    columns = "id, order_date, customer, amount, updated_at"

    def run_for(day: str) -> None:
        query = f"  query: \"SELECT {columns} FROM orders WHERE order_date = '{day}'\"\n"
        manifest = _with_lookback(manifest_at(base, strategy="replace_partition", extra=query))
        result = dpone("run", str(manifest))
        assert result.exit_code == 0, result.output

    for day in days[-4:]:
        run_for(day)
    run_for(days[-3])  # an older date again

    assert sorted(r for r in target_rows(base) if str(r[1]) in days[-4:]) == sorted(
        r for r in source_rows(base) if str(r[1]) in days[-4:]
    )


def test_the_part_of_an_old_month_no_new_day_covers_is_emptied_and_takes_no_lookback_slot_it_holds_no_row_of(
    base: Path, store_url: str
) -> None:
    """Months -> days: the old month's days the source emptied are emptied in the target; its days that never
    held a row (the rest of the month) do not crowd the lookback out, so a late row of the newest day moves."""
    for _ in range(2):  # the source ends two days before its month does
        _delete_newest_day(base)
    assert (
        dpone(
            "run", str(_with_lookback(manifest_at(base, strategy="replace_partition", kind="month")))
        ).exit_code
        == 0
    )
    emptied = _delete_newest_day(base)
    manifest = _with_lookback(manifest_at(base, strategy="replace_partition"))

    assert dpone("run", str(manifest)).exit_code == 0
    assert sorted(target_rows(base)) == sorted(source_rows(base))
    assert chdb_query(base, f"SELECT count() FROM {TARGET} WHERE order_date = '{emptied}'") == [(0,)]

    with sqlite3.connect(base / "source.sqlite") as db:
        (newest,) = db.execute("SELECT max(order_date) FROM orders").fetchone()
    add_source_rows(base, [(900_001, str(newest))])  # a late row of the newest day left
    late = dpone("run", str(manifest))

    assert late.exit_code == 0, late.output
    assert sorted(target_rows(base)) == sorted(source_rows(base))


def test_days_held_back_as_open_do_not_hide_a_settled_day_the_source_emptied_during_an_edit(
    base: Path, store_url: str
) -> None:
    """``settle: 1d``: yesterday and today are open, so the lookback ranks only settled days; a unit of the
    old definition must be measured against those, not against the open days (which hid it: the emptied
    day stayed in the target, exit 0)."""
    today = dt.datetime.now(dt.timezone.utc).date()
    recent = [today - dt.timedelta(days=n) for n in range(3, -1, -1)]  # today-3 .. today
    add_source_rows(base, [(900_000 + n, day.isoformat()) for n, day in enumerate(recent)])

    def settled_manifest(edit: str | None) -> Path:
        manifest = manifest_at(base, strategy="replace_partition", extra=EDITS[edit] if edit else "")
        return _repartitioned(manifest, "column: order_date, lookback: 2, settle: 1d")

    assert dpone("run", str(settled_manifest(None))).exit_code == 0
    emptied = (today - dt.timedelta(days=2)).isoformat()  # the newest settled day
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE order_date = ?", (emptied,))

    result = dpone("run", str(settled_manifest("columns-pinned")))

    assert result.exit_code == 0, result.output
    assert chdb_query(base, f"SELECT count() FROM {TARGET} WHERE order_date = '{emptied}'") == [(0,)]
    open_days = {(today - dt.timedelta(days=1)).isoformat(), today.isoformat()}
    assert sorted(target_rows(base)) == [row for row in source_rows(base) if row[1] not in open_days]


@pytest.mark.parametrize("first", ["incremental_append", "full_refresh"])
def test_a_day_emptied_before_a_route_is_switched_to_replace_with_a_lookback_leaves_the_target(
    base: Path, store_url: str, first: str
) -> None:
    """The runbook's advice for drifted partitions: move the route to ``replace_partition`` with a lookback.
    A day only the first strategy's route committed (a sibling route: the strategy is part of a route) and
    that the source emptied meanwhile stayed in the target for good, exit 0 (source 900 rows, target 1,200)."""
    assert dpone("run", str(manifest_at(base, strategy=first))).exit_code == 0
    _delete_newest_day(base)
    manifest = _with_lookback(manifest_at(base, strategy="replace_partition"))

    for _ in range(2):
        result = dpone("run", str(manifest))
        assert result.exit_code == 0, result.output
        assert sorted(target_rows(base)) == sorted(source_rows(base))


def test_a_replacing_route_partitioned_by_another_column_stops_on_the_day_the_source_emptied(
    base: Path, store_url: str
) -> None:
    """Old bounds on another column cannot be split into this partitioning's: the run said "the rows the
    other definition loaded there are deleted" while a day the source emptied stayed (900 rows, 1,200); then
    it said they stay. Now the rows of the lookback's window that no partition of this partitioning accounts
    for stop the run before the target (``unrecorded_rows_in_lookback``), and the operator's
    ``--allow-nonempty-target`` empties them."""
    assert dpone("run", str(_with_lookback(manifest_at(base, strategy="replace_partition")))).exit_code == 0
    _delete_newest_day(base)
    manifest = _repartitioned(
        manifest_at(base, strategy="replace_partition"), "column: updated_at, lookback: 2"
    )
    held = target_rows(base)

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 3, result.output
    assert json.loads(result.output)["details"]["problem"] == "unrecorded_rows_in_lookback"
    assert "the rows the other definition loaded there are deleted" not in result.output
    assert target_rows(base) == held
    allowed = dpone("run", "--allow-nonempty-target", str(manifest))
    assert allowed.exit_code == 0, allowed.output
    assert sorted(target_rows(base)) == sorted(source_rows(base))


def test_days_the_source_empties_one_run_after_another_all_leave_the_target(
    base: Path, store_url: str
) -> None:
    """An emptied day kept its lookback slot for good: the third day emptied under ``lookback: 2`` (one per
    run) stayed in the target, exit 0 (source 300 rows, target 600)."""
    manifest = _with_lookback(manifest_at(base, strategy="replace_partition"))
    assert dpone("run", str(manifest)).exit_code == 0

    for _ in range(3):
        _delete_newest_day(base)
        result = dpone("run", str(manifest))
        assert result.exit_code == 0, result.output
        assert sorted(target_rows(base)) == sorted(source_rows(base))


def test_an_old_month_split_into_more_emptied_days_than_the_lookback_leaves_the_target_in_one_run(
    base: Path, store_url: str
) -> None:
    """Months -> days with three of the month's days emptied under ``lookback: 2``: only two were emptied
    and the third stayed for good (source 300 rows, target 600)."""
    month = _with_lookback(manifest_at(base, strategy="replace_partition", kind="month"))
    assert dpone("run", str(month)).exit_code == 0
    for _ in range(3):
        _delete_newest_day(base)

    result = dpone("run", str(_with_lookback(manifest_at(base, strategy="replace_partition"))))

    assert result.exit_code == 0, result.output
    assert sorted(target_rows(base)) == sorted(source_rows(base))
