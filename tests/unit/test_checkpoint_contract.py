"""The checkpoint payload contract: what the store writes must come back unchanged, and nothing else parses.

Seed 000 case 11: existing checkpoint payloads (with or without a target commit guard) round-trip without
migration, because the guard lives in the already-public ``diagnostics`` map.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr, ValidationError

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import canonical_json, sha256_tag

BATCH = sha256_tag("run-1|p1|p2")


def payload_dict(**overrides: Any) -> dict[str, Any]:
    """A checkpoint as the store holds it (JSON types only), as an older or current writer produced it."""
    base: dict[str, Any] = {
        "partition_id": sha256_tag("p1"),
        "route": {
            "source_table": "dbo.orders",
            "target_table": "analytics.orders",
            "strategy": "incremental_append",
        },
        "run_id": "manual__2026-11-30T00:00:00+00:00",
        "status": "EXPORTED",
        "started_at": "2026-11-30T08:00:00.123456Z",
        "completed_at": None,
        "rows": 42,
        "bytes": 4096,
        "query_hash": sha256_tag("select"),
        "schema_hash": sha256_tag("schema"),
        "bounds": {
            "kind": "range",
            "column": "order_date",
            "lower": "2026-11-30",
            "upper": "2026-12-01",
            "values": None,
            "value_type": "date",
            "label": "order_date=2026-11-30",
        },
        "diagnostics": {},
    }
    base.update(overrides)
    return base


def guard_json(phase: GuardPhase) -> dict[str, str]:
    return TargetCommitGuard.for_phase(phase, BATCH).to_json()


# -- round trips ---------------------------------------------------------------------------------------


def test_a_legacy_payload_without_a_guard_round_trips_unchanged() -> None:
    payload = canonical_json(payload_dict(diagnostics={"artifact_sha256": sha256_tag("file")}))
    assert PartitionCheckpoint.from_payload(payload).to_payload() == payload


@pytest.mark.parametrize("phase", list(GuardPhase))
def test_a_payload_with_a_target_commit_guard_round_trips_unchanged(phase: GuardPhase) -> None:
    status = {
        GuardPhase.ARMED: "EXPORTED",
        GuardPhase.CHECKPOINT_COMMITTED: "COMMITTED",
    }.get(phase, "FAILED")
    completed = "2026-11-30T08:00:00.123456Z" if status == "COMMITTED" else None
    payload = canonical_json(
        payload_dict(
            status=status,
            completed_at=completed,
            diagnostics={GUARD_KEY: guard_json(phase), "artifact_sha256": sha256_tag("f")},
        )
    )
    checkpoint = PartitionCheckpoint.from_payload(payload)
    assert checkpoint.to_payload() == payload
    assert checkpoint.diagnostics[GUARD_KEY] == guard_json(phase)


def test_values_bounds_round_trip_through_json_arrays() -> None:
    bounds = {
        "kind": "values",
        "column": "region",
        "lower": None,
        "upper": None,
        "values": ["eu", "üs"],
        "value_type": "string",
        "label": "region in (eu, üs)",
    }
    payload = canonical_json(payload_dict(bounds=bounds))
    assert PartitionCheckpoint.from_payload(payload).to_payload() == payload


def test_a_guard_the_runtime_would_reject_still_round_trips_so_it_can_fail_closed_later() -> None:
    """The store must not drop or "repair" a malformed guard: validation belongs to the guard reader."""
    malformed = {"schema_version": "dpone.native_transfer.target_commit_guard.v999", "phase": 7}
    payload = canonical_json(payload_dict(diagnostics={GUARD_KEY: malformed}))
    assert PartitionCheckpoint.from_payload(payload).to_payload() == payload


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    diagnostics=st.dictionaries(st.text(max_size=12), json_values, max_size=6),
    with_guard=st.booleans(),
    micros=st.integers(min_value=0, max_value=999_999),
)
def test_any_json_diagnostics_map_round_trips_byte_identical(
    diagnostics: dict[str, Any], with_guard: bool, micros: int
) -> None:
    if with_guard:
        diagnostics = {**diagnostics, GUARD_KEY: guard_json(GuardPhase.ARMED)}
    started = dt.datetime(2026, 11, 30, 8, 0, 0, micros, tzinfo=dt.timezone.utc)
    written = json.dumps(payload_dict(diagnostics=diagnostics, started_at=started.isoformat()), indent=1)
    checkpoint = PartitionCheckpoint.from_payload(written)  # any JSON spelling in, canonical text out
    payload = checkpoint.to_payload()

    again = PartitionCheckpoint.from_payload(payload)

    assert again.to_payload() == payload
    assert again == checkpoint
    assert json.loads(payload)["diagnostics"] == diagnostics


# -- what does not parse -------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["started_at", "completed_at"])
def test_naive_timestamps_are_rejected(field: str) -> None:
    with pytest.raises(ValidationError, match="should have timezone info"):
        PartitionCheckpoint.from_payload(canonical_json(payload_dict(**{field: "2026-11-30T08:00:00"})))


@pytest.mark.parametrize("offset", ["+02:00", "-05:30"])
def test_timestamps_outside_utc_are_rejected(offset: str) -> None:
    with pytest.raises(ValidationError, match="Timezone offset of 0 required"):
        PartitionCheckpoint.from_payload(
            canonical_json(payload_dict(started_at=f"2026-11-30T08:00:00{offset}"))
        )


def test_naive_and_non_utc_datetimes_are_rejected_from_python_too() -> None:
    base = PartitionCheckpoint.from_payload(canonical_json(payload_dict()))
    data = base.model_dump()
    for bad in (
        dt.datetime(2026, 11, 30, 8, 0),
        dt.datetime(2026, 11, 30, 8, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    ):
        with pytest.raises(ValidationError):
            PartitionCheckpoint.model_validate({**data, "started_at": bad})


@pytest.mark.parametrize(
    "payload",
    [
        payload_dict(unexpected="x"),
        payload_dict(route={**payload_dict()["route"], "schema": "dbo"}),
        payload_dict(bounds={**payload_dict()["bounds"], "inclusive": True}),
    ],
    ids=["top-level", "route", "bounds"],
)
def test_extra_keys_are_rejected(payload: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        PartitionCheckpoint.from_payload(canonical_json(payload))


def test_unknown_statuses_are_rejected() -> None:
    with pytest.raises(ValidationError):
        PartitionCheckpoint.from_payload(canonical_json(payload_dict(status="DONE")))
    assert {s.value for s in CheckpointStatus} == {"PLANNED", "EXPORTED", "LOADED", "COMMITTED", "FAILED"}


# -- endpoint secrets ----------------------------------------------------------------------------------


def test_endpoint_repr_and_json_never_show_the_password() -> None:
    secret = "pg-Sup3r-s3cret"
    endpoint = EndpointDescriptor(
        name="checkpoints",
        kind=EndpointKind.POSTGRES,
        host="db.internal",
        port=5432,
        database="dpone",
        user="dpone",
        password=SecretStr(secret),
    )
    shown = [
        repr(endpoint),
        str(endpoint),
        endpoint.model_dump_json(),
        json.dumps(endpoint.model_dump(mode="json")),
        repr(endpoint.model_dump()),
        endpoint.describe(),
    ]
    assert all(secret not in text for text in shown)
    assert endpoint.secret() == secret
