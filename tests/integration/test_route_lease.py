"""Two runs of one target never both write: the lease, and its release by process death (SIGKILL)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from airflow_provider_dpone.adapters.checkpoint_sql.tables import CHECKPOINT_TABLE
from tests.integration.route_rig import (
    LEASE_HOLDER,
    dpone,
    hold_lease,
    manifest_at,
    source_rows,
    target_rows,
    write_manifest,
)


def checkpoint_rows(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(f"SELECT count(*) FROM {CHECKPOINT_TABLE}")).scalar_one())
    finally:
        engine.dispose()


def test_a_second_run_of_a_leased_target_stops_with_exit_4_before_any_io_and_a_sigkilled_holder_frees_it(
    base: Path,
    store_url: str,
) -> None:
    manifest = write_manifest(base, "orders", store_url)
    holder = hold_lease(store_url)
    try:
        busy = dpone("run", str(manifest))
        assert busy.exit_code == 4, busy.output
        assert "native_transfer_route_busy" in busy.output
        assert checkpoint_rows(store_url) == 0  # not even a PLANNED row
        assert not (base / "clickhouse").exists()  # the target was never opened
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert target_rows(base) == source_rows(base)


def test_a_lease_on_another_target_does_not_block(base: Path, store_url: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", LEASE_HOLDER, store_url, "demo.other"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert dpone("run", str(write_manifest(base, "orders", store_url))).exit_code == 0
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert target_rows(base) == source_rows(base)


def test_a_store_reached_through_a_symbolic_link_is_leased_as_one(base: Path) -> None:
    """Red before: the lease file was named after the store's path as written, so a run through a link
    to the store took a lease of its own beside the holder's and wrote (seen: both runs appended, exit 0).
    (A PostgreSQL store leases by key in the server: one database, one lease.)"""
    store_url = f"sqlite:///{base / 'state.sqlite'}"
    link = base / "state-link.sqlite"
    link.symlink_to(base / "state.sqlite")
    holder = hold_lease(store_url)
    try:
        busy = dpone("run", str(manifest_at(base, state=f"sqlite:///{link}")))
        assert busy.exit_code == 4, busy.output
        assert "native_transfer_route_busy" in busy.output
        assert checkpoint_rows(store_url) == 0
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)


def test_a_store_file_with_a_second_hard_link_is_refused_through_either_name(base: Path) -> None:
    """Red before: a run through a hard link took a lease file of its own (named after its path) and read
    its own write-ahead log, so it neither saw the holder's armed records nor waited for it: both runs
    committed every partition, every row twice, exit 0. Two names for one file are refused, nothing written."""
    store = base / "state.sqlite"
    assert dpone("run", str(manifest_at(base, state=f"sqlite:///{store}"))).exit_code == 0
    committed = checkpoint_rows(f"sqlite:///{store}")
    (base / "other").mkdir()
    (base / "other" / "state.sqlite").hardlink_to(store)
    for name in (store, base / "other" / "state.sqlite"):
        refused = dpone("run", str(manifest_at(base, state=f"sqlite:///{name}")), "--json")
        assert refused.exit_code == 2, refused.output
        assert '"problem": "store_has_hard_links"' in refused.stdout
    assert checkpoint_rows(f"sqlite:///{store}") == committed
    assert target_rows(base) == source_rows(base)
