"""Which committed rows of other source tables' routes a destructive strategy would delete.

``runtime/shared_target.other_sources_in_scope`` decides; the engine stops before any target I/O when it
finds any (``native_transfer_target_not_empty``), unless ``allow_nonempty_target``. Checked here with
in-memory checkpoints and the product's own SQLite naming (respellings of one table are one source).
"""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources.route_naming import SourceRouteNaming
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType
from airflow_provider_dpone.contracts.partition import (
    BoundsKind,
    PartitionBounds,
    PlannedPartition,
)
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.shared_target import other_sources_in_scope
from tests.builders import day, stored_checkpoint

TARGET = "demo.orders"
NAMING = SourceRouteNaming(SourceSpec(type=SourceType.SQLITE, connection="sqlite:///x", table="orders"))
AT = datetime(2026, 12, 1, tzinfo=timezone.utc)
HASH = "sha256:" + "c" * 64


def route(source: str, strategy: Strategy) -> RouteIdentity:
    return RouteIdentity(source_table=source, target_table=TARGET, strategy=strategy)


def committed(
    source: str,
    bounds: PartitionBounds,
    strategy: Strategy = Strategy.INCREMENTAL_APPEND,
    status: CheckpointStatus = CheckpointStatus.COMMITTED,
) -> PartitionCheckpoint:
    return stored_checkpoint(route(source, strategy), bounds, AT, query_hash=HASH, status=status)


def planned(*bounds: PartitionBounds) -> list[PlannedPartition]:
    return [
        PlannedPartition(partition_id=f"sha256:{i:064x}", query_hash=HASH, schema_hash=HASH, bounds=b)
        for i, b in enumerate(bounds)
    ]


NOV_29 = day("2026-11-29", "2026-11-30")
NOV_30 = day("2026-11-30", "2026-12-01")
ALL = PartitionBounds(kind=BoundsKind.ALL, label="all")


def test_replace_partition_over_another_sources_committed_day_is_found() -> None:
    hits = other_sources_in_scope(
        route("main.orders_b", Strategy.REPLACE_PARTITION),
        planned(NOV_30),
        [committed("main.orders", NOV_29), committed("main.orders", NOV_30)],
        NAMING,
    )
    assert [c.bounds for c in hits] == [NOV_30]  # the other day is outside the deleted bounds


def test_full_refresh_finds_every_committed_partition_of_another_source() -> None:
    others = [committed("main.orders", NOV_29), committed("main.orders", NOV_30)]
    hits = other_sources_in_scope(
        route("main.orders_b", Strategy.FULL_REFRESH),
        planned(ALL),
        others,
        NAMING,
    )
    assert hits == others


def test_bounds_on_another_column_or_unpartitioned_overlap_everything() -> None:
    by_id = PartitionBounds(
        kind=BoundsKind.RANGE, column="id", lower="0", upper="10", value_type="integer", label="id"
    )
    for theirs in (by_id, ALL):
        assert other_sources_in_scope(
            route("main.orders_b", Strategy.REPLACE_PARTITION),
            planned(NOV_30),
            [committed("main.orders", theirs)],
            NAMING,
        )


def test_the_same_source_under_another_strategy_or_spelling_is_not_another_source() -> None:
    """A full_refresh replacing what the same table's append route (or an older spelling) loaded is what
    the user asked for."""
    mine = [
        committed("main.orders", NOV_30),
        committed("ORDERS", NOV_30),
        committed('"main"."orders"', NOV_30, Strategy.REPLACE_PARTITION),
    ]
    for strategy in (Strategy.FULL_REFRESH, Strategy.REPLACE_PARTITION):
        assert not other_sources_in_scope(route("main.orders", strategy), planned(NOV_30), mine, NAMING)


def test_an_append_route_or_an_empty_run_deletes_nothing() -> None:
    theirs = [committed("main.orders", NOV_30)]
    assert not other_sources_in_scope(
        route("main.orders_b", Strategy.INCREMENTAL_APPEND),
        planned(NOV_30),
        theirs,
        NAMING,
    )
    assert not other_sources_in_scope(route("main.orders_b", Strategy.REPLACE_PARTITION), [], theirs, NAMING)


def test_only_committed_checkpoints_count() -> None:
    """Unresolved guards of other routes are the guard scan's (they block first); FAILED ones loaded nothing."""
    for status in (CheckpointStatus.FAILED, CheckpointStatus.EXPORTED, CheckpointStatus.PLANNED):
        assert not other_sources_in_scope(
            route("main.orders_b", Strategy.FULL_REFRESH),
            planned(ALL),
            [committed("main.orders", NOV_30, status=status)],
            NAMING,
        )


DAYS = [day(f"2026-11-{d:02d}", f"2026-11-{d + 1:02d}") for d in range(1, 29)]


@given(
    mine=st.sets(st.integers(0, len(DAYS) - 1), min_size=1),
    theirs=st.sets(st.integers(0, len(DAYS) - 1)),
)
def test_replace_partition_finds_exactly_the_other_sources_days_it_deletes(
    mine: set[int], theirs: set[int]
) -> None:
    hits = other_sources_in_scope(
        route("main.orders_b", Strategy.REPLACE_PARTITION),
        planned(*(DAYS[i] for i in sorted(mine))),
        [committed("main.orders", DAYS[i]) for i in sorted(theirs)],
        NAMING,
    )
    assert {DAYS.index(c.bounds) for c in hits} == mine & theirs
