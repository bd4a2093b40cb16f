"""An operator can always find and resolve the operation that blocks a route, after the manifest changed too.

An operation's ID hashes the manifest's semantic identity and the run ID, so any edit of the manifest (a
check loosened after a quality failure, the table respelled) gives the run that blocks the route another
ID. ``dpone replay resolve --run-id`` must still find it (by the run ID its checkpoints record), and
``status``, ``resolve`` and a run must read the same checkpoints: the route under every stored spelling.
Real capsule stores, the transfer engine, scripted readers (``tests.quality_replay_rig``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import ErrorCode
from airflow_provider_dpone.contracts.manifest import Manifest
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.contracts.target_observation import ReaderOutcomeKind, ReaderReason
from airflow_provider_dpone.manifests.identity import semantic_identity
from airflow_provider_dpone.runtime.replay.ref import operation_id_for
from airflow_provider_dpone.runtime.replay.resolution import (
    ReplayResolutionRequest,
    ReplayResolveAs,
    ReplayStatus,
    replay_status,
    resolve_replay,
)
from airflow_provider_dpone.runtime.replay.scan import OperationRecord, OperationState
from airflow_provider_dpone.runtime.route_family import load_family
from tests.doubles import orders_rows
from tests.quality_replay_rig import Rig, expect_code, outcome, quality_manifest

BEFORE = quality_manifest(checks=({"type": "row_count"}, {"type": "not_null", "columns": ["amount"]}))
EDITED = quality_manifest(checks=({"type": "row_count"},))  # a check dropped after the failure
ROUTE = BEFORE.route()
PENDING = outcome(ReaderOutcomeKind.TIMEOUT, ReaderReason.BUDGET_EXHAUSTED, verified=True)
RETAINED = outcome(ReaderOutcomeKind.TIMEOUT, ReaderReason.BUDGET_EXHAUSTED, verified=False)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path, orders_rows())
    yield made
    made.close()


def resolve(
    rig: Rig,
    manifest: Manifest,
    run_id: str,
    resolve_as: ReplayResolveAs,
    latest: Sequence[PartitionCheckpoint] | None = None,
) -> tuple[OperationRecord, list[PartitionCheckpoint]]:
    """``dpone replay resolve`` with ``manifest`` (its identity) over ``latest`` (default: the route's
    latest checkpoints under every spelling, what the command reads)."""
    request = ReplayResolutionRequest(run_id, resolve_as, "target checked by hand", "oncall@host")
    identity = semantic_identity(manifest)
    found = rig.latest(ROUTE) if latest is None else latest
    return resolve_replay(rig.store, found, rig.stores, rig.clock, ROUTE, identity, request)


def status_of(
    rig: Rig, manifest: Manifest, latest: Sequence[PartitionCheckpoint] | None = None
) -> ReplayStatus:
    """``dpone replay status`` with ``manifest`` (see :func:`resolve`)."""
    found = rig.latest(ROUTE) if latest is None else latest
    return replay_status(found, lambda: rig.stores, semantic_identity(manifest), selector_on=True)


def blocked_by_a_run_of_the_manifest_before_the_edit(rig: Rig) -> None:
    rig.reader.outcomes = [PENDING]
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(BEFORE).run("run-1"))
    assert EDITED.route() == ROUTE and semantic_identity(BEFORE) != semantic_identity(EDITED)


def test_a_run_of_the_edited_manifest_says_the_blocking_run_cannot_be_retried_with_it(rig: Rig) -> None:
    blocked_by_a_run_of_the_manifest_before_the_edit(rig)
    err = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(EDITED).run("run-1"))
    line = next(line for line in err.hint_lines if "run=run-1" in line)
    assert "ran under another version of this manifest" in line and "resolve it as failed" in line

    before = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(BEFORE).run("run-2"))
    assert not any("another version" in line for line in before.hint_lines)  # the same manifest: no note


def test_status_lists_the_blocking_operation_as_recorded_under_another_manifest(rig: Rig) -> None:
    blocked_by_a_run_of_the_manifest_before_the_edit(rig)
    shown = status_of(rig, EDITED)
    assert shown.blocked
    [operation] = shown.as_json()["operations"]  # type: ignore[misc]
    assert operation["run_id"] == "run-1" and operation["under_another_manifest"] is True
    same = status_of(rig, BEFORE)
    assert same.under_another_manifest == frozenset()


def test_resolve_as_failed_by_run_id_after_the_manifest_was_edited_unblocks_the_route(rig: Rig) -> None:
    blocked_by_a_run_of_the_manifest_before_the_edit(rig)
    record, audit = resolve(rig, EDITED, "run-1", ReplayResolveAs.FAILED)
    assert (
        record.operation_id
        == operation_id_for(semantic_identity(BEFORE), "run-1")
        != operation_id_for(semantic_identity(EDITED), "run-1")
    )
    assert record.closed_by_operator and record.state is OperationState.FAILED and len(audit) == 3
    report = rig.engine(EDITED).run("run-2")  # unblocked; every partition stays committed
    assert report.partitions_committed == 0 and len(rig.target_rows()) == len(orders_rows())
    # the closed operation is never certified: its own run, with its own manifest, reports a failure
    expect_code(ErrorCode.QUALITY_CHECK_FAILED, lambda: rig.engine(BEFORE).run("run-1"))


def test_resolve_as_retry_after_the_edit_releases_the_guard_for_a_retry_with_the_manifest_it_ran_with(
    rig: Rig,
) -> None:
    rig.reader.outcomes = [RETAINED]
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(BEFORE).run("run-1"))
    record, _ = resolve(rig, EDITED, "run-1", ReplayResolveAs.RETRY)
    assert record.blocking and not record.guard_retained
    report = rig.engine(BEFORE).run("run-1")
    assert report.quality is not None and report.quality.verdict == "passed"
    assert not status_of(rig, EDITED).blocked


def test_a_run_id_no_checkpoint_records_is_refused_with_where_to_look(rig: Rig) -> None:
    blocked_by_a_run_of_the_manifest_before_the_edit(rig)
    err = expect_code(
        ErrorCode.USAGE,
        lambda: resolve(rig, EDITED, "run-9", ReplayResolveAs.FAILED),
    )
    assert any("dpone replay status" in line for line in err.hint_lines)


def test_of_two_operations_recording_one_run_id_resolve_takes_the_one_that_blocks(rig: Rig) -> None:
    blocked_by_a_run_of_the_manifest_before_the_edit(rig)
    resolve(rig, BEFORE, "run-1", ReplayResolveAs.FAILED)
    # the same run ID with the edited manifest: another operation, which moves a new day and stays pending
    rig.source.rows.append((100, dt.date(2026, 12, 1), 7))
    rig.reader.outcomes = [PENDING]
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(EDITED).run("run-1"))
    shown = status_of(rig, BEFORE)
    assert [r.run_id for r in shown.operations] == ["run-1", "run-1"] and shown.blocked

    record, audit = resolve(rig, BEFORE, "run-1", ReplayResolveAs.FAILED)
    assert record.operation_id == operation_id_for(semantic_identity(EDITED), "run-1") and len(audit) == 1
    assert rig.engine(EDITED).run("run-2").partitions_committed == 0


class LowerCaseNaming:
    """A test naming under which ``ANALYTICS...`` spellings are the canonical route's older spellings."""

    def canonical(self, route: RouteIdentity) -> RouteIdentity:
        return route.model_copy(update={"source_table": route.source_table.lower()})

    def legacy_query_hash(self, source_table: str) -> str:
        return "sha256:" + "c" * 64


def test_an_operation_referenced_under_an_older_spelling_is_listed_and_resolved(rig: Rig) -> None:
    blocked_by_a_run_of_the_manifest_before_the_edit(rig)
    older = ROUTE.model_copy(update={"source_table": ROUTE.source_table.upper()})
    moved = [c.model_copy(update={"route": older}) for c in rig.store.list_latest(ROUTE)]
    rig.store.rows.clear()
    rig.store.write_batch(moved)
    own = load_family(rig.store, ROUTE, LowerCaseNaming()).own
    assert rig.store.list_latest(ROUTE) == [] and len(own) == 3

    assert status_of(rig, BEFORE, own).blocked
    record, audit = resolve(rig, BEFORE, "run-1", ReplayResolveAs.FAILED, own)
    assert record.closed_by_operator and {c.route for c in audit} == {older}
    assert not status_of(rig, BEFORE, load_family(rig.store, ROUTE, LowerCaseNaming()).own).blocked


def test_resolve_by_run_id_finds_the_operation_whose_checkpoints_a_recorded_move_copied(rig: Rig) -> None:
    """A ``guard rebaseline --source-moved|--target-moved`` copies a commit under its own run ID, keeping
    the capsule reference: where the copy is the operation's only latest checkpoint (a daily run of one
    day), resolve by the run ID the blocked line names (the capsule's) found nothing, and no command
    unblocked the route."""
    blocked_by_a_run_of_the_manifest_before_the_edit(rig)
    copied = [c.model_copy(update={"run_id": "rebaseline__moved"}) for c in rig.latest(ROUTE)]

    record, audit = resolve(rig, EDITED, "run-1", ReplayResolveAs.FAILED, latest=copied)

    assert record.closed_by_operator and record.run_id == "run-1"
    assert audit and all(c.run_id == "rebaseline__moved" for c in audit)
