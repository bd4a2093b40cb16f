"""A commit still stands under later attempts that never reached the target (``with_standing_commits``).

Pure over an in-memory store: only an attempt's own progress and ``failed_before_target`` records are looked
through, and an attempt an operator resolved ``not-applied`` (whatever it left in the target is this route's);
an unresolved armed attempt or a resolution that counted another route's rows there (a fan-in) between them
and the commit leaves the latest record to decide, and a planned partition (run again anyway) is never looked up. The black-box proof is in
``tests/integration/test_restored_store_lookback.py``.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.runtime.route_family import with_standing_commits
from tests.doubles import InMemoryCheckpointStore
from tests.unit.late_rows_rig import committed_checkpoint, planned_days

BATCH = "sha256:" + "b" * 64


def _attempt(
    commit: PartitionCheckpoint, phase: GuardPhase | None, **diagnostics: object
) -> PartitionCheckpoint:
    """A later attempt's record of the committed partition: guarded in ``phase``, or unguarded LOADED."""
    if phase is None:
        return commit.model_copy(
            update={"run_id": "run-1", "status": CheckpointStatus.LOADED, "diagnostics": {}}
        )
    status = CheckpointStatus.EXPORTED if phase is GuardPhase.ARMED else CheckpointStatus.FAILED
    guard = TargetCommitGuard.for_phase(phase, BATCH).to_json()
    return commit.model_copy(
        update={"run_id": "run-1", "status": status, "diagnostics": {GUARD_KEY: guard, **diagnostics}}
    )


def _standing(records: list[PartitionCheckpoint], planned: bool = False) -> PartitionCheckpoint:
    store = InMemoryCheckpointStore()
    store.write_batch(records)
    part = planned_days()[0]
    (latest,) = store.list_latest(records[0].route)
    (standing,) = with_standing_commits(store, [latest], [part] if planned else [])
    return standing


def test_a_commit_under_an_attempts_progress_and_its_failure_before_the_target_still_stands() -> None:
    commit = committed_checkpoint(planned_days()[0])
    loaded = _attempt(commit, None)
    failed = _attempt(commit, GuardPhase.FAILED_BEFORE_TARGET)

    assert _standing([commit, loaded, failed]) == commit
    assert _standing([commit, loaded]) == commit  # killed before its failure was written


def test_a_commit_under_an_attempt_resolved_not_applied_still_stands() -> None:
    """Seen: a day's attempt killed in the target, resolved ``not-applied`` as the runbook says, then the
    source emptied the day; every later run stopped with ``unrecorded_rows_in_lookback``."""
    commit = committed_checkpoint(planned_days()[0])
    armed = _attempt(commit, GuardPhase.ARMED)
    unknown = _attempt(commit, GuardPhase.TARGET_OUTCOME_UNKNOWN)
    resolved = _attempt(
        commit,
        GuardPhase.FAILED_BEFORE_TARGET,
        resolution={"as": "not-applied", "forced": False, "other_routes_rows": 0, "target_rows": 3},
    )
    failed = _attempt(commit, GuardPhase.FAILED_BEFORE_TARGET)

    assert _standing([commit, armed, resolved]) == commit
    partly = _attempt(
        commit,
        GuardPhase.FAILED_BEFORE_TARGET,
        resolution={"as": "not-applied", "forced": False, "other_routes_rows": 0, "target_rows": 2},
    )
    assert _standing([commit, armed, partly]) == partly  # the target held 2 of the commit's 3 rows: rewritten
    assert _standing([commit, armed, unknown, resolved, failed]) == commit
    unknown_share = _attempt(
        commit,
        GuardPhase.FAILED_BEFORE_TARGET,
        resolution={"as": "not-applied", "forced": True, "other_routes_rows": None},
    )
    own_rows = _attempt(
        commit,
        GuardPhase.FAILED_BEFORE_TARGET,
        resolution={"as": "not-applied", "forced": True, "other_routes_rows": 0, "target_rows": 3},
    )
    assert _standing([commit, armed, own_rows]) == commit  # forced over its own commit, as the runbook says
    assert _standing([commit, armed, unknown_share]) == unknown_share  # other routes' share unknown


def test_an_armed_attempt_or_an_operators_resolution_between_leaves_the_latest_record_to_decide() -> None:
    commit = committed_checkpoint(planned_days()[0])
    failed = _attempt(commit, GuardPhase.FAILED_BEFORE_TARGET)
    resolved = _attempt(
        commit,
        GuardPhase.FAILED_BEFORE_TARGET,
        resolution={"as": "not-applied", "forced": True, "other_routes_rows": 40},
    )
    armed = _attempt(commit, GuardPhase.ARMED)
    unknown = _attempt(commit, GuardPhase.TARGET_OUTCOME_UNKNOWN)

    assert _standing([commit, armed, failed]) == failed
    assert _standing([commit, unknown, failed]) == failed
    assert _standing([commit, resolved]) == resolved
    assert _standing([commit, resolved, failed]) == failed


def test_a_planned_partition_or_one_never_committed_keeps_its_latest_record() -> None:
    commit = committed_checkpoint(planned_days()[0])
    failed = _attempt(commit, GuardPhase.FAILED_BEFORE_TARGET)

    assert _standing([commit, failed], planned=True) == failed
    assert _standing([failed]) == failed
