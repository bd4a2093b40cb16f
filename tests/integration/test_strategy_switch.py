"""Switching a manifest's strategy back to ``incremental_append`` never appends what the other one loaded.

A route is (source, target, strategy): a ``replace_partition`` or ``full_refresh`` manifest of the same
source table is another route over the same target, and the days it commits have no checkpoint of the
append route. Seen before the fix: the demo switched to ``replace_partition``, a new day arrived and was
replaced in, the manifest went back to ``incremental_append``, and its next run appended the day's 333
rows a second time (exit 0). Black-box ``dpone`` runs, SQLite source into chDB, checkpoints in SQLite and
PostgreSQL; every target is compared with the source value by value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.route_rig import add_source_rows, dpone, manifest_at, source_rows, target_rows

SIBLINGS = ["replace_partition", "full_refresh"]


def _appended_then_switched(root: Path, sibling: str) -> Path:
    """The append route loads the source; the sibling strategy's route then loads one new day."""
    append = manifest_at(root)
    assert dpone("run", str(append)).exit_code == 0
    add_source_rows(root, [(900_001, "2026-12-01"), (900_002, "2026-12-01")])
    switched = dpone("run", "--json", str(manifest_at(root, strategy=sibling)))
    assert switched.exit_code == 0, switched.output
    assert target_rows(root) == source_rows(root)
    return manifest_at(root)  # back to incremental_append


@pytest.mark.parametrize("sibling", SIBLINGS)
def test_back_to_append_stops_before_the_target_where_the_other_strategy_committed(
    base: Path,
    store_url: str,
    sibling: str,
) -> None:
    append = _appended_then_switched(base, sibling)

    result = dpone("run", "--json", str(append))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["error"] == "native_transfer_route_identity_changed"
    assert error["details"]["changed"] == ["strategy"]
    assert [o["bounds"] for o in error["details"]["overlaps"]] == ["order_date=2026-12-01"]
    assert target_rows(base) == source_rows(base)  # the new day is there once


@pytest.mark.parametrize("sibling", SIBLINGS)
def test_a_rebaseline_takes_over_the_other_strategys_days_and_the_next_run_moves_only_new_rows(
    base: Path,
    store_url: str,
    sibling: str,
) -> None:
    append = _appended_then_switched(base, sibling)
    assert dpone("run", str(append)).exit_code == 3

    rebased = dpone("guard", "rebaseline", str(append), "--reason", "back to append", "--json")

    assert rebased.exit_code == 0, rebased.output
    recorded = json.loads(rebased.output)["recorded"]
    assert [r["bounds"]["label"] for r in recorded] == ["order_date=2026-12-01"]
    assert recorded[0]["diagnostics"]["rebaseline"]["changed"] == ["strategy"]
    add_source_rows(base, [(900_003, "2026-12-02")])

    after = dpone("run", "--json", str(append))

    assert after.exit_code == 0, after.output
    assert json.loads(after.output)["rows_committed"] == 1
    assert target_rows(base) == source_rows(base)


def test_an_append_route_with_no_checkpoint_after_another_strategy_stops_too(
    base: Path,
    store_url: str,
) -> None:
    assert dpone("run", str(manifest_at(base, strategy="replace_partition"))).exit_code == 0

    result = dpone("run", "--json", str(manifest_at(base)))

    assert result.exit_code == 3, result.output
    assert json.loads(result.output)["error"] == "native_transfer_route_identity_changed"
    assert dpone("guard", "rebaseline", str(manifest_at(base)), "--reason", "to append").exit_code == 0
    add_source_rows(base, [(900_001, "2026-12-01")])
    assert dpone("run", str(manifest_at(base))).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_the_stop_after_another_strategys_filtered_route_does_not_call_its_rows_this_routes(
    base: Path,
    store_url: str,
) -> None:
    """Red with the earlier hint: "their rows are in the target already", wrong where the other route read
    another filter (its rows, not this manifest's, are there); a rebaseline on that word records them."""
    filtered = '  query: "SELECT * FROM orders WHERE id % 2 = 0"\n'
    replaced = manifest_at(base, strategy="replace_partition", extra=filtered, file="replace.yaml")
    assert dpone("run", str(replaced)).exit_code == 0

    result = dpone("run", str(manifest_at(base)))

    assert result.exit_code == 3, result.output
    assert "the query, schema, strategy of route" in result.output
    assert "not necessarily the rows this manifest selects" in " ".join(result.output.split())


def test_a_replacing_route_after_the_append_route_goes_on_without_a_word_on_strategy(
    base: Path,
    store_url: str,
) -> None:
    assert dpone("run", str(manifest_at(base))).exit_code == 0
    add_source_rows(base, [(900_001, "2026-12-01")])

    result = dpone("run", "--json", str(manifest_at(base, strategy="replace_partition")))

    assert result.exit_code == 0, result.output
    assert not any("strategy" in n for n in json.loads(result.output).get("notices", []))
    assert target_rows(base) == source_rows(base)


def test_from_a_whole_table_refresh_to_daily_appends_no_day_is_lost_or_doubled(
    base: Path,
    store_url: str,
) -> None:
    """A `full_refresh` without partitioning committed one partition, the whole table, at one moment: a day
    that reached the source after it lies within its bounds but was never loaded. Recording it as covered
    would lose it; stopping on it would block every new day for good."""
    whole = base / "whole.yaml"
    whole.write_text(
        manifest_at(base, strategy="full_refresh")
        .read_text(encoding="utf-8")
        .replace("  partitioning: {kind: day, column: order_date}\n", ""),
        encoding="utf-8",
    )
    assert dpone("run", str(whole)).exit_code == 0
    add_source_rows(base, [(900_001, "2026-12-01"), (900_002, "2026-12-01")])  # after the refresh
    append = manifest_at(base)

    stopped = dpone("run", "--json", str(append))

    assert stopped.exit_code == 3, stopped.output  # the days the refresh loaded are in the target
    overlaps = json.loads(stopped.output)["details"]["overlaps"]
    assert "order_date=2026-12-01" not in [o["bounds"] for o in overlaps]  # the target holds none of it
    rebased = dpone("guard", "rebaseline", str(append), "--reason", "refresh -> daily append", "--json")
    assert rebased.exit_code == 0, rebased.output
    recorded = json.loads(rebased.output)["recorded"]
    assert {r["diagnostics"]["rebaseline"]["covered_by"] for r in recorded} == {"target_count"}
    assert "order_date=2026-12-01" not in [r["bounds"]["label"] for r in recorded]

    after = dpone("run", "--json", str(append))

    assert after.exit_code == 0, after.output
    report = json.loads(after.output)
    assert report["rows_committed"] == 2
    assert any("order_date=2026-12-01" in n and "moved as new" in n for n in report["notices"]), report
    assert target_rows(base) == source_rows(base)


def test_a_route_without_partitioning_partitioned_by_day_later_moves_the_days_it_never_had(
    base: Path,
    store_url: str,
) -> None:
    """The notice of a route without partitioning says to partition it; the day that arrived after its one
    commit must then be moved, not recorded as covered by the whole-table partition."""
    whole = base / "whole.yaml"
    text = manifest_at(base).read_text(encoding="utf-8")
    # the same route without partitioning: one commit of the whole table
    unpartitioned = text.replace("  partitioning: {kind: day, column: order_date}\n", "").replace(
        "demo.orders", "demo.orders_whole"
    )
    whole.write_text(unpartitioned, encoding="utf-8")
    assert dpone("run", str(whole)).exit_code == 0
    add_source_rows(base, [(900_001, "2026-12-01")])
    by_day = base / "by_day.yaml"
    by_day.write_text(text.replace("demo.orders", "demo.orders_whole"), encoding="utf-8")

    assert dpone("run", str(by_day)).exit_code == 3  # the days the whole-table commit loaded
    assert dpone("guard", "rebaseline", str(by_day), "--reason", "partitioned by day").exit_code == 0
    after = dpone("run", "--json", str(by_day))

    assert after.exit_code == 0, after.output
    assert json.loads(after.output)["rows_committed"] == 1
    assert target_rows(base, "demo.orders_whole") == source_rows(base)
