"""Route identity survives a respelled table, an upgrade from raw keys, and another route to the same target.

Black-box where it matters: ``dpone run`` on a SQLite source into chDB, checkpoints in SQLite or
PostgreSQL. Every target is compared with the source value by value, not only by count.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.route_rig import (
    append_armed,
    dpone,
    latest_of,
    rewrite_as_legacy,
    source_rows,
    stored_payloads,
    target_rows,
    write_manifest,
)

RESPELLINGS = ["ORDERS", "main.orders", '"orders"', "[Main].[Orders]"]


@pytest.mark.parametrize("spelling", RESPELLINGS)
def test_a_respelled_table_is_blocked_by_the_armed_guard_of_its_route(
    base: Path, store_url: str, spelling: str
) -> None:
    first = write_manifest(base, "orders", store_url)
    assert dpone("run", str(first)).exit_code == 0
    append_armed(store_url, latest_of(store_url, load_manifest(first).route))
    before = target_rows(base)

    result = dpone("run", str(write_manifest(base, spelling, store_url)))

    assert result.exit_code == 3, result.output
    assert "native_transfer_manual_reconciliation_required" in result.output
    assert target_rows(base) == before == source_rows(base)


@pytest.mark.parametrize("spelling", RESPELLINGS)
def test_a_respelled_table_skips_every_committed_partition(base: Path, store_url: str, spelling: str) -> None:
    assert dpone("run", str(write_manifest(base, "orders", store_url))).exit_code == 0

    result = dpone("run", "--json", str(write_manifest(base, spelling, store_url)))

    assert result.exit_code == 0, result.output
    assert '"partitions_committed": 0' in result.output
    assert target_rows(base) == source_rows(base)


@pytest.mark.parametrize("raw", ["orders", "ORDERS"])
def test_committed_checkpoints_in_the_old_raw_key_form_are_still_skipped_and_round_trip_unchanged(
    base: Path, store_url: str, raw: str
) -> None:
    manifest = write_manifest(base, raw, store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    payloads = rewrite_as_legacy(store_url, manifest, raw)

    for spelling in (raw, "main.orders"):
        result = dpone("run", "--json", str(write_manifest(base, spelling, store_url)))
        assert result.exit_code == 0, result.output
        assert '"partitions_committed": 0' in result.output

    assert target_rows(base) == source_rows(base)
    assert stored_payloads(store_url) == payloads  # nothing new written, nothing migrated


def test_an_armed_guard_in_the_old_raw_key_form_still_blocks(base: Path, store_url: str) -> None:
    manifest = write_manifest(base, "ORDERS", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    rewrite_as_legacy(store_url, manifest, "ORDERS")
    raw_route = load_manifest(manifest).route.model_copy(update={"source_table": "ORDERS"})
    append_armed(store_url, latest_of(store_url, raw_route), how_many=2)
    before = target_rows(base)

    for spelling in ("ORDERS", "orders"):
        result = dpone("run", str(write_manifest(base, spelling, store_url)))
        assert result.exit_code == 3, result.output

    listing = dpone("checkpoints", str(manifest))
    assert listing.exit_code == 0 and "2 blocked" in listing.output
    assert target_rows(base) == before


def test_an_unresolved_guard_of_another_route_to_the_same_target_blocks(base: Path, store_url: str) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("CREATE TABLE orders_archive AS SELECT * FROM orders WHERE 0")
    other = write_manifest(base, "orders_archive", store_url, name="archive", strategy="replace_partition")
    mine = write_manifest(base, "orders", store_url)
    assert dpone("run", str(mine)).exit_code == 0
    # forge an armed guard on the other route, as if its last attempt died inside the target call
    mine_latest = latest_of(store_url, load_manifest(mine).route)
    other_route = load_manifest(other).route
    append_armed(store_url, [c.model_copy(update={"route": other_route}) for c in mine_latest])
    before = target_rows(base)

    result = dpone("run", str(mine))

    assert result.exit_code == 3, result.output
    assert target_rows(base) == before
    listing = dpone("checkpoints", str(mine))
    assert "stored under route main.orders_archive" in listing.output


def test_a_guard_on_a_route_to_another_target_does_not_block(base: Path, store_url: str) -> None:
    elsewhere = write_manifest(base, "orders", store_url, name="elsewhere", target="demo.orders_copy")
    assert dpone("run", str(elsewhere)).exit_code == 0
    append_armed(store_url, latest_of(store_url, load_manifest(elsewhere).route))

    result = dpone("run", str(write_manifest(base, "orders", store_url)))

    assert result.exit_code == 0, result.output
    assert target_rows(base) == source_rows(base)
