"""Read-only evidence for an operator deciding how to resolve a blocked partition.

Shows, per blocked partition, the rows the attempt recorded beside the rows the source and the target
hold within the partition's bounds. It never decides: the operator does. A partition whose attempt wrote
another target than the one counted (another environment's connection of the same name in the on-call
shell) is marked: its target count is not the attempt's, and ``guard resolve`` refuses it. Inspecting
refuses nothing (it only reads) but says so: it printed ``target_rows 0`` for another chDB folder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.ports.source import Source
from airflow_provider_dpone.runtime.guard.resolution import (
    CommitsBySource,
    blocked_partitions,
    other_routes_rows,
    other_routes_rows_lost,
    other_routes_within,
)
from airflow_provider_dpone.runtime.target_counts import TargetCounts


@dataclass(frozen=True)
class InspectionRow:
    partition_id: str
    label: str
    phase: str
    checkpoint_batch_id: str | None
    attempt_rows: int | None
    source_rows: int | None
    target_rows: int | None
    #: the route whose attempt is blocked (another route of the target, in a fan-in)
    route: str = ""
    #: rows routes of other source tables committed within the bounds: in ``target_rows``, not the attempt's
    other_routes_rows: int | None = 0
    #: those routes (``route.describe()``), where some of their rows there are gone (an append attempt's
    #: bounds hold fewer rows than they committed: a delete by the bounds alone took them); else empty.
    #: ``guard resolve`` refuses either answer then: nothing would load their rows again
    other_routes_rows_lost_by: tuple[str, ...] = ()
    #: the attempt wrote another target than the one counted here (``guard resolve`` refuses it)
    target_elsewhere: bool = False

    def as_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def inspect_blocked(
    latest: Sequence[PartitionCheckpoint],
    source: Source | None,
    sink: Sink,
    target_table: str,
    route: RouteIdentity | None = None,
    *,
    written_elsewhere: Callable[[PartitionCheckpoint], bool] | None = None,
) -> list[InspectionRow]:
    """``route``: the manifest's; its source is counted only for that route's partitions (another route's
    blocked partition reads another source table: counting this one's showed a misleading match).
    ``written_elsewhere``: whether an attempt wrote another target than ``sink`` reaches (as for
    ``resolve``)."""
    by_id = {c.partition_id: c for c in latest}
    commits = CommitsBySource(latest)
    counts = TargetCounts(sink, target_table)
    rows: list[InspectionRow] = []
    for block in blocked_partitions(latest):
        checkpoint = by_id[block.partition_id]
        own = route is None or checkpoint.route == route
        source_rows = source.count(checkpoint.bounds) if source is not None and own else None
        target_rows = counts.within(checkpoint.bounds)  # None where the table cannot select them
        others = commits.of_others(checkpoint)
        others_rows = other_routes_rows(checkpoint, others)
        lost = checkpoint.route.strategy is Strategy.INCREMENTAL_APPEND and other_routes_rows_lost(
            target_rows, others_rows
        )
        rows.append(
            InspectionRow(
                partition_id=block.partition_id,
                label=block.label,
                phase=block.phase,
                checkpoint_batch_id=block.checkpoint_batch_id,
                attempt_rows=checkpoint.rows,
                source_rows=source_rows,
                target_rows=target_rows,
                route=checkpoint.route.describe(),
                other_routes_rows=others_rows,
                other_routes_rows_lost_by=tuple(other_routes_within(checkpoint, others)) if lost else (),
                target_elsewhere=written_elsewhere is not None and written_elsewhere(checkpoint),
            )
        )
    return rows


def another_target_lines(rows: Sequence[InspectionRow], shown: int = 5) -> list[str]:
    """What ``guard inspect`` says of the partitions whose attempt wrote another target than the one it
    counted (empty when none did): their target counts are not the attempt's. Names ``shown`` of them."""
    elsewhere = [r.label for r in rows if r.target_elsewhere]
    if not elsewhere:
        return []
    labels = ", ".join(elsewhere[:shown]) + (
        f" and {len(elsewhere) - shown} more" if len(elsewhere) > shown else ""
    )
    return [
        f"{len(elsewhere)} blocked partition(s) ({labels}) were written to another target than the one the sink "
        "connection leads to now (another server, database or chDB folder): their target_rows are that "
        "target's, not the attempt's, and `dpone guard resolve` refuses them",
        "  point the sink connection at the target the run wrote (check AIRFLOW_CONN_* in this shell: another "
        "environment's connection of the same name leads elsewhere), then inspect again",
        "  if that target itself moved (a new host name, a moved chDB folder): count it yourself, then resolve "
        "with --force",
    ]
