"""Per-partition resume decisions, taken only after the route-wide guard scan found nothing unsafe.

Late-arriving rows (issue 12) are handled here too, from the manifest's partitioning:

* ``settle`` — a partition whose upper bound is later than ``now - settle`` is still open: it is planned
  but not moved (``open_partition``), so an ``incremental_append`` never commits a day that is still
  filling. Day and month bounds are read as UTC midnights; ``now`` is the worker's own clock, never the
  floor record times follow (``CausalClock.wall_now``): a floor raised by a worker whose clock ran ahead
  made later workers commit days still filling.
* ``lookback`` (``replace_partition`` only) — the N most recent settled committed partitions, in bounds
  order, run again (``lookback``). They become active partitions like any other: armed, replaced under
  the permit, promoted; a failure leaves the same guard phases and blocks the same way.
* ``replace_partition`` — a day, month or range whose commit recorded 0 rows runs again whenever the source
  plans it (``empty_when_committed``): the source plans such bounds only where it holds rows now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import NamedTuple

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GuardPhase, read_guard
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.runtime.vanished import bounds_order


class Action(str, Enum):
    RUN = "run"
    SKIP = "skip"


class Reason(str, Enum):
    MISSING_CHECKPOINT = "missing_checkpoint"
    COMMITTED = "committed"
    QUERY_OR_SCHEMA_CHANGED = "query_or_schema_changed"
    PREVIOUS_FAILURE = "previous_failure"
    FAILED_BEFORE_TARGET = "failed_before_target"
    INTERRUPTED_BEFORE_TARGET = "interrupted_before_target"
    FULL_REFRESH_NEW_RUN = "full_refresh_new_run"
    OPEN_PARTITION = "open_partition"
    LOOKBACK = "lookback"
    EMPTY_WHEN_COMMITTED = "empty_when_committed"


class ResumeDecision(NamedTuple):
    """Immutable, like the frozen dataclass it was; a tuple because a long route builds tens of
    thousands of them per run and a frozen dataclass's ``__init__`` costs four times as much."""

    partition: PlannedPartition
    action: Action
    reason: Reason


def _decide(planned: PlannedPartition, latest: PartitionCheckpoint | None) -> ResumeDecision:
    if latest is None:
        return ResumeDecision(planned, Action.RUN, Reason.MISSING_CHECKPOINT)
    if latest.status is CheckpointStatus.COMMITTED:
        if latest.query_hash == planned.query_hash and latest.schema_hash == planned.schema_hash:
            return ResumeDecision(planned, Action.SKIP, Reason.COMMITTED)
        if _attested_over_unreadable(latest):
            # found by the planned partition ID, itself a digest over query and schema hash: the operator
            # resolved an unreadable row whose hashes could not be read as committed
            return ResumeDecision(planned, Action.SKIP, Reason.COMMITTED)
        return ResumeDecision(planned, Action.RUN, Reason.QUERY_OR_SCHEMA_CHANGED)
    guard = read_guard(latest)  # already validated by the route scan; blocking phases never reach here
    if guard is not None and guard.phase is GuardPhase.FAILED_BEFORE_TARGET:
        return ResumeDecision(planned, Action.RUN, Reason.FAILED_BEFORE_TARGET)
    if latest.status is CheckpointStatus.FAILED:
        return ResumeDecision(planned, Action.RUN, Reason.PREVIOUS_FAILURE)
    # PLANNED / LOADED / unguarded EXPORTED: legacy behaviour, the previous attempt stopped before the target.
    return ResumeDecision(planned, Action.RUN, Reason.INTERRUPTED_BEFORE_TARGET)


def committed_empty(checkpoint: PartitionCheckpoint) -> bool:
    """A commit of a day, month or integer range that recorded 0 rows: what a ``replace_partition`` run leaves
    where the source held no row of it (the lookback emptied it as vanished, or its rows left between the
    plan and the read). A ``list`` value is planned and committed empty while it has no rows, so it is none.
    """
    return (
        checkpoint.status is CheckpointStatus.COMMITTED
        and checkpoint.rows == 0
        and checkpoint.bounds.kind is BoundsKind.RANGE
    )


def _rerun_empty_commits(
    decisions: list[ResumeDecision], latest: Mapping[str, PartitionCheckpoint]
) -> list[ResumeDecision]:
    """``replace_partition``: a skipped partition whose commit recorded 0 rows runs again, as the source
    plans it (it holds rows there now).

    Seen: a re-sync job took six days out of the source for one run (deleted, or flipped to a status the
    query filters); the lookback emptied them as vanished, committing each with 0 rows. Back in the source,
    they were skipped as committed, the lookback moved only its N newest again, and the others stayed empty
    in the target for good (9 of 30 rows, exit 0, no word). A replace deletes within the bounds before it
    inserts, so running one again duplicates nothing; such a partition takes no lookback slot."""
    return [
        ResumeDecision(d.partition, Action.RUN, Reason.EMPTY_WHEN_COMMITTED)
        if d.action is Action.SKIP
        and d.reason is Reason.COMMITTED
        and (checkpoint := latest.get(d.partition.partition_id)) is not None
        and committed_empty(checkpoint)
        else d
        for d in decisions
    ]


def _attested_over_unreadable(checkpoint: PartitionCheckpoint) -> bool:
    resolution = checkpoint.diagnostics.get("resolution")
    return isinstance(resolution, dict) and resolution.get("over_unreadable_row") is True


def plan_resume(
    planned: Sequence[PlannedPartition],
    latest: Mapping[str, PartitionCheckpoint],
    strategy: Strategy,
    run_id: str,
    *,
    partitioning: Partitioning | None = None,
    now: datetime | None = None,
    vanished: Sequence[PlannedPartition] = (),
) -> list[ResumeDecision]:
    """Skip committed partitions (on ``replace_partition`` not those committed with 0 rows:
    ``_rerun_empty_commits``); run the rest; then hold back open partitions and add the lookback.

    ``vanished``: partitions the source no longer plans whose rows the target still holds
    (``TransferEngine._still_held``); those newer than the oldest of the lookback's N run beside them, taking
    no slot (their bounds are emptied in the target).

    ``full_refresh`` rewrites the whole table, so it is all-or-nothing: a retry of the same run skips only
    when every partition was committed by that run; a new run refreshes everything. The manifest refuses
    ``settle`` and ``lookback`` there.
    """
    decisions = [_decide(p, latest.get(p.partition_id)) for p in planned]
    if strategy is Strategy.FULL_REFRESH:
        _refuse_late_row_keys(partitioning, strategy)
        committed_by_this_run = all(
            d.action is Action.SKIP and latest[d.partition.partition_id].run_id == run_id for d in decisions
        )
        if not committed_by_this_run:
            return [
                d
                if d.action is Action.RUN
                else ResumeDecision(d.partition, Action.RUN, Reason.FULL_REFRESH_NEW_RUN)
                for d in decisions
            ]
        return decisions
    if strategy is Strategy.REPLACE_PARTITION:
        decisions = _rerun_empty_commits(decisions, latest)
    if partitioning is None:
        return decisions
    settle = partitioning.settle_delta()
    settled_before: datetime | None = None
    if settle is not None:
        if now is None:
            raise ValueError("settle needs the clock's now")
        settled_before = settled_cutoff(now, settle)
        decisions = _hold_open(decisions, settled_before)
    if partitioning.lookback is not None:
        if strategy is not Strategy.REPLACE_PARTITION:
            _refuse_late_row_keys(partitioning, strategy)
        decisions = _look_back(decisions, partitioning.lookback, settled_before, vanished, now)
    return decisions


def settled_cutoff(now: datetime, settle: timedelta) -> datetime:
    """The instant before which a partition's upper bound must lie for it to be settled (``now - settle``)."""
    if now.tzinfo is None:
        raise ValueError("the clock must give a timezone-aware time")
    return now.astimezone(timezone.utc) - settle


def upper_instant(bounds: PartitionBounds) -> datetime | None:
    """A time-bound partition's upper bound as a UTC instant (None for bounds without one)."""
    return _instant(bounds, bounds.upper)


def lower_instant(bounds: PartitionBounds) -> datetime | None:
    """A time-bound partition's lower bound as a UTC instant (None for bounds without one)."""
    return _instant(bounds, bounds.lower)


def _instant(bounds: PartitionBounds, side: str | None) -> datetime | None:
    """``side`` (one of ``bounds``' two) as a UTC instant, where ``bounds`` is a time range."""
    if bounds.kind is not BoundsKind.RANGE or side is None or bounds.value_type not in ("date", "datetime"):
        return None
    moment = datetime.fromisoformat(side)
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def takes_a_slot(bounds: PartitionBounds, settled_before: datetime | None, now: datetime | None) -> bool:
    """A committed partition the lookback ranks for its N slots: settled, and begun (its lower bound not
    in the future).

    A day not begun yet (a scheduled order 40 days ahead) is the newest by bounds for weeks: it held the
    only slot of ``lookback: 1`` for good, and today's day, committed while still filling, never ran again
    (its late rows lost, exit 0). It ranks from its own day on, when its rows are due."""
    if not is_settled(bounds, settled_before):
        return False
    lower = lower_instant(bounds)
    return now is None or lower is None or lower <= now.astimezone(timezone.utc)


def is_settled(bounds: PartitionBounds, settled_before: datetime | None) -> bool:
    """No rows may arrive any more (always, without ``settle``: ``settled_before`` None)."""
    return settled_before is None or not is_open(bounds, settled_before)


def is_open(bounds: PartitionBounds, settled_before: datetime) -> bool:
    """Rows may still arrive: the upper bound is later than ``now - settle``.

    Bounds without a time upper bound count as open: the manifest allows ``settle`` only on day/month
    partitioning, so such bounds mean something is off, and holding a partition back loses nothing.
    """
    upper = upper_instant(bounds)
    return upper is None or upper > settled_before


def _hold_open(decisions: list[ResumeDecision], settled_before: datetime) -> list[ResumeDecision]:
    """A partition that would run but is still open is planned and skipped; committed ones stay as they are."""
    return [
        ResumeDecision(d.partition, Action.SKIP, Reason.OPEN_PARTITION)
        if d.action is Action.RUN and is_open(d.partition.bounds, settled_before)
        else d
        for d in decisions
    ]


def _look_back(
    decisions: list[ResumeDecision],
    count: int,
    settled_before: datetime | None,
    vanished: Sequence[PlannedPartition] = (),
    now: datetime | None = None,
) -> list[ResumeDecision]:
    """The last ``count`` settled, begun committed partitions in bounds order (the planner's order) run
    again (``takes_a_slot``); so
    does every settled vanished one newer than the oldest of them (all of them, while fewer than ``count``
    are committed), to be emptied.

    A vanished partition takes no slot: it used to compete, so a deleted day pushed a committed day's late
    rows out of the lookback, and days emptied before kept their slots for good while a day the source
    emptied later, just below them, stayed in the target. The caller passes only those the target still
    holds rows of (``TransferEngine._still_held``)."""

    committed = [
        (i, d.partition)
        for i, d in enumerate(decisions)
        if d.action is Action.SKIP
        and d.reason is Reason.COMMITTED
        and takes_a_slot(d.partition.bounds, settled_before, now)
    ]
    chosen = committed[-count:]
    oldest_chosen = bounds_order(chosen[0][1].bounds) if len(committed) >= count else None
    again = {i for i, _ in chosen}
    looked_back = [
        ResumeDecision(d.partition, Action.RUN, Reason.LOOKBACK) if i in again else d
        for i, d in enumerate(decisions)
    ]
    emptied = [
        ResumeDecision(p, Action.RUN, Reason.LOOKBACK)
        for p in vanished
        if is_settled(p.bounds, settled_before)
        and (oldest_chosen is None or bounds_order(p.bounds) > oldest_chosen)
    ]
    if not emptied:
        return looked_back
    return sorted([*looked_back, *emptied], key=lambda d: bounds_order(d.partition.bounds))


def _refuse_late_row_keys(partitioning: Partitioning | None, strategy: Strategy) -> None:
    """Fail closed if a manifest check was bypassed: re-moving under append duplicates, and a full refresh
    without its open partitions would drop them from the target."""
    if partitioning is None:
        return
    if partitioning.lookback is not None or (
        strategy is Strategy.FULL_REFRESH and partitioning.settle is not None
    ):
        raise DponeError(
            ErrorCode.MANIFEST_INVALID,
            f"source.partitioning settle/lookback do not apply to sink.strategy {strategy.value}",
            details={"strategy": strategy.value},
        )


def still_filling(
    decisions: Sequence[ResumeDecision],
    strategy: Strategy,
    partitioning: Partitioning | None,
    now: datetime,
) -> list[PlannedPartition]:
    """Partitions this run moves that may still receive rows, which no later run of the route moves again.

    ``incremental_append`` (and ``replace_partition`` without ``lookback``) skip a committed partition for
    good, so rows that reach the source later within its bounds are never moved. Three kinds of partition
    are known to be in that state when they are committed: a day or month whose upper bound is still in
    the future (today's day, unless ``settle`` holds it back), the newest ``integer_range`` range (an id
    sequence keeps filling it), and every ``list`` value (a value has no end: a region or a status keeps
    receiving rows, and a listed value with no rows yet is committed empty); and the one partition of a
    route without partitioning (the whole table, moved once). The run says so (a notice) rather than
    committing them without a word.
    """
    if partitioning is None or strategy is Strategy.FULL_REFRESH:
        return []
    running = [d.partition for d in decisions if d.action is Action.RUN]
    if not running:
        return []
    if strategy is Strategy.REPLACE_PARTITION and partitioning.lookback:
        if partitioning.kind is not PartitionKind.LIST:
            return []  # the lookback moves the newest begun partitions again; a day ahead ranks once begun
        # a value has no end, and a lookback of fewer slots than values never moves the others again
        reached = {d.partition.partition_id for d in decisions[-partitioning.lookback :]}
        return [p for p in running if p.partition_id not in reached]
    if partitioning.kind in (PartitionKind.DAY, PartitionKind.MONTH):
        instant = now.astimezone(timezone.utc)
        return [p for p in running if (upper := upper_instant(p.bounds)) is not None and upper > instant]
    if partitioning.kind is PartitionKind.INTEGER_RANGE:
        ranges = [
            (lower, d.partition)
            for d in decisions
            if (lower := _integer_lower(d.partition.bounds)) is not None
        ]
        if not ranges:
            return []
        newest = max(ranges, key=lambda pair: pair[0])[1]
        return [newest] if any(p.partition_id == newest.partition_id for p in running) else []
    if partitioning.kind in (PartitionKind.LIST, PartitionKind.NONE):
        return running  # a value has no end; without partitioning the whole table is one partition
    return []


def _integer_lower(bounds: PartitionBounds) -> int | None:
    if bounds.kind is not BoundsKind.RANGE or bounds.value_type != "integer" or bounds.lower is None:
        return None
    try:
        return int(bounds.lower)
    except ValueError:
        return None
