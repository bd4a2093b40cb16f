"""Which earlier commits make a run prove the target's rows lie within its partitions
(``runtime.rows_beyond_partitioning``); the end-to-end proof is
``tests/integration/test_partition_column_switch.py``."""

from __future__ import annotations

import datetime as dt

from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.rows_beyond_partitioning import by_another_column
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
