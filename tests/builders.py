"""Builders shared by tests: partition bounds and target permits as the product's own code makes them."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
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
