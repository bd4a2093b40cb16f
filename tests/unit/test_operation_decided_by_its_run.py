"""Which operations a retry of their own run decides without on-call (what the route sensor need not wait on).

A run's own operation is resumed, not scanned as a block: a retry observes a pending capsule again,
replays a complete one, or reports a final failure. A retained reader guard is the exception: the retry
does not take it over, so on-call must release it (``dpone replay resolve --as retry``). Real capsule
stores and the transfer engine, scripted readers (``tests.quality_replay_rig``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.capsule_store.tables import CAPSULE_TABLE
from airflow_provider_dpone.contracts.errors import ErrorCode
from airflow_provider_dpone.contracts.target_observation import ReaderOutcomeKind, ReaderReason
from airflow_provider_dpone.runtime.replay.scan import OperationRecord, OperationState, scan_capsules
from tests.doubles import orders_rows
from tests.quality_replay_rig import Rig, expect_code, outcome, quality_manifest

MANIFEST = quality_manifest()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path, orders_rows())
    yield made
    made.close()


def the_operation(rig: Rig) -> OperationRecord:
    [record], _ = scan_capsules(rig.latest(MANIFEST.route()), lambda: rig.stores)
    return record


@pytest.mark.parametrize(
    ("verified", "state", "decided"),
    [(True, OperationState.TARGET_PENDING, True), (False, OperationState.TARGET_PENDING, False)],
    ids=["guard-released", "guard-retained"],
)
def test_a_pending_operation_is_decided_by_its_run_unless_its_reader_guard_is_retained(
    rig: Rig, verified: bool, state: OperationState, decided: bool
) -> None:
    rig.reader.outcomes = [
        outcome(ReaderOutcomeKind.TIMEOUT, ReaderReason.BUDGET_EXHAUSTED, verified=verified)
    ]
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-1"))
    record = the_operation(rig)
    assert record.state is state and record.blocking
    assert record.decided_by_its_run is decided


def test_a_failed_verdict_is_decided_by_its_run_and_a_missing_capsule_is_not(rig: Rig) -> None:
    rig.reader.before_observe = lambda: rig.target_rows().append((999, dt.date(2026, 11, 29), 5))
    expect_code(ErrorCode.QUALITY_CHECK_FAILED, lambda: rig.engine(MANIFEST).run("run-1"))
    record = the_operation(rig)
    assert record.state is OperationState.COMPLETE_FAILED and record.blocking
    assert record.decided_by_its_run  # its retry reports the final failure from the evidence

    with sa.create_engine(rig.capsules._engine.url).begin() as conn:  # the capsule store lost its rows
        conn.execute(sa.text(f"DELETE FROM {CAPSULE_TABLE}"))
    missing = the_operation(rig)
    assert missing.state is OperationState.MISSING and missing.blocking and not missing.decided_by_its_run
