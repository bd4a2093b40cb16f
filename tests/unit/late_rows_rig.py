"""The late-rows rig shared by the unit tests of ``settle``, ``lookback``, vanished and still-filling partitions.

Four planned days (11-28 .. 12-01) of one route, committed checkpoints of them, a one-line summary of the
planner's decisions, and an engine over the port doubles whose manifest carries partitioning keys.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import PlannedPartition, partition_id_for
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.transfer import TransferEngine
from tests.doubles import (
    FixedClock,
    InMemoryCheckpointStore,
    MemorySource,
    RecordingSink,
    manifest_dict,
    orders_rows,
    transfer_engine,
)

UTC = dt.timezone.utc
ROUTE = RouteIdentity(
    source_table="dbo.orders", target_table="analytics.orders", strategy=Strategy.REPLACE_PARTITION
)
DAYS = [dt.date(2026, 11, 28) + dt.timedelta(days=i) for i in range(4)]  # 11-28 .. 12-01


def planned_days() -> list[PlannedPartition]:
    """The four DAYS, planned on ROUTE under fixed query and schema hashes."""
    return [
        PlannedPartition(
            partition_id=partition_id_for(ROUTE, "sha256:q", "sha256:s", bounds),
            bounds=bounds,
            query_hash="sha256:q",
            schema_hash="sha256:s",
        )
        for bounds in day_partitions("order_date", DAYS)
    ]


def committed_checkpoint(part: PlannedPartition, run_id: str = "run-0") -> PartitionCheckpoint:
    """``part`` as committed by ``run_id`` on 2026-11-01."""
    at = dt.datetime(2026, 11, 1, tzinfo=UTC)
    return PartitionCheckpoint.model_validate(
        {
            "partition_id": part.partition_id,
            "route": ROUTE,
            "run_id": run_id,
            "status": CheckpointStatus.COMMITTED,
            "started_at": at,
            "completed_at": at,
            "rows": 3,
            "bytes": 30,
            "query_hash": part.query_hash,
            "schema_hash": part.schema_hash,
            "bounds": part.bounds,
            "diagnostics": {},
        }
    )


def decision_summary(decisions: list[Any]) -> list[tuple[str, str, str]]:
    """Each decision as (lower bound, action, reason)."""
    return [(d.partition.bounds.lower, d.action.value, d.reason.value) for d in decisions]


def late_rows_engine(
    store: InMemoryCheckpointStore, sink: RecordingSink, clock: FixedClock, **partitioning: Any
) -> TransferEngine:
    """An engine over three days of orders whose manifest partitioning carries ``partitioning`` (settle,
    lookback); ``replace_partition`` when a lookback is given, else ``incremental_append``."""
    strategy = "replace_partition" if "lookback" in partitioning else "incremental_append"
    data = manifest_dict(strategy=strategy)
    data["source"]["partitioning"].update(partitioning)  # type: ignore[index]
    return transfer_engine(
        store=store,
        source=MemorySource(orders_rows(days=3)),
        sink=sink,
        clock=clock,
        manifest=data,
        manifest_ref="manifests/orders.yaml",
    )
