"""Committed partitions the source no longer holds any row of, for ``replace_partition``'s lookback.

The source plans partitions from the values it holds, so a day whose rows were all deleted is no partition
any more. ``lookback`` promises that deleted rows of the N most recent committed partitions are picked up,
but a wholly emptied day was never among them: its rows stayed in the target for good while the lookback
moved older days instead (seen: the demo's last day deleted in the source, 33 rows left in the target,
exit 0). Such a partition is one of the route's own COMMITTED checkpoints under the current definition
(same query and schema hash, bounds of the current partitioning's shape) that no planned partition is; while
the target still holds rows of it and it is newer than the oldest of the lookback's N partitions, it runs
beside them (taking no slot: ``resume_planner._look_back``) and is replaced by what the source holds within
its bounds: nothing. The same holds for units of earlier definitions' commits (``units_of_other_definitions``).

Only a partition not older than the oldest one the source still plans counts as deleted. One older than all
of them has rolled out of a source that keeps a window (a staging table cleared each night, a retention
job): emptying it in the target would delete history the target is meant to keep, so it is left alone, as
is everything when the source plans nothing at all (an empty source is as likely a reload in progress).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date, timedelta

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind
from airflow_provider_dpone.contracts.partition import (
    BoundsKind,
    PartitionBounds,
    PlannedPartition,
    partition_id_for,
)
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.runtime.unrecorded import comparable, units_of


def vanished_committed(
    route: RouteIdentity,
    checkpoints: Sequence[PartitionCheckpoint],
    planned: Sequence[PlannedPartition],
    query_hash: str,
    schema_hash: str,
    partitioning: Partitioning,
) -> list[PlannedPartition]:
    """The route's COMMITTED partitions of the current definition that the source no longer plans.

    ``checkpoints``: the route's latest checkpoints under its canonical spelling. A checkpoint qualifies
    only when its ID is the one the current definition gives its bounds and the bounds are what the
    current partitioning makes (a day, a month, an aligned range of ``size``): a partition of an older
    partitioning never comes back this way."""
    if partitioning.lookback is None or partitioning.column is None or not planned:
        return []
    oldest = min(bounds_order(p.bounds) for p in planned)
    return [
        as_planned(checkpoint)
        for checkpoint in _unplanned_commits(
            route, checkpoints, planned, query_hash, schema_hash, partitioning
        )
        if bounds_order(checkpoint.bounds) >= oldest  # an older one rolled out of a windowed source: kept
    ]


def rolled_out_within_reach(
    route: RouteIdentity,
    checkpoints: Sequence[PartitionCheckpoint],
    planned: Sequence[PlannedPartition],
    query_hash: str,
    schema_hash: str,
    partitioning: Partitioning,
) -> list[PlannedPartition]:
    """The committed partitions ``vanished_committed`` keeps as rolled out (older than every partition the
    source plans) that the lookback would still reach: the source plans fewer than its N partitions, and these
    are the newest of the rest. Their rows may have moved to a newer partition instead of leaving the source
    (an ``UPDATE`` of the partition column): then the target holds them twice, and without a key no run can
    tell the two apart (seen: the oldest day's rows moved to the next day, 18 target rows against 15, exit 0,
    no word). The caller says so where the target still holds their rows."""
    if partitioning.lookback is None or partitioning.column is None or not planned:
        return []
    room = partitioning.lookback - len(planned)
    if room < 1:
        return []
    oldest = min(bounds_order(p.bounds) for p in planned)
    older = sorted(
        (
            checkpoint
            for checkpoint in _unplanned_commits(
                route, checkpoints, planned, query_hash, schema_hash, partitioning
            )
            if bounds_order(checkpoint.bounds) < oldest
        ),
        key=lambda checkpoint: bounds_order(checkpoint.bounds),
        reverse=True,
    )
    return [as_planned(checkpoint) for checkpoint in older[:room] if checkpoint.rows]


def as_planned(checkpoint: PartitionCheckpoint) -> PlannedPartition:
    """A committed partition of the current definition as one to plan again (its hashes are the route's)."""
    return PlannedPartition(
        partition_id=checkpoint.partition_id,
        bounds=checkpoint.bounds,
        query_hash=checkpoint.query_hash,
        schema_hash=checkpoint.schema_hash,
    )


def _unplanned_commits(
    route: RouteIdentity,
    checkpoints: Sequence[PartitionCheckpoint],
    planned: Sequence[PlannedPartition],
    query_hash: str,
    schema_hash: str,
    partitioning: Partitioning,
) -> Iterator[PartitionCheckpoint]:
    """The route's COMMITTED checkpoints of the current definition (its ID, hashes and partitioning's shape)
    that no planned partition is."""
    planned_ids = {p.partition_id for p in planned}
    for checkpoint in checkpoints:
        if (
            checkpoint.status is CheckpointStatus.COMMITTED
            and checkpoint.partition_id not in planned_ids
            and checkpoint.query_hash == query_hash
            and checkpoint.schema_hash == schema_hash
            and shaped_by(checkpoint.bounds, partitioning)
            and partition_id_for(route, query_hash, schema_hash, checkpoint.bounds) == checkpoint.partition_id
        ):
            yield checkpoint


def units_of_other_definitions(
    route: RouteIdentity,
    checkpoints: Sequence[PartitionCheckpoint],
    planned: Sequence[PlannedPartition],
    query_hash: str,
    schema_hash: str,
    partitioning: Partitioning,
    floor: tuple[int, str],
    kept: list[PlannedPartition] | None = None,
) -> Iterator[PlannedPartition]:
    """Partitions of the current definition within the bounds of COMMITTED partitions of another definition
    (another query or schema, or another partitioning, or the same source table's route under another
    strategy, or another spelling) that the source no longer plans and this definition never wrote: where the source may have deleted rows that other definition loaded. Each old partition's
    units come newest first, down to ``floor`` (in ``bounds_order``; at least the oldest planned partition,
    as there: a windowed source).

    After a manifest edit every partition the source still plans is new and replaces its own bounds, but an
    old partition the source emptied (or the part of an old month no new day covers) was never among them:
    its rows stayed in the target for good, while the run said the old definition's rows were deleted. A
    caller keeps those units that hold target rows (an empty one, a weekend or a future day, needs nothing)
    and runs them beside the lookback's partitions like ``vanished_committed``'s.

    Units of a commit made under another ``source.query`` (or columns) above the newest partition planned
    now go to ``kept`` instead, and are not emptied: a query templated per run (``WHERE order_date =
    '{{ ds }}'``, as the Airflow guide shows) is another definition on every run, and a run of an older date
    took every newer day for deleted and emptied it (exit 0, 20 of 40 rows left)."""
    if partitioning.lookback is None or partitioning.column is None or not planned:
        return
    template = planned[0].bounds
    newest = max(bounds_order(p.bounds) for p in planned)
    known = {p.partition_id for p in planned} | {c.partition_id for c in checkpoints}
    for checkpoint in checkpoints:
        bounds = checkpoint.bounds
        if (
            checkpoint.status is not CheckpointStatus.COMMITTED
            or (
                checkpoint.route == route
                and checkpoint.query_hash == query_hash
                and checkpoint.schema_hash == schema_hash
                and shaped_by(bounds, partitioning)
            )
            or not comparable(bounds, template)
        ):
            continue
        for unit in units_within(bounds, template, partitioning):
            if bounds_order(unit) < floor:
                break
            unit_id = partition_id_for(route, query_hash, schema_hash, unit)
            if unit_id not in known:
                known.add(unit_id)
                found = PlannedPartition(
                    partition_id=unit_id, bounds=unit, query_hash=query_hash, schema_hash=schema_hash
                )
                if checkpoint.query_hash != query_hash and bounds_order(unit) > newest:
                    if kept is not None:
                        kept.append(found)
                    continue
                yield found


def units_within(
    bounds: PartitionBounds, template: PartitionBounds, partitioning: Partitioning
) -> Iterator[PartitionBounds]:
    """The current partitioning's bounds overlapping ``bounds``, newest first, spelled as the planner spells
    them (``template``: one planned partition's bounds; ``unrecorded.Units`` spells them)."""
    units = units_of(partitioning, template)
    if units is None or bounds.lower is None or bounds.upper is None:
        return
    try:
        first, end = units.index_of(bounds.lower), units.end_of(bounds.upper)
        for index in range(end - 1, first - 1, -1):
            yield units.unit(index)
    except (ValueError, OverflowError):  # not ISO, or a calendar's edge
        return


def shaped_by(bounds: PartitionBounds, partitioning: Partitioning) -> bool:
    """Whether the partitioning would plan exactly these bounds for a value within them."""
    column = partitioning.column
    if bounds.kind is not BoundsKind.RANGE or column is None or bounds.column is None:
        return False
    if bounds.column.casefold() != column.casefold() or bounds.lower is None or bounds.upper is None:
        return False
    try:
        if partitioning.kind is PartitionKind.DAY:
            lower = date.fromisoformat(bounds.lower)
            return (
                bounds.value_type == "date"
                and bounds.upper == (lower + timedelta(days=1)).isoformat()
                and bounds.lower == lower.isoformat()
                and bounds.label == f"{bounds.column}={bounds.lower}"
            )
        if partitioning.kind is PartitionKind.MONTH:
            lower = date.fromisoformat(bounds.lower)
            following = (
                date(lower.year + 1, 1, 1) if lower.month == 12 else date(lower.year, lower.month + 1, 1)
            )
            return (
                bounds.value_type == "date"
                and lower.day == 1
                and bounds.lower == lower.isoformat()
                and bounds.upper == following.isoformat()
                and bounds.label == f"{bounds.column}={lower.year:04d}-{lower.month:02d}"
            )
        if partitioning.kind is PartitionKind.INTEGER_RANGE and partitioning.size is not None:
            start, size = int(bounds.lower), partitioning.size
            return (
                bounds.value_type == "integer"
                and start % size == 0
                and bounds.lower == str(start)
                and bounds.upper == str(start + size)
                and bounds.label == f"{bounds.column}=[{start},{start + size})"
            )
    except ValueError:
        return False
    return False


def bounds_order(bounds: PartitionBounds) -> tuple[int, str]:
    """The planner's order of range bounds of one partitioning: integers by value, ISO dates as text."""
    if bounds.value_type == "integer" and bounds.lower is not None:
        try:
            return (int(bounds.lower), "")
        except ValueError:
            pass
    return (0, bounds.lower or "")
