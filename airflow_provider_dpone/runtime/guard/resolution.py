"""The operator's deliberate repair of a blocked route. Appends audited checkpoints; never touches the target.

Resolving ``committed`` records that the operator verified the target holds the partition's rows;
``not-applied`` records that it does not, which makes the partition retryable (phase
``failed_before_target``). Nothing here infers the answer: automatic reconciliation is out of scope.

It does protect the operator from the answer that duplicates: before ``not-applied`` on an
``incremental_append`` route it counts the target's rows within each partition's bounds and refuses when
any are there, or when the attempt's target call is known to have succeeded (``checkpoint_incomplete``),
unless ``force``. ``committed`` is recorded with the counts, so a mismatch is visible and audited; it
is refused (unless ``force``) where the target holds no row of the partition, since no run would move its rows
again, and where the attempt's rows are unknown (a direct load) the counted rows become the checkpoint's, so
later runs check that the target still holds them. On ``replace_partition`` and ``full_refresh`` it is
refused (unless ``force``) except after ``checkpoint_incomplete``: counts cannot tell the rows an attempt was to
replace from its own, and ``not-applied`` is safe there. Either answer is refused (unless ``force``) on an
append partition whose bounds hold fewer rows than other source tables' routes committed there: theirs
were deleted, and nothing would load them again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GUARD_KEY, UNREADABLE_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.runtime.bounds_coverage import (
    OverlapIndex,
    fully_covered,
    may_overlap,
    pairwise_disjoint,
)
from airflow_provider_dpone.runtime.guard.batch_id import checkpoint_batch_id
from airflow_provider_dpone.runtime.guard.route_guard import BlockedPartition, scan_route

MAX_REASON_CHARS = 500


class ResolveAs(str, Enum):
    COMMITTED = "committed"
    NOT_APPLIED = "not-applied"


@dataclass(frozen=True)
class ResolutionRequest:
    partition_ids: tuple[str, ...] | None  # None: every blocked partition
    resolve_as: ResolveAs
    reason: str
    actor: str
    force: bool = False


#: Rows the target holds within one blocked checkpoint's bounds (counted read-only, per partition); None
#: where the target table cannot select them (``target_counts``): unknown, as a count that failed forced.
TargetCounter = Callable[[PartitionCheckpoint], int | None]
#: The source's rows now within a checkpoint's bounds; None where this manifest's source cannot say.
SourceCounter = Callable[[PartitionCheckpoint], int | None]


def blocked_partitions(latest: Sequence[PartitionCheckpoint]) -> list[BlockedPartition]:
    scan = scan_route(latest)
    return [*scan.invalid, *scan.unresolved]


MIN_PREFIX_HEX = 8


def _refuse_another_target(route: RouteIdentity, elsewhere: Sequence[PartitionCheckpoint]) -> None:
    """Stop a resolution whose counts would come from another target than the one its attempts wrote."""
    if not elsewhere:
        return
    raise DponeError(
        ErrorCode.USAGE,
        f"{len(elsewhere)} blocked partition(s) of route {route.describe()} were written to another target than "
        "the one the sink connection leads to now (another server, database or chDB folder): their rows "
        "counted here are not the attempt's; nothing was written",
        details={"problem": "target_elsewhere", "partitions": [c.partition_id for c in elsewhere]},
        hint_lines=(
            "point the sink connection at the target the run wrote (check AIRFLOW_CONN_* in this shell: "
            "another environment's connection of the same name leads elsewhere), then resolve again",
            "if that target itself moved (a new host name, a moved chDB folder): count it yourself, then "
            "resolve with --force",
        ),
    )


def _expand_prefix(given: str, latest: dict[str, PartitionCheckpoint]) -> str:
    """Accept the short IDs the table shows (``sha256:0123abcd...``) when they name exactly one partition."""
    given = given.strip().removesuffix("...")
    if given in latest or len(given.removeprefix("sha256:")) < MIN_PREFIX_HEX:
        return given
    matches = [pid for pid in latest if pid.startswith(given)]
    if len(matches) > 1:
        raise DponeError(ErrorCode.USAGE, "a partition ID prefix matches several partitions; give more of it")
    return matches[0] if matches else given


def resolve(
    store: CheckpointStore,
    clock: Clock,
    route: RouteIdentity,
    request: ResolutionRequest,
    *,
    latest: Sequence[PartitionCheckpoint] | None = None,
    count_target: TargetCounter | None = None,
    count_source: SourceCounter | None = None,
    written_elsewhere: Callable[[PartitionCheckpoint], bool] | None = None,
    views: Sequence[str] = (),
) -> list[PartitionCheckpoint]:
    """Append one resolution checkpoint per chosen blocked partition, sharing one timestamp.

    ``latest`` is what the route's runs scan (its target-wide family); by default the route's own rows.
    Each resolution is written under the route its blocked checkpoint was stored with. ``count_source``:
    the source's rows within a partition's bounds (None where it cannot say: another route's partition),
    asked only for ``committed`` over an attempt that recorded no row count (a direct load).
    ``written_elsewhere``: whether an attempt wrote a target other than the one ``count_target`` counts
    (refused unless forced: its counts would be another target's). ``views``: the views an insert into the
    target feeds (``db.table``): named in the refusals and recorded in a ``not-applied`` audit of an append
    attempt, since what the attempt inserted is in their tables whatever is deleted from the target.
    """
    reason = request.reason.strip()
    if not reason:
        raise DponeError(ErrorCode.USAGE, "--reason must say why the partition is being resolved")
    if len(reason) > MAX_REASON_CHARS:
        raise DponeError(ErrorCode.USAGE, f"--reason is limited to {MAX_REASON_CHARS} characters")
    rows = store.list_latest(route) if latest is None else latest
    by_id = {c.partition_id: c for c in rows}
    blocked = {b.partition_id: b for b in blocked_partitions(list(by_id.values()))}
    if request.partition_ids is None:
        chosen = sorted(blocked)
        if not chosen:
            raise DponeError(ErrorCode.USAGE, f"route {route.describe()} has no blocked partition")
    else:
        chosen = list(dict.fromkeys(_expand_prefix(pid, by_id) for pid in request.partition_ids))
        unknown = [pid for pid in chosen if pid not in by_id]
        if unknown:
            raise DponeError(
                ErrorCode.USAGE,
                "no checkpoint of this route has that partition ID",
                details={"partitions": unknown},
            )
        not_blocked = [pid for pid in chosen if pid not in blocked]
        if not_blocked:
            raise DponeError(
                ErrorCode.USAGE,
                "only blocked partitions can be resolved; see `dpone checkpoints`",
                details={"partitions": not_blocked},
            )
    if written_elsewhere is not None and not request.force:
        _refuse_another_target(route, [by_id[pid] for pid in chosen if written_elsewhere(by_id[pid])])
    raw = _target_counts([by_id[pid] for pid in chosen], count_target, force=request.force)
    # a fan-in: another source table's committed rows within the bounds are not this attempt's
    commits = CommitsBySource(rows)
    others = {pid: other_routes_rows(by_id[pid], commits.of_others(by_id[pid])) for pid in chosen}
    counts = {pid: _net(raw[pid], others[pid]) for pid in chosen}
    if not request.force:
        _refuse_over_other_routes_lost_rows([by_id[pid] for pid in chosen], blocked, raw, others, commits)
    if request.resolve_as is ResolveAs.NOT_APPLIED and not request.force:
        _refuse_duplicating_not_applied([by_id[pid] for pid in chosen], blocked, counts, views)
    if request.resolve_as is ResolveAs.COMMITTED and not request.force:
        _refuse_committed_on_replacing([by_id[pid] for pid in chosen], blocked)
        _refuse_losing_committed([by_id[pid] for pid in chosen], blocked, counts, count_source, raw)
    at = clock.now()
    records: list[PartitionCheckpoint] = []
    for pid in chosen:
        previous = by_id[pid]
        block = blocked[pid]
        batch = block.checkpoint_batch_id or checkpoint_batch_id(f"resolution:{at.isoformat()}", [pid])
        if request.resolve_as is ResolveAs.COMMITTED:
            status, phase = CheckpointStatus.COMMITTED, GuardPhase.CHECKPOINT_COMMITTED
        else:
            status, phase = CheckpointStatus.FAILED, GuardPhase.FAILED_BEFORE_TARGET
        diagnostics: dict[str, object] = {
            k: v
            for k, v in previous.diagnostics.items()
            if k not in (GUARD_KEY, "resolution", UNREADABLE_KEY)
        }
        diagnostics[GUARD_KEY] = TargetCommitGuard.for_phase(phase, batch).to_json()
        audit: dict[str, object] = {
            "as": request.resolve_as.value,
            "by": request.actor,
            "at": at.isoformat(),
            "reason": reason,
            "previous_status": previous.status.value,
            "previous_phase": block.phase,
            "attempt_rows": previous.rows,
            "target_rows": raw.get(pid),
            "other_routes_rows": others.get(pid),
            "forced": request.force,
            "over_unreadable_row": UNREADABLE_KEY in previous.diagnostics,
        }
        if (
            views
            and status is CheckpointStatus.FAILED
            and previous.route.strategy is Strategy.INCREMENTAL_APPEND
        ):
            # what the attempt inserted reached them; the next run feeds them again (``views_fed_warning``)
            audit["views_fed"] = list(views)
        diagnostics["resolution"] = audit
        update: dict[str, object] = {
            "status": status,
            "started_at": at,
            "completed_at": at,
            "diagnostics": diagnostics,
        }
        counted = counts.get(pid)
        if status is CheckpointStatus.COMMITTED and previous.rows is None and counted is not None:
            # the attempt's rows are unknown (a direct load counts them inside the target call): what the
            # operator declared committed is what the target holds, and later runs check it is still there
            update["rows"] = counted
        records.append(previous.model_copy(update=update))
    store.write_batch(records)
    return records


class CommitsBySource:
    """A target's COMMITTED checkpoints grouped by source table, each source's indexed by bounds
    (``bounds_coverage.OverlapIndex``, built at its first question and kept for the command): the other
    sources' commits overlapping a partition are found without a pass over every checkpoint. A scan per
    partition made ``guard inspect`` and ``guard resolve --all-blocked`` quadratic (2,000 blocked days beside
    a fan-in route's 2,000: 25 CPU s)."""

    def __init__(self, latest: Sequence[PartitionCheckpoint]) -> None:
        self._by_source: dict[str, list[PartitionCheckpoint]] = {}
        self._indexes: dict[str, OverlapIndex] = {}
        for checkpoint in latest:
            if checkpoint.status is CheckpointStatus.COMMITTED:
                self._by_source.setdefault(checkpoint.route.source_table, []).append(checkpoint)

    def of_others(self, checkpoint: PartitionCheckpoint) -> list[PartitionCheckpoint]:
        """Other source tables' commits whose bounds :func:`may_overlap` ``checkpoint``'s, in the order given
        (those a pass over them all would keep: every function taking ``latest`` here filters them so)."""
        own = checkpoint.route.source_table
        found: list[PartitionCheckpoint] = []
        for source, commits in self._by_source.items():
            if source == own:
                continue
            index = self._indexes.get(source)
            if index is None:
                index = self._indexes[source] = OverlapIndex([c.bounds for c in commits])
            found.extend(commits[position] for position in index.overlapping(checkpoint.bounds))
        return found


def other_routes_within(checkpoint: PartitionCheckpoint, latest: Sequence[PartitionCheckpoint]) -> list[str]:
    """The routes of other source tables with a COMMITTED partition overlapping ``checkpoint``'s bounds
    (``latest``: :meth:`CommitsBySource.of_others`), as ``route.describe()`` names them, sorted."""
    return sorted(
        {
            c.route.describe()
            for c in latest
            if c.status is CheckpointStatus.COMMITTED and may_overlap(c.bounds, checkpoint.bounds)
        }
    )


def other_routes_rows_lost(target_rows: int | None, others: int | None) -> bool:
    """Whether the target holds fewer rows within a partition's bounds than other source tables' routes
    committed there: some of theirs are gone (a delete by the bounds alone takes them with the attempt's)."""
    return target_rows is not None and others is not None and target_rows < others


def other_routes_rows(checkpoint: PartitionCheckpoint, latest: Sequence[PartitionCheckpoint]) -> int | None:
    """Rows routes of other source tables committed within ``checkpoint``'s bounds (several source tables
    appending into one table): they are in the target's count but are not the blocked attempt's."""
    return other_sources_rows(checkpoint.route, checkpoint.bounds, latest)


def other_sources_rows(
    route: RouteIdentity, bounds: PartitionBounds, latest: Sequence[PartitionCheckpoint]
) -> int | None:
    """Rows routes of source tables other than ``route``'s committed within ``bounds``
    (:func:`committed_rows_within`). None: their share is unknown."""
    return committed_rows_within(bounds, [c for c in latest if c.route.source_table != route.source_table])


def committed_rows_within(bounds: PartitionBounds, latest: Sequence[PartitionCheckpoint]) -> int | None:
    """Rows the COMMITTED checkpoints among ``latest`` loaded within ``bounds``: of each source table's
    commits overlapping them, newest first, each one not covered by newer ones of that source (a strategy
    switch, an edit or a rebaseline commits the same rows again under a new partition ID, even in other
    bounds: days rebaselined to a month. Counted twice, they hid an attempt's own rows). None when a
    commit counted only partly overlaps the bounds (another partitioning), an older one is only partly
    covered by newer ones, or one recorded no rows: the share is unknown (an undercount would take
    another source's rows for an attempt's own)."""
    by_source: dict[str, list[PartitionCheckpoint]] = {}
    for other in latest:
        if other.status is CheckpointStatus.COMMITTED and may_overlap(other.bounds, bounds):
            by_source.setdefault(other.route.source_table, []).append(other)
    total = 0
    for commits in by_source.values():
        newest: dict[PartitionBounds, PartitionCheckpoint] = {}  # the same bounds again: the newest
        for other in commits:
            kept = newest.get(other.bounds)
            if kept is None or checkpoint_moment(other) > checkpoint_moment(kept):
                newest[other.bounds] = other
        if pairwise_disjoint(list(newest)):  # the common case: one partitioning, no pair to compare
            if any(c.rows is None or not fully_covered(c.bounds, [bounds]) for c in newest.values()):
                return None
            total += sum(c.rows or 0 for c in newest.values())
            continue
        # newest first, each against the newer ones counted: found by an index, not compared pair by pair
        ordered = sorted(newest.values(), key=checkpoint_moment, reverse=True)
        index = OverlapIndex([c.bounds for c in ordered])
        counted: set[int] = set()
        for position, other in enumerate(ordered):
            newer = [ordered[i].bounds for i in index.overlapping(other.bounds) if i in counted]
            if newer and fully_covered(other.bounds, newer):
                continue  # the same rows, committed again since
            if newer or not fully_covered(other.bounds, [bounds]) or other.rows is None:
                return None
            counted.add(position)
            total += other.rows
    return total


def _target_counts(
    chosen: Sequence[PartitionCheckpoint], count_target: TargetCounter | None, *, force: bool
) -> dict[str, int | None]:
    """The target's rows within each partition's bounds; with ``force`` a count that fails is unknown."""
    counts: dict[str, int | None] = {}
    for checkpoint in chosen:
        if count_target is None:
            counts[checkpoint.partition_id] = None
            continue
        try:
            counts[checkpoint.partition_id] = count_target(checkpoint)
        except DponeError:
            if not force:
                raise
            counts[checkpoint.partition_id] = None
    return counts


def _net(target_rows: int | None, others: int | None) -> int | None:
    """The target's rows within the bounds less those other routes committed there (None: unknown)."""
    if target_rows is None or target_rows == 0:
        return target_rows
    if others is None or others > target_rows:
        return None  # unknown, or other routes' rows went missing: nothing is decided from it
    return target_rows - others


def _refusal(
    message: str,
    problems: Sequence[str],
    hints: tuple[str, ...],
    *,
    problem: str | None = None,
    details: Mapping[str, object] | None = None,
) -> DponeError:
    """The shape every refused answer takes: each partition's problem in the details and first among the
    hints, then what to do, then the runbook's command."""
    return DponeError(
        ErrorCode.USAGE,
        message,
        details={
            **({"problem": problem} if problem else {}),
            "partitions": list(problems),
            **(details or {}),
        },
        hint_lines=(*problems, *hints, "runbook:  dpone runbook guard"),
    )


def _refuse_over_other_routes_lost_rows(
    chosen: Sequence[PartitionCheckpoint],
    blocked: dict[str, BlockedPartition],
    raw: Mapping[str, int | None],
    others: Mapping[str, int | None],
    commits: CommitsBySource,
) -> None:
    """Either answer on an append partition whose bounds hold fewer rows than other source tables' routes
    committed there: their rows were deleted (the runbook's example delete by the bounds takes them with
    the attempt's), and their checkpoints still say COMMITTED, so no run of theirs reloads them. Seen:
    route A's partial day deleted by the bounds with route B's 5,000 committed rows, ``target_rows=0``,
    ``not-applied`` accepted, A reloaded its rows and B's were gone for good, every command exit 0."""
    problems: list[str] = []
    for checkpoint in chosen:
        if checkpoint.route.strategy is not Strategy.INCREMENTAL_APPEND:
            continue  # a replacing run deletes other routes' rows within its bounds itself (allowed by flag)
        pid = checkpoint.partition_id
        if not other_routes_rows_lost(raw.get(pid), others.get(pid)):
            continue
        routes = ", ".join(other_routes_within(checkpoint, commits.of_others(checkpoint)))
        problems.append(
            f"partition {blocked[pid].label}: the target holds {raw.get(pid)} row(s) within its bounds, fewer "
            f"than the {others.get(pid)} other routes committed there ({routes}): their rows were deleted"
        )
    if problems:
        raise _refusal(
            "refusing the resolution: other routes' committed rows within these partitions' bounds were "
            "deleted, and no run of theirs would load them again (their checkpoints say COMMITTED)",
            problems,
            (
                "Restore those routes' rows first (from a backup of the table, or from their sources by their "
                "own key), until `dpone guard inspect` shows target_rows >= other_routes_rows; then remove "
                "only this attempt's rows (by a column that tells the sources apart, never by the bounds "
                "alone) and resolve again.",
                "If their rows were removed on purpose (a retired source), re-run with --force.",
            ),
            problem="other_routes_rows_lost",
        )


def _refuse_committed_on_replacing(
    chosen: Sequence[PartitionCheckpoint], blocked: dict[str, BlockedPartition]
) -> None:
    """``committed`` on a ``replace_partition`` or ``full_refresh`` attempt whose target call may not have
    run: it deletes and inserts, so the target holds as many rows within the bounds before its delete as
    after its insert when the source's count did not change, and no count tells the old rows from the new.
    ``not-applied`` is always safe there (the next run replaces the bounds). Seen: a one-day repair killed
    between arming and its delete, resolved ``committed`` on equal counts: the corrected values never
    arrived, every run and ``--verify`` said nothing. Only ``checkpoint_incomplete`` (the target call
    returned: the bounds hold the attempt's rows) is taken on the guard's own word."""
    problems: list[str] = []
    for checkpoint in chosen:
        if checkpoint.route.strategy is Strategy.INCREMENTAL_APPEND:
            continue
        block = blocked[checkpoint.partition_id]
        if block.phase == GuardPhase.CHECKPOINT_INCOMPLETE.value:
            continue
        problems.append(
            f"partition {block.label} of route {checkpoint.route.describe()} ({block.phase}): its rows "
            "within the bounds may be the ones the attempt was to replace"
        )
    if problems:
        raise _refusal(
            "refusing --as committed on a replacing route: counts cannot tell the rows the attempt was to "
            "replace from the ones it loads, and recorded committed, the old rows would stay",
            problems,
            (
                "Resolve --as not-applied: the next run replaces these partitions (deletes what their bounds "
                "hold, loads the source's rows), whatever the attempt left there; nothing is duplicated.",
                "Only if you compared the target's values with the source's and they are the attempt's, "
                "re-run with --force.",
            ),
            problem="committed_on_replacing_route",
        )


def views_fed_warning(views: Sequence[str], labels: Sequence[str]) -> str:
    """What an operator must also undo before an append partition runs again in a target that feeds views:
    a materialized view receives every inserted block and never sees a delete, so rows of the attempt
    deleted from the target stay in each view's table, and the next run gives them to it again (seen:
    a partial day deleted, resolved ``not-applied``, run: 500 rows twice in the view's table, exit 0, and
    nothing dpone printed named the view)."""
    shown = ", ".join(labels[:3]) + (" ..." if len(labels) > 3 else "")
    return (
        f"the target feeds {len(views)} view(s) ({', '.join(views)}): every row the attempt inserted within "
        f"{shown} is already in their tables, and deleting it from the target does not remove it there; "
        "take the same rows out of each view's table (its TO table, or its inner table) before the next "
        "run, or it feeds them again"
    )


def _refuse_duplicating_not_applied(
    chosen: Sequence[PartitionCheckpoint],
    blocked: dict[str, BlockedPartition],
    counts: dict[str, int | None],
    views: Sequence[str] = (),
) -> None:
    """``not-applied`` on an append route whose rows may be in the target would append them again."""
    problems: list[str] = []
    labels: list[str] = []  # of the partitions refused: where rows may have reached the views
    for checkpoint in chosen:
        if checkpoint.route.strategy is not Strategy.INCREMENTAL_APPEND:
            continue  # a re-run replaces the partition (or the table): no duplicate
        block = blocked[checkpoint.partition_id]
        target_rows = counts.get(checkpoint.partition_id)
        if block.phase == GuardPhase.CHECKPOINT_INCOMPLETE.value or target_rows is None or target_rows > 0:
            labels.append(block.label)
        if block.phase == GuardPhase.CHECKPOINT_INCOMPLETE.value:
            problems.append(
                f"partition {block.label}: the attempt's target call succeeded (checkpoint_incomplete); "
                f"target_rows={_shown(target_rows)} attempt_rows={_shown(checkpoint.rows)}"
            )
        elif target_rows is None or target_rows > 0:
            problems.append(
                f"partition {block.label}: the target holds {target_rows if target_rows is not None else 'an unknown number of'} "
                f"row(s) within its bounds; attempt_rows={_shown(checkpoint.rows)}"
            )
    if problems:
        fed = views_fed_warning(views, labels) if views else None
        raise _refusal(
            "refusing --as not-applied: the next run would append these partitions again",
            problems,
            (
                "If the target holds exactly the attempt's rows there, resolve --as committed. If it holds part "
                "of them, delete them (`dpone guard inspect` counts 0 afterwards, and --as not-applied needs no "
                "--force); if they belong to another writer, re-run with --force (the counts are kept in the "
                "audit record).",
                *((f"If you delete them: {fed}.",) if fed else ()),
            ),
            details={"views_fed": list(views)} if views else None,
        )


def _shown(count: int | None) -> str:
    """A count as ``guard inspect`` prints it: ``-`` where none was recorded or counted."""
    return "-" if count is None else str(count)


def _refuse_losing_committed(
    chosen: Sequence[PartitionCheckpoint],
    blocked: dict[str, BlockedPartition],
    counts: dict[str, int | None],
    count_source: SourceCounter | None = None,
    raw: Mapping[str, int | None] | None = None,
) -> None:
    """``committed`` over a partition the target holds only part of would skip the rest for ever: no
    later run moves a committed partition again (and nothing would say the rows are missing). Part: no
    row at all; fewer than the attempt exported; or, where the attempt recorded no count (a direct load
    counts inside the target call), fewer or more than the source holds now. Seen: a SIGKILLed direct
    load left 50 of a day's 5,000 rows, ``committed`` was accepted without a word, exit 0. And where it
    cannot be told: the target was counted but other source tables' share of it is unknown (they commit
    in another partitioning, or some of their rows went missing), or the attempt recorded no count and this
    manifest's source cannot count the partition (another route's): both were accepted, exit 0."""
    problems: list[str] = []
    for c in chosen:
        held = counts.get(c.partition_id)
        label = blocked[c.partition_id].label
        if held is None:
            whole = None if raw is None else raw.get(c.partition_id)
            if whole:
                problems.append(
                    f"partition {label}: the target holds {whole} row(s) within its bounds, and how many of "
                    "them other source tables' routes committed is unknown"
                )
            continue
        if c.rows is None and count_source is not None:
            source_rows = count_source(c)
            if source_rows is None:
                problems.append(
                    f"partition {label}: the attempt recorded no row count and it is route "
                    f"{c.route.describe()}'s: resolve it with that route's manifest, which counts its source"
                )
            elif source_rows != held:
                problems.append(
                    f"partition {label}: the target holds {held} row(s) within its bounds, the source {source_rows}"
                )
        elif held == 0 and c.rows != 0:
            problems.append(
                f"partition {label}: the target holds no row within its bounds; attempt_rows={c.rows}"
            )
        elif c.rows is not None and held < c.rows:
            problems.append(
                f"partition {label}: the target holds {held} of the {c.rows} row(s) the attempt exported"
            )
    if problems:
        raise _refusal(
            "refusing --as committed: the target does not hold these partitions' rows whole, and no run "
            "would move them again",
            problems,
            (
                "If the attempt never reached the target, resolve --as not-applied: the next run moves them.",
                "If it landed partly: delete its rows from the target, check the count is back, then resolve "
                "--as not-applied.",
                "If you checked the rows are right (the source changed since, or its partition is empty), "
                "re-run with --force.",
            ),
        )
