"""Rows another source's route committed into the target are never deleted by this route's strategy.

A route is per source table, so several source tables may feed one target table (a fan-in), each route
appending its own rows. ``full_refresh`` truncates the table and ``replace_partition`` deletes every row
within the armed partitions' bounds, whichever route wrote them. Run over a target into which another
source's route has committed rows, they delete those rows while that route's checkpoints still say
COMMITTED: it skips them on every later run, and nothing ever loads them again. Seen: ``main.orders_b``
with ``replace_partition`` into the demo's target deleted all 20,000 rows ``main.orders`` had appended; the
next ``main.orders`` run skipped every partition (exit 0).

Routes of the *same* source table under another strategy or spelling are not "another source": a
``full_refresh`` replacing what the same table's ``incremental_append`` route loaded is what the user asked
for. Overlap is decided by ``bounds_coverage.may_overlap``, which errs toward "they may overlap".
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import PlannedPartition
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.ports.route_naming import RouteNaming
from airflow_provider_dpone.runtime.bounds_coverage import OverlapIndex
from airflow_provider_dpone.runtime.route_family import committed_by_source


def other_sources_in_scope(
    route: RouteIdentity,
    active: Sequence[PlannedPartition],
    target_wide: Sequence[PartitionCheckpoint],
    naming: RouteNaming,
) -> list[PartitionCheckpoint]:
    """COMMITTED checkpoints of other source tables' routes whose rows this run's scope would delete.

    ``route`` is canonical; ``active`` are the partitions this run arms. Empty for an append route (it
    deletes nothing) and whenever no other source writes the target (the common case costs one pass)."""
    if route.strategy is Strategy.INCREMENTAL_APPEND or not active:
        return []
    _, others = committed_by_source(target_wide, route.source_table, naming)
    if route.strategy is Strategy.FULL_REFRESH:
        return others  # the truncate removes every row of the table
    return within_partitions(others, active)


def within_partitions(
    checkpoints: Sequence[PartitionCheckpoint], active: Sequence[PlannedPartition]
) -> list[PartitionCheckpoint]:
    """Those of ``checkpoints`` whose bounds may overlap one of ``active``'s (``may_overlap``, asked of an
    index of ``active``'s bounds rather than of every pair)."""
    if not checkpoints or not active:
        return []
    index = OverlapIndex([p.bounds for p in active])
    return [c for c in checkpoints if index.first(c.bounds) is not None]
