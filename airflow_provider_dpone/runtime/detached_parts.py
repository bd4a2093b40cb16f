"""Whether a part detached from the target lies where a run writes, and the stop it makes (ADR 0093).

``ALTER TABLE ... DETACH PARTITION`` takes a partition's rows out of the table without deleting them. A
``replace_partition`` run over that day (its lookback) found it empty, loaded it again and exited 0; once
the day was attached back it held every row twice, and no later run saw it (the lost-rows check sees fewer
rows, never more). So before arming, a run that writes partitions lists the target table's detached parts
(``DetachedListingSink``) and stops in front of any whose partition may hold rows of a partition it writes
(the whole table for ``full_refresh``, which truncates it). A part whose partition the target cannot map
onto the route's partition column (no partition key, a text or compound key, another column) may hold rows
of any partition: it stops every run that writes the table. So does a part ClickHouse detached itself
(``broken``, ``ignored``, ...): whether its rows are in the table is unknown, and attaching it may put them
there twice. Nothing passes this stop but the operator's ATTACH or DROP DETACHED (the runbook says how).

A target that cannot list detached parts (ClickHouse 18.16) shows a DETACH only as a partition emptied: a
replacing run stops when a partition it moves again held rows at its commit and the target now holds none
of them (the newest ``COUNTED_ON_LEGACY`` such partitions are counted). Retention explains that as well on a
table whose TTL deletes rows, and an operator may have deleted the rows on purpose: with a deleting TTL, or
with ``allow_nonempty_target``, the run goes on and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.detached_part import DetachedPart
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.bounds_coverage import may_overlap
from airflow_provider_dpone.runtime.route_family import never_reached_target
from airflow_provider_dpone.runtime.vanished import bounds_order

#: On a target that cannot list detached parts: how many partitions a replacing run counts, newest first.
COUNTED_ON_LEGACY = 62
#: The runbook section both stops point to.
RUNBOOK = "see `dpone runbook guard`, 'A detached partition in the run's scope'"
#: How many partitions and detached partition IDs a message names.
_NAMED = 5


@dataclass(frozen=True)
class InScope:
    """The detached parts a run would write over: those whose partition's values overlap a partition it
    writes (with those partitions), and those whose partition's values are unknown."""

    mapped: tuple[tuple[DetachedPart, tuple[PartitionBounds, ...]], ...]
    unmapped: tuple[DetachedPart, ...]

    def __bool__(self) -> bool:
        return bool(self.mapped or self.unmapped)


def in_scope(parts: Sequence[DetachedPart], scope: Sequence[PartitionBounds] | None) -> InScope:
    """The parts of ``parts`` within ``scope`` (the bounds a run writes; None: the whole table). A part's
    partition counts as mapped only onto bounds of its own column; every answer errs toward "within"."""
    mapped: list[tuple[DetachedPart, tuple[PartitionBounds, ...]]] = []
    unmapped: list[DetachedPart] = []
    for part in parts:
        covers = part.covers
        if covers is None or (scope is not None and not _same_column(covers, scope)):
            unmapped.append(part)
        elif scope is None:
            mapped.append((part, ()))
        elif hits := tuple(b for b in scope if may_overlap(covers, b)):
            mapped.append((part, hits))
    return InScope(tuple(mapped), tuple(unmapped))


def _same_column(covers: PartitionBounds, scope: Sequence[PartitionBounds]) -> bool:
    """Whether every bounds of ``scope`` selects by ``covers``' column (the whole table counts as any)."""
    column = (covers.column or "").casefold()
    return all(b.kind is BoundsKind.ALL or (b.column or "").casefold() == column for b in scope)


def scope_of(strategy: Strategy, active: Sequence[PlannedPartition]) -> list[PartitionBounds] | None:
    """What a run writes: the whole table for ``full_refresh`` (None), else its partitions' bounds."""
    return None if strategy is Strategy.FULL_REFRESH else [p.bounds for p in active]


def detached_in_scope_error(
    route: RouteIdentity, table: str, found: InScope, manifest_ref: str
) -> DponeError:
    """``native_transfer_target_not_empty`` naming the partitions and the detached partition IDs."""
    parts = [*(p for p, _ in found.mapped), *found.unmapped]
    ids = sorted({p.partition_id or "(unreadable)" for p in parts})
    own_doing = sorted({p.reason for p in parts if p.reason})
    written = sorted({b.label for _, hits in found.mapped for b in hits}, key=str)
    where = (
        f"within partition(s) {_some(written)} of this run"
        if written
        else "within the table this run replaces whole (full_refresh truncates it)"
        if route.strategy is Strategy.FULL_REFRESH and not found.unmapped
        else "that may hold rows of any partition this run writes"
    )
    why = []
    if found.unmapped:
        why.append(
            f"{len(found.unmapped)} of them in partition(s) the table's partition key does not map onto "
            "this route's partitions (no partition key, or a key on another column or of another shape), so "
            "they may hold rows of any of them"
        )
    if own_doing:
        why.append(
            f"ClickHouse detached {sum(1 for p in parts if p.reason)} of them itself ({', '.join(own_doing)}): "
            "whether their rows are in the table is unknown"
        )
    return DponeError(
        ErrorCode.TARGET_NOT_EMPTY,
        f"target table {table} has {len(parts)} detached part(s) (partition(s) {_some(ids)}) {where}: route "
        f"{route.describe()} would load rows there while those stay out of the table, and attaching them "
        "back afterwards would hold the rows twice; nothing was written"
        + "".join(f"; {line}" for line in why),
        details={
            "route": route.describe(),
            "target_table": table,
            "problem": "detached_parts_in_scope",
            "partitions": written[:20],
            "detached_partitions": ids[:20],
            "detached_parts": len(parts),
            "unmapped_parts": len(found.unmapped),
            "reasons": sorted({p.reason or "detached" for p in parts}),
        },
        hint_lines=(
            "nothing was written to the target or the checkpoint store",
            "if those rows belong in the table: attach the partition(s) back (ATTACH PARTITION), then run "
            f"again: dpone run {manifest_ref}",
            "if they do not: drop them from the detached folder (DROP DETACHED PARTITION, or DROP DETACHED "
            "PART), then run again",
            "--allow-nonempty-target does not pass this: the detached parts must be attached or dropped",
            RUNBOOK,
        ),
    )


def emptied_commits(
    strategy: Strategy,
    own: Sequence[PartitionCheckpoint],
    active: Sequence[PlannedPartition],
    count: Callable[[PartitionBounds | None], int],
    history: Callable[[PartitionCheckpoint], Sequence[PartitionCheckpoint]] | None = None,
    count_each: Callable[[Sequence[PartitionBounds]], list[int]] | None = None,
) -> list[tuple[PlannedPartition, int]]:
    """On a target that cannot list detached parts: the partitions a replacing run moves again that held
    rows at their latest commit and of which the target holds none now (with the rows committed), newest
    first, of the newest ``COUNTED_ON_LEGACY`` such partitions (``count``: the target's rows within bounds,
    None the whole table). Bounds an attempt under another definition reached since their commit are not
    among them: its own delete may have emptied them (a replace killed between its delete and its insert,
    then resolved). An append run moves no committed partition again (the lost-rows check counts
    those). Of a ``full_refresh`` only the newest refresh's commits count (it truncated the table: a day an
    earlier refresh committed, gone from the source since and back now, is no detach; seen, it stopped every
    run); a table that holds at least the rows they committed is counted once,
    whole: it held no more than them after the refresh, so none of them can be empty unless rows left.
    ``history``: every record of a checkpoint's partition, oldest first; a partition to move whose latest
    record is an attempt that never reached the target (a source read that broke while staging) is judged
    by the commit under it (seen: such a day, detached, was reloaded, exit 0, and held twice once attached).
    ``count_each``: ``count`` of many bounds at once, in order (``target_counts.rows_within_each``: one
    grouped statement instead of one per partition); without it each is counted alone."""
    if strategy is Strategy.INCREMENTAL_APPEND or not active:
        return []
    if history is not None:
        moving = {p.bounds for p in active}
        own = [
            _standing_commit(c, history) if c.bounds in moving and never_reached_target(c) else c for c in own
        ]
    committed: dict[PartitionBounds, PartitionCheckpoint] = {}
    for checkpoint in own:
        if checkpoint.status is not CheckpointStatus.COMMITTED:
            continue
        known = committed.get(checkpoint.bounds)
        if known is None or checkpoint_moment(checkpoint) > checkpoint_moment(known):
            committed[checkpoint.bounds] = checkpoint
    for checkpoint in own:  # an attempt since the commit that may have run its own delete empties it too
        known = committed.get(checkpoint.bounds)
        if (
            known is not None
            and checkpoint_moment(checkpoint) > checkpoint_moment(known)
            and not never_reached_target(checkpoint)
        ):
            del committed[checkpoint.bounds]
    if strategy is Strategy.FULL_REFRESH:
        # each refresh truncates the table: the commits of refreshes before the newest are gone
        newest = max((c.started_at for c in own if not never_reached_target(c)), default=None)
        committed = {b: c for b, c in committed.items() if newest is None or c.started_at >= newest}
    held = [(p, committed[p.bounds].rows or 0) for p in active if p.bounds in committed]
    held = sorted((h for h in held if h[1] > 0), key=lambda h: bounds_order(h[0].bounds), reverse=True)
    if not held or (strategy is Strategy.FULL_REFRESH and count(None) >= sum(n for _, n in held)):
        return []
    counted = held[:COUNTED_ON_LEGACY]
    bounds = [p.bounds for p, _ in counted]
    now = count_each(bounds) if count_each is not None else [count(one) for one in bounds]
    return [(p, rows) for (p, rows), rows_now in zip(counted, now, strict=True) if rows_now == 0]


def _standing_commit(
    latest: PartitionCheckpoint, history: Callable[[PartitionCheckpoint], Sequence[PartitionCheckpoint]]
) -> PartitionCheckpoint:
    """The newest commit under ``latest`` and any other attempt that never reached the target (``latest``
    itself where anything else lies between: an attempt that reached the target may have emptied it)."""
    for checkpoint in reversed(history(latest)):
        if checkpoint.status is CheckpointStatus.COMMITTED:
            return checkpoint
        if not never_reached_target(checkpoint):
            break
    return latest


def emptied_text(route: RouteIdentity, table: str, emptied: Sequence[tuple[PlannedPartition, int]]) -> str:
    """What a run tells of committed partitions it finds empty on a target that cannot list detached parts."""
    labels = _some([p.bounds.label for p, _ in emptied])
    rows = sum(n for _, n in emptied)
    return (
        f"{len(emptied)} partition(s) route {route.describe()} moves again ({labels}) held {rows} row(s) at "
        f"their commit and target table {table} holds none of them now, and this target cannot list "
        "detached parts (ClickHouse 18.16 has no system.detached_parts): if they were detached (ALTER TABLE "
        "... DETACH PARTITION), loading them now and attaching them back later would hold the rows twice"
    )


def emptied_error(
    route: RouteIdentity, table: str, emptied: Sequence[tuple[PlannedPartition, int]], manifest_ref: str
) -> DponeError:
    """``native_transfer_target_not_empty`` for committed partitions found empty on such a target."""
    return DponeError(
        ErrorCode.TARGET_NOT_EMPTY,
        emptied_text(route, table, emptied) + "; nothing was written",
        details={
            "route": route.describe(),
            "target_table": table,
            "problem": "emptied_where_detached_parts_are_unlisted",
            "partitions": [p.bounds.label for p, _ in emptied[:20]],
            "committed_rows": [n for _, n in emptied[:20]],
        },
        hint_lines=(
            "nothing was written to the target or the checkpoint store",
            "if someone detached them: attach them back (ALTER TABLE ... ATTACH PARTITION), then run again "
            f"(the run replaces the rows it finds): dpone run {manifest_ref}",
            "if the rows were deleted on purpose and nothing of them is detached (the table's detached folder "
            f"on the server holds none): dpone run {manifest_ref} --allow-nonempty-target",
            RUNBOOK,
        ),
    )


def _some(labels: Sequence[str]) -> str:
    return ", ".join(labels[:_NAMED]) + (", ..." if len(labels) > _NAMED else "")
