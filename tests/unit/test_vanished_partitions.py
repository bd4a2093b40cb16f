"""A committed partition the source no longer plans (every row deleted) still takes part in the lookback.

Pure: ``vanished_committed`` picks the route's own committed partitions of the current definition that no
planned partition is; ``shaped_by`` accepts exactly the bounds the source planners make for the current
partitioning (checked against the planners themselves with hypothesis); ``plan_resume`` lets them compete
for the lookback in bounds order. The black-box proof on every path is in
``tests/integration/test_late_rows.py``.
"""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources.partition_planning import (
    day_partitions,
    integer_range_partitions,
    month_partitions,
)
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind
from airflow_provider_dpone.contracts.partition import PlannedPartition, partition_id_for
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.runtime.resume_planner import plan_resume
from airflow_provider_dpone.runtime.vanished import (
    rolled_out_within_reach,
    shaped_by,
    units_within,
    vanished_committed,
)
from tests.unit.late_rows_rig import ROUTE, committed_checkpoint, decision_summary, planned_days

DAY = Partitioning(kind=PartitionKind.DAY, column="order_date", lookback=2)
MONTH = Partitioning(kind=PartitionKind.MONTH, column="order_date", lookback=2)
NOW = dt.datetime(2026, 12, 3, 6, 0, tzinfo=dt.timezone.utc)
dates = st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2199, 12, 31))


@given(dates)
def test_bounds_the_day_and_month_planners_make_are_shaped_by_their_partitioning_only(day: dt.date) -> None:
    (by_day,) = day_partitions("order_date", [day])
    (by_month,) = month_partitions("order_date", [(day.year, day.month)])
    assert shaped_by(by_day, DAY) and not shaped_by(by_day, MONTH)
    assert shaped_by(by_month, MONTH)
    assert not shaped_by(by_month, DAY)


@given(st.integers(min_value=-(10**12), max_value=10**12), st.integers(min_value=1, max_value=10**6))
def test_ranges_the_integer_planner_makes_are_shaped_by_their_size_only(start: int, size: int) -> None:
    (bounds,) = integer_range_partitions("id", [start], size)
    assert shaped_by(
        bounds, Partitioning(kind=PartitionKind.INTEGER_RANGE, column="id", size=size, lookback=1)
    )
    other = size + 1
    assert not shaped_by(bounds, Partitioning(kind=PartitionKind.INTEGER_RANGE, column="id", size=other))
    assert not shaped_by(bounds, Partitioning(kind=PartitionKind.INTEGER_RANGE, column="other", size=size))


def test_only_committed_partitions_of_the_current_definition_and_shape_vanish() -> None:
    planned = planned_days()  # 11-28 .. 12-01
    kept, gone = planned[:3], planned[3]
    (month,) = month_partitions("order_date", [(2026, 11)])
    of_months = PlannedPartition(
        partition_id=partition_id_for(ROUTE, "sha256:q", "sha256:s", month),
        bounds=month,
        query_hash="sha256:q",
        schema_hash="sha256:s",
    )
    other_query = gone.model_copy(update={"query_hash": "sha256:older"})
    stored = [committed_checkpoint(p) for p in [*kept, gone, of_months]] + [committed_checkpoint(other_query)]

    found = vanished_committed(ROUTE, stored, kept, "sha256:q", "sha256:s", DAY)

    assert [p.partition_id for p in found] == [gone.partition_id]
    assert (
        vanished_committed(
            ROUTE, stored, kept, "sha256:q", "sha256:s", DAY.model_copy(update={"lookback": None})
        )
        == []
    )


def test_a_vanished_day_among_the_newest_runs_in_bounds_order_and_takes_no_lookback_slot() -> None:
    """The two newest committed days still run again: a deleted day used to take one of their slots."""
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p) for p in planned}
    kept = [planned[0], planned[1], planned[3]]  # 11-30 deleted whole in the source

    decisions = plan_resume(
        kept, latest, Strategy.REPLACE_PARTITION, "r", partitioning=DAY, now=NOW, vanished=[planned[2]]
    )

    assert decision_summary(decisions) == [
        ("2026-11-28", "skip", "committed"),
        ("2026-11-29", "run", "lookback"),
        ("2026-11-30", "run", "lookback"),
        ("2026-12-01", "run", "lookback"),
    ]


def test_every_vanished_day_newer_than_the_lookback_runs_however_many() -> None:
    """Days emptied one run after another used to keep the slots, and the next one stayed in the target."""
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p) for p in planned}

    decisions = plan_resume(
        planned[:1], latest, Strategy.REPLACE_PARTITION, "r", partitioning=DAY, now=NOW, vanished=planned[1:]
    )

    assert decision_summary(decisions) == [
        ("2026-11-28", "run", "lookback"),
        ("2026-11-29", "run", "lookback"),
        ("2026-11-30", "run", "lookback"),
        ("2026-12-01", "run", "lookback"),
    ]


def test_a_vanished_day_older_than_the_lookback_is_left_out_of_the_plan() -> None:
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p) for p in planned}

    decisions = plan_resume(
        planned[1:], latest, Strategy.REPLACE_PARTITION, "r", partitioning=DAY, now=NOW, vanished=[planned[0]]
    )

    assert decision_summary(decisions) == [
        ("2026-11-29", "skip", "committed"),
        ("2026-11-30", "run", "lookback"),
        ("2026-12-01", "run", "lookback"),
    ]


def test_a_vanished_day_still_open_under_settle_is_not_emptied() -> None:
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p) for p in planned}
    settled = DAY.model_copy(update={"settle": "1d"})
    now = dt.datetime(2026, 12, 2, 6, 0, tzinfo=dt.timezone.utc)  # 12-01 ended 6 h ago: open

    decisions = plan_resume(
        planned[:3],
        latest,
        Strategy.REPLACE_PARTITION,
        "r",
        partitioning=settled,
        now=now,
        vanished=[planned[3]],
    )

    assert ("2026-12-01", "run", "lookback") not in decision_summary(decisions)


def test_a_day_older_than_everything_the_source_holds_rolled_out_and_is_kept() -> None:
    """A source that keeps a window (cleared each night) no longer holds yesterday: that is retention, not a
    deletion, and emptying yesterday in the target would lose it."""
    planned = planned_days()  # 11-28 .. 12-01
    stored = [committed_checkpoint(p) for p in planned]
    today_only = [planned[3]]

    assert vanished_committed(ROUTE, stored, today_only, "sha256:q", "sha256:s", DAY) == []
    assert vanished_committed(ROUTE, stored, [], "sha256:q", "sha256:s", DAY) == []  # an empty source
    inside = [planned[0], planned[3]]  # 11-29 and 11-30 deleted between days the source still holds
    found = vanished_committed(ROUTE, stored, inside, "sha256:q", "sha256:s", DAY)
    assert [p.bounds.lower for p in found] == ["2026-11-29", "2026-11-30"]


@given(dates, st.integers(min_value=1, max_value=20_000), st.sampled_from([1, 7, 100, 1000]))
def test_the_units_within_an_earlier_partitioning_bounds_are_spelled_as_the_planners_spell_them(
    day: dt.date, start: int, size: int
) -> None:
    """An emptied unit's ID must be the one the planner gives its bounds once rows come back there."""
    (month,) = month_partitions("order_date", [(day.year, day.month)])
    days = _days_of(month.lower, month.upper)
    assert list(units_within(month, day_partitions("order_date", [day])[0], DAY)) == list(
        reversed(day_partitions("order_date", days))
    )
    (by_day,) = day_partitions("order_date", [day])
    assert list(units_within(by_day, month, MONTH)) == [month]
    coarse = integer_range_partitions("id", [start * 1000], 1000)[0]
    ranged = Partitioning(kind=PartitionKind.INTEGER_RANGE, column="id", size=size, lookback=2)
    template = integer_range_partitions("id", [0], size)[0]
    starts = range(int(coarse.lower) // size * size, int(coarse.upper), size)
    assert list(units_within(coarse, template, ranged)) == list(
        reversed(integer_range_partitions("id", list(starts), size))
    )


def _days_of(lower: str | None, upper: str | None) -> list[dt.date]:
    first, end = dt.date.fromisoformat(str(lower)), dt.date.fromisoformat(str(upper))
    return [first + dt.timedelta(days=n) for n in range((end - first).days)]


def test_a_rolled_out_day_is_named_only_while_the_lookback_would_still_reach_it() -> None:
    """Kept days older than every planned one: a retention job's (the source plans N days or more) are not
    named; while the source plans fewer than the lookback's N, the newest of them are (their rows may have
    moved to a newer day), at most the slots left and only those that committed rows."""
    days = planned_days()  # 11-28 .. 12-01
    stored = [committed_checkpoint(p) for p in days]
    three = DAY.model_copy(update={"lookback": 3})

    assert rolled_out_within_reach(ROUTE, stored, days[2:], "sha256:q", "sha256:s", DAY) == []
    reached = rolled_out_within_reach(ROUTE, stored, days[2:], "sha256:q", "sha256:s", three)
    assert [p.partition_id for p in reached] == [days[1].partition_id]
    assert rolled_out_within_reach(ROUTE, stored, days[3:], "sha256:q", "sha256:s", three) == [
        days[2],
        days[1],
    ]
    empty = [
        c.model_copy(update={"rows": 0}) if c.partition_id == days[1].partition_id else c for c in stored
    ]
    assert [
        p.partition_id for p in rolled_out_within_reach(ROUTE, empty, days[2:], "sha256:q", "sha256:s", three)
    ] == []
