"""Rows a ``replace_partition`` run would delete and never load again: those an earlier definition of the
route committed within a partition this run replaces that this definition's read leaves out.

A ``source.query`` templated per run (an Airflow data interval) is another definition on every run. When its
window covers part of a partition (an hourly schedule on day partitions, a daily DAG in a zone other than
UTC), each run replaced the whole day with its part and deleted what the previous run loaded there, exit 0.
Counts cannot tell a window's exclusion from a filter's (a soft delete, a status, a region); running both
reads on the source can: each definition a run commits under is kept in the checkpoint store, and before
arming, the earlier definition's read within each partition is compared with this one's (as multisets,
read-only, ``DefinitionComparingSource``). A row either read leaves out (deleted, soft-deleted, re-statused
at the source) is no loss; a row only the earlier read returns is, and stops the run (``PreArmChecks``).

Only commits whose rows are still in the target count: one that a later commit of the route replaced over
the partition (or over the whole of the earlier commit) is gone already, whatever its definition read (an
operator let a run drop its rows with ``--allow-nonempty-target``: the next run must not stop on them).
Where the comparison cannot be made (a commit of an earlier release, whose definition was never kept; an
earlier read that fails now; a column type the engine cannot compare) the run goes on, saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.partition import PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.read_definition import LeftOutCounts, NotCompared, ReadDefinition
from airflow_provider_dpone.ports.source import DefinitionsNotComparable, Source
from airflow_provider_dpone.runtime.bounds_coverage import fully_covered
from airflow_provider_dpone.runtime.route_identity import IdentityOverlap

#: Kept definitions by query hash, for the hashes asked (one store read).
DefinitionLookup = Callable[[Sequence[str]], Mapping[str, ReadDefinition]]


@dataclass(frozen=True)
class DefinitionComparison:
    """What comparing the earlier definitions' reads with this one's found, partition by partition."""

    #: partitions where an earlier read returns rows this one does not, with how many (counted one by one
    #: only until ``PARTITIONS_NAMED`` are found: ``complete`` says whether others may hold such rows too)
    left_out: tuple[tuple[PlannedPartition, int], ...] = ()
    #: partitions (none of ``left_out``) some earlier definition of which could not be compared, and why
    not_compared: tuple[tuple[PlannedPartition, NotCompared], ...] = ()
    #: the rows left out in all (per earlier definition and batch of partitions, each as often as missing)
    rows: int = 0
    #: whether ``left_out`` names every partition holding such rows
    complete: bool = True

    def reasons(self) -> list[NotCompared]:
        """Why comparisons could not be made, each once, in the order met."""
        return list(dict.fromkeys(reason for _, reason in self.not_compared))


def compare_with_earlier(
    overlaps: Sequence[IdentityOverlap],
    latest: Mapping[str, PartitionCheckpoint],
    definitions: DefinitionLookup | None,
    source: Source | None,
) -> DefinitionComparison:
    """Compare, on the source, each earlier definition whose commit still stands within an overlapping
    partition (``overlaps``: a replacing run's partitions to move over commits of another identity) with
    this run's read. ``latest``: the latest checkpoint of each planned partition, by ID (its own earlier
    commit replaced the other definition's too). Same-query overlaps (a schema or partitioning change) read
    the same rows and are not compared. One store read for every definition asked; one count per earlier
    definition and batch of partitions on the source."""
    regions: dict[str, list[tuple[PlannedPartition, tuple[PartitionBounds, ...]]]] = {}
    for overlap in overlaps:
        part = overlap.partition
        own = latest.get(part.partition_id)
        later = [*overlap.committed, *((own,) if own is not None else ())]
        standing = [
            c
            for c in overlap.committed
            if c.query_hash != part.query_hash and not _replaced_since(c, part.bounds, later)
        ]
        by_hash: dict[str, list[PartitionCheckpoint]] = {}
        for checkpoint in standing:
            by_hash.setdefault(checkpoint.query_hash, []).append(checkpoint)
        for query_hash, commits in by_hash.items():
            asked = regions.setdefault(query_hash, [])
            if any(fully_covered(part.bounds, [c.bounds]) for c in commits):
                asked.append((part, (part.bounds,)))  # the whole partition: its own bounds say it all
            else:  # an earlier commit of other bounds within it: only what that commit loaded
                asked.extend((part, (part.bounds, c.bounds)) for c in commits)
    if not regions:
        return DefinitionComparison()
    kept = definitions(list(regions)) if definitions is not None else {}
    count = getattr(source, "rows_left_out", None)
    total, complete = 0, True
    left: dict[str, int] = {}
    parts: dict[str, PlannedPartition] = {}
    failed: dict[str, NotCompared] = {}
    for query_hash, asked in regions.items():
        for part, _ in asked:
            parts.setdefault(part.partition_id, part)
        earlier = kept.get(query_hash)
        reason: NotCompared | None = None
        if earlier is None:
            reason = NotCompared.NOT_RECORDED
        elif not callable(count):
            reason = NotCompared.SOURCE_CANNOT_COMPARE
        else:
            try:
                counted: LeftOutCounts = count(earlier, [region for _, region in asked])
            except DefinitionsNotComparable as exc:
                reason = exc.reason
            else:
                total += counted.total
                # regions past those a stop names were not counted alone (nor any, where the source
                # changed between the statements): other partitions may hold such rows
                complete &= counted.complete and (counted.total == 0 or any(counted.regions))
                for (part, _), rows in zip(asked, counted.regions, strict=True):
                    if rows:
                        left[part.partition_id] = left.get(part.partition_id, 0) + rows
        if reason is not None:
            for part, _ in asked:
                failed.setdefault(part.partition_id, reason)
    order = [o.partition.partition_id for o in overlaps if o.partition.partition_id in parts]
    return DefinitionComparison(
        left_out=tuple((parts[i], left[i]) for i in order if left.get(i, 0) > 0),
        not_compared=tuple((parts[i], failed[i]) for i in order if i in failed and not left.get(i, 0)),
        rows=total,
        complete=complete,
    )


def still_standing(
    overlaps: Sequence[IdentityOverlap], latest: Mapping[str, PartitionCheckpoint]
) -> list[IdentityOverlap]:
    """The overlaps where an earlier commit's rows may still be in the target: no later commit of the route
    replaced it over the partition (as :func:`compare_with_earlier` counts them; ``latest`` likewise). Each
    run after a query edit said the definition changed over the lookback's days, long after every one of
    them was replaced under the new definition."""
    standing: list[IdentityOverlap] = []
    for overlap in overlaps:
        own = latest.get(overlap.partition.partition_id)
        later = [*overlap.committed, *((own,) if own is not None else ())]
        if any(not _replaced_since(c, overlap.partition.bounds, later) for c in overlap.committed):
            standing.append(overlap)
    return standing


def _replaced_since(
    earlier: PartitionCheckpoint, bounds: PartitionBounds, later: Sequence[PartitionCheckpoint]
) -> bool:
    """Whether a commit of the route made after ``earlier`` replaced its rows within ``bounds``: it covers
    the partition, or the whole of ``earlier``'s."""
    moment = checkpoint_moment(earlier)
    return any(
        other is not earlier
        and other.status is CheckpointStatus.COMMITTED
        and checkpoint_moment(other) > moment
        and (fully_covered(bounds, [other.bounds]) or fully_covered(earlier.bounds, [other.bounds]))
        for other in later
    )
