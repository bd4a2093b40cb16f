"""A lookback partition committed with fewer rows than the commit it replaced is named in a notice.

Pure: ``shrunk_by_lookback`` compares each lookback partition's new commit with the stored one it was planned
from; ``shrunk_notice`` words it. The black-box proof (a row moved into an older committed day, lost, named,
and reloaded by a wider lookback) is in ``tests/integration/test_late_rows.py``.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import PlannedPartition
from airflow_provider_dpone.runtime.lookback_shortfall import shrunk_by_lookback, shrunk_notice
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, ResumeDecision
from tests.unit.late_rows_rig import ROUTE, committed_checkpoint, planned_days


def _with_rows(checkpoint: PartitionCheckpoint, rows: int | None) -> PartitionCheckpoint:
    return checkpoint.model_copy(update={"rows": rows})


def _run(part: PlannedPartition, reason: Reason = Reason.LOOKBACK) -> ResumeDecision:
    return ResumeDecision(part, Action.RUN, reason)


def test_only_lookback_partitions_that_came_back_with_fewer_rows_are_named_with_how_many_fewer() -> None:
    days = planned_days()  # 11-28 .. 12-01; the stored commits hold 3 rows each
    stored = {p.partition_id: committed_checkpoint(p) for p in days}
    decisions = [
        ResumeDecision(days[0], Action.SKIP, Reason.COMMITTED),  # not read: nothing to compare
        _run(days[1]),  # 3 -> 3: unchanged
        _run(days[2]),  # 3 -> 1: two rows deleted or moved
        _run(days[3]),  # 3 -> 5: late rows
    ]
    now = [_with_rows(committed_checkpoint(p, "run-1"), n) for p, n in zip(days[1:], (3, 1, 5), strict=True)]

    assert shrunk_by_lookback(decisions, stored, now) == [(days[2].bounds, 2)]


def test_a_day_the_source_emptied_counts_and_new_or_uncounted_commits_do_not() -> None:
    days = planned_days()
    stored = {
        days[0].partition_id: committed_checkpoint(days[0]),
        days[1].partition_id: _with_rows(committed_checkpoint(days[1]), None),  # an older release's commit
    }
    decisions = [
        _run(days[0]),  # emptied at the source (a vanished day, run to be emptied): 3 -> 0
        _run(days[1]),
        _run(days[2], Reason.MISSING_CHECKPOINT),  # a new day: no commit to compare with
    ]
    now = [_with_rows(committed_checkpoint(p, "run-1"), 0) for p in days[:3]]

    assert shrunk_by_lookback(decisions, stored, now) == [(days[0].bounds, 3)]


def test_a_partition_this_run_did_not_commit_is_not_compared() -> None:
    (day, *_) = planned_days()
    stored = {day.partition_id: committed_checkpoint(day)}
    failed = committed_checkpoint(day, "run-1").model_copy(
        update={"status": CheckpointStatus.FAILED, "rows": 0}
    )

    assert shrunk_by_lookback([_run(day)], stored, [failed]) == []
    assert shrunk_by_lookback([_run(day)], stored, []) == []


def test_the_notice_names_a_few_partitions_the_rows_missing_and_the_commands_to_check_and_reload() -> None:
    days = planned_days()
    said = shrunk_notice(
        ROUTE, "order_date", [(p.bounds, 2) for p in days], "analytics.orders", "manifests/orders.yaml"
    )

    assert said is not None
    assert "4 partition(s)" in said and "8 row(s) fewer" in said
    assert "order_date=2026-11-28, order_date=2026-11-29, order_date=2026-11-30, ..." in said
    assert "order_date=2026-12-01" not in said  # a few labels, not every one
    assert "deleted at the source or moved to another partition (an update of order_date)" in said
    assert "not in analytics.orders" in said
    assert "`dpone checkpoints manifests/orders.yaml --verify`" in said
    assert "lookback reaches it" in said and "`dpone runbook guard`, 'Drifted partitions'" in said
    assert shrunk_notice(ROUTE, "order_date", [], "analytics.orders", "m.yaml") is None
