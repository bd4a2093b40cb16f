"""Guard behaviours each proven by a test that fails without them (batch ID, target-call failure path)."""

from __future__ import annotations

import traceback
from collections.abc import Iterable

import pytest

from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.partition import canonical_json, sha256_tag
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.runtime.guard.batch_id import checkpoint_batch_id
from tests.doubles import (
    InjectedFault,
    InMemoryCheckpointStore,
    RecordingSink,
    phase_of,
    transfer_engine,
)


def test_the_batch_id_is_the_digest_of_the_run_id_and_the_sorted_partition_ids() -> None:
    expected = sha256_tag(canonical_json({"run_id": "run-7", "partition_ids": ["a", "b", "c"]}))
    assert checkpoint_batch_id("run-7", ["c", "a", "b"]) == expected
    assert checkpoint_batch_id("run-7", ["b", "c", "a"]) == expected  # order of the active list is irrelevant
    assert checkpoint_batch_id("run-8", ["a", "b", "c"]) != expected  # a new run is a new batch
    assert checkpoint_batch_id("run-7", ["a", "b"]) != expected


class RaisingInsideTheCall(RecordingSink):
    """Raises from inside ``load`` after consuming a chunk; keeps the permit and the raised object."""

    def __init__(self) -> None:
        super().__init__()
        self.raised: InjectedFault | None = None
        self.permit: TargetPermit | None = None

    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        self.permit = permit
        permit.require_open(table)
        next(iter(chunks))
        self.raised = InjectedFault("connection dropped mid-insert")
        raise self.raised


@pytest.mark.parametrize("strategy", ["incremental_append", "full_refresh", "replace_partition"])
def test_a_target_call_failure_reraises_the_same_object_closes_the_permit_and_marks_outcome_unknown(
    strategy: str,
) -> None:
    store = InMemoryCheckpointStore()
    sink = RaisingInsideTheCall()
    engine = transfer_engine(store=store, sink=sink, strategy=strategy)

    with pytest.raises(InjectedFault) as caught:
        engine.run("run-1")

    assert caught.value is sink.raised  # the very object, not a copy or a wrapper
    assert traceback.extract_tb(caught.value.__traceback__)[-1].name == "load"  # its own traceback
    assert sink.permit is not None
    with pytest.raises(DponeError):  # the window closed with the failed call: the permit opens nothing now
        sink.permit.require_open(sink.permit.route.target_table)
    latest = store.list_latest(engine._route)
    assert len(latest) == 3
    # the strategy under test is the one that ran
    assert {c.route.strategy.value for c in latest} == {strategy}
    assert {phase_of(c) for c in latest} == {"target_outcome_unknown"}
    assert {c.status.value for c in latest} == {"FAILED"}


@pytest.mark.parametrize(
    ("status", "phase", "wrong_recovery"),
    [
        ("EXPORTED", "armed", "retry_allowed"),
        ("FAILED", "failed_before_target", "manual_reconciliation_required"),
        ("COMMITTED", "checkpoint_committed", "retry_allowed"),
        ("FAILED", "checkpoint_incomplete", "none"),
        ("FAILED", "target_outcome_unknown", "retry_allowed"),
    ],
)
def test_a_recovery_that_does_not_match_its_phase_is_an_invalid_guard(
    status: str, phase: str, wrong_recovery: str
) -> None:
    from datetime import datetime, timezone

    from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
    from airflow_provider_dpone.contracts.guard import (
        GUARD_KEY,
        GuardInvalid,
        GuardPhase,
        TargetCommitGuard,
        read_guard,
    )
    from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
    from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy

    guard = TargetCommitGuard.for_phase(GuardPhase(phase), "sha256:" + "c" * 64).to_json()
    at = datetime(2026, 12, 1, tzinfo=timezone.utc)

    def with_recovery(recovery: str) -> PartitionCheckpoint:
        return PartitionCheckpoint(
            partition_id="p",
            route=RouteIdentity(source_table="a", target_table="d.t", strategy=Strategy.INCREMENTAL_APPEND),
            run_id="r",
            status=CheckpointStatus(status),
            started_at=at,
            query_hash="q",
            schema_hash="s",
            bounds=PartitionBounds(kind=BoundsKind.ALL, label="all"),
            diagnostics={GUARD_KEY: {**guard, "recovery": recovery}},
        )

    assert read_guard(with_recovery(str(guard["recovery"]))) is not None  # the matching pair is valid
    with pytest.raises(GuardInvalid) as caught:
        read_guard(with_recovery(wrong_recovery))
    assert caught.value.reason == "recovery does not match the guard phase"


class CommitsALookAlikeThenFails(InMemoryCheckpointStore):
    """On the commit batch, stores a COMMITTED record whose bytes differ from the candidate, then raises."""

    def write_batch(self, checkpoints):  # type: ignore[no-untyped-def]
        if checkpoints and phase_of(checkpoints[0]) == "checkpoint_committed":
            first = checkpoints[0]
            super().write_batch([first.model_copy(update={"rows": (first.rows or 0) + 1})])
            raise InjectedFault("commit batch failed after a look-alike row")
        super().write_batch(checkpoints)


def test_reconciliation_keeps_only_candidates_whose_exact_bytes_are_durable() -> None:
    store = CommitsALookAlikeThenFails()
    engine = transfer_engine(store=store, open_sink=RecordingSink)

    with pytest.raises(InjectedFault):
        engine.run("run-1")

    latest = store.list_latest(engine._route)
    # the look-alike COMMITTED row is not this attempt's record: it is marked incomplete, not trusted
    assert {(c.status.value, phase_of(c)) for c in latest} == {("FAILED", "checkpoint_incomplete")}
