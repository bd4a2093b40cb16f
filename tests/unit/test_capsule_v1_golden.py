"""The v1 capsule's canonical bytes never change: a golden file pins them byte for byte.

If this test fails, a change altered the v1 format (a field, a default, a serializer, the JSON form).
v1 evidence already written must stay verifiable: put the change in v2, never in v1.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.capsule import (
    CapsuleInvalid,
    CapsuleV1,
    CheckKind,
    CheckSeverity,
    PolicyCheck,
    ProbeEvidence,
    ProbeScope,
    QualityPolicy,
    sha256_of,
)
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.target_observation import MetricValue, ObservationMetric

GOLDEN = Path(__file__).parent / "golden" / "capsule_v1.json"
#: The digest of the golden bytes, so an edit of the file itself is caught too.
GOLDEN_SHA256 = "sha256:719beca93e716f36e720d983a3512cedfa964b5d1759df93de438459199b2114"


def golden_capsule() -> CapsuleV1:
    return CapsuleV1(
        operation_id="op:2026-11-30:orders:0001",
        run_id="manual__2026-11-30T08:00:00+00:00",
        identity="sha256:" + "1" * 64,
        route=RouteIdentity(
            source_table="dbo.orders", target_table="analytics.orders", strategy=Strategy.INCREMENTAL_APPEND
        ),
        checkpoint_batch_id="sha256:" + "2" * 64,
        policy=QualityPolicy(
            checks=(
                PolicyCheck(check=CheckKind.ROW_COUNT, severity=CheckSeverity.ERROR),
                PolicyCheck(check=CheckKind.NOT_NULL, columns=("customer",), severity=CheckSeverity.ERROR),
                PolicyCheck(
                    check=CheckKind.DISTINCT_COUNT, columns=("customer",), severity=CheckSeverity.WARN
                ),
            )
        ),
        probes=(
            ProbeEvidence(
                scope=ProbeScope.SOURCE,
                partition_id="sha256:" + "3" * 64,
                metrics=(
                    MetricValue(metric=ObservationMetric.ROW_COUNT, value=1200),
                    MetricValue(metric=ObservationMetric.NULL_COUNT, column="customer", value=0),
                ),
            ),
            ProbeEvidence(
                scope=ProbeScope.STAGED,
                metrics=(
                    MetricValue(metric=ObservationMetric.ROW_COUNT, value=1200),
                    MetricValue(metric=ObservationMetric.DISTINCT_COUNT, column="customer", value=37),
                ),
            ),
        ),
        sealed_at=datetime(2026, 11, 30, 8, 0, 1, 250000, tzinfo=timezone.utc),
    )


def test_v1_capsule_canonical_bytes_equal_the_golden_file() -> None:
    assert golden_capsule().to_canonical() == GOLDEN.read_bytes()


def test_golden_file_is_unchanged() -> None:
    assert sha256_of(GOLDEN.read_bytes()) == GOLDEN_SHA256


def test_golden_bytes_parse_and_round_trip_exactly() -> None:
    data = GOLDEN.read_bytes()
    parsed = CapsuleV1.from_canonical(data)
    assert parsed == golden_capsule()
    assert parsed.to_canonical() == data


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b'"value":1200', b'"value":1201'),  # still well-formed: parses, but no longer the golden bytes
        (b'"schema_version":"dpone.quality_capsule.v1"', b'"schema_version":"dpone.quality_capsule.v2"'),
        (b'"sealed_at":"2026-11-30T08:00:01.250000Z"', b'"sealed_at":"2026-11-30T08:00:01.25Z"'),
        (b'"severity":"warn"', b'"severity":"info"'),
    ],
)
def test_edited_v1_bytes_never_pass_as_the_original(old: bytes, new: bytes) -> None:
    data = GOLDEN.read_bytes()
    assert old in data
    edited = data.replace(old, new, 1)
    try:
        parsed = CapsuleV1.from_canonical(edited)
    except CapsuleInvalid:
        return
    assert parsed != golden_capsule()
    assert sha256_of(edited) != GOLDEN_SHA256
