"""Per-partition resume decisions, taken only after the route-wide guard scan found nothing unsafe."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.guard import GuardPhase, read_guard
from airflow_provider_dpone.contracts.partition import PlannedPartition
from airflow_provider_dpone.contracts.route import Strategy


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


@dataclass(frozen=True)
class ResumeDecision:
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


def _attested_over_unreadable(checkpoint: PartitionCheckpoint) -> bool:
    resolution = checkpoint.diagnostics.get("resolution")
    return isinstance(resolution, dict) and resolution.get("over_unreadable_row") is True


def plan_resume(
    planned: Sequence[PlannedPartition],
    latest: Mapping[str, PartitionCheckpoint],
    strategy: Strategy,
    run_id: str,
) -> list[ResumeDecision]:
    """Skip committed partitions; run the rest.

    ``full_refresh`` rewrites the whole table, so it is all-or-nothing: a retry of the same run skips only
    when every partition was committed by that run; a new run refreshes everything.
    """
    decisions = [_decide(p, latest.get(p.partition_id)) for p in planned]
    if strategy is Strategy.FULL_REFRESH:
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
