"""A route whose identity changed must not append what its old identity already committed.

A partition ID is a digest over the route, the query hash, the schema hash and the bounds, so pinning
``source.columns``, editing ``source.query`` or changing the partitioning gives every partition a new ID,
and no checkpoint finds the rows the old IDs committed. On ``incremental_append`` a run would append them
again. A strategy switched back to ``incremental_append`` is the same case: the rows the same source
table's route under the other strategy committed meanwhile have no checkpoint of the append route. This
module finds the new partitions that overlap partitions committed under another identity, so the engine
stops before it writes (``native_transfer_route_identity_changed``), and records the operator's deliberate
``dpone guard rebaseline``: new partitions the old committed ones hold are recorded as committed, with an
audit that names the old partitions; partially covered ones stay blocking.

Bounds alone prove what an old partition held only when they are the new partition's own bounds. An old
partition *wider* than the new one (the whole table, a month over a day) was committed at one moment:
days that reached the source after it are within its bounds and were never moved. So a new partition whose
bounds hold no row in the target is no overlap at all (the engine drops it before stopping: appending it
duplicates nothing), and one covered only by wider old partitions is recorded when the target holds
exactly the source's rows within its bounds (read-only counts), else it stays blocking.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import JsonValue

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.runtime.bounds_coverage import OverlapIndex, fully_covered
from airflow_provider_dpone.runtime.guard.batch_id import checkpoint_batch_id

REBASELINE_KEY = "rebaseline"
MAX_REASON_CHARS = 500
#: Overlapping partitions listed in an error's text; the JSON details carry all of them.
_LISTED = 10


@dataclass(frozen=True)
class IdentityOverlap:
    """One partition of the new identity that may select rows committed under an old one."""

    partition: PlannedPartition
    committed: tuple[PartitionCheckpoint, ...]
    covered: bool
    #: the strategy of the route planning ``partition`` (None: not compared)
    strategy: Strategy | None = None
    #: set when the target holds no row within the partition but the views it feeds received the rows an
    #: old partition inside it committed (retention emptied the table): appending would feed them again
    views_fed: tuple[str, ...] = ()

    @property
    def changed(self) -> tuple[str, ...]:
        """What differs between the new partition and the old committed ones, in manifest words."""
        found: list[str] = []
        if self.strategy is not None and any(c.route.strategy is not self.strategy for c in self.committed):
            found.append("strategy")  # sink.strategy: the same source table's route under another one
        if any(c.query_hash != self.partition.query_hash for c in self.committed):
            found.append("query")  # source.query, source.columns or the table read
        if any(c.schema_hash != self.partition.schema_hash for c in self.committed):
            found.append("schema")  # the columns or their types
        if any(c.bounds != self.partition.bounds for c in self.committed):
            found.append("partitioning")
        return tuple(found)

    def as_json(self) -> dict[str, object]:
        return {
            "partition_id": self.partition.partition_id,
            "bounds": self.partition.bounds.label,
            "covered": self.covered,
            "changed": list(self.changed),
            "committed_partitions": [
                {"partition_id": c.partition_id, "bounds": c.bounds.label, "rows": c.rows}
                for c in self.committed
            ],
            **({"views_fed": list(self.views_fed)} if self.views_fed else {}),
        }


def find_overlaps(
    active: Sequence[PlannedPartition],
    other_committed: Sequence[PartitionCheckpoint],
    strategy: Strategy | None = None,
) -> list[IdentityOverlap]:
    """Each active partition that may select rows of a partition committed under another identity.

    ``strategy``: the planning route's, so a sibling route's commit reads as a changed strategy. The
    commits are indexed (``bounds_coverage.OverlapIndex``: what ``may_overlap`` says of each pair, without
    asking it of every pair)."""
    if not active or not other_committed:
        return []
    index = OverlapIndex([c.bounds for c in other_committed])
    found: list[IdentityOverlap] = []
    for part in active:
        hits = tuple(other_committed[i] for i in index.overlapping(part.bounds))
        if hits:
            covered = fully_covered(part.bounds, [c.bounds for c in hits])
            found.append(IdentityOverlap(partition=part, committed=hits, covered=covered, strategy=strategy))
    return found


def changed_summary(overlaps: Sequence[IdentityOverlap], same_columns: frozenset[str] = frozenset()) -> str:
    """What changed, in manifest words. ``same_columns``: the planned schema's hashes up to nullability
    (``TableSchema.hashes_up_to_nullability``); where every old commit's schema is one of them and the query
    changed, the schema did not: a table's NOT NULL columns read through a query are nullable."""
    changed = {what for overlap in overlaps for what in overlap.changed}
    if "query" in changed and "schema" in changed and same_columns:
        hashes = {c.schema_hash for overlap in overlaps for c in overlap.committed}
        if hashes <= same_columns:
            changed.discard("schema")
    return ", ".join(sorted(changed) or ["identity"])


def require_unchanged_identity(
    route: RouteIdentity, overlaps: Sequence[IdentityOverlap], manifest_ref: str
) -> None:
    """Stop an append route before it writes when a new partition may re-append committed rows."""
    if not overlaps:
        return
    lines = [
        f"{o.partition.bounds.label} (id={o.partition.partition_id[:19]}...) overlaps "
        f"{len(o.committed)} committed partition(s): "
        + ", ".join(c.bounds.label for c in o.committed[:3])
        + (" ..." if len(o.committed) > 3 else "")
        + ("" if o.covered else "  [partially covered]")
        for o in overlaps[:_LISTED]
    ]
    if len(overlaps) > _LISTED:
        lines.append(f"... and {len(overlaps) - _LISTED} more (see --json)")
    covered = sum(1 for o in overlaps if o.covered)
    raise DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"the {changed_summary(overlaps)} of route {route.describe()} changed: {len(overlaps)} partition(s) "
        "to move overlap partitions committed under the old definition, and appending them would duplicate rows",
        details={
            "route": route.describe(),
            "changed": changed_summary(overlaps).split(", "),
            "overlaps": [o.as_json() for o in overlaps],
            "covered": covered,
            "partially_covered": len(overlaps) - covered,
        },
        hint_lines=(
            "nothing was written to the target (its rows within these partitions were counted, read-only)",
            *lines,
            *_views_fed_hint(overlaps),
            *(
                (
                    "a route of the same source table under another sink.strategy committed them: the rows "
                    "that route selected are in the target already"
                    + (
                        " (it read another source.query or source.columns: not necessarily the rows this "
                        "manifest selects)"
                        if any("query" in o.changed for o in overlaps)
                        else ""
                    ),
                )
                if any("strategy" in o.changed for o in overlaps)
                else ()
            ),
            *(
                (
                    "only the schema changed, not source.query or source.columns: if nobody edited the "
                    "manifest, the source table's columns did (a column added, dropped, retyped, or only "
                    "moved: the schema is compared in column order); where the target lacks a column, give "
                    "it the same columns first (ALTER TABLE ... ADD COLUMN), with the source's DEFAULT where "
                    "every old row holds it; rows the target holds get no value of an added column, so reload "
                    "their partitions (delete them in the target, then run) unless their values are already "
                    "right (only the order of columns changed, or the DEFAULT is what the source holds), then "
                    "record it (with --schema-checked):",
                )
                if changed_summary(overlaps) == "schema"
                else (
                    "revert the manifest change, or record the new definition over the old one deliberately "
                    "(never when another manifest of this table, another filter, committed them: a rebaseline "
                    "compares counts and would record that filter's rows as this one's; give each filter its "
                    "own target table):",
                )
            ),
            f"  dpone guard rebaseline {manifest_ref} --reason '<what changed and why>'",
            "partially covered partitions stay blocking after a rebaseline; see `dpone runbook guard`, "
            "'The route's identity changed'",
        ),
    )


def _views_fed_hint(overlaps: Sequence[IdentityOverlap]) -> tuple[str, ...]:
    fed = [o for o in overlaps if o.views_fed]
    if not fed:
        return ()
    views = sorted({v for o in fed for v in o.views_fed})
    return (
        f"{len(fed)} of them ({', '.join(o.partition.bounds.label for o in fed[:3])}"
        f"{' ...' if len(fed) > 3 else ''}) hold no row in the target any more (retention, a TTL, deletes), but "
        f"the view(s) the table feeds ({', '.join(views[:3])}{' ...' if len(views) > 3 else ''}) received their rows "
        "when they were committed: appending them again would give the views those rows twice; a rebaseline "
        "records them as committed (they stay removed from the table)",
    )


def _sql_text(value: str) -> str:
    """A ClickHouse string literal (quotes and backslashes escaped) for a hint's statement."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def raise_respelled(
    route: RouteIdentity,
    table: str,
    moving: Sequence[PlannedPartition],
    old: Sequence[PartitionBounds],
    manifest_ref: str,
) -> None:
    """Stop a run before it writes where the target holds rows of listed values the source no longer
    delivers while it moves values never committed (``respelled_values``)."""
    column = old[0].column
    values = sorted({v for bounds in old for v in bounds.values or ()})
    listed = ", ".join(_sql_text(v) for v in values[:_LISTED]) + (" ..." if len(values) > _LISTED else "")
    raise DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"route {route.describe()} moves {len(moving)} listed value(s) of column {column!r} never committed "
        f"({', '.join(p.bounds.label for p in moving[:3])}{' ...' if len(moving) > 3 else ''}), while the "
        f"target table {table} holds rows of {len(values)} value(s) committed under another source.query that "
        "the source no longer delivers: if the query now rewrites the column (RTRIM, LOWER, REPLACE), those "
        "rows would be in the target twice, once under each spelling",
        details={
            "route": route.describe(),
            "changed": ["spelling"],
            "column": column,
            "moving": [p.bounds.label for p in moving],
            "old_values": [b.label for b in old],
        },
        hint_lines=(
            "nothing was written to the target (its rows of the old values were counted, read-only)",
            "if the query respells the old values: delete their rows from the target, then run, to move them "
            "under the new spelling:",
            f"  ALTER TABLE {table} DELETE WHERE {column} IN ({listed})",
            f"  dpone run {manifest_ref}",
            "if the old values' rows left the source and the new values are new (not a respelling), appending "
            f"beside them is right: dpone run {manifest_ref} --allow-nonempty-target",
            "see `dpone runbook guard`, 'Listed values respelled'",
        ),
    )


@dataclass(frozen=True)
class RebaselineRequest:
    reason: str
    actor: str
    #: the operator checked that the target's rows already hold the new schema's values (``--schema-checked``)
    schema_checked: bool = False


@dataclass(frozen=True)
class RowsDiffer:
    """A new partition with the old bounds whose source rows, under the new definition, are not the rows
    committed under the old one: the target may lack rows (a filter removed) or hold others."""

    partition_id: str
    label: str
    source_rows: int
    #: ``None``: no commit recorded its rows and the target could not be counted
    committed_rows: int | None

    def as_json(self) -> dict[str, JsonValue]:
        return {
            "partition_id": self.partition_id,
            "bounds": self.label,
            "source_rows": self.source_rows,
            "committed_rows": self.committed_rows,
        }


@dataclass(frozen=True)
class RebaselineResult:
    recorded: tuple[PartitionCheckpoint, ...]
    #: new partitions that stay blocking: partly covered, or (``rows_differ``) their rows changed
    partial: tuple[IdentityOverlap, ...]
    #: old committed partitions marked not loaded (``--release-partial``): their new partition loads whole
    released: tuple[PartitionCheckpoint, ...] = ()
    #: those of ``partial`` whose bounds the old partitions cover but whose source rows changed
    rows_differ: tuple[RowsDiffer, ...] = ()
    #: what the operator should know (partitions recorded while they may still be filling)
    notices: tuple[str, ...] = ()
    #: those of ``partial`` kept because their schema changed and the operator did not say it was checked
    schema_unchecked: tuple[str, ...] = ()


def checked_reason(request: RebaselineRequest) -> str:
    reason = request.reason.strip()
    if not reason:
        raise DponeError(ErrorCode.USAGE, "--reason must say what changed and what you checked")
    if len(reason) > MAX_REASON_CHARS:
        raise DponeError(ErrorCode.USAGE, f"--reason is limited to {MAX_REASON_CHARS} characters")
    return reason


def committed_record(
    part: PlannedPartition,
    route: RouteIdentity,
    run_id: str,
    at: datetime,
    batch: str,
    rows: int | None,
    audit: dict[str, JsonValue],
    *,
    size_bytes: int | None = None,
    diagnostics: dict[str, JsonValue] | None = None,
) -> PartitionCheckpoint:
    """An audited COMMITTED record written by an operator's command, not by a run (``audit`` under
    ``rebaseline``; ``diagnostics``: further keys beside it)."""
    guard: dict[str, JsonValue] = {
        **TargetCommitGuard.for_phase(GuardPhase.CHECKPOINT_COMMITTED, batch).to_json()
    }
    return PartitionCheckpoint(
        partition_id=part.partition_id,
        route=route,
        run_id=run_id,
        status=CheckpointStatus.COMMITTED,
        started_at=at,
        completed_at=at,
        rows=rows,
        bytes=size_bytes,
        query_hash=part.query_hash,
        schema_hash=part.schema_hash,
        bounds=part.bounds,
        diagnostics={GUARD_KEY: guard, REBASELINE_KEY: audit, **(diagnostics or {})},
    )


#: Rows the source holds now within some bounds (read-only).
SourceCounter = Callable[[PartitionBounds], int]
#: Rows the target holds now within some bounds (read-only); ``None`` where it cannot select them
#: (``target_counts``).
TargetCounter = Callable[[PartitionBounds], int | None]


def _old_rows_inside(overlap: IdentityOverlap) -> int | None:
    """The old partitions' committed rows when they all lie wholly inside the new partition, else None.

    Old partitions of the same bounds are the same rows committed under two earlier definitions (an edit
    rebaselined, then another edit): only the newest of them counts. Summing both doubled the rows, and a
    second rebaseline refused every day as ``rows_differ``, which blocked the route."""
    part = overlap.partition
    if not all(fully_covered(c.bounds, [part.bounds]) for c in overlap.committed):
        return None
    newest = _newest_by_bounds(overlap)
    if any(c.rows is None for c in newest.values()):
        return None
    return sum(c.rows or 0 for c in newest.values())


def _newest_by_bounds(overlap: IdentityOverlap) -> dict[PartitionBounds, PartitionCheckpoint]:
    newest: dict[PartitionBounds, PartitionCheckpoint] = {}
    for checkpoint in overlap.committed:
        kept = newest.get(checkpoint.bounds)
        if kept is None or checkpoint_moment(checkpoint) > checkpoint_moment(kept):
            newest[checkpoint.bounds] = checkpoint
    return newest


def _each_old_partition_holds_its_rows(overlap: IdentityOverlap, count_source: SourceCounter) -> bool:
    """The source holds, within each old partition's bounds, exactly the rows it committed: with the new
    partition's total equal to their sum, no row lies outside them. The total alone passed a month whose
    committed day lost a row while a day never partitioned gained one: the month was recorded and that
    day's row never moved, exit 0."""
    return all(count_source(bounds) == c.rows for bounds, c in _newest_by_bounds(overlap).items())


def rebaseline(
    overlaps: Sequence[IdentityOverlap],
    route: RouteIdentity,
    run_id: str,
    clock: Clock,
    request: RebaselineRequest,
    count_source: SourceCounter | None = None,
    count_target: TargetCounter | None = None,
    columns_unchanged: Callable[[str], bool] | None = None,
) -> RebaselineResult:
    """COMMITTED records for the new partitions the old committed partitions hold. Writes nothing.

    The old identity's checkpoints and the source's counts under the new definition are the evidence. A
    new partition is held when old partitions of the same bounds committed exactly the rows the source now
    holds within them under the new definition (a filter removed from ``source.query`` selects more rows
    than the target got: recording them would lose those rows for good), or (a coarser new partitioning,
    e.g. days -> months, where days without rows were never partitions) when every old partition lies
    inside it and the source now holds exactly their committed rows within its bounds and within each of
    theirs. Anything else stays blocking: partially covered, or with ``rows_differ``.

    A changed schema stays blocking unless ``request.schema_checked`` or ``columns_unchanged`` says each
    old partition's schema had the same names, types and order (only nullability differs): counts cannot
    see the values of a column added to the target after its rows were loaded (every old row holds the
    column's default, not the source's value: seen, 9 of 10 values wrong, exit 0) or retyped by hand.
    """
    reason = checked_reason(request)
    at = clock.now()
    held: list[tuple[IdentityOverlap, int | None, str]] = []
    partial: list[IdentityOverlap] = []
    differ: list[RowsDiffer] = []
    unchecked: list[str] = []
    for overlap in overlaps:
        if (
            "schema" in overlap.changed
            and not request.schema_checked
            and not (columns_unchanged and all(columns_unchanged(c.schema_hash) for c in overlap.committed))
        ):
            partial.append(overlap)
            unchecked.append(overlap.partition.partition_id)
            continue
        inside_rows = _old_rows_inside(overlap)
        if overlap.covered and all(c.bounds == overlap.partition.bounds for c in overlap.committed):
            changed = _rows_changed(overlap, inside_rows, count_source, count_target)
            if changed is None:
                held.append((overlap, inside_rows, "bounds"))
            else:
                partial.append(overlap)
                differ.append(changed)
        elif overlap.covered:  # only wider old partitions: rows may have arrived after they were committed
            target_rows = count_target(overlap.partition.bounds) if count_target is not None else 0
            if (
                target_rows
                and count_source is not None
                and count_source(overlap.partition.bounds) == target_rows
            ):
                held.append((overlap, target_rows, "target_count"))
            else:
                partial.append(overlap)
        elif inside_rows is not None and count_source is not None:
            if count_source(overlap.partition.bounds) == inside_rows and _each_old_partition_holds_its_rows(
                overlap, count_source
            ):
                held.append((overlap, inside_rows, "source_count"))
            else:
                partial.append(overlap)
        else:
            partial.append(overlap)
    batch = checkpoint_batch_id(f"rebaseline:{run_id}", [o.partition.partition_id for o, _, _ in held])
    records = []
    for overlap, rows, evidence in held:
        audit: dict[str, JsonValue] = {
            "mode": "identity_changed",
            "by": request.actor,
            "at": at.isoformat(),
            "reason": reason,
            "changed": list(overlap.changed),
            "covered_by": evidence,
            "old_partitions": [c.partition_id for c in overlap.committed],
            "old_rows": [c.rows for c in overlap.committed],
            "schema_checked": request.schema_checked,
        }
        records.append(committed_record(overlap.partition, route, run_id, at, batch, rows, audit))
    return RebaselineResult(
        recorded=tuple(records),
        partial=tuple(partial),
        rows_differ=tuple(differ),
        schema_unchecked=tuple(unchecked),
    )


def _rows_changed(
    overlap: IdentityOverlap,
    committed_rows: int | None,
    count_source: SourceCounter | None,
    count_target: TargetCounter | None,
) -> RowsDiffer | None:
    """``None`` when the source holds, within the partition's bounds and under the new definition, the rows
    the old partitions committed (the target's count stands in where a commit recorded none)."""
    if count_source is None:
        return None
    bounds = overlap.partition.bounds
    expected = committed_rows
    if expected is None:
        expected = count_target(bounds) if count_target is not None else None
    now = count_source(bounds)
    if expected is not None and now == expected:
        return None
    return RowsDiffer(overlap.partition.partition_id, bounds.label, now, expected)


def release_partly_covered(
    result: RebaselineResult,
    run_id: str,
    clock: Clock,
    request: RebaselineRequest,
    count_target: TargetCounter,
) -> RebaselineResult:
    """Mark the old partitions inside each partly covered new partition as not loaded, so it loads whole.

    Only after the operator emptied the new partition's bounds in the target (counted here, read-only) and
    only when every old partition lies inside it: an old partition reaching outside would be loaded again
    over rows the target still holds if the manifest were reverted. All or nothing."""
    reason = checked_reason(request)
    problems: list[str] = []
    for overlap in result.partial:
        label = overlap.partition.bounds.label
        if not all(fully_covered(c.bounds, [overlap.partition.bounds]) for c in overlap.committed):
            problems.append(f"{label}: an old committed partition reaches outside its bounds")
            continue
        held = count_target(overlap.partition.bounds)
        if held is None:
            problems.append(
                f"{label}: the target table has no column {overlap.partition.bounds.column!r} to count by"
            )
        elif held:
            problems.append(f"{label}: the target still holds {held} row(s) within its bounds")
    if problems:
        raise DponeError(
            ErrorCode.MANUAL_RECONCILIATION_REQUIRED,
            f"cannot release {len(problems)} partly covered partition(s); nothing was recorded",
            details={"problems": problems},
            hint_lines=(
                *problems[:_LISTED],
                "delete the target's rows within each such partition's bounds first, then run this again; "
                "see `dpone runbook guard`, 'The route's identity changed'",
            ),
        )
    at = clock.now()
    released = []
    for overlap in result.partial:
        batch = checkpoint_batch_id(f"release:{run_id}", [overlap.partition.partition_id])
        for old in overlap.committed:
            guard: dict[str, JsonValue] = {
                **TargetCommitGuard.for_phase(GuardPhase.FAILED_BEFORE_TARGET, batch).to_json()
            }
            audit: dict[str, JsonValue] = {
                "mode": "released",
                "by": request.actor,
                "at": at.isoformat(),
                "reason": reason,
                "new_partition": overlap.partition.partition_id,
                "target_rows_within_new_bounds": 0,
                "previous_rows": old.rows,
            }
            released.append(
                old.model_copy(
                    update={
                        "status": CheckpointStatus.FAILED,
                        "run_id": run_id,
                        "started_at": at,
                        "completed_at": at,
                        "diagnostics": {GUARD_KEY: guard, REBASELINE_KEY: audit},
                    }
                )
            )
    return RebaselineResult(recorded=result.recorded, partial=(), released=tuple(released), rows_differ=())


@dataclass(frozen=True)
class AdoptionCount:
    """One planned partition of a route the checkpoint store does not know, counted on both sides."""

    partition: PlannedPartition
    source_rows: int
    #: the target's rows within the bounds, less those other source tables committed there (a fan-in)
    target_rows: int
    #: other source tables committed rows overlapping the bounds in another partitioning, or without a
    #: count: how many of ``target_rows`` are theirs is unknown, so the partition is never adopted
    others_unknown: bool = False
    #: the target's rows within the bounds that other source tables' routes committed (left out of
    #: ``target_rows``): the same rows under another spelling of this table, or another table's
    others_rows: int = 0

    @property
    def holds_exactly(self) -> bool:
        return self.target_rows > 0 and self.target_rows == self.source_rows and not self.others_unknown

    @property
    def conflicting(self) -> bool:
        return self.target_rows > 0 and (self.target_rows != self.source_rows or self.others_unknown)


@dataclass(frozen=True)
class AdoptionResult:
    recorded: tuple[PartitionCheckpoint, ...]
    left_to_run: tuple[AdoptionCount, ...]
    notices: tuple[str, ...] = ()


def views_fed_again_notice(result: AdoptionResult, views: Sequence[str]) -> str:
    """What adopting a target that feeds views leaves to the operator: the partitions it leaves to run may be
    days a retention job emptied in the table after an earlier store committed them, whose rows the views
    still hold; the next run would give the views those rows again (seen: a daily total doubled, exit 0)."""
    left = [c.partition.bounds.label for c in result.left_to_run]
    return (
        f"the target feeds {len(views)} view(s) ({', '.join(views[:3])}{' ...' if len(views) > 3 else ''}): "
        f"the {len(left)} partition(s) left to run ({', '.join(left[:3])}{' ...' if len(left) > 3 else ''}) hold no "
        "row in the table, but where an earlier checkpoint store committed them (a retention job or a TTL "
        "emptied them since) the views still hold their rows and the next run gives the views those rows "
        "again: before that run, take such partitions' rows out of the views' tables, or keep those days out "
        "of the route (source.query); see `dpone runbook guard`, 'An empty checkpoint store in front of a "
        "non-empty target'"
    )


def adopt(
    counts: Sequence[AdoptionCount],
    route: RouteIdentity,
    run_id: str,
    clock: Clock,
    request: RebaselineRequest,
) -> AdoptionResult:
    """COMMITTED records for the partitions whose target rows equal the source rows within their bounds.

    All or nothing: when any partition holds some rows but not the source's count, appending or skipping it
    would both be wrong, so nothing is recorded and the mismatches are listed. Partitions the target holds
    no rows of are left for the next run to move.
    """
    reason = checked_reason(request)
    conflicts = [c for c in counts if c.conflicting]
    if conflicts:
        lines = tuple(
            f"{c.partition.bounds.label}: target_rows={c.target_rows} source_rows={c.source_rows}"
            + (" (other source tables' share unknown)" if c.others_unknown else "")
            for c in conflicts
        )
        fan_in = (
            (
                "other source tables committed rows within some of these bounds in another partitioning (a "
                "fan-in): never delete by bounds alone, only this source's rows; if the target holds none of "
                "them, run once with --allow-nonempty-target instead",
            )
            if any(c.others_unknown for c in conflicts)
            else ()
        )
        raise DponeError(
            ErrorCode.MANUAL_RECONCILIATION_REQUIRED,
            f"route {route.describe()}: {len(conflicts)} partition(s) of the target hold rows not known to be "
            "exactly the source's within their bounds; nothing was recorded",
            details={
                "route": route.describe(),
                "partitions": [
                    {
                        "partition_id": c.partition.partition_id,
                        "bounds": c.partition.bounds.label,
                        "target_rows": c.target_rows,
                        "source_rows": c.source_rows,
                        "others_unknown": c.others_unknown,
                    }
                    for c in conflicts
                ],
            },
            hint_lines=(
                *lines[:_LISTED],
                *fan_in,
                "make each of these partitions hold exactly the source's rows or none (delete "
                + ("only this source's rows" if fan_in else "them")
                + " in the target),",
                "then run the rebaseline again; see `dpone runbook guard`",
            ),
        )
    at = clock.now()
    held = [c for c in counts if c.holds_exactly]
    batch = checkpoint_batch_id(f"adoption:{run_id}", [c.partition.partition_id for c in held])
    records = []
    for count in held:
        audit: dict[str, JsonValue] = {
            "mode": "adopt_target",
            "by": request.actor,
            "at": at.isoformat(),
            "reason": reason,
            "target_rows": count.target_rows,
            "source_rows": count.source_rows,
        }
        records.append(committed_record(count.partition, route, run_id, at, batch, count.target_rows, audit))
    return AdoptionResult(recorded=tuple(records), left_to_run=tuple(c for c in counts if c.target_rows == 0))
