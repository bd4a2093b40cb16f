"""Operator resolution: audited, only for blocked partitions, and it decides what a retry may do."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.guard.resolution import ResolutionRequest, ResolveAs, resolve
from tests.builders import day, stored_checkpoint
from tests.doubles import (
    FaultyStore,
    FixedClock,
    InjectedFault,
    InMemoryCheckpointStore,
    RecordingSink,
    WriteFault,
    describe,
    transfer_engine,
)


def blocked_store_after_lost_commit() -> tuple[InMemoryCheckpointStore, RecordingSink]:
    store = InMemoryCheckpointStore()
    sink = RecordingSink()
    with pytest.raises(InjectedFault):
        transfer_engine(
            store=FaultyStore(store, write_faults=[WriteFault("checkpoint_committed", after_rows=0)]),
            sink=sink,
        ).run("r1")
    return store, sink


def test_resolving_as_committed_lets_the_next_run_skip_without_touching_the_target() -> None:
    store, sink = blocked_store_after_lost_commit()
    route = transfer_engine(store=store, sink=sink)._route
    records = resolve(
        store,
        FixedClock(),
        route,
        ResolutionRequest(None, ResolveAs.COMMITTED, "counted rows in target: match", "oncall@host"),
    )
    assert len(records) == 3
    audit = records[0].diagnostics["resolution"]
    assert isinstance(audit, dict)
    assert audit["by"] == "oncall@host" and audit["as"] == "committed"
    assert audit["previous_phase"] == "checkpoint_incomplete"
    events: list[str] = []
    retry_sink = RecordingSink(events)
    report = transfer_engine(store=store, sink=retry_sink).run("r2")
    assert report.partitions_skipped == 3 and retry_sink.target_calls() == 0


def test_resolving_as_not_applied_lets_the_next_run_move_the_partitions_again() -> None:
    store, sink = blocked_store_after_lost_commit()
    route = transfer_engine(store=store, sink=sink)._route
    sink.tables.clear()  # the operator deleted the attempt's rows from the target, then forces
    resolve(
        store,
        FixedClock(),
        route,
        ResolutionRequest(None, ResolveAs.NOT_APPLIED, "deleted the rows", "me", force=True),
    )
    assert {describe(c) for c in store.list_latest(route)} == {"FAILED/failed_before_target"}
    retry_sink = RecordingSink()
    report = transfer_engine(store=store, sink=retry_sink).run("r2")
    assert report.partitions_committed == 3 and retry_sink.target_calls() == 1


def test_resolution_refuses_partitions_that_are_not_blocked_and_needs_a_reason() -> None:
    store = InMemoryCheckpointStore()
    sink = RecordingSink()
    transfer_engine(store=store, sink=sink).run("r1")
    route = transfer_engine(store=store, sink=sink)._route
    pid = store.list_latest(route)[0].partition_id
    with pytest.raises(DponeError) as not_blocked:
        resolve(store, FixedClock(), route, ResolutionRequest((pid,), ResolveAs.COMMITTED, "x", "me"))
    assert not_blocked.value.code is ErrorCode.USAGE
    with pytest.raises(DponeError):
        resolve(store, FixedClock(), route, ResolutionRequest(None, ResolveAs.COMMITTED, "   ", "me"))
    with pytest.raises(DponeError):
        resolve(store, FixedClock(), route, ResolutionRequest(None, ResolveAs.COMMITTED, "ok", "me"))


def test_an_invalid_guard_can_be_resolved_and_keeps_its_history() -> None:
    store, sink = blocked_store_after_lost_commit()
    route = transfer_engine(store=store, sink=sink)._route
    first = store.list_latest(route)[0]
    store.write_batch([first.model_copy(update={"diagnostics": {GUARD_KEY: {"phase": "???"}}})])
    resolve(
        store,
        FixedClock(),
        route,
        ResolutionRequest((first.partition_id,), ResolveAs.NOT_APPLIED, "bad rec", "me", force=True),
    )
    history = store.history(route, first.partition_id)
    assert [describe(c) for c in history][-1] == "FAILED/failed_before_target"
    assert len(history) >= 5  # append-only: PLANNED, armed, unknown, corrupt, resolution


def test_permit_is_required_for_every_target_mutation() -> None:
    """By construction: a sink refuses a permit that the lifecycle has not opened (or already closed)."""
    from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
    from airflow_provider_dpone.contracts.permit import TargetPermit
    from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
    from tests.doubles import ORDERS_SCHEMA

    route = RouteIdentity(
        source_table="dbo.orders", target_table="analytics.orders", strategy=Strategy.INCREMENTAL_APPEND
    )
    permit = TargetPermit(
        route=route,
        checkpoint_batch_id="sha256:" + "0" * 64,
        partitions=(("p", PartitionBounds(kind=BoundsKind.ALL, label="all")),),
    )
    sink = RecordingSink()
    with pytest.raises(DponeError) as refused:
        sink.load(permit, "analytics.orders", ORDERS_SCHEMA, [])
    assert refused.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED
    permit._open_window()
    with pytest.raises(DponeError):
        sink.load(permit, "analytics.other", ORDERS_SCHEMA, [])
    permit._close_window()
    with pytest.raises(DponeError):
        permit._open_window()  # single use


def counter(sink: RecordingSink):  # type: ignore[no-untyped-def]
    return lambda checkpoint: sink.count_rows(checkpoint.route.target_table, checkpoint.bounds)


def test_not_applied_is_refused_while_the_target_holds_rows_and_nothing_is_written() -> None:
    store = InMemoryCheckpointStore()
    sink = RecordingSink(fail_after_mutation=True)  # the rows landed, the call raised: target_outcome_unknown
    with pytest.raises(InjectedFault):
        transfer_engine(store=store, sink=sink).run("r1")
    route = transfer_engine(store=store, sink=sink)._route
    before = list(store.rows)
    request = ResolutionRequest(None, ResolveAs.NOT_APPLIED, "looked empty", "me")
    with pytest.raises(DponeError) as caught:
        resolve(store, FixedClock(), route, request, count_target=counter(sink))
    assert caught.value.code is ErrorCode.USAGE
    assert any("the target holds 4 row(s)" in line for line in caught.value.hint_lines)
    assert store.rows == before


def test_not_applied_is_refused_for_a_checkpoint_incomplete_partition_even_with_an_empty_target() -> None:
    store, sink = blocked_store_after_lost_commit()
    sink.tables.clear()
    route = transfer_engine(store=store, sink=sink)._route
    with pytest.raises(DponeError) as caught:
        resolve(
            store,
            FixedClock(),
            route,
            ResolutionRequest(None, ResolveAs.NOT_APPLIED, "x", "me"),
            count_target=counter(sink),
        )
    assert any("target call succeeded" in line for line in caught.value.hint_lines)


def test_not_applied_with_an_empty_target_is_accepted_and_audits_the_counts() -> None:
    store = InMemoryCheckpointStore()
    sink = RecordingSink(fail_before_mutation=True)
    with pytest.raises(InjectedFault):
        transfer_engine(store=store, sink=sink).run("r1")
    route = transfer_engine(store=store, sink=sink)._route
    records = resolve(
        store,
        FixedClock(),
        route,
        ResolutionRequest(None, ResolveAs.NOT_APPLIED, "empty", "me"),
        count_target=counter(sink),
    )
    audit = records[0].diagnostics["resolution"]
    assert isinstance(audit, dict)
    assert (
        audit["target_rows"] == 0
        and audit["forced"] is False
        and audit["previous_phase"] == "target_outcome_unknown"
    )
    retry = RecordingSink()
    transfer_engine(store=store, sink=retry).run("r2")
    assert sum(len(rows) for rows in retry.tables.values()) == 12


def test_not_applied_with_an_unknown_target_count_is_refused_without_force() -> None:
    store, sink = blocked_store_after_lost_commit()
    route = transfer_engine(store=store, sink=sink)._route
    with pytest.raises(DponeError):
        resolve(store, FixedClock(), route, ResolutionRequest(None, ResolveAs.NOT_APPLIED, "x", "me"))


def test_a_replacing_route_resolved_after_its_failed_first_run_is_not_stopped_as_a_first_run() -> None:
    """The first-run stop in front of rows no route loaded (``require_first_replacement_knows_the_rows``)
    must not mistake a failed first attempt's own rows for another loader's: after ``not-applied``, the
    retry replaces them."""
    store = InMemoryCheckpointStore()
    sink = RecordingSink(fail_after_mutation=True)
    with pytest.raises(InjectedFault):
        transfer_engine(store=store, sink=sink, strategy="full_refresh").run("r1")
    assert sink.tables["analytics.orders"]  # the failed attempt left rows behind
    route = transfer_engine(store=store, sink=sink, strategy="full_refresh")._route
    resolve(
        store,
        FixedClock(),
        route,
        ResolutionRequest(None, ResolveAs.NOT_APPLIED, "full_refresh replaces them", "me"),
        count_target=lambda c: len(sink.tables["analytics.orders"]),
    )
    sink.fail_after_mutation = False

    report = transfer_engine(store=store, sink=sink, strategy="full_refresh").run("r2")

    assert report.partitions_committed == 3  # not stopped in front of its own first attempt's rows


def _fan_in(
    attempt_landed: int,
) -> tuple[InMemoryCheckpointStore, RouteIdentity, list[PartitionCheckpoint], int]:
    """Route A committed a day of 1,000 rows; route B (another source table, the same target) was killed
    armed within the same day, having written ``attempt_landed`` rows: the target counts both."""
    at = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    route_a = RouteIdentity(
        source_table="main.orders_a", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
    )
    route_b = RouteIdentity(
        source_table="main.orders_b", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
    )
    committed = stored_checkpoint(route_a, day("2026-11-28", "2026-11-29"), at, rows=1_000)
    armed = stored_checkpoint(route_b, day("2026-11-28", "2026-11-29"), at, rows=300_000).model_copy(
        update={
            "status": CheckpointStatus.EXPORTED,
            "completed_at": None,
            "diagnostics": {
                GUARD_KEY: TargetCommitGuard.for_phase(GuardPhase.ARMED, "sha256:" + "ab" * 32).to_json()
            },
        }
    )
    store = InMemoryCheckpointStore()
    store.write_batch([committed, armed])
    return store, route_a, [committed, armed], 1_000 + attempt_landed


def test_in_a_fan_in_another_routes_committed_rows_are_not_the_blocked_attempts() -> None:
    """Red before: the target's 1,000 rows of route A within the day were taken for route B's attempt:
    ``not-applied`` was refused ("resolve --as committed"), and ``committed`` was accepted, so B's 300,000
    rows would never have moved, every command exit 0."""
    store, route_a, latest, in_target = _fan_in(attempt_landed=0)
    count = lambda checkpoint: in_target  # noqa: E731 - the target's count within the bounds

    with pytest.raises(DponeError) as refused:
        resolve(
            store,
            FixedClock(),
            route_a,
            ResolutionRequest(None, ResolveAs.COMMITTED, "x", "me"),
            latest=latest,
            count_target=count,
        )
    assert "holds no row" in " ".join(refused.value.hint_lines)

    records = resolve(
        store,
        FixedClock(),
        route_a,
        ResolutionRequest(None, ResolveAs.NOT_APPLIED, "B never landed", "me"),
        latest=latest,
        count_target=count,
    )
    audit = records[0].diagnostics["resolution"]
    assert isinstance(audit, dict) and audit["target_rows"] == 1_000 and audit["other_routes_rows"] == 1_000


def test_in_a_fan_in_rows_the_attempt_wrote_still_refuse_not_applied() -> None:
    store, route_a, latest, in_target = _fan_in(attempt_landed=20_000)
    with pytest.raises(DponeError):
        resolve(
            store,
            FixedClock(),
            route_a,
            ResolutionRequest(None, ResolveAs.NOT_APPLIED, "x", "me"),
            latest=latest,
            count_target=lambda checkpoint: in_target,
        )


def test_another_source_committing_the_same_day_twice_is_counted_once() -> None:
    """Route A's day committed by its append route and again by its replace route (a strategy switch):
    the target holds those rows once. Red before: counted twice (20 of a target's 17), the 7 rows B's
    attempt wrote were hidden, ``not-applied`` was accepted and the next run appended them again."""
    store, route_a, latest, _ = _fan_in(attempt_landed=0)
    replaced = latest[0].model_copy(
        update={
            "route": RouteIdentity(
                source_table="main.orders_a", target_table="demo.orders", strategy=Strategy.REPLACE_PARTITION
            ),
            "partition_id": "sha256:" + "e" * 64,
            "completed_at": dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc),
        }
    )
    latest = [*latest, replaced]
    store.write_batch([replaced])
    with pytest.raises(DponeError):
        resolve(
            store,
            FixedClock(),
            route_a,
            ResolutionRequest(None, ResolveAs.NOT_APPLIED, "x", "me"),
            latest=latest,
            count_target=lambda checkpoint: 1_000 + 7,
        )
    landed = [latest[0], latest[1].model_copy(update={"rows": 7}), replaced]  # B's attempt exported 7 rows
    records = resolve(
        store,
        FixedClock(),
        route_a,
        ResolutionRequest(None, ResolveAs.COMMITTED, "B's 7 rows are there", "me"),
        latest=landed,
        count_target=lambda checkpoint: 1_000 + 7,
    )
    audit = records[0].diagnostics["resolution"]
    assert isinstance(audit, dict) and audit["other_routes_rows"] == 1_000


def test_another_sources_days_rebaselined_to_a_month_are_counted_once() -> None:
    """Route B's two days (5 rows each) were rebaselined to a month (10 rows): the month's commit is a new
    partition ID beside the days'. Red before: a month of route A counted B's rows twice (20), which hid
    10 rows of A's own (an append of a lost commit ran again; ``not-applied`` was accepted)."""
    from airflow_provider_dpone.runtime.guard.resolution import other_sources_rows

    earlier = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    later = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    route_a = RouteIdentity(
        source_table="main.a", target_table="demo.t", strategy=Strategy.INCREMENTAL_APPEND
    )
    route_b = RouteIdentity(
        source_table="main.b", target_table="demo.t", strategy=Strategy.INCREMENTAL_APPEND
    )
    month = day("2026-11-01", "2026-12-01", label="2026-11")
    days = [
        stored_checkpoint(route_b, day("2026-11-01", "2026-11-02"), earlier, rows=5),
        stored_checkpoint(route_b, day("2026-11-02", "2026-11-03"), earlier, rows=5),
    ]
    rebaselined = stored_checkpoint(route_b, month, later, query_hash="sha256:" + "d" * 64, rows=10)

    assert other_sources_rows(route_a, month, [*days, rebaselined]) == 10
    # the other way round (two days' range rebaselined to days): the days are the newest and cover it
    pair = stored_checkpoint(route_b, day("2026-11-01", "2026-11-03"), earlier, rows=10)
    days_since = [c.model_copy(update={"started_at": later, "completed_at": later}) for c in days]
    assert other_sources_rows(route_a, month, [pair, *days_since]) == 10
    # an older commit only partly covered by newer ones: how much of it is still there is unknown
    assert other_sources_rows(route_a, month, [pair, days_since[0]]) is None
    assert (
        other_sources_rows(
            route_a,
            month,
            [rebaselined.model_copy(update={"started_at": earlier, "completed_at": earlier}), *days_since],
        )
        is None
    )


def test_committed_over_a_partly_landed_attempt_is_refused() -> None:
    """Red before: a direct load killed after 50 of a day's 5,000 rows (no count recorded: a direct load
    counts inside the target call) was resolved ``committed`` without a word, and the day kept 50 rows
    for good, exit 0. The source's count is asked now; an exported count is compared where there is one."""
    store = InMemoryCheckpointStore()
    sink = RecordingSink(fail_after_mutation=True)
    with pytest.raises(InjectedFault):
        transfer_engine(store=store, sink=sink).run("r1")
    route = transfer_engine(store=store, sink=sink)._route
    assert all(c.rows is None for c in store.list_latest(route))  # the attempt recorded no count
    before = list(store.rows)
    request = ResolutionRequest(None, ResolveAs.COMMITTED, "looks loaded", "me")

    with pytest.raises(DponeError) as refused:
        resolve(store, FixedClock(), route, request, count_target=lambda c: 1, count_source=lambda c: 4)

    assert refused.value.code is ErrorCode.USAGE
    assert any(
        "the target holds 1 row(s) within its bounds, the source 4" in line
        for line in refused.value.hint_lines
    )
    assert store.rows == before
    # with an exported count, fewer rows than it are refused too, without asking the source
    exported = [c.model_copy(update={"rows": 4}) for c in store.list_latest(route)]
    with pytest.raises(DponeError) as short:
        resolve(store, FixedClock(), route, request, latest=exported, count_target=lambda c: 3)
    assert any("holds 3 of the 4 row(s)" in line for line in short.value.hint_lines)
    # whole: accepted
    records = resolve(store, FixedClock(), route, request, count_target=lambda c: 4, count_source=lambda c: 4)
    assert len(records) == 3


def test_committed_is_refused_where_other_sources_share_or_the_source_count_is_unknown() -> None:
    """Red before: route A committed by month, B's day attempt blocked: the target's rows within the day
    were A's as much as B's, ``committed`` was accepted for days B held none of, exit 0. And B's
    partition resolved through A's manifest (which cannot count B's source) was accepted as well."""
    store, route_a, latest, _ = _fan_in(attempt_landed=0)
    month = latest[0].model_copy(
        update={
            "bounds": day("2026-11-01", "2026-12-01", label="2026-11"),
            "partition_id": "sha256:" + "f" * 64,
        }
    )
    uncounted = latest[1].model_copy(update={"rows": None})  # a direct attempt: no count recorded
    by_month = [month, uncounted]
    store.write_batch(by_month)
    request = ResolutionRequest(None, ResolveAs.COMMITTED, "looks loaded", "me")

    with pytest.raises(DponeError) as unknown_share:
        resolve(store, FixedClock(), route_a, request, latest=by_month, count_target=lambda c: 525)
    assert any("how many of them other source tables" in line for line in unknown_share.value.hint_lines)

    same_day = [latest[0], uncounted]
    with pytest.raises(DponeError) as not_this_source:
        resolve(
            store,
            FixedClock(),
            route_a,
            request,
            latest=same_day,
            count_target=lambda c: 1_025,
            count_source=lambda c: None,  # B's partition, resolved through A's manifest
        )
    assert any("resolve it with that route's manifest" in line for line in not_this_source.value.hint_lines)


def test_committed_over_an_uncounted_attempt_of_an_empty_day_is_accepted() -> None:
    """A direct attempt re-moving a day the source emptied: target and source both hold no row. Red
    before (this stop's first version): refused as "the target holds no row" before the source was asked."""
    store = InMemoryCheckpointStore()
    sink = RecordingSink(fail_after_mutation=True)
    with pytest.raises(InjectedFault):
        transfer_engine(store=store, sink=sink).run("r1")
    route = transfer_engine(store=store, sink=sink)._route
    request = ResolutionRequest(None, ResolveAs.COMMITTED, "both empty", "me")

    records = resolve(store, FixedClock(), route, request, count_target=lambda c: 0, count_source=lambda c: 0)

    assert len(records) == 3 and all(r.rows == 0 for r in records)


@pytest.mark.parametrize("strategy", ["replace_partition", "full_refresh"])
def test_committed_on_a_replacing_attempt_is_refused_whatever_the_counts_and_force_overrides_it(
    strategy: str,
) -> None:
    """Red before: a replacing attempt killed before its delete left the old rows, as many as the source
    holds; ``committed`` on the equal counts was accepted and the corrected values never arrived, exit 0.
    ``not-applied`` is safe there (the next run replaces the bounds)."""
    store = InMemoryCheckpointStore()
    sink = RecordingSink(fail_after_mutation=True)
    with pytest.raises(InjectedFault):
        transfer_engine(store=store, sink=sink, strategy=strategy).run("r1")
    route = transfer_engine(store=store, sink=sink, strategy=strategy)._route
    before = list(store.rows)
    request = ResolutionRequest(None, ResolveAs.COMMITTED, "target count == source count", "me")

    with pytest.raises(DponeError) as refused:
        resolve(store, FixedClock(), route, request, count_target=lambda c: 4, count_source=lambda c: 4)

    assert refused.value.code is ErrorCode.USAGE
    assert refused.value.details["problem"] == "committed_on_replacing_route"
    assert "replacing route" in refused.value.safe_message
    assert any("Resolve --as not-applied" in line for line in refused.value.hint_lines)
    assert store.rows == before
    forced = ResolutionRequest(None, ResolveAs.COMMITTED, "compared values", "me", force=True)
    assert len(resolve(store, FixedClock(), route, forced, count_target=lambda c: 4)) == 3


def test_committed_on_a_replacing_attempt_whose_target_call_returned_is_accepted() -> None:
    """``checkpoint_incomplete``: the target call returned, so the bounds hold the attempt's rows; the
    guard's own record, not a count, says so."""
    store = InMemoryCheckpointStore()
    with pytest.raises(InjectedFault):
        transfer_engine(
            store=FaultyStore(store, write_faults=[WriteFault("checkpoint_committed", after_rows=0)]),
            sink=RecordingSink(),
            strategy="replace_partition",
        ).run("r1")
    route = transfer_engine(store=store, sink=RecordingSink(), strategy="replace_partition")._route
    request = ResolutionRequest(None, ResolveAs.COMMITTED, "the call returned", "me")

    records = resolve(store, FixedClock(), route, request)

    assert {describe(r) for r in records} == {"COMMITTED/checkpoint_committed"}


@pytest.mark.parametrize("resolve_as", [ResolveAs.NOT_APPLIED, ResolveAs.COMMITTED])
def test_in_a_fan_in_other_routes_rows_deleted_within_the_bounds_refuse_either_answer(
    resolve_as: ResolveAs,
) -> None:
    """Red before: B's partial day was deleted by its bounds, A's 1,000 committed rows with it (the target
    counts 0); ``_net`` took 0 for "the attempt left nothing", ``not-applied`` was accepted, and A's rows
    were gone for good (A's checkpoint says COMMITTED), every command exit 0."""
    store, route_a, latest, _ = _fan_in(attempt_landed=0)
    before = list(store.rows)

    with pytest.raises(DponeError) as refused:
        resolve(
            store,
            FixedClock(),
            route_a,
            ResolutionRequest(None, resolve_as, "deleted the day", "me"),
            latest=latest,
            count_target=lambda checkpoint: 0,
        )

    assert refused.value.details["problem"] == "other_routes_rows_lost"
    hints = " ".join(refused.value.hint_lines)
    assert "fewer than the 1000 other routes committed there (main.orders_a -> demo.orders" in hints
    assert "were deleted" in hints and "Restore" in hints
    assert store.rows == before
    forced = ResolutionRequest(None, ResolveAs.NOT_APPLIED, "A was retired", "me", force=True)
    assert resolve(store, FixedClock(), route_a, forced, latest=latest, count_target=lambda c: 0)


def test_the_views_a_target_feeds_are_named_in_the_refusal_and_recorded_with_not_applied() -> None:
    """Red before: nothing named the view, whose table kept the attempt's rows deleted from the target;
    the next run fed them again (duplicates), exit 0."""
    store = InMemoryCheckpointStore()
    sink = RecordingSink(fail_after_mutation=True)
    with pytest.raises(InjectedFault):
        transfer_engine(store=store, sink=sink).run("r1")
    route = transfer_engine(store=store, sink=sink)._route
    request = ResolutionRequest(None, ResolveAs.NOT_APPLIED, "deleted", "me")

    with pytest.raises(DponeError) as refused:
        resolve(store, FixedClock(), route, request, count_target=lambda c: 4, views=["demo.orders_mv"])
    assert refused.value.details["views_fed"] == ["demo.orders_mv"]
    assert any("demo.orders_mv" in line and "view's table" in line for line in refused.value.hint_lines)

    records = resolve(store, FixedClock(), route, request, count_target=lambda c: 0, views=["demo.orders_mv"])
    audits = [r.diagnostics["resolution"] for r in records]
    assert all(isinstance(a, dict) and a["views_fed"] == ["demo.orders_mv"] for a in audits)
