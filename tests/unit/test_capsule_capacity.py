"""Worst-case sizes are exact upper bounds, computed from the plan and checked before any target I/O."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from airflow_provider_dpone.contracts.capsule import (
    CAPSULE_RECORD_MAX_BYTES,
    GENESIS_SHA256,
    RESPONSE_FRAME_MAX_BYTES,
    CapsuleCapacityExceeded,
    CapsuleRecord,
    QualityPolicy,
    SealedCore,
    TargetComplete,
    canonical_bytes,
    reserve_capacity,
    worst_case_frame_bytes,
    worst_case_sizes,
)
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.target_observation import (
    MAX_PLAN_COLUMNS,
    METRIC_VALUE_MAX,
    GenerationSelector,
    LoadIdSelector,
    MetricValue,
    ObservationMetric,
    ObservationStatus,
    ReaderResponseFrame,
    TargetObservation,
    TargetReadRequest,
)

ALL = (ObservationMetric.ROW_COUNT, ObservationMetric.NULL_COUNT, ObservationMetric.DISTINCT_COUNT)
STAMP = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc)


def plan(columns: tuple[str, ...], metrics: tuple[ObservationMetric, ...] = ALL) -> TargetReadRequest:
    return TargetReadRequest(
        target_table="analytics.orders",
        selector=GenerationSelector(load_id=LoadIdSelector(column="load_id", value="L1")),
        columns=columns,
        metrics=metrics,
    )


def core(request: TargetReadRequest, operation_id: str = "op-1") -> CapsuleRecord:
    return CapsuleRecord(
        operation_id=operation_id,
        version=1,
        prev_sha256=GENESIS_SHA256,
        body=SealedCore(
            identity="sha256:" + "1" * 64,
            run_id="run",
            route=RouteIdentity(
                source_table="s.t", target_table="analytics.orders", strategy=Strategy.FULL_REFRESH
            ),
            load_ids=("L1",),
            policy=QualityPolicy(),
            probes=(),
            target_plan=request,
            sealed_at=STAMP,
        ),
    )


def real_observation(request: TargetReadRequest, value: int) -> TargetObservation:
    return TargetObservation(
        request_sha256=request.sha256(),
        status=ObservationStatus.COMPLETE,
        metrics=tuple(MetricValue(metric=m, column=c, value=value) for m, c in request.expected_keys()),
    )


@pytest.mark.parametrize("columns", [("a",), ("customer", "amount"), tuple(f"col_{i}" for i in range(40))])
def test_worst_case_is_an_upper_bound_reached_by_maximal_values(columns: tuple[str, ...]) -> None:
    request = plan(columns)
    estimate = worst_case_sizes("op-1", request)
    for value, reaches in ((0, False), (12345, False), (METRIC_VALUE_MAX, True)):
        observation = real_observation(request, value)
        complete = CapsuleRecord(
            operation_id="op-1",
            version=3,
            prev_sha256="sha256:" + "a" * 64,
            body=TargetComplete(core_sha256="sha256:" + "b" * 64, observation=observation, recorded_at=STAMP),
        )
        frame = canonical_bytes(ReaderResponseFrame(nonce="c" * 64, observation=observation)) + b"\n"
        assert len(complete.to_canonical()) <= estimate.complete_record_bytes
        assert len(frame) <= estimate.response_frame_bytes
        if reaches:  # exact, not a loose estimate
            assert len(complete.to_canonical()) == estimate.complete_record_bytes
            assert len(frame) == estimate.response_frame_bytes


def test_worst_case_grows_with_columns_and_metrics() -> None:
    one = worst_case_frame_bytes(plan(("a",)))
    two = worst_case_frame_bytes(plan(("a", "b")))
    fewer_metrics = worst_case_frame_bytes(plan(("a", "b"), (ObservationMetric.NULL_COUNT,)))
    assert one < two
    assert fewer_metrics < two


def test_an_ordinary_plan_fits_the_fixed_limits() -> None:
    estimate = reserve_capacity(core(plan(tuple(f"column_{i:03d}" for i in range(MAX_PLAN_COLUMNS)))))
    assert estimate.terminal_record_bytes <= CAPSULE_RECORD_MAX_BYTES
    assert estimate.response_frame_bytes <= RESPONSE_FRAME_MAX_BYTES


def test_a_plan_too_large_for_the_response_frame_is_refused_before_publication() -> None:
    wide = plan(tuple(f"c{i:03d}_" + "x" * 120 for i in range(MAX_PLAN_COLUMNS)))
    with pytest.raises(CapsuleCapacityExceeded, match="response frame") as raised:
        reserve_capacity(core(wide))
    assert raised.value.worst_case_bytes > raised.value.limit_bytes == RESPONSE_FRAME_MAX_BYTES


def test_each_limit_is_enforced_separately() -> None:
    record = core(plan(("a", "b")))
    estimate = worst_case_sizes("op-1", plan(("a", "b")))
    with pytest.raises(CapsuleCapacityExceeded, match="terminal record"):
        reserve_capacity(record, record_limit=estimate.complete_record_bytes - 1)
    with pytest.raises(CapsuleCapacityExceeded, match="sealed core"):
        reserve_capacity(record, record_limit=len(record.to_canonical()) - 1)
    with pytest.raises(CapsuleCapacityExceeded, match="response frame"):
        reserve_capacity(record, frame_limit=estimate.response_frame_bytes - 1)
    assert (
        reserve_capacity(
            record, record_limit=estimate.complete_record_bytes, frame_limit=estimate.response_frame_bytes
        )
        == estimate
    )


def test_longer_operation_ids_cost_exactly_their_extra_characters() -> None:
    request = plan(("a",))
    short = worst_case_sizes("op", request).complete_record_bytes
    long = worst_case_sizes("op" + "x" * 50, request).complete_record_bytes
    assert long - short == 50
