"""``replace_partition``: which committed partitions a later commit of another definition replaced.

``runtime/superseded.rerun_superseded`` runs them again; checked with in-memory checkpoints.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, ResumeDecision
from airflow_provider_dpone.runtime.superseded import rerun_superseded
from tests.builders import day, stored_checkpoint

ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.REPLACE_PARTITION
)
T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
MINE, THEIRS = "sha256:" + "a" * 64, "sha256:" + "b" * 64
NOV_29, NOV_30 = day("2026-11-29", "2026-11-30"), day("2026-11-30", "2026-12-01")


def checkpoint(query_hash: str, bounds: PartitionBounds, at: datetime) -> PartitionCheckpoint:
    return stored_checkpoint(ROUTE, bounds, at, query_hash=query_hash)


def skipped(mine: PartitionCheckpoint) -> ResumeDecision:
    planned = PlannedPartition(
        partition_id=mine.partition_id, bounds=mine.bounds, query_hash=MINE, schema_hash=MINE
    )
    return ResumeDecision(planned, Action.SKIP, Reason.COMMITTED)


def test_a_partition_another_definition_replaced_later_runs_again() -> None:
    mine = checkpoint(MINE, NOV_30, T0)
    decided = rerun_superseded(
        [skipped(mine)], {mine.partition_id: mine}, [checkpoint(THEIRS, NOV_30, T0 + timedelta(hours=1))]
    )
    assert [(d.action, d.reason) for d in decided] == [(Action.RUN, Reason.QUERY_OR_SCHEMA_CHANGED)]


def test_an_older_or_disjoint_commit_of_another_definition_changes_nothing() -> None:
    mine = checkpoint(MINE, NOV_30, T0)
    for other in (
        checkpoint(THEIRS, NOV_30, T0 - timedelta(hours=1)),
        checkpoint(THEIRS, NOV_29, T0 + timedelta(hours=1)),
    ):
        decided = rerun_superseded([skipped(mine)], {mine.partition_id: mine}, [other])
        assert [(d.action, d.reason) for d in decided] == [(Action.SKIP, Reason.COMMITTED)]


def test_decisions_that_are_not_committed_skips_are_left_alone() -> None:
    mine = checkpoint(MINE, NOV_30, T0)
    open_day = skipped(mine)._replace(reason=Reason.OPEN_PARTITION)
    running = skipped(mine)._replace(action=Action.RUN, reason=Reason.MISSING_CHECKPOINT)
    later = [checkpoint(THEIRS, NOV_30, T0 + timedelta(hours=1))]
    assert rerun_superseded([open_day, running], {mine.partition_id: mine}, later) == [open_day, running]
