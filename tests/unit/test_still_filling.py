"""A run that commits a partition rows may still reach says so (a notice), rather than without a word.

``incremental_append`` (and ``replace_partition`` without ``lookback``) never move a committed partition
again, so today's day (no ``settle``) or the newest ``integer_range`` range committed while it fills
misses every row that arrives later. Found trying an id-ranged table as a user would: ids 1-150 with
``size: 100``, then ids 151-250: the second run moved 200-250 and skipped ``[100,200)``; 49 rows never
arrived, exit 0. Behaviour is unchanged (``settle``/``lookback`` are the tools); the run now tells.
"""

from __future__ import annotations

import datetime as dt

from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, ResumeDecision, still_filling
from tests.doubles import FixedClock, InMemoryCheckpointStore, RecordingSink
from tests.unit.late_rows_rig import late_rows_engine

UTC = dt.timezone.utc
HASH = "sha256:" + "d" * 64


def integer_range(lower: int, size: int = 100) -> PlannedPartition:
    bounds = PartitionBounds(
        kind=BoundsKind.RANGE,
        column="id",
        lower=str(lower),
        upper=str(lower + size),
        value_type="integer",
        label=f"id=[{lower},{lower + size})",
    )
    return PlannedPartition(
        partition_id=f"sha256:{lower:064x}", bounds=bounds, query_hash=HASH, schema_hash=HASH
    )


RANGES = Partitioning(kind=PartitionKind.INTEGER_RANGE, column="id", size=100)
NOW = dt.datetime(2026, 12, 5, tzinfo=UTC)


def decisions(*pairs: tuple[int, Action]) -> list[ResumeDecision]:
    reason = {Action.RUN: Reason.MISSING_CHECKPOINT, Action.SKIP: Reason.COMMITTED}
    return [ResumeDecision(integer_range(lower), action, reason[action]) for lower, action in pairs]


def test_the_newest_integer_range_moved_by_an_append_run_may_still_fill() -> None:
    plan = decisions((0, Action.RUN), (200, Action.RUN), (100, Action.RUN))
    filling = still_filling(plan, Strategy.INCREMENTAL_APPEND, RANGES, NOW)
    assert [p.bounds.label for p in filling] == ["id=[200,300)"]  # by value, not by position


def test_no_integer_range_is_named_when_the_newest_is_not_moved_or_is_moved_again_later() -> None:
    committed_newest = decisions((0, Action.RUN), (100, Action.SKIP))
    assert still_filling(committed_newest, Strategy.INCREMENTAL_APPEND, RANGES, NOW) == []
    plan = decisions((0, Action.RUN), (100, Action.RUN))
    assert still_filling(plan, Strategy.FULL_REFRESH, RANGES, NOW) == []
    with_lookback = RANGES.model_copy(update={"lookback": 1})
    assert still_filling(plan, Strategy.REPLACE_PARTITION, with_lookback, NOW) == []
    assert still_filling(plan, Strategy.REPLACE_PARTITION, RANGES, NOW)  # without lookback: it says so


def test_an_append_run_that_commits_todays_day_says_it_may_still_fill() -> None:
    """Red without the notice: the run committed 11-30 at 23:00 on 11-30 without a word."""
    clock = FixedClock(dt.datetime(2026, 11, 30, 23, 0, tzinfo=UTC))
    report = late_rows_engine(InMemoryCheckpointStore(), RecordingSink(), clock).run("run-1")
    notes = [n for n in report.notices if "may still be filling" in n]
    assert len(notes) == 1 and "order_date=2026-11-30" in notes[0] and "settle" in notes[0]


def test_no_notice_when_settle_holds_the_day_back_or_every_day_is_over() -> None:
    late = FixedClock(dt.datetime(2026, 11, 30, 23, 0, tzinfo=UTC))
    held = late_rows_engine(InMemoryCheckpointStore(), RecordingSink(), late, settle="2h").run("run-1")
    assert not any("may still be filling" in n for n in held.notices)
    later = FixedClock(dt.datetime(2026, 12, 5, 6, 0, tzinfo=UTC))
    over = late_rows_engine(InMemoryCheckpointStore(), RecordingSink(), later).run("run-1")
    assert not any("may still be filling" in n for n in over.notices)


def _region_partitions(*regions: str) -> list[PlannedPartition]:
    """One planned ``list`` partition per region value, in order."""
    return [
        PlannedPartition(
            partition_id=f"sha256:{n:064x}",
            bounds=PartitionBounds(kind=BoundsKind.VALUES, column="region", values=(v,), label=f"region={v}"),
            query_hash=HASH,
            schema_hash=HASH,
        )
        for n, v in enumerate(regions)
    ]


def test_every_list_value_an_append_run_commits_may_still_fill_an_empty_one_too() -> None:
    values = _region_partitions("EU", "APAC")
    listed = Partitioning(kind=PartitionKind.LIST, column="region", values=("EU", "APAC"))
    plan = [
        ResumeDecision(values[0], Action.SKIP, Reason.COMMITTED),
        ResumeDecision(values[1], Action.RUN, Reason.MISSING_CHECKPOINT),
    ]
    assert still_filling(plan, Strategy.INCREMENTAL_APPEND, listed, NOW) == [values[1]]
    assert still_filling(plan, Strategy.REPLACE_PARTITION, listed, NOW) == [values[1]]
    with_lookback = listed.model_copy(update={"lookback": 2})
    assert still_filling(plan, Strategy.REPLACE_PARTITION, with_lookback, NOW) == []


def test_a_list_value_a_lookback_of_fewer_slots_never_reaches_is_said_to_still_fill() -> None:
    """Red before: any lookback silenced the notice, though ``lookback: 1`` of three values moves only the
    last one again and rows reaching the others later are never moved."""
    values = _region_partitions("EU", "APAC", "US")
    listed = Partitioning(kind=PartitionKind.LIST, column="region", values=("EU", "APAC", "US"), lookback=1)
    plan = [ResumeDecision(v, Action.RUN, Reason.MISSING_CHECKPOINT) for v in values]
    assert still_filling(plan, Strategy.REPLACE_PARTITION, listed, NOW) == values[:2]
    every = listed.model_copy(update={"lookback": 3})
    assert still_filling(plan, Strategy.REPLACE_PARTITION, every, NOW) == []


def test_the_one_partition_of_a_route_without_partitioning_may_still_fill() -> None:
    whole = PlannedPartition(
        partition_id="sha256:" + "a" * 64,
        bounds=PartitionBounds(kind=BoundsKind.ALL, label="all"),
        query_hash=HASH,
        schema_hash=HASH,
    )
    plan = [ResumeDecision(whole, Action.RUN, Reason.MISSING_CHECKPOINT)]
    none = Partitioning(kind=PartitionKind.NONE)
    assert still_filling(plan, Strategy.INCREMENTAL_APPEND, none, NOW) == [whole]
    assert still_filling(plan, Strategy.FULL_REFRESH, none, NOW) == []
