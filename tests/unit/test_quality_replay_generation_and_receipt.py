"""Two ADR 0074 steps with their own proof (issue 14, point 6):

* a completed retry validates the CURRENT generation: the route's checkpoints must still show exactly
  this operation's batch, committed, or the historical evidence is not replayed;
* the COMPLETE record is accepted only as read back from the store while this operation still holds the
  reader guard (the fresh receipt): a lost write or a guard taken away in between is never a success.

Faults are injected as port implementations wrapping the real SQLite capsule and guard stores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.capsule import CapsuleChain, CapsuleRecord, CapsuleV1, TargetComplete
from airflow_provider_dpone.contracts.errors import ErrorCode
from airflow_provider_dpone.contracts.target_observation import ReaderGuardState
from airflow_provider_dpone.manifests.identity import semantic_identity
from airflow_provider_dpone.runtime.replay.ref import CAPSULE_REF_KEY, operation_id_for
from airflow_provider_dpone.runtime.replay.scan import CapsuleStores
from tests.doubles import orders_rows
from tests.quality_replay_rig import Rig, expect_code, quality_manifest

MANIFEST = quality_manifest(checks=({"type": "row_count"}, {"type": "not_null", "columns": ["amount"]}))
OPERATION = operation_id_for(semantic_identity(MANIFEST), "run-1")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path, orders_rows())
    yield made
    made.close()


def test_a_completed_retry_whose_generation_was_replaced_is_not_replayed(rig: Rig) -> None:
    rig.engine(MANIFEST).run("run-1")
    latest = rig.store.list_latest(MANIFEST.route())
    assert len(latest) == 3
    # another operation now owns one of the batch's partitions: its latest checkpoint no longer names run-1's
    # capsule (same committed guard, so the route itself is clear)
    replaced = latest[0]
    diagnostics = {k: v for k, v in replaced.diagnostics.items() if k != CAPSULE_REF_KEY}
    rig.store.write_batch([replaced.model_copy(update={"diagnostics": diagnostics})])
    rig.events.clear()

    err = expect_code(ErrorCode.CAPSULE_CONFLICT, lambda: rig.engine(MANIFEST).run("run-1"))
    assert err.details["operation_id"] == OPERATION
    assert "no longer exactly the route's committed state" in err.safe_message
    # the way out is named: no retry of run-1 can measure it again (every other message led back here); it
    # completed and blocks nothing, so a replay resolve would refuse it: a new run ID is the way
    assert any("new run ID" in line for line in err.hint_lines), err.hint_lines
    assert not any("replay resolve" in line for line in err.hint_lines), err.hint_lines
    assert rig.events == []  # refused from durable state alone: no source, sink or reader


def test_a_completed_retry_whose_generation_is_intact_is_replayed(rig: Rig) -> None:
    rig.engine(MANIFEST).run("run-1")
    rig.events.clear()
    report = rig.engine(MANIFEST).run("run-1")
    assert report.quality is not None and report.quality.replayed
    assert rig.events == ["sink.open", "sink.close"]  # the target only counted: no source, load or reader


class LosingCapsules:
    """A capsule store that acknowledges the COMPLETE append but reads back the chain without it."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.lost: set[str] = set()

    def current_version(self, operation_id: str) -> int:
        return self.inner.current_version(operation_id)  # type: ignore[attr-defined, no-any-return]

    def append(self, operation_id: str, expected_version: int, record: CapsuleV1 | CapsuleRecord) -> int:
        if isinstance(record, CapsuleRecord) and isinstance(record.body, TargetComplete):
            self.lost.add(operation_id)
            return expected_version + 1  # acknowledged, never stored
        return self.inner.append(operation_id, expected_version, record)  # type: ignore[attr-defined, no-any-return]

    def read(self, operation_id: str) -> CapsuleV1 | CapsuleChain | None:
        return self.inner.read(operation_id)  # type: ignore[attr-defined, no-any-return]


class GuardThief:
    """Capsule store wrapper: right after the COMPLETE append, the reader guard is released behind the
    owner's back (as a wrong operator resolution or a second owner would)."""

    def __init__(self, inner: object, rig: Rig) -> None:
        self.inner = inner
        self.rig = rig

    def current_version(self, operation_id: str) -> int:
        return self.inner.current_version(operation_id)  # type: ignore[attr-defined, no-any-return]

    def append(self, operation_id: str, expected_version: int, record: CapsuleV1 | CapsuleRecord) -> int:
        done = self.inner.append(operation_id, expected_version, record)  # type: ignore[attr-defined]
        if isinstance(record, CapsuleRecord) and isinstance(record.body, TargetComplete):
            chain = self.inner.read(operation_id)  # type: ignore[attr-defined]
            key = chain.core.target_plan.generation_key()
            held = self.rig.guards.read(operation_id, key)
            assert held is not None and held.state is ReaderGuardState.ACQUIRED
            self.rig.guards.release(operation_id, key, held.owner_token)
        return done  # type: ignore[no-any-return]

    def read(self, operation_id: str) -> CapsuleV1 | CapsuleChain | None:
        return self.inner.read(operation_id)  # type: ignore[attr-defined, no-any-return]


def test_a_complete_record_that_does_not_read_back_is_never_accepted(rig: Rig) -> None:
    rig.stores = CapsuleStores(capsules=LosingCapsules(rig.capsules), guards=rig.guards)  # type: ignore[arg-type]
    err = expect_code(ErrorCode.CAPSULE_CONFLICT, lambda: rig.engine(MANIFEST).run("run-1"))
    assert err.details["operation_id"] == OPERATION
    stored = rig.capsules.read(OPERATION)
    assert isinstance(stored, CapsuleChain) and stored.terminal is None  # still TARGET_PENDING

    rig.stores = CapsuleStores(capsules=rig.capsules, guards=rig.guards)
    report = rig.engine(MANIFEST).run("run-1")  # the retry observes again and completes honestly
    assert report.quality is not None and report.quality.verdict == "passed"


def test_a_guard_lost_before_the_receipt_is_never_a_success(rig: Rig) -> None:
    rig.stores = CapsuleStores(capsules=GuardThief(rig.capsules, rig), guards=rig.guards)  # type: ignore[arg-type]
    err = expect_code(ErrorCode.CAPSULE_CONFLICT, lambda: rig.engine(MANIFEST).run("run-1"))
    assert "reader guard changed under this operation" in err.safe_message
