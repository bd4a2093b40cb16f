"""Which earlier commits make a run prove the target's rows lie within its partitions, and the reach it
counts them in (``runtime.rows_beyond_partitioning``); the end-to-end proof is
``tests/integration/test_partition_column_switch.py``."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.bounds_coverage import fully_covered
from airflow_provider_dpone.runtime.rows_beyond_partitioning import by_another_column, reach_of
from tests.builders import stored_checkpoint

AT = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)
WHOLE = PartitionBounds(kind=BoundsKind.ALL, label="all")


def test_commits_by_another_column_or_the_whole_table_count_and_the_same_column_in_any_case_does_not() -> (
    None
):
    by_d = stored_checkpoint(ROUTE, day_partitions("d", [dt.date(2026, 1, 1)])[0], AT)
    by_s = stored_checkpoint(ROUTE, day_partitions("S", [dt.date(2026, 1, 1)])[0], AT)
    whole = stored_checkpoint(ROUTE, WHOLE, AT)
    empty = stored_checkpoint(ROUTE, day_partitions("d", [dt.date(2026, 1, 2)])[0], AT).model_copy(
        update={"rows": 0}
    )

    assert by_another_column([by_d, by_s, whole, empty], "s") == [by_d, whole]


@given(st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=30, unique=True))
def test_the_reach_of_day_partitions_covers_each_of_them_in_one_range(offsets: list[int]) -> None:
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=n) for n in offsets]
    planned = day_partitions("s", days)

    reach = reach_of(planned)

    assert len(reach) == 1 and reach[0].kind is BoundsKind.RANGE and reach[0].column == "s"
    assert all(fully_covered(p, reach) for p in planned)
    assert (
        reach[0].lower == min(days).isoformat()
        and reach[0].upper == (max(days) + dt.timedelta(days=1)).isoformat()
    )


def test_listed_values_are_their_own_reach() -> None:
    listed = PartitionBounds(kind=BoundsKind.VALUES, column="code", values=("EU",), label="code=EU")
    assert reach_of([listed]) == [listed]
