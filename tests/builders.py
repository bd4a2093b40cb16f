"""Builders shared by tests: partition bounds and target permits as the product's own code makes them, and
the day-partitioned SQLite manifest several black-box suites run."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, sha256_tag
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy

BATCH = "sha256:" + "ab" * 32


def day(lower: str, upper: str, column: str = "order_date", *, label: str | None = None) -> PartitionBounds:
    """A date range ``[lower, upper)`` on ``column`` (a day, a month, or any run of days)."""
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column=column,
        lower=lower,
        upper=upper,
        value_type="date",
        label=label or lower,
    )


def stored_checkpoint(
    route: RouteIdentity,
    bounds: PartitionBounds,
    at: datetime,
    *,
    query_hash: str = "sha256:" + "c" * 64,
    status: CheckpointStatus = CheckpointStatus.COMMITTED,
    rows: int = 10,
) -> PartitionCheckpoint:
    """A checkpoint as a store returns it (one moment, as the guard's transitions write it); its partition
    ID is a digest of the route, the query hash and the bounds, so distinct inputs never collide."""
    return PartitionCheckpoint(
        partition_id=sha256_tag(f"{route.key()}|{query_hash}|{bounds.label}"),
        route=route,
        run_id="earlier",
        status=status,
        started_at=at,
        completed_at=at,
        rows=rows,
        query_hash=query_hash,
        schema_hash=query_hash,
        bounds=bounds,
    )


def chdb_endpoint(path: Path) -> EndpointDescriptor:
    """An embedded chDB target at ``path`` (a test's own directory)."""
    return EndpointDescriptor(
        name="t", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(path)
    )


def permit_for(
    table: str,
    strategy: Strategy = Strategy.INCREMENTAL_APPEND,
    bounds: Sequence[PartitionBounds] = (),
    *,
    batch: str = BATCH,
    open_: bool = True,
) -> TargetPermit:
    """A permit for ``table`` over ``bounds``, opened as only the guard lifecycle opens one in product code."""
    permit = TargetPermit(
        route=RouteIdentity(source_table="dbo.orders", target_table=table, strategy=strategy),
        checkpoint_batch_id=batch,
        partitions=tuple((f"sha256:{i:064x}", b) for i, b in enumerate(bounds)),
    )
    if open_:
        permit._open_window()
    return permit


def sqlite_day_manifest(
    base: Path,
    table: str,
    *,
    state: str,
    sink: str = "chdb:///clickhouse",
    target: str | None = None,
    export: str = "lazy_plan",
    load: str = "direct",
    strategy: str = "replace_partition",
    order_by: str = "id",
    query: str = "",
) -> Path:
    """A new manifest file in ``base`` moving ``table`` of ``base/source.sqlite`` (or ``query`` over it),
    partitioned by day on its ``day`` column, into ``target`` (``demo.<table>``) over ``sink``, with its
    checkpoints in connection ``state``."""
    path = base / f"{table}-{uuid.uuid4().hex[:6]}.yaml"
    query_line = f'\n  query: "{query}"' if query else ""
    path.write_text(
        f"""
kind: native_transfer
name: {table}_by_day
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: {table}{query_line}
  partitioning: {{kind: day, column: day}}
  export: {export}
sink:
  type: clickhouse
  connection: {sink}
  table: {target or f"demo.{table}"}
  strategy: {strategy}
  load: {load}
  order_by: [{order_by}]
checkpoints:
  connection: {state}
""",
        encoding="utf-8",
    )
    return path
