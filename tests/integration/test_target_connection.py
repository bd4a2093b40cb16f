"""A route's commits went through one target connection: a run through another one never skips them.

The checkpoint store says which partitions are committed, not where. Seen before the fix: one run with the
sink pointed at a staging copy (``sink_conn_id`` chosen per run) committed a late day there; every later
production run skipped it as committed, exit 0, and production never held that day. A run through another
target connection now stops before it reads anything, and a target that really moved (a renamed
connection) is recorded once, deliberately (ADR 0088). Black-box ``dpone`` runs, a SQLite source into
chDB, checkpoints in SQLite and PostgreSQL; the target is compared with its source value by value.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.checkpoint_sql.tables import CHECKPOINT_TABLE
from tests.integration.route_rig import add_source_rows, dpone, manifest_at, source_rows, target_rows


def manifest(base: Path, name: str, sink_connection: str) -> Path:
    path = manifest_at(base, file=f"{name}.yaml")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("connection: chdb:///clickhouse", f"connection: {sink_connection}"))
    return path


@pytest.fixture
def named_targets(base: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``ch_prod`` and ``ch_main``: two Airflow-style connection names for the workspace's one chDB folder;
    ``ch_staging`` a copy of it made later (``staging_copy``)."""
    monkeypatch.setenv("AIRFLOW_CONN_CH_PROD", f"chdb:///{base / 'clickhouse'}")
    monkeypatch.setenv("AIRFLOW_CONN_CH_MAIN", f"chdb:///{base / 'clickhouse'}")
    monkeypatch.setenv("AIRFLOW_CONN_CH_STAGING", f"chdb:///{base / 'staging'}")
    return base


def test_another_connection_name_for_the_same_target_is_the_same_target(
    named_targets: Path,
    store_url: str,
) -> None:
    """A second name for one server and database (say, with longer timeouts for a backfill) is no change."""
    base = named_targets
    assert dpone("run", str(manifest(base, "prod", "ch_prod"))).exit_code == 0
    add_source_rows(base, [(900_001, "2026-12-01")])

    result = dpone("run", "--json", str(manifest(base, "main", "ch_main")))

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["rows_committed"] == 1
    assert target_rows(base) == source_rows(base)


def test_a_connection_name_that_now_leads_elsewhere_stops_and_a_recorded_move_lets_only_new_rows_move(
    named_targets: Path,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Environments share connection names: a staging deployment's ``ch_prod`` is another server, and a
    store shared with it lost a day with exit 0. Here the name is repointed at the same folder through a
    link (a real move looks the same): it stops once, and the move is recorded deliberately."""
    base = named_targets
    prod = manifest(base, "prod", "ch_prod")
    assert dpone("run", str(prod)).exit_code == 0
    (base / "linked").symlink_to(base / "clickhouse")
    monkeypatch.setenv("AIRFLOW_CONN_CH_PROD", f"chdb:///{base / 'linked'}")
    add_source_rows(base, [(900_001, "2026-12-01"), (900_002, "2026-12-01")])
    before = target_rows(base)

    stopped = dpone("run", "--json", str(prod))

    assert stopped.exit_code == 3, stopped.output
    error = json.loads(stopped.output)
    assert error["error"] == "native_transfer_route_identity_changed"
    assert error["details"]["changed"] == ["target"]
    assert "now leads to another server, database or folder" in error["message"]
    assert target_rows(base) == before  # nothing written
    recorded = dpone("guard", "rebaseline", str(prod), "--target-moved", "--reason", "moved", "--json")
    assert recorded.exit_code == 0, recorded.output
    (record,) = json.loads(recorded.output)["recorded"]
    audit = record["diagnostics"]["rebaseline"]
    assert audit["reason"] == "moved" and audit["target_rows_now"] == record["rows"]  # the same table
    assert record["diagnostics"]["target_place"] != error["details"]["newest_commit"]

    moved = dpone("run", "--json", str(prod))

    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.output)["rows_committed"] == 2
    assert target_rows(base) == source_rows(base)


def test_a_history_written_before_targets_were_recorded_runs_and_its_next_commit_records_one(
    named_targets: Path,
    store_url: str,
) -> None:
    base = named_targets
    prod = manifest(base, "prod", "ch_prod")
    assert dpone("run", str(prod)).exit_code == 0
    _forget_recorded_targets(store_url)  # what an earlier release left
    add_source_rows(base, [(900_001, "2026-12-01")])

    assert dpone("run", str(prod)).exit_code == 0  # no stop on upgrade; this commit records ch_prod

    assert target_rows(base) == source_rows(base)
    shutil.copytree(base / "clickhouse", base / "staging", symlinks=True)
    add_source_rows(base, [(900_002, "2026-12-02")])
    staged = subprocess.run(
        [
            str(Path(sys.executable).with_name("dpone")),
            "run",
            "--json",
            str(manifest(base, "st", "ch_staging")),
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    assert staged.returncode == 3, staged.stdout + staged.stderr
    assert json.loads(staged.stdout)["details"]["changed"] == ["target"]


def test_the_same_inline_target_from_the_manifest_folder_is_one_target(base: Path, store_url: str) -> None:
    """``chdb:///clickhouse`` and the same folder written absolute are one target: its path is resolved."""
    relative = manifest_at(base, file="relative.yaml")
    assert dpone("run", str(relative)).exit_code == 0
    absolute = manifest(base, "absolute", f"chdb:///{base.resolve() / 'clickhouse'}")
    add_source_rows(base, [(900_001, "2026-12-01")])

    result = dpone("run", str(absolute))

    assert result.exit_code == 0, result.output
    assert target_rows(base) == source_rows(base)


def _forget_recorded_targets(url: str) -> None:
    """Every stored checkpoint without its recorded target connection."""
    engine = sa.create_engine(url)
    table = sa.table(CHECKPOINT_TABLE, sa.column("id"), sa.column("payload_text"))
    with engine.begin() as conn:
        for row_id, text in conn.execute(sa.select(table.c.id, table.c.payload_text)).all():
            payload = json.loads(text)
            payload["diagnostics"].pop("target_connection", None)
            payload["diagnostics"].pop("target_place", None)
            conn.execute(
                table.update()
                .where(table.c.id == row_id)
                .values(payload_text=json.dumps(payload, sort_keys=True, separators=(",", ":")))
            )
    engine.dispose()
