"""Property tests: a guard either is one of the five allowed records, or it fails closed."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.guard import (
    ALLOWED_PAIRS,
    GUARD_KEY,
    GUARD_SCHEMA_VERSION,
    GuardInvalid,
    GuardPhase,
    read_guard,
)
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy

BATCH = "sha256:" + "0" * 64
VALID_RECOVERY = {phase: recovery.value for (_, phase), (recovery, _) in ALLOWED_PAIRS.items()}


def checkpoint(status: CheckpointStatus, guard: object) -> PartitionCheckpoint:
    return PartitionCheckpoint(
        partition_id="p1",
        route=RouteIdentity(
            source_table="dbo.orders", target_table="a.orders", strategy=Strategy.INCREMENTAL_APPEND
        ),
        run_id="r",
        status=status,
        started_at=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
        query_hash="q",
        schema_hash="s",
        bounds=PartitionBounds(kind=BoundsKind.ALL, label="all"),
        diagnostics={GUARD_KEY: guard},  # type: ignore[dict-item]
    )


SAFE_REASONS = {
    "guard is not an object",
    "guard keys are missing or unexpected",
    "unknown guard schema version",
    "malformed checkpoint batch id",
    "unsupported phase or recovery value",
    "checkpoint status does not allow this guard phase",
    "recovery does not match the guard phase",
}

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=6,
)
field_values = st.one_of(
    json_values,
    st.sampled_from([GUARD_SCHEMA_VERSION, BATCH, *[p.value for p in GuardPhase], *VALID_RECOVERY.values()]),
)
guards = st.one_of(
    json_values,
    st.dictionaries(
        st.sampled_from(["schema_version", "checkpoint_batch_id", "phase", "recovery", "extra", "Phase"]),
        field_values,
        max_size=5,
    ),
)


@settings(max_examples=600, deadline=None)
@given(status=st.sampled_from(list(CheckpointStatus)), guard=guards)
def test_no_generated_guard_passes_validation_unless_it_is_one_of_the_five_allowed_pairs(
    status: CheckpointStatus, guard: object
) -> None:
    try:
        parsed = read_guard(checkpoint(status, guard))
    except GuardInvalid as exc:
        assert exc.reason in SAFE_REASONS  # fixed phrases: never the offending value
        return
    assert parsed is not None
    assert (status, parsed.phase) in ALLOWED_PAIRS
    assert guard == parsed.to_json()
    assert parsed.recovery.value == VALID_RECOVERY[parsed.phase]


valid_pairs = st.sampled_from(sorted(ALLOWED_PAIRS, key=lambda pair: pair[1].value))
mutations = st.sampled_from(
    ["drop-key", "extra-key", "schema", "batch", "phase", "recovery", "type", "status"]
)


@settings(max_examples=300, deadline=None)
@given(pair=valid_pairs, mutation=mutations, data=st.data())
def test_any_contract_breaking_mutation_of_a_valid_guard_fails_closed(pair, mutation, data) -> None:  # type: ignore[no-untyped-def]
    status, phase = pair
    guard: dict[str, object] = {
        "schema_version": GUARD_SCHEMA_VERSION,
        "checkpoint_batch_id": BATCH,
        "phase": phase.value,
        "recovery": VALID_RECOVERY[phase],
    }
    assert read_guard(checkpoint(status, guard)) is not None
    if mutation == "drop-key":
        guard.pop(data.draw(st.sampled_from(sorted(guard))))
    elif mutation == "extra-key":
        guard[data.draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in guard))] = 1
    elif mutation == "schema":
        guard["schema_version"] = data.draw(st.text(max_size=60).filter(lambda s: s != GUARD_SCHEMA_VERSION))
    elif mutation == "batch":
        guard["checkpoint_batch_id"] = data.draw(
            st.one_of(st.text(max_size=80), st.just("sha256:" + "G" * 64), st.just("sha256:" + "0" * 63))
        )
    elif mutation == "phase":
        guard["phase"] = data.draw(
            st.text(max_size=30).filter(lambda s: s not in {p.value for p in GuardPhase})
        )
    elif mutation == "recovery":
        guard["recovery"] = data.draw(st.text(max_size=40).filter(lambda s: s != VALID_RECOVERY[phase]))
    elif mutation == "type":
        key = data.draw(st.sampled_from(sorted(guard)))
        guard[key] = data.draw(
            st.one_of(st.integers(), st.booleans(), st.none(), st.lists(st.integers(), max_size=2))
        )
    else:
        status = data.draw(st.sampled_from([s for s in CheckpointStatus if (s, phase) not in ALLOWED_PAIRS]))
    try:
        read_guard(checkpoint(status, guard))
    except GuardInvalid:
        return
    raise AssertionError(f"mutation {mutation} passed validation")
