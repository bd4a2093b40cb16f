"""Which listed values a run moves as new, and which committed values it no longer lists (``respelled_values``).

These decide when a run stops because a changed ``source.query`` may deliver committed rows again under a new
spelling: a value counted as committed that was not lets duplicates through; a value counted new that was
committed before stops a route that respelled nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.respelled_values import new_values, vanished_values
from tests.builders import day, stored_checkpoint

ROUTE = RouteIdentity(
    source_table="main.sales", target_table="demo.sales", strategy=Strategy.INCREMENTAL_APPEND
)
AT = datetime(2026, 12, 1, tzinfo=UTC)
OLD, NEW = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def listed(*values: str, column: str = "region") -> PartitionBounds:
    return PartitionBounds(
        kind=BoundsKind.VALUES, column=column, values=values, value_type="string", label=f"{column}={values}"
    )


def planned(bounds: PartitionBounds, query_hash: str = NEW) -> PlannedPartition:
    return PlannedPartition(
        partition_id=f"p-{bounds.label}-{query_hash[-1]}",
        bounds=bounds,
        query_hash=query_hash,
        schema_hash=NEW,
    )


def test_a_value_committed_under_any_definition_is_not_new_and_other_columns_do_not_count() -> None:
    committed = [stored_checkpoint(ROUTE, listed("eu"), AT, query_hash=OLD)]
    fresh, again = planned(listed("EU")), planned(listed("eu"))
    other_column = planned(listed("EU", column="country"))
    ranged = planned(day("2026-11-01", "2026-11-02"))

    assert new_values([fresh, again, other_column, ranged], committed) == [fresh, other_column]


def test_only_committed_values_of_another_query_that_no_planned_partition_lists_have_vanished() -> None:
    committed = [
        stored_checkpoint(ROUTE, listed("  EU", "US"), AT, query_hash=OLD),
        stored_checkpoint(ROUTE, listed("FR"), AT, query_hash=NEW),  # this query's own: not another's
        stored_checkpoint(ROUTE, listed("DE"), AT, query_hash=OLD, status=CheckpointStatus.FAILED),
        stored_checkpoint(ROUTE, listed("IT", column="country"), AT, query_hash=OLD),
    ]

    gone = vanished_values([planned(listed("EU")), planned(listed("US"))], committed)

    assert [(b.column, b.values) for b in gone] == [("region", ("  EU",))]
    assert vanished_values([planned(day("2026-11-01", "2026-11-02"))], committed) == []
