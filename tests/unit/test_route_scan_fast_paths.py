"""The route scan's fast paths decide exactly what the plain per-checkpoint reading decides.

The scan of a long history (issue 16: 50,000 latest checkpoints) remembers the guard verdict per
(status, guard values), checks UTC timestamps inside pydantic, files checkpoints by the route they were
read under and moves what it built to the oldest collector generation. Each is checked against the
plain rule it replaces: hypothesis-generated routes with valid, unresolved, mistyped and malformed
guards (also mixed with valid ones of the same values) give the same scan as reading every checkpoint
on its own; any non-zero offset is refused and zero is accepted, from JSON and from Python.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import weakref
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import (
    ALLOWED_PAIRS,
    GUARD_KEY,
    GUARD_SCHEMA_VERSION,
    UNREADABLE_KEY,
    GuardInvalid,
    RetryMeaning,
    read_guard,
)
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, canonical_json
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.collector import collector_paused
from airflow_provider_dpone.runtime.guard.route_guard import BlockedPartition, RouteGuardScan, scan_route
from airflow_provider_dpone.runtime.route_family import latest_by_partition, load_family
from tests.doubles import InMemoryCheckpointStore

UTC = dt.timezone.utc
ROUTE = RouteIdentity(
    source_table="dbo.orders", target_table="a.orders", strategy=Strategy.INCREMENTAL_APPEND
)
BATCHES = ["sha256:" + c * 64 for c in "01"]
AT = dt.datetime(2026, 1, 1, tzinfo=UTC)


def _checkpoint(index: int, status: CheckpointStatus, diagnostics: dict[str, Any]) -> PartitionCheckpoint:
    return PartitionCheckpoint(
        partition_id=f"p{index:04d}",
        route=ROUTE,
        run_id="r",
        status=status,
        started_at=AT,
        query_hash="q",
        schema_hash="s",
        bounds=PartitionBounds(kind=BoundsKind.ALL, label=f"b{index % 3}"),
        diagnostics=diagnostics,
    )


def _reference_scan(latest: Sequence[PartitionCheckpoint]) -> RouteGuardScan:
    """The scan as it was before the fast path: sort everything, read every guard on its own."""
    invalid: list[BlockedPartition] = []
    unresolved: list[BlockedPartition] = []
    for checkpoint in sorted(latest, key=lambda c: (c.bounds.label, c.partition_id)):
        try:
            guard = read_guard(checkpoint)
        except GuardInvalid as exc:
            invalid.append(
                BlockedPartition(checkpoint.partition_id, checkpoint.bounds.label, exc.reason, None)
            )
            continue
        if guard is None:
            continue
        if ALLOWED_PAIRS[(checkpoint.status, guard.phase)][1] is RetryMeaning.BLOCK:
            unresolved.append(
                BlockedPartition(
                    checkpoint.partition_id,
                    checkpoint.bounds.label,
                    guard.phase.value,
                    guard.checkpoint_batch_id,
                )
            )
    return RouteGuardScan(tuple(invalid), tuple(unresolved))


PHASES = [phase.value for _, phase in ALLOWED_PAIRS] + ["exploded"]
RECOVERIES = ["manual_reconciliation_required", "retry_allowed", "none", "later"]
guard_strings = st.fixed_dictionaries(
    {
        "schema_version": st.sampled_from(
            [GUARD_SCHEMA_VERSION, "dpone.native_transfer.target_commit_guard.v2"]
        ),
        "checkpoint_batch_id": st.sampled_from([*BATCHES, "sha256:xyz"]),
        "phase": st.sampled_from(PHASES),
        "recovery": st.sampled_from(RECOVERIES),
    }
)


@st.composite
def diagnostics(draw: st.DrawFn) -> dict[str, Any]:
    guard: Any = draw(guard_strings)
    shape = draw(
        st.sampled_from(["four strings", "extra key", "missing key", "not a string", "not an object"])
    )
    if shape == "extra key":
        guard = {**guard, "note": "x"}
    elif shape == "missing key":
        guard = {k: v for k, v in guard.items() if k != draw(st.sampled_from(sorted(guard)))}
    elif shape == "not a string":
        guard = {**guard, draw(st.sampled_from(sorted(guard))): draw(st.sampled_from([None, 1, ["armed"]]))}
    elif shape == "not an object":
        guard = draw(st.sampled_from([None, "armed", [guard]]))
    out: dict[str, Any] = {}
    if draw(st.integers(0, 9)):  # a legacy checkpoint now and then: no guard at all
        out[GUARD_KEY] = guard
    if draw(st.integers(0, 19)) == 0:
        out[UNREADABLE_KEY] = {"checkpoint_row_id": 1}
    return out


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.sampled_from(list(CheckpointStatus)), diagnostics(), st.integers(1, 4)), max_size=12
    )
)
def test_the_remembered_verdicts_give_exactly_the_plain_scan(
    entries: list[tuple[CheckpointStatus, dict[str, Any], int]],
) -> None:
    # each drawn record is repeated, as a checkpoint batch repeats one guard in each of its partitions
    latest = [
        _checkpoint(index * 10 + copy, status, diag)
        for index, (status, diag, copies) in enumerate(entries)
        for copy in range(copies)
    ]
    assert scan_route(latest) == _reference_scan(latest)


def test_a_guard_with_the_values_of_a_valid_one_but_another_status_or_an_extra_key_still_fails_closed() -> (
    None
):
    good = {
        "schema_version": GUARD_SCHEMA_VERSION,
        "checkpoint_batch_id": BATCHES[0],
        "phase": "checkpoint_committed",
        "recovery": "none",
    }
    latest = [_checkpoint(i, CheckpointStatus.COMMITTED, {GUARD_KEY: good}) for i in range(100)]
    latest.insert(50, _checkpoint(500, CheckpointStatus.FAILED, {GUARD_KEY: good}))  # status mismatch
    latest.insert(70, _checkpoint(700, CheckpointStatus.COMMITTED, {GUARD_KEY: {**good, "x": "y"}}))
    latest.append(_checkpoint(900, CheckpointStatus.COMMITTED, {GUARD_KEY: good, UNREADABLE_KEY: {}}))
    scan = scan_route(latest)
    assert [b.partition_id for b in scan.invalid] == ["p0900", "p0700", "p0500"]  # labels b0, b1, b2
    assert scan == _reference_scan(latest)


# -- UTC timestamps ------------------------------------------------------------------------------------


def _payload(**overrides: Any) -> str:
    base = json.loads(_checkpoint(1, CheckpointStatus.COMMITTED, {}).to_payload())
    return canonical_json({**base, **overrides})


@settings(max_examples=200, deadline=None)
@given(
    minutes=st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1),
    field=st.sampled_from(["started_at", "completed_at"]),
)
def test_only_a_zero_utc_offset_is_accepted_from_json_and_from_python(minutes: int, field: str) -> None:
    zone = dt.timezone(dt.timedelta(minutes=minutes))
    stamp = dt.datetime(2026, 11, 30, 8, 0, tzinfo=zone)
    data = _checkpoint(1, CheckpointStatus.COMMITTED, {}).model_dump()
    if minutes == 0:
        assert (
            PartitionCheckpoint.from_payload(_payload(**{field: stamp.isoformat()})).model_dump()[field]
            == stamp
        )
        assert PartitionCheckpoint.model_validate({**data, field: stamp}).model_dump()[field] == stamp
        return
    with pytest.raises(ValidationError):
        PartitionCheckpoint.from_payload(_payload(**{field: stamp.isoformat()}))
    with pytest.raises(ValidationError):
        PartitionCheckpoint.model_validate({**data, field: stamp})


def test_naive_timestamps_are_refused_from_python_and_json_and_none_completes_nothing() -> None:
    data = _checkpoint(1, CheckpointStatus.COMMITTED, {}).model_dump()
    for field in ("started_at", "completed_at"):
        with pytest.raises(ValidationError, match="timezone info"):
            PartitionCheckpoint.model_validate({**data, field: dt.datetime(2026, 1, 1)})
        with pytest.raises(ValidationError, match="timezone info"):
            PartitionCheckpoint.from_payload(_payload(**{field: "2026-01-01T00:00:00"}))
    assert PartitionCheckpoint.model_validate({**data, "completed_at": None}).completed_at is None
    with pytest.raises(ValidationError):
        PartitionCheckpoint.model_validate({**data, "started_at": None})


# -- route family --------------------------------------------------------------------------------------


class _Naming:
    def canonical(self, route: RouteIdentity) -> RouteIdentity:
        return ROUTE if route.source_table.lower() == ROUTE.source_table else route

    def legacy_query_hash(self, source_table: str) -> str:
        return "q-legacy"


class _MisfilingStore(InMemoryCheckpointStore):
    """Returns a checkpoint of another route among the canonical route's: a broken store."""

    def list_latest(self, route: RouteIdentity) -> list[PartitionCheckpoint]:
        found = super().list_latest(route)
        if route == ROUTE:
            other = ROUTE.model_copy(update={"source_table": "dbo.other"})
            found.append(_checkpoint(99, CheckpointStatus.COMMITTED, {}).model_copy(update={"route": other}))
        return found


def test_the_family_files_checkpoints_by_the_route_they_were_read_under() -> None:
    store = InMemoryCheckpointStore()
    legacy = ROUTE.model_copy(update={"source_table": "DBO.ORDERS"})
    canonical = [_checkpoint(i, CheckpointStatus.COMMITTED, {}) for i in range(3)]
    old = _checkpoint(7, CheckpointStatus.COMMITTED, {}).model_copy(update={"route": legacy})
    store.write_batch([*canonical, old])
    family = load_family(store, ROUTE, _Naming())  # type: ignore[arg-type]
    assert family.canonical_checkpoints() == tuple(canonical)
    assert family.legacy_routes() == [legacy]
    assert sorted(c.partition_id for c in family.own) == ["p0000", "p0001", "p0002", "p0007"]
    derived = type(family)(route=ROUTE, own=family.own, target_wide=family.target_wide)
    assert derived.canonical_checkpoints() == family.canonical_checkpoints()
    assert derived.legacy_routes() == family.legacy_routes()
    assert latest_by_partition(family, [], _Naming()) == {c.partition_id: c for c in canonical}  # type: ignore[arg-type]


def test_a_store_that_returns_another_routes_checkpoint_is_refused() -> None:
    store = _MisfilingStore()
    store.write_batch([_checkpoint(1, CheckpointStatus.COMMITTED, {})])
    with pytest.raises(DponeError) as caught:
        load_family(store, ROUTE, _Naming())  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.CHECKPOINT_STORE_FAILED


# -- the collector -------------------------------------------------------------------------------------


class _Node:
    def __init__(self) -> None:
        self.ref: object = None


def test_what_the_pause_built_moves_to_the_oldest_generation_without_a_collection() -> None:
    collections: list[int] = []

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(callback)
    try:
        with collector_paused():
            built = [_Node() for _ in range(20_000)]
        # resumed alone, the young generation would hold all 20,000 and the next allocation would walk
        # them in a collection; promoted, it starts empty and the pause's objects are in the oldest
        young = gc.get_count()[0]
        after = [{} for _ in range(100)]
        assert young < 100, young
        assert not collections, "no collection started when the collector resumed"
        assert any(obj is built[-1] for obj in gc.get_objects(generation=2))
        # nothing leaks: a cycle built during the pause is found by the next full collection
        with collector_paused():
            a, b = _Node(), _Node()
            a.ref, b.ref = b, a
            cycle_member = weakref.ref(a)
            del a, b
        assert cycle_member() is not None  # only a collection can free a cycle
        assert gc.collect() >= 2
        # (a weak reference, not a walk of gc.get_objects(): touching every tracked object may import a
        # lazily loaded module, as Airflow 3.1's provider shims do)
        assert cycle_member() is None
    finally:
        gc.callbacks.remove(callback)
    del built, after


def test_objects_someone_else_froze_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            [_Node() for _ in range(100)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
