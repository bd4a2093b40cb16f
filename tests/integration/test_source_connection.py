"""A route's commits hold one source connection's rows: a run from another connection never skips them.

Seen before the fix: a second SQLite file holding a table of the same name, run into the demo's target,
skipped all 60 partitions as already committed and exited 0; its 20,000 rows never moved. Two databases
whose tables share a name are one route (the name carries no database), so a run from another connection
now stops before it reads, and a table that really moved is recorded once, deliberately. Black-box
``dpone`` runs, SQLite sources into chDB, checkpoints in SQLite and PostgreSQL; every target is compared
with its source value by value.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.checkpoint_sql.tables import CHECKPOINT_TABLE
from airflow_provider_dpone.runtime.source_binding import source_reference
from tests.integration.route_rig import (
    add_source_rows,
    cents,
    dpone,
    manifest_at,
    source_rows,
    target_rows,
)

STRATEGIES = ["incremental_append", "replace_partition", "full_refresh"]


def manifest(
    root: Path,
    name: str,
    connection: str,
    *,
    target: str = "demo.orders",
    strategy: str,
    state: str = "spelling_state",
) -> Path:
    return manifest_at(
        root, strategy=strategy, state=state, connection=connection, target=target, file=f"{name}.yaml"
    )


def rows_of(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, order_date, customer, amount, updated_at FROM orders").fetchall()
    return sorted((r[0], r[1], r[2], cents(str(r[3])), r[4]) for r in rows)


@pytest.fixture
def shards(base: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``shard_a`` is the example's source; ``shard_b`` another file with a table of the same name (other
    ids, the same days), both Airflow-style named connections."""
    shard_b = base / "shard_b.sqlite"
    shutil.copy(base / "source.sqlite", shard_b)
    with sqlite3.connect(shard_b) as db:
        db.execute("UPDATE orders SET id = id + 1000000, customer = 'b-' || customer")
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_A", f"sqlite:///{base / 'source.sqlite'}")
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_B", f"sqlite:///{shard_b}")
    return base


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_another_database_with_a_table_of_the_same_name_stops_before_it_reads_and_the_target_keeps_the_first(
    shards: Path,
    store_url: str,
    strategy: str,
) -> None:
    assert dpone("run", str(manifest(shards, "a", "shard_a", strategy=strategy))).exit_code == 0

    result = dpone("run", "--json", str(manifest(shards, "b", "shard_b", strategy=strategy)))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["error"] == "native_transfer_route_identity_changed"
    assert error["details"]["changed"] == ["source"]
    assert "reads source connection 'shard_b'" in error["message"]
    assert "last committed through source connection 'shard_a'" in error["message"]
    assert "--source-moved" in dpone("run", str(shards / "b.yaml")).output  # the text names the command
    assert target_rows(shards) == source_rows(shards)  # shard A's rows, each once, none replaced


@pytest.mark.parametrize("strategy", ["replace_partition", "full_refresh"])
def test_another_database_under_another_strategy_stops_too_instead_of_replacing_the_first_ones_rows(
    shards: Path,
    store_url: str,
    strategy: str,
) -> None:
    """Seen before: shard B's ``replace_partition`` manifest into the target shard A's append route had
    loaded replaced all of A's rows (a route of the same table under another strategy counted as the same
    source), and A's next run had nothing to do: exit 0 both times, A's rows gone."""
    assert dpone("run", str(manifest(shards, "a", "shard_a", strategy="incremental_append"))).exit_code == 0

    result = dpone("run", "--json", str(manifest(shards, "b", "shard_b", strategy=strategy)))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["details"]["changed"] == ["source"]
    assert error["details"]["newest_commit"]["route"].endswith("(incremental_append)")
    assert target_rows(shards) == source_rows(shards)


def test_a_strategy_switch_on_the_same_connection_is_no_change_of_source(
    shards: Path,
    store_url: str,
) -> None:
    assert dpone("run", str(manifest(shards, "a", "shard_a", strategy="incremental_append"))).exit_code == 0
    add_source_rows(shards, [(900_001, "2026-12-01")])

    result = dpone("run", "--json", str(manifest(shards, "a", "shard_a", strategy="replace_partition")))

    assert result.exit_code == 0, result.output
    assert target_rows(shards) == source_rows(shards)


def test_each_database_into_a_target_of_its_own_moves_both(shards: Path, store_url: str) -> None:
    assert dpone("run", str(manifest(shards, "a", "shard_a", strategy="incremental_append"))).exit_code == 0

    own = manifest(shards, "b", "shard_b", target="demo.orders_b", strategy="incremental_append")
    result = dpone("run", "--json", str(own))

    assert result.exit_code == 0, result.output
    assert target_rows(shards) == source_rows(shards)
    assert target_rows(shards, "demo.orders_b") == rows_of(shards / "shard_b.sqlite")


def test_a_moved_file_is_recorded_once_deliberately_and_the_next_run_moves_only_new_rows(
    base: Path,
    store_url: str,
) -> None:
    before = manifest(base, "before", "sqlite:///source.sqlite", strategy="incremental_append")
    assert dpone("run", str(before)).exit_code == 0
    (base / "moved").mkdir()
    (base / "source.sqlite").rename(base / "moved" / "source.sqlite")
    after = manifest(base, "after", "sqlite:///moved/source.sqlite", strategy="incremental_append")

    stopped = dpone("run", "--json", str(after))

    assert stopped.exit_code == 3, stopped.output
    assert "moved/source.sqlite" not in stopped.output  # an inline path is never printed
    recorded = dpone("guard", "rebaseline", str(after), "--source-moved", "--reason", "file moved", "--json")
    assert recorded.exit_code == 0, recorded.output
    (record,) = json.loads(recorded.output)["recorded"]
    assert record["status"] == "COMMITTED" and record["diagnostics"]["rebaseline"]["reason"] == "file moved"
    assert record["diagnostics"]["rebaseline"]["source_rows_now"] == record["rows"]  # the same table
    audit = record["diagnostics"]["rebaseline"]
    assert (audit["key_columns"], audit["keys_compared"], "keys_differ" in audit) == (["id"], 4, False)
    add_source_rows(base / "moved", [(900_001, "2026-12-01"), (900_002, "2026-12-01")])

    moved = dpone("run", "--json", str(after))

    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.output)["rows_committed"] == 2
    assert target_rows(base) == rows_of(base / "moved" / "source.sqlite")
    assert dpone("run", str(after)).exit_code == 0  # nothing new: skipped, not stopped
    (base / "source.sqlite").write_bytes((base / "moved" / "source.sqlite").read_bytes())
    assert dpone("run", str(before)).exit_code == 3  # the old connection is now the other one


def test_a_history_written_before_sources_were_recorded_runs_and_its_next_commit_records_one(
    shards: Path,
    store_url: str,
) -> None:
    a = manifest(shards, "a", "shard_a", strategy="incremental_append")
    assert dpone("run", str(a)).exit_code == 0
    _forget_recorded_sources(store_url)  # what an earlier release left
    assert dpone("run", str(manifest(shards, "b", "shard_b", strategy="incremental_append"))).exit_code == 0
    add_source_rows(shards, [(900_001, "2026-12-01")])

    assert dpone("run", str(a)).exit_code == 0  # the first commit under this release records shard_a

    assert target_rows(shards) == source_rows(shards)
    result = dpone("run", "--json", str(manifest(shards, "b", "shard_b", strategy="incremental_append")))
    assert result.exit_code == 3, result.output


def test_a_sibling_shard_of_equal_counts_is_drifted_by_its_keys_and_its_move_is_refused(
    shards: Path,
    store_url: str,
) -> None:
    """Seen before: shard B holds as many rows per day as shard A committed (other ids). ``--verify`` said
    ``0 drifted``, ``--source-moved`` recorded B as a move without a word, and every later run of B skipped
    its days as committed, exit 0: its rows never reached any target. The keys tell them apart."""
    assert dpone("run", str(manifest(shards, "a", "shard_a", strategy="incremental_append"))).exit_code == 0
    b = manifest(shards, "b", "shard_b", strategy="incremental_append")
    assert dpone("run", str(b)).exit_code == 3

    verified = json.loads(dpone("checkpoints", str(b), "--verify", "--json").output)
    text = dpone("checkpoints", str(b), "--verify").output
    refused = dpone("guard", "rebaseline", str(b), "--source-moved", "--reason", "counts are equal", "--json")

    summary = verified["summary"]
    assert (summary["drifted"], summary["keys_differ"], summary["key_columns"]) == (4, 4, ["id"])
    assert all(p["source_rows"] == p["rows"] and p["keys"] == "differs" for p in verified["partitions"])
    assert "DRIFTED (keys)" in text and text.rstrip().splitlines()[-1].startswith("4 drifted partitions")
    assert refused.exit_code == 3, refused.output
    error = json.loads(refused.output)
    assert error["error"] == "native_transfer_route_identity_changed"
    assert (error["details"]["changed"], error["details"]["partitions_differing"]) == (["source"], 4)
    assert "1000001" not in refused.output  # names the columns and days, never a value
    again = dpone("run", "--json", str(b))
    assert again.exit_code == 3, again.output  # nothing was recorded: B still stops
    assert target_rows(shards) == source_rows(shards)  # A's rows, each once


def test_a_moved_table_with_rows_deleted_since_its_commit_is_recorded_with_the_count_warning(
    base: Path,
    store_url: str,
) -> None:
    """Rows deleted at the source since the commit change counts, not the keys of the days they left alone:
    the move is recorded (those days are compared), and the count warning names the newest day."""
    before = manifest(base, "before", "sqlite:///source.sqlite", strategy="incremental_append")
    assert dpone("run", str(before)).exit_code == 0
    (base / "moved").mkdir()
    shutil.copy(base / "source.sqlite", base / "moved" / "source.sqlite")
    with sqlite3.connect(base / "moved" / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE id = (SELECT MAX(id) FROM orders)")  # in the newest day
    after = manifest(base, "after", "sqlite:///moved/source.sqlite", strategy="incremental_append")

    result = dpone("guard", "rebaseline", str(after), "--source-moved", "--reason", "file moved")

    assert result.exit_code == 0, result.output
    assert "warning: this source connection holds" in result.output
    assert "keys (id) match the target's in 3 committed partition(s)" in result.output
    assert dpone("run", str(after)).exit_code == 0


@pytest.mark.parametrize("shard", ["other_counts_every_day", "into_a_fan_in_target"])
def test_a_shard_whose_keys_no_day_can_compare_is_refused_and_force_records_it_with_a_warning(
    shards: Path,
    store_url: str,
    shard: str,
) -> None:
    """Seen: shard B with other counts in every day, and the F6 shard (equal counts) into a target another
    source table's route also appends to, were compared by no key ("keys (id) match the target's in 0
    committed partition(s)"), recorded exit 0, and every later run of B skipped its days as committed."""
    a = manifest(shards, "a", "shard_a", strategy="incremental_append")
    assert dpone("run", str(a)).exit_code == 0
    if shard == "other_counts_every_day":
        with sqlite3.connect(shards / "shard_b.sqlite") as db:
            db.execute("DELETE FROM orders WHERE id IN (SELECT MIN(id) FROM orders GROUP BY order_date)")
    else:
        with sqlite3.connect(shards / "source.sqlite") as db:  # a second source table, appended beside A
            db.execute(
                "CREATE TABLE orders_web (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, customer TEXT "
                "NOT NULL, amount NUMERIC(12,2) NOT NULL, updated_at DATETIME NOT NULL)"
            )
            db.execute(
                "INSERT INTO orders_web SELECT id + 5000000, order_date, customer, amount, updated_at FROM orders"
            )
        web = manifest_at(shards, table="orders_web", connection="shard_a", file="web.yaml")
        assert dpone("run", str(web), "--allow-nonempty-target").exit_code == 0
    before = target_rows(shards)
    b = manifest(shards, "b", "shard_b", strategy="incremental_append")

    refused = dpone(
        "guard", "rebaseline", str(b), "--source-moved", "--reason", "said to be a move", "--json"
    )

    assert refused.exit_code == 3, refused.output
    error = json.loads(refused.output)
    assert error["error"] == "native_transfer_route_identity_changed"
    assert (error["details"]["changed"], error["details"]["partitions_compared"]) == (["source"], 0)
    assert dpone("run", str(b)).exit_code == 3  # nothing was recorded: B still stops
    assert target_rows(shards) == before
    forced = dpone("guard", "rebaseline", str(b), "--source-moved", "--force", "--reason", "checked ids")
    assert forced.exit_code == 0, forced.output
    assert "warning: recorded with --force although no committed partition's keys" in forced.output


def test_force_records_a_move_over_other_keys_and_keeps_them_in_the_audit(
    shards: Path,
    store_url: str,
) -> None:
    assert dpone("run", str(manifest(shards, "a", "shard_a", strategy="incremental_append"))).exit_code == 0
    b = manifest(shards, "b", "shard_b", strategy="incremental_append")
    assert (
        dpone("guard", "rebaseline", str(b), "--force", "--reason", "x").exit_code == 2
    )  # --source-moved only

    forced = dpone(
        "guard", "rebaseline", str(b), "--source-moved", "--force", "--reason", "checked", "--json"
    )
    text = dpone("guard", "rebaseline", str(b), "--source-moved", "--force", "--reason", "again")

    assert forced.exit_code == 0, forced.output
    (record,) = json.loads(forced.output)["recorded"]
    assert len(record["diagnostics"]["rebaseline"]["keys_differ"]) == 4
    assert text.exit_code == 2  # recorded already: nothing more to record
    assert dpone("run", str(b)).exit_code == 0  # the operator's word: B runs from now on


def test_a_route_without_an_integer_key_column_compares_counts_and_says_so(
    shards: Path,
    store_url: str,
) -> None:
    """Kept as before where no key can be compared (the ids are not read: ``source.columns`` leaves them
    out), but never a silent ``0 drifted``: both commands say the keys were not compared and why."""
    columns = "  columns: [order_date, customer, amount]\n"
    a = manifest_at(shards, extra=columns, connection="shard_a", state="spelling_state", file="a.yaml")
    b = manifest_at(shards, extra=columns, connection="shard_b", state="spelling_state", file="b.yaml")
    for path in (a, b):
        path.write_text(path.read_text().replace("order_by: [order_date, id]", "order_by: [order_date]"))
    assert dpone("run", str(a)).exit_code == 0, dpone("run", str(a)).output

    verified = dpone("checkpoints", str(b), "--verify")
    moved = dpone("guard", "rebaseline", str(b), "--source-moved", "--reason", "counts are equal")

    assert "keys:     not compared: no integer key column" in verified.output, verified.output
    assert verified.output.rstrip().endswith("verified against the source: row counts only)")
    assert moved.exit_code == 0, moved.output
    assert "warning: keys not compared: no integer key column" in moved.output


def test_partitions_adopted_after_a_lost_store_name_their_connection_and_another_one_stops(
    shards: Path,
    store_url: str,
) -> None:
    assert dpone("run", str(manifest(shards, "a", "shard_a", strategy="incremental_append"))).exit_code == 0
    lost = manifest(
        shards, "a2", "shard_a", strategy="incremental_append", state="sqlite:///new_state.sqlite"
    )
    assert dpone("run", str(lost)).exit_code == 3  # a new store in front of a loaded target
    adopted = dpone("guard", "rebaseline", str(lost), "--adopt-target", "--reason", "store lost", "--json")
    assert adopted.exit_code == 0, adopted.output
    assert all("source_connection" in r["diagnostics"] for r in json.loads(adopted.output)["recorded"])

    b = manifest(shards, "b2", "shard_b", strategy="incremental_append", state="sqlite:///new_state.sqlite")
    result = dpone("run", "--json", str(b))

    assert result.exit_code == 3, result.output
    assert json.loads(result.output)["details"]["changed"] == ["source"]
    assert target_rows(shards) == source_rows(shards)


def test_a_source_move_with_nothing_to_record_is_a_usage_error(shards: Path, store_url: str) -> None:
    a = manifest(shards, "a", "shard_a", strategy="incremental_append")
    assert dpone("run", str(a)).exit_code == 0

    result = dpone("guard", "rebaseline", str(a), "--source-moved", "--reason", "nothing moved")

    assert result.exit_code == 2, result.output
    assert "already came from this source connection" in result.output


def _forget_recorded_sources(url: str) -> None:
    """What an earlier release left: checkpoints that record no source connection."""
    _rewrite_recorded_sources(url, None)


def _rewrite_recorded_sources(url: str, reference: str | None) -> None:
    """Every stored checkpoint's recorded source connection replaced by ``reference`` (None: removed)."""
    engine = sa.create_engine(url)
    table = sa.table(CHECKPOINT_TABLE, sa.column("id"), sa.column("payload_text"))
    with engine.begin() as conn:
        for row_id, text in conn.execute(sa.select(table.c.id, table.c.payload_text)).all():
            payload = json.loads(text)
            if reference is None:
                payload["diagnostics"].pop("source_connection", None)
            elif "source_connection" in payload["diagnostics"]:
                payload["diagnostics"]["source_connection"] = reference
            conn.execute(
                table.update()
                .where(table.c.id == row_id)
                .values(payload_text=json.dumps(payload, sort_keys=True, separators=(",", ":")))
            )
    engine.dispose()


def _shard_manifest(folder: Path, root: Path, name: str, connection: str = "sqlite:///source.sqlite") -> Path:
    """A manifest in ``folder`` reading ``sqlite:///source.sqlite`` there (relative: the manifest's folder;
    or ``connection``), into the one target and store under ``root``."""
    path = folder / "manifest.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: {name}
source:
  type: sqlite
  connection: {connection}
  table: orders
  partitioning: {{kind: day, column: order_date}}
sink:
  type: clickhouse
  connection: chdb:///{root / "clickhouse"}
  table: demo.orders
  strategy: incremental_append
  order_by: [order_date, id]
checkpoints:
  connection: spelling_state
""",
        encoding="utf-8",
    )
    return path


def test_one_relative_uri_in_two_folders_is_two_sources(shards: Path, store_url: str) -> None:
    """Red before: a source connection was recorded by the digest of its text, so ``sqlite:///source.sqlite``
    in a second folder (another file) was the first one: its run skipped every day, exit 0, its rows never
    moved. The digest is of the resolved path now."""
    eu, us = shards / "eu", shards / "us"
    eu.mkdir()
    us.mkdir()
    shutil.copy(shards / "source.sqlite", eu / "source.sqlite")
    shutil.copy(shards / "shard_b.sqlite", us / "source.sqlite")
    assert dpone("run", str(_shard_manifest(eu, shards, "orders_eu"))).exit_code == 0

    result = dpone("run", "--json", str(_shard_manifest(us, shards, "orders_us")))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["details"]["changed"] == ["source"]
    assert "another source file" in error["message"] and str(shards) not in result.output
    assert target_rows(shards) == rows_of(eu / "source.sqlite")  # the first folder's rows, each once


def test_a_history_recording_an_absolute_uri_as_written_still_runs_and_then_records_the_resolved_file(
    shards: Path, store_url: str
) -> None:
    """What releases before the resolved form recorded (the digest of the text) is still this connection
    where the text names one file, an absolute path: an upgrade does not stop a route reading it. Its next
    commit records the file. (A relative URI's text names a file per folder: it stops, as a bare name
    does below.)"""
    eu, us = shards / "eu", shards / "us"
    eu.mkdir()
    us.mkdir()
    shutil.copy(shards / "source.sqlite", eu / "source.sqlite")
    shutil.copy(shards / "shard_b.sqlite", us / "source.sqlite")
    written = f"sqlite:///{eu}/../eu/source.sqlite"
    assert dpone("run", str(_shard_manifest(eu, shards, "orders_eu", written))).exit_code == 0
    _rewrite_recorded_sources(store_url, source_reference(written))  # an earlier release's record
    add_source_rows(eu, [(900_001, "2026-12-01")])

    assert dpone("run", str(_shard_manifest(eu, shards, "orders_eu", written))).exit_code == 0

    assert target_rows(shards) == rows_of(eu / "source.sqlite")
    assert dpone("run", str(_shard_manifest(us, shards, "orders_us"))).exit_code == 3  # now told apart


def test_one_named_connection_with_a_relative_path_in_two_folders_is_two_sources(
    shards: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red before: a named connection was recorded by its name alone, so ``shard_src`` naming
    ``sqlite:///source.sqlite`` (a file beside each manifest) was one source in two folders: the second
    folder's run skipped every day, exit 0. It is recorded as its file now, as an inline URI is."""
    eu, us = shards / "eu", shards / "us"
    eu.mkdir()
    us.mkdir()
    shutil.copy(shards / "source.sqlite", eu / "source.sqlite")
    shutil.copy(shards / "shard_b.sqlite", us / "source.sqlite")
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_SRC", "sqlite:///source.sqlite")
    assert dpone("run", str(_shard_manifest(eu, shards, "orders_eu", "shard_src"))).exit_code == 0

    result = dpone("run", "--json", str(_shard_manifest(us, shards, "orders_us", "shard_src")))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["details"]["changed"] == ["source"]
    assert "another source file" in error["message"] and str(shards) not in result.output
    assert target_rows(shards) == rows_of(eu / "source.sqlite")  # the first folder's rows, each once


def test_a_history_recording_a_relative_named_connection_by_its_name_stops_once_until_its_file_is_proven(
    shards: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red before: what earlier releases recorded of that connection (its bare name) was taken for whatever
    file its relative path resolves to: a new folder's first run skipped every day the first one committed,
    exit 0, its rows never moved. The bare name names no file: each folder stops once, ``--source-moved``
    records the file only where its keys match the target's, and the route goes on from there."""
    eu, us = shards / "eu", shards / "us"
    eu.mkdir()
    us.mkdir()
    shutil.copy(shards / "source.sqlite", eu / "source.sqlite")
    shutil.copy(shards / "shard_b.sqlite", us / "source.sqlite")
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_SRC", "sqlite:///source.sqlite")
    eu_manifest = str(_shard_manifest(eu, shards, "orders_eu", "shard_src"))
    us_manifest = str(_shard_manifest(us, shards, "orders_us", "shard_src"))
    assert dpone("run", eu_manifest).exit_code == 0
    _rewrite_recorded_sources(store_url, "shard_src")  # an earlier release's record
    add_source_rows(eu, [(900_001, "2026-12-01")])

    stopped = dpone("run", "--json", us_manifest)

    assert stopped.exit_code == 3, stopped.output
    error = json.loads(stopped.output)
    assert error["details"]["changed"] == ["source"]
    assert error["details"]["reason"] == "history_names_no_file"
    assert "'shard_src', and only its name was recorded" in error["message"]
    move = ("guard", "rebaseline", "--source-moved", "--reason", "the route reads this folder's file")
    assert dpone(*move[:2], us_manifest, *move[2:]).exit_code == 3  # another file: its keys differ
    assert dpone("run", eu_manifest).exit_code == 3  # the same file, not proven yet
    assert dpone(*move[:2], eu_manifest, *move[2:]).exit_code == 0

    assert dpone("run", eu_manifest).exit_code == 0

    assert target_rows(shards) == rows_of(eu / "source.sqlite")
    assert dpone("run", us_manifest).exit_code == 3  # told apart from then on


def test_one_folder_reached_through_a_symbolic_link_is_one_source(shards: Path, store_url: str) -> None:
    """The operator finds a manifest from the DAG file's real folder, the CLI from the path it is given:
    a run through a symlinked folder reads the same file and is the same source (no stop)."""
    eu = shards / "eu"
    eu.mkdir()
    shutil.copy(shards / "source.sqlite", eu / "source.sqlite")
    (shards / "eu-link").symlink_to(eu, target_is_directory=True)
    assert dpone("run", str(_shard_manifest(eu, shards, "orders_eu"))).exit_code == 0
    add_source_rows(eu, [(900_001, "2026-12-01")])

    result = dpone("run", str(shards / "eu-link" / "manifest.yaml"))

    assert result.exit_code == 0, result.output
    assert target_rows(shards) == rows_of(eu / "source.sqlite")


def test_an_absolute_uri_through_a_link_flipped_to_a_new_snapshot_stays_one_source(
    shards: Path, store_url: str
) -> None:
    """A refresh job re-points ``current.sqlite`` at each new snapshot of the same table: the URI, as
    written, is the source; resolving the link made each flip a "source changed" stop."""
    data = shards / "data"
    data.mkdir()
    shutil.copy(shards / "source.sqlite", data / "snap1.sqlite")
    (data / "current.sqlite").symlink_to("snap1.sqlite")
    manifest = _shard_manifest(data, shards, "orders_snap")
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace(
            "sqlite:///source.sqlite", f"sqlite:///{data / 'current.sqlite'}"
        ),
        encoding="utf-8",
    )
    assert dpone("run", str(manifest)).exit_code == 0
    shutil.copy(data / "snap1.sqlite", data / "snap2.sqlite")
    with sqlite3.connect(data / "snap2.sqlite") as db:
        db.execute("INSERT INTO orders VALUES (900001, '2026-12-01', 'late', 1.25, '2026-12-01 08:00:00')")
    (data / "next.sqlite").symlink_to("snap2.sqlite")
    (data / "next.sqlite").replace(data / "current.sqlite")

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert target_rows(shards) == rows_of(data / "snap2.sqlite")
