"""The seed's eleven focused cases for the target commit guard, one test each.

Every case runs on three stores (in-memory, SQLite and PostgreSQL): faults are injected by a wrapper
around the real store, the way a real store fails (after k rows of a batch, on a read).
"""

from __future__ import annotations

import json
import traceback
from typing import Any

import pytest

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GUARD_KEY
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore
from airflow_provider_dpone.runtime.guard.batch_id import checkpoint_batch_id
from airflow_provider_dpone.runtime.transfer import TransferEngine
from tests.doubles import (
    FaultyStore,
    FixedClock,
    InjectedFault,
    MemoryArtifactStore,
    MemorySource,
    RecordingSink,
    WriteFault,
    describe,
    orders_rows,
    phase_of,
    transfer_engine,
)

ROUTE_MANIFEST = "manifests/orders.yaml"


def make_engine(
    store: CheckpointStore, source: MemorySource, sink: RecordingSink, **options: Any
) -> TransferEngine:
    """``transfer_engine`` on this module's route manifest."""
    return transfer_engine(store=store, source=source, sink=sink, manifest_ref=ROUTE_MANIFEST, **options)


def latest_by_label(store, engine) -> dict[str, PartitionCheckpoint]:  # type: ignore[no-untyped-def]
    route = engine._route
    return {c.bounds.label: c for c in store.list_latest(route)}


def innermost_frame(exc: BaseException) -> str:
    return traceback.extract_tb(exc.__traceback__)[-1].name


# 1 -------------------------------------------------------------------------------------------------
def test_partial_commit_with_failed_reconciliation_read_reraises_the_exact_original(checkpoint_store) -> None:
    original = InjectedFault("commit batch broke after one row")
    events: list[str] = []
    store = FaultyStore(
        checkpoint_store,
        events,
        write_faults=[WriteFault("checkpoint_committed", after_rows=1, error=original)],
        read_latest_error=InjectedFault("reconciliation read failed"),
    )
    sink = RecordingSink(events)
    engine = make_engine(store, MemorySource(orders_rows()), sink)

    with pytest.raises(InjectedFault) as caught:
        engine.run("run-1")

    assert caught.value is original
    assert innermost_frame(caught.value) == "write_batch"
    assert caught.value.__cause__ is None
    assert "store.read_latest" in events
    # reconciliation failed, so nothing was downgraded or marked: the armed guard stays in place
    phases = sorted(describe(c) for c in latest_by_label(checkpoint_store, engine).values())
    assert phases == ["COMMITTED/checkpoint_committed", "EXPORTED/armed", "EXPORTED/armed"]


# 2 -------------------------------------------------------------------------------------------------
def test_partial_commit_with_failed_incomplete_marker_write_reraises_the_exact_original(
    checkpoint_store,
) -> None:
    original = InjectedFault("commit batch broke after one row")
    store = FaultyStore(
        checkpoint_store,
        write_faults=[
            WriteFault("checkpoint_committed", after_rows=1, error=original),
            WriteFault("checkpoint_incomplete", after_rows=0, error=InjectedFault("marker write failed")),
        ],
    )
    engine = make_engine(store, MemorySource(orders_rows()), RecordingSink())

    with pytest.raises(InjectedFault) as caught:
        engine.run("run-1")

    assert caught.value is original
    assert innermost_frame(caught.value) == "write_batch"
    latest = latest_by_label(checkpoint_store, engine)
    assert sorted(describe(c) for c in latest.values()) == [
        "COMMITTED/checkpoint_committed",
        "EXPORTED/armed",
        "EXPORTED/armed",
    ]


# 3 -------------------------------------------------------------------------------------------------
def test_incremental_append_retry_after_partial_commit_stops_before_sink_invocation(checkpoint_store) -> None:
    source = MemorySource(orders_rows())
    first_sink = RecordingSink()
    store = FaultyStore(checkpoint_store, write_faults=[WriteFault("checkpoint_committed", after_rows=1)])
    with pytest.raises(InjectedFault):
        make_engine(store, source, first_sink).run("run-1")
    assert first_sink.mutations == 1
    rows_after_first = len(first_sink.tables["analytics.orders"])

    # the partial commit was reconciled exactly: one durable committed, the rest checkpoint_incomplete
    engine = make_engine(checkpoint_store, source, first_sink)
    latest = latest_by_label(checkpoint_store, engine)
    assert sorted(describe(c) for c in latest.values()) == [
        "COMMITTED/checkpoint_committed",
        "FAILED/checkpoint_incomplete",
        "FAILED/checkpoint_incomplete",
    ]

    retry_events: list[str] = []
    retry_sink = RecordingSink(retry_events)
    retry_sink.tables = first_sink.tables
    with pytest.raises(DponeError) as blocked:
        make_engine(FaultyStore(checkpoint_store, retry_events), source, retry_sink).run("run-1")

    assert blocked.value.code is ErrorCode.MANUAL_RECONCILIATION_REQUIRED
    assert retry_sink.target_calls() == 0
    assert not any(e.startswith("sink.") for e in retry_events)
    assert len(retry_sink.tables["analytics.orders"]) == rows_after_first  # no duplicate append
    assert "retryable" not in json.dumps(blocked.value.to_json())


# 4 -------------------------------------------------------------------------------------------------
def test_surviving_armed_record_blocks_retry(checkpoint_store) -> None:
    # the process dies inside the target call: only the armed records are durable
    class ProcessDeath(BaseException):
        pass

    source = MemorySource(orders_rows())
    store = FaultyStore(
        checkpoint_store,
        write_faults=[WriteFault("target_outcome_unknown", after_rows=0, error=InjectedFault("store gone"))],
    )
    dying_sink = RecordingSink()
    dying_sink.load = lambda *a, **k: (_ for _ in ()).throw(ProcessDeath())  # type: ignore[method-assign]
    with pytest.raises(ProcessDeath):
        make_engine(store, source, dying_sink).run("run-1")
    engine = make_engine(checkpoint_store, source, RecordingSink())
    assert {describe(c) for c in latest_by_label(checkpoint_store, engine).values()} == {"EXPORTED/armed"}

    retry_sink = RecordingSink()
    with pytest.raises(DponeError) as blocked:
        make_engine(checkpoint_store, source, retry_sink).run("run-1")
    assert blocked.value.code is ErrorCode.MANUAL_RECONCILIATION_REQUIRED
    assert retry_sink.events == []
    assert {p["phase"] for p in blocked.value.details["partitions"]} == {"armed"}


# 5 -------------------------------------------------------------------------------------------------
def test_route_guard_blocks_after_query_schema_and_partition_changes(checkpoint_store) -> None:
    store = FaultyStore(checkpoint_store, write_faults=[WriteFault("checkpoint_committed", after_rows=0)])
    with pytest.raises(InjectedFault):
        make_engine(store, MemorySource(orders_rows(days=2)), RecordingSink()).run("run-1")

    # new query text, an extra column, and different days: every partition ID differs from the old ones
    changed = MemorySource(
        [(100 + i, r[1].replace(month=10), r[2]) for i, r in enumerate(orders_rows(days=2))],
        query_version="v2",
        extra_column=True,
    )
    sink = RecordingSink()
    engine = make_engine(checkpoint_store, changed, sink)
    old_ids = {c.partition_id for c in checkpoint_store.list_latest(engine._route)}
    with pytest.raises(DponeError) as blocked:
        engine.run("run-2")
    assert blocked.value.code is ErrorCode.MANUAL_RECONCILIATION_REQUIRED
    assert sink.events == []
    assert {p["partition_id"] for p in blocked.value.details["partitions"]} == old_ids
    assert changed.reads == 0


# 6 -------------------------------------------------------------------------------------------------
def test_partial_guard_persistence_prevents_the_first_target_invocation(checkpoint_store) -> None:
    original = InjectedFault("arm batch broke after one row")
    events: list[str] = []
    store = FaultyStore(
        checkpoint_store, events, write_faults=[WriteFault("armed", after_rows=1, error=original)]
    )
    sink = RecordingSink(events)
    with pytest.raises(InjectedFault) as caught:
        make_engine(store, MemorySource(orders_rows()), sink).run("run-1")

    assert caught.value is original
    assert sink.target_calls() == 0
    assert sink.tables["analytics.orders"] == []
    # the target never started, so the best-effort marker says so and a retry is allowed
    engine = make_engine(checkpoint_store, MemorySource(orders_rows()), RecordingSink())
    assert {describe(c) for c in latest_by_label(checkpoint_store, engine).values()} == {
        "FAILED/failed_before_target"
    }


# 7 -------------------------------------------------------------------------------------------------
def test_failed_before_target_and_legacy_checkpoints_remain_retryable(checkpoint_store) -> None:
    source = MemorySource(orders_rows())
    # failed_before_target: the arm batch failed entirely
    store = FaultyStore(checkpoint_store, write_faults=[WriteFault("armed", after_rows=0)])
    with pytest.raises(InjectedFault):
        make_engine(store, source, RecordingSink()).run("run-1")

    # legacy: a checkpoint written by an older version, FAILED with no guard, for a partition of the route
    engine = make_engine(checkpoint_store, source, RecordingSink())
    some = next(iter(latest_by_label(checkpoint_store, engine).values()))
    legacy = some.model_copy(
        update={"status": CheckpointStatus.FAILED, "diagnostics": {}, "run_id": "legacy-run"}
    )
    checkpoint_store.write_batch([legacy])

    sink = RecordingSink()
    report = make_engine(checkpoint_store, source, sink).run("run-1")
    assert sink.target_calls() == 1
    assert report.partitions_committed == 3
    assert {p.reason for p in report.partitions} == {"failed_before_target", "previous_failure"}
    assert len(sink.tables["analytics.orders"]) == len(source.rows)


# 8 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(
            lambda g: {**g, "schema_version": "dpone.native_transfer.target_commit_guard.v2"},
            id="unknown-schema",
        ),
        pytest.param(lambda g: {**g, "phase": "committing"}, id="unsupported-phase"),
        pytest.param(lambda g: {**g, "checkpoint_batch_id": "sha256:XYZ"}, id="malformed-batch-id"),
        pytest.param(lambda g: {k: v for k, v in g.items() if k != "recovery"}, id="missing-key"),
        pytest.param(lambda g: {**g, "extra": 1}, id="extra-key"),
        pytest.param(lambda g: {**g, "phase": "checkpoint_committed"}, id="status-phase-mismatch"),
        pytest.param(lambda g: "armed", id="not-an-object"),
    ],
)
def test_malformed_and_unknown_guards_fail_closed(checkpoint_store, corrupt) -> None:  # type: ignore[no-untyped-def]
    source = MemorySource(orders_rows(days=1))
    store = FaultyStore(checkpoint_store, write_faults=[WriteFault("armed", after_rows=0)])
    with pytest.raises(InjectedFault):
        make_engine(store, source, RecordingSink(), chunk_rows=100).run("run-1")
    engine = make_engine(checkpoint_store, source, RecordingSink())
    (current,) = checkpoint_store.list_latest(engine._route)
    armed_guard = {
        "schema_version": "dpone.native_transfer.target_commit_guard.v1",
        "checkpoint_batch_id": checkpoint_batch_id("run-1", [current.partition_id]),
        "phase": "armed",
        "recovery": "manual_reconciliation_required",
    }
    checkpoint_store.write_batch(
        [
            current.model_copy(
                update={"status": CheckpointStatus.EXPORTED, "diagnostics": {GUARD_KEY: corrupt(armed_guard)}}
            )
        ]
    )
    sink = RecordingSink()
    with pytest.raises(DponeError) as blocked:
        make_engine(checkpoint_store, source, sink).run("run-2")
    assert blocked.value.code is ErrorCode.GUARD_INVALID
    assert sink.events == []
    rendered = blocked.value.render()
    assert "v2" not in rendered and "committing" not in rendered and "XYZ" not in rendered


# 9 -------------------------------------------------------------------------------------------------
def test_all_terminal_candidates_use_one_injected_timestamp(checkpoint_store) -> None:
    clock = FixedClock()
    engine = make_engine(checkpoint_store, MemorySource(orders_rows(days=4)), RecordingSink(), clock=clock)
    engine.run("run-1")
    committed = list(latest_by_label(checkpoint_store, engine).values())
    assert len(committed) == 4
    stamps = {(c.started_at, c.completed_at) for c in committed}
    assert len(stamps) == 1
    ((started, completed),) = stamps
    assert started == completed and started in clock.calls
    assert started.tzinfo is not None and started.utcoffset().total_seconds() == 0  # type: ignore[union-attr]

    # the best-effort incomplete markers of a partial promotion share one timestamp as well (new days under
    # a new query: an overlap with the committed days would stop the run as route_identity_changed)
    other = make_engine(
        FaultyStore(checkpoint_store, write_faults=[WriteFault("checkpoint_committed", after_rows=2)]),
        MemorySource(
            [(100 + i, r[1].replace(month=10), r[2]) for i, r in enumerate(orders_rows(days=4))],
            query_version="v2",
        ),
        RecordingSink(),
        clock=clock,
    )
    with pytest.raises(InjectedFault):
        other.run("run-2")
    incomplete = [
        c for c in checkpoint_store.list_latest(engine._route) if phase_of(c) == "checkpoint_incomplete"
    ]
    assert len(incomplete) == 2
    assert len({c.completed_at for c in incomplete}) == 1


# 10 ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("export", "load", "target_call"),
    [
        ("lazy_plan", "direct", "sink.load"),
        ("file_artifact", "direct", "sink.load"),
        ("lazy_plan", "staged", "sink.finalize_staged_load"),
        ("file_artifact", "staged", "sink.finalize_staged_load"),
    ],
)
@pytest.mark.parametrize("strategy", ["incremental_append", "full_refresh", "replace_partition"])
def test_staged_and_legacy_events_prove_guard_before_target_ordering(
    checkpoint_store, export: str, load: str, target_call: str, strategy: str
) -> None:
    events: list[str] = []
    store = FaultyStore(checkpoint_store, events)
    sink = RecordingSink(events)
    engine = make_engine(
        store,
        MemorySource(orders_rows(), events=events),
        sink,
        export=export,
        load=load,
        strategy=strategy,
        artifacts=MemoryArtifactStore(),
    )
    engine.run("run-1")
    assert engine._route.strategy.value == strategy

    armed = [i for i, e in enumerate(events) if e == "store.write:EXPORTED/armed"]
    committed = [i for i, e in enumerate(events) if e == "store.write:COMMITTED/checkpoint_committed"]
    target = events.index(target_call)
    assert events[:2] == ["store.list_routes", "store.list_latest"]  # the guard scan comes first
    assert len(armed) == 3 and len(committed) == 3
    assert max(armed) < target < min(committed)
    assert events.count(target_call) == 1
    if load == "staged":
        assert events.index("sink.stage") < min(armed)
    if export == "file_artifact":
        assert max(i for i, e in enumerate(events) if e.startswith("source.read")) < min(armed)
    else:
        assert (
            min(i for i, e in enumerate(events) if e.startswith("source.read")) > min(armed)
            or load == "staged"
        )


# 11 ------------------------------------------------------------------------------------------------
LEGACY_PAYLOAD = (
    '{"bounds":{"column":"order_date","kind":"range","label":"order_date=2026-11-30","lower":"2026-11-30",'
    '"upper":"2026-12-01","value_type":"date","values":null},"bytes":null,"completed_at":"2026-11-30T01:02:03Z",'
    '"diagnostics":{"nested":{"a":[1,2,{"b":null}]},"note":"pre-guard","unicode":"日本"},'
    '"partition_id":"sha256:' + "a" * 64 + '","query_hash":"sha256:' + "b" * 64 + '",'
    '"route":{"source_table":"dbo.orders","strategy":"incremental_append","target_table":"analytics.orders"},'
    '"rows":12,"run_id":"legacy","schema_hash":"sha256:' + "c" * 64 + '","started_at":"2026-11-30T01:00:00Z",'
    '"status":"COMMITTED"}'
)


def test_existing_checkpoint_payloads_round_trip_without_migration(checkpoint_store) -> None:
    legacy = PartitionCheckpoint.from_payload(LEGACY_PAYLOAD)
    assert legacy.to_payload() == LEGACY_PAYLOAD
    checkpoint_store.write_batch([legacy])
    (stored,) = checkpoint_store.list_latest(legacy.route)
    assert stored.to_payload() == LEGACY_PAYLOAD

    guarded = legacy.model_copy(
        update={
            "status": CheckpointStatus.EXPORTED,
            "diagnostics": {
                **legacy.diagnostics,
                "artifact_sha256": "sha256:" + "d" * 64,
                GUARD_KEY: {
                    "schema_version": "dpone.native_transfer.target_commit_guard.v1",
                    "checkpoint_batch_id": "sha256:" + "e" * 64,
                    "phase": "armed",
                    "recovery": "manual_reconciliation_required",
                },
            },
        }
    )
    payload = guarded.to_payload()
    checkpoint_store.write_batch([guarded])
    (stored,) = checkpoint_store.list_latest(legacy.route)
    assert stored.to_payload() == payload
    assert PartitionCheckpoint.from_payload(payload).to_payload() == payload
