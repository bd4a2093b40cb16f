"""What ``dpone replay status`` says of a sealed operation: published only where its partitions committed."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.replay.scan import OperationRecord, OperationState
from tests.builders import day, stored_checkpoint

ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)
AT = datetime(2026, 12, 1, tzinfo=UTC)


def sealed(status: CheckpointStatus) -> OperationRecord:
    partitions = (stored_checkpoint(ROUTE, day("2026-11-01", "2026-11-02"), AT, status=status),)
    return OperationRecord(
        operation_id="op", partitions=partitions, state=OperationState.SEALED_CORE, published=True
    )


def test_a_sealed_operation_whose_partitions_never_committed_is_not_said_to_have_published() -> None:
    """Red before: a run killed right after arming read "it published", with none of its rows in the target."""
    assert sealed(CheckpointStatus.COMMITTED).reason().startswith("it published")
    armed = sealed(CheckpointStatus.EXPORTED).reason()
    assert "may have reached the target" in armed and "guard inspect" in armed
