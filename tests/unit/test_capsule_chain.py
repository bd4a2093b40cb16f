"""The v2 capsule: sealed core, TARGET_PENDING, one terminal record, hash-chained and strictly ordered."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from airflow_provider_dpone.contracts.capsule import (
    GENESIS_SHA256,
    CapsuleInvalid,
    CapsuleRecord,
    CheckKind,
    CheckSeverity,
    PolicyCheck,
    ProbeEvidence,
    ProbeScope,
    QualityPolicy,
    SealedCore,
    TargetComplete,
    TargetFailed,
    TargetPending,
    parse_chain,
    validate_chain,
)
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.target_observation import (
    GenerationSelector,
    LoadIdSelector,
    MetricValue,
    ObservationMetric,
    ObservationStatus,
    ReaderOutcomeKind,
    TargetObservation,
    TargetReadRequest,
    UnavailableReason,
)

T0 = datetime(2026, 11, 30, 8, 0, 0, tzinfo=timezone.utc)
OP = "op-0001"


def plan(*, allow_unavailable: bool = False) -> TargetReadRequest:
    return TargetReadRequest(
        target_table="analytics.orders",
        selector=GenerationSelector(
            partitions=(
                PartitionBounds(
                    kind=BoundsKind.RANGE,
                    column="order_date",
                    lower="2026-11-30",
                    upper="2026-12-01",
                    value_type="date",
                    label="order_date=2026-11-30",
                ),
            ),
            load_id=LoadIdSelector(column="dpone_load_id", value="load-0001"),
        ),
        columns=("customer",),
        metrics=(ObservationMetric.ROW_COUNT, ObservationMetric.NULL_COUNT),
        allow_unavailable=allow_unavailable,
    )


def core_record(request: TargetReadRequest | None = None, *, run_id: str = "run-1") -> CapsuleRecord:
    return CapsuleRecord(
        operation_id=OP,
        version=1,
        prev_sha256=GENESIS_SHA256,
        body=SealedCore(
            identity="sha256:" + "1" * 64,
            run_id=run_id,
            route=RouteIdentity(
                source_table="dbo.orders",
                target_table="analytics.orders",
                strategy=Strategy.INCREMENTAL_APPEND,
            ),
            checkpoint_batch_id="sha256:" + "2" * 64,
            load_ids=("load-0001",),
            policy=QualityPolicy(
                checks=(PolicyCheck(check=CheckKind.ROW_COUNT, severity=CheckSeverity.ERROR),)
            ),
            probes=(
                ProbeEvidence(
                    scope=ProbeScope.SOURCE,
                    metrics=(MetricValue(metric=ObservationMetric.ROW_COUNT, value=10),),
                ),
            ),
            target_plan=request or plan(),
            sealed_at=T0,
        ),
    )


def pending_record(core: CapsuleRecord) -> CapsuleRecord:
    assert isinstance(core.body, SealedCore)
    return CapsuleRecord(
        operation_id=OP,
        version=2,
        prev_sha256=core.sha256(),
        body=TargetPending(
            core_sha256=core.sha256(),
            request_sha256=core.body.target_plan.sha256(),
            generation_key=core.body.target_plan.generation_key(),
            recorded_at=T0 + timedelta(seconds=1),
        ),
    )


def observation_for(request: TargetReadRequest, rows: int = 10) -> TargetObservation:
    return TargetObservation(
        request_sha256=request.sha256(),
        status=ObservationStatus.COMPLETE,
        metrics=(
            MetricValue(metric=ObservationMetric.NULL_COUNT, column="customer", value=0),
            MetricValue(metric=ObservationMetric.ROW_COUNT, value=rows),
        ),
    )


def complete_record(
    core: CapsuleRecord, pending: CapsuleRecord, observation: TargetObservation
) -> CapsuleRecord:
    return CapsuleRecord(
        operation_id=OP,
        version=3,
        prev_sha256=pending.sha256(),
        body=TargetComplete(
            core_sha256=core.sha256(), observation=observation, recorded_at=T0 + timedelta(2)
        ),
    )


def full_chain() -> list[CapsuleRecord]:
    core = core_record()
    pending = pending_record(core)
    assert isinstance(core.body, SealedCore)
    return [core, pending, complete_record(core, pending, observation_for(core.body.target_plan))]


def test_complete_chain_validates_and_exposes_its_parts() -> None:
    records = full_chain()
    chain = validate_chain(records)
    assert chain.version == 3
    assert chain.core.run_id == "run-1"
    assert chain.pending is not None
    assert isinstance(chain.terminal, TargetComplete)
    assert chain.head_sha256 == records[-1].sha256()
    assert parse_chain([r.to_canonical() for r in records]).records == chain.records


def test_failed_terminal_record_is_accepted_with_its_termination_fact() -> None:
    core = core_record()
    pending = pending_record(core)
    failed = CapsuleRecord(
        operation_id=OP,
        version=3,
        prev_sha256=pending.sha256(),
        body=TargetFailed(
            core_sha256=core.sha256(),
            outcome=ReaderOutcomeKind.TIMEOUT,
            reason="budget_exhausted",
            termination_verified=True,
            recorded_at=T0,
        ),
    )
    terminal = validate_chain([core, pending, failed]).terminal
    assert isinstance(terminal, TargetFailed) and terminal.termination_verified


def test_a_second_sealed_core_cannot_replace_the_first() -> None:
    core = core_record()
    other = core_record(run_id="run-2").model_copy(update={"version": 2, "prev_sha256": core.sha256()})
    with pytest.raises(CapsuleInvalid, match="not allowed at this chain position"):
        validate_chain([core, other])


def test_records_after_the_core_must_name_its_exact_hash() -> None:
    core = core_record()
    pending = pending_record(core)
    assert isinstance(pending.body, TargetPending)
    forged = pending.model_copy(
        update={"body": pending.body.model_copy(update={"core_sha256": core_record(run_id="x").sha256()})}
    )
    with pytest.raises(CapsuleInvalid, match="different sealed core"):
        validate_chain([core, forged])


def test_a_broken_link_is_refused() -> None:
    core, pending, complete = full_chain()
    with pytest.raises(CapsuleInvalid, match="does not link"):
        validate_chain([core, pending, complete.model_copy(update={"prev_sha256": core.sha256()})])
    with pytest.raises(CapsuleInvalid, match="does not link"):
        validate_chain([core.model_copy(update={"prev_sha256": "sha256:" + "e" * 64})])


@pytest.mark.parametrize("order", [[0, 2], [1], [0, 1, 1], [0, 2, 1]])
def test_versions_must_be_strictly_consecutive_from_the_core(order: list[int]) -> None:
    records = full_chain()
    with pytest.raises(CapsuleInvalid):
        validate_chain([records[i] for i in order])


def test_chain_cannot_mix_operations() -> None:
    core, pending, _ = full_chain()
    with pytest.raises(CapsuleInvalid, match="mixes operations"):
        validate_chain([core, pending.model_copy(update={"operation_id": "op-other"})])


def test_pending_must_name_the_sealed_plan_and_generation() -> None:
    core = core_record()
    pending = pending_record(core)
    assert isinstance(pending.body, TargetPending)
    other_plan = plan(allow_unavailable=True)
    for field, value, reason in [
        ("request_sha256", other_plan.sha256(), "different target plan"),
        ("generation_key", "sha256:" + "9" * 64, "different generation"),
    ]:
        forged = pending.model_copy(update={"body": pending.body.model_copy(update={field: value})})
        with pytest.raises(CapsuleInvalid, match=reason):
            validate_chain([core, forged])


def test_complete_must_answer_the_sealed_plan_exactly() -> None:
    core = core_record()
    pending = pending_record(core)
    wrong_request = observation_for(plan(allow_unavailable=True))
    with pytest.raises(CapsuleInvalid, match="does not answer the sealed plan"):
        validate_chain([core, pending, complete_record(core, pending, wrong_request)])
    assert isinstance(core.body, SealedCore)
    missing_metric = TargetObservation(
        request_sha256=core.body.target_plan.sha256(),
        status=ObservationStatus.COMPLETE,
        metrics=(MetricValue(metric=ObservationMetric.ROW_COUNT, value=10),),
    )
    with pytest.raises(CapsuleInvalid, match="does not answer the sealed plan"):
        validate_chain([core, pending, complete_record(core, pending, missing_metric)])


def test_unavailable_stands_only_where_the_plan_permits_it() -> None:
    for allowed in (True, False):
        core = core_record(plan(allow_unavailable=allowed))
        pending = pending_record(core)
        assert isinstance(core.body, SealedCore)
        unavailable = TargetObservation(
            request_sha256=core.body.target_plan.sha256(),
            status=ObservationStatus.UNAVAILABLE,
            unavailable_reason=UnavailableReason.METRIC_NOT_COMPUTABLE,
        )
        records = [core, pending, complete_record(core, pending, unavailable)]
        if allowed:
            validate_chain(records)
        else:
            with pytest.raises(CapsuleInvalid):
                validate_chain(records)


def test_a_failed_record_cannot_claim_a_complete_outcome() -> None:
    core = core_record()
    pending = pending_record(core)
    bad = CapsuleRecord(
        operation_id=OP,
        version=3,
        prev_sha256=pending.sha256(),
        body=TargetFailed(
            core_sha256=core.sha256(),
            outcome=ReaderOutcomeKind.COMPLETE,
            reason="observed",
            termination_verified=True,
            recorded_at=T0,
        ),
    )
    with pytest.raises(CapsuleInvalid, match="complete outcome"):
        validate_chain([core, pending, bad])


def test_nothing_follows_a_terminal_record() -> None:
    records = full_chain()
    with pytest.raises(ValidationError):
        CapsuleRecord(operation_id=OP, version=4, prev_sha256=records[2].sha256(), body=records[2].body)
    extra = records[2].model_copy(update={"prev_sha256": records[2].sha256()})
    with pytest.raises(CapsuleInvalid):
        validate_chain([*records, extra])


@settings(max_examples=60, deadline=None)
@given(
    record_index=st.integers(min_value=0, max_value=1),
    position=st.integers(min_value=0),
    byte=st.integers(0, 255),
)
def test_any_byte_change_in_a_linked_record_breaks_the_chain(
    record_index: int, position: int, byte: int
) -> None:
    payloads = [r.to_canonical() for r in full_chain()]
    target = bytearray(payloads[record_index])
    position %= len(target)
    if target[position] == byte:
        return
    target[position] = byte
    payloads[record_index] = bytes(target)
    with pytest.raises(CapsuleInvalid):
        parse_chain(payloads)
