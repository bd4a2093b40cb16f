"""``dpone guard resolve`` refuses the answer that would duplicate, on a real target (chDB)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.route_rig import (
    TARGET,
    append_armed,
    dpone,
    hold_lease,
    latest_of,
    source_rows,
    target_rows,
    write_manifest,
)


def blocked_after_a_landed_append(base: Path, store_url: str) -> Path:
    """Every partition's rows are in the target; two partitions' latest rows say EXPORTED/armed."""
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    append_armed(store_url, latest_of(store_url, load_manifest(manifest).route), how_many=2)
    return manifest


def test_not_applied_over_rows_in_the_target_is_refused_with_the_counts(
    base: Path,
    store_url: str,
) -> None:
    manifest = blocked_after_a_landed_append(base, store_url)

    refused = dpone(
        "guard", "resolve", str(manifest), "--all-blocked", "--as", "not-applied", "--reason", "x"
    )

    assert refused.exit_code == 2, refused.output
    assert "refusing --as not-applied" in refused.output and "row(s) within its bounds" in refused.output
    assert dpone("run", str(manifest)).exit_code == 3  # still blocked: nothing was written
    assert target_rows(base) == source_rows(base)


def test_committed_after_checking_the_target_unblocks_without_duplicating(
    base: Path,
    store_url: str,
) -> None:
    manifest = blocked_after_a_landed_append(base, store_url)

    resolved = dpone(
        "guard",
        "resolve",
        str(manifest),
        "--all-blocked",
        "--as",
        "committed",
        "--reason",
        "counted",
        "--json",
    )

    assert resolved.exit_code == 0, resolved.output
    audits = [r["diagnostics"]["resolution"] for r in json.loads(resolved.stdout)["resolved"]]
    assert all(a["target_rows"] == a["attempt_rows"] and a["forced"] is False for a in audits)
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_force_overrides_the_refusal_and_is_audited(base: Path, store_url: str) -> None:
    manifest = blocked_after_a_landed_append(base, store_url)

    forced = dpone(
        "guard",
        "resolve",
        str(manifest),
        "--all-blocked",
        "--as",
        "not-applied",
        "--reason",
        "y",
        "--force",
        "--json",
    )

    assert forced.exit_code == 0, forced.output
    assert all(r["diagnostics"]["resolution"]["forced"] for r in json.loads(forced.stdout)["resolved"])


def test_a_resolution_while_a_run_of_the_target_is_live_stops_busy_and_writes_nothing(
    base: Path,
    store_url: str,
) -> None:
    """A live run's ARMED partitions look blocked; resolving them while it loads (``not-applied`` before
    its insert lands) would let the next run append them again. ``guard resolve`` takes the target's
    lease, as a run does: while another process holds it, it stops with exit 4 and appends nothing."""
    manifest = blocked_after_a_landed_append(base, store_url)
    route = load_manifest(manifest).route
    before = latest_of(store_url, route)
    holder = hold_lease(store_url)
    try:
        busy = dpone("guard", "resolve", str(manifest), "--all-blocked", "--as", "committed", "--reason", "x")
        assert busy.exit_code == 4, busy.output
        assert "native_transfer_route_busy" in busy.output
        assert latest_of(store_url, route) == before  # nothing appended
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert TARGET in busy.output
    resolved = dpone("guard", "resolve", str(manifest), "--all-blocked", "--as", "committed", "--reason", "x")
    assert resolved.exit_code == 0, resolved.output
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)
