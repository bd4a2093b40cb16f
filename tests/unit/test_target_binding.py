"""Which target connection a route's commits went through, and when another one is stopped (ADR 0088).

As for the source (``test_source_binding.py``): the newest COMMITTED checkpoint that records a target
connection decides; checkpoints of older releases record none. A recorded move keeps the source the copied
commit names. The black-box proofs: ``tests/integration/test_target_connection.py`` and the staging case in
``test_target_checked_when_all_skipped.py``.
"""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.route_identity import RebaselineRequest
from airflow_provider_dpone.runtime.source_binding import (
    SOURCE_KEY,
    TARGET_KEY,
    TARGET_PLACE_KEY,
    connection_reference,
    record_move,
)
from airflow_provider_dpone.runtime.target_binding import require_same_target, same_target
from tests.builders import stored_checkpoint

AT = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)
DAYS = day_partitions("order_date", [dt.date(2026, 11, day) for day in range(1, 29)])
PROD, STAGING = connection_reference("ch_prod"), connection_reference("ch_staging")


class FixedClock:
    def now(self) -> dt.datetime:
        return AT + dt.timedelta(days=1)

    def monotonic(self) -> float:
        return 0.0


def checkpoint(
    day: int, target: str | None, status: CheckpointStatus = CheckpointStatus.COMMITTED
) -> PartitionCheckpoint:
    stored = stored_checkpoint(ROUTE, DAYS[day], AT + dt.timedelta(minutes=day), status=status)
    diagnostics = (
        {SOURCE_KEY: "orders_db"} if target is None else {SOURCE_KEY: "orders_db", TARGET_KEY: target}
    )
    return stored.model_copy(update={"diagnostics": diagnostics})


def test_a_run_through_another_target_connection_stops_naming_both_and_the_way_out() -> None:
    history = [checkpoint(0, PROD), checkpoint(1, PROD)]

    with pytest.raises(DponeError) as info:
        require_same_target(ROUTE, history, STAGING, "orders.yaml")

    err = info.value
    assert err.code is ErrorCode.ROUTE_IDENTITY_CHANGED
    assert err.details["changed"] == ["target"]
    assert (err.details["recorded_target"], err.details["this_target"]) == (PROD, STAGING)
    assert "'ch_staging'" in err.safe_message and "'ch_prod'" in err.safe_message
    hints = "\n".join(err.hint_lines)
    assert "checkpoint store of its own" in hints
    assert "dpone guard rebaseline orders.yaml --target-moved" in hints


def test_an_inline_target_uri_is_not_printed() -> None:
    recorded = connection_reference("chdb:///srv/secret/prod")
    with pytest.raises(DponeError) as info:
        require_same_target(
            ROUTE, [checkpoint(0, recorded)], connection_reference("chdb:///srv/secret/staging"), "m"
        )
    assert "secret" not in info.value.safe_message and "another folder" in info.value.safe_message


def test_the_same_target_and_a_history_without_any_recorded_target_pass() -> None:
    require_same_target(ROUTE, [checkpoint(0, PROD)], PROD, "m")
    require_same_target(ROUTE, [checkpoint(0, None), checkpoint(1, None)], STAGING, "m")  # older releases
    require_same_target(ROUTE, [], STAGING, "m")


def test_the_newest_commit_that_records_a_target_decides() -> None:
    moved = [checkpoint(0, PROD), checkpoint(1, STAGING), checkpoint(2, None)]
    require_same_target(ROUTE, moved, STAGING, "m")
    failed_after = [checkpoint(0, PROD), checkpoint(1, STAGING, CheckpointStatus.FAILED)]
    require_same_target(ROUTE, failed_after, PROD, "m")  # an attempt that never committed decides nothing
    with pytest.raises(DponeError):
        require_same_target(ROUTE, failed_after, STAGING, "m")


def test_a_sibling_routes_newer_commit_decides() -> None:
    sibling = stored_checkpoint(
        ROUTE.model_copy(update={"strategy": Strategy.REPLACE_PARTITION}), DAYS[5], AT + dt.timedelta(hours=1)
    ).model_copy(update={"diagnostics": {TARGET_KEY: STAGING}})
    with pytest.raises(DponeError):
        require_same_target(ROUTE, [checkpoint(0, PROD)], PROD, "m", siblings=[sibling])


def test_a_recorded_target_move_copies_the_newest_commit_keeping_its_source_and_counting_the_target() -> None:
    history = [checkpoint(0, PROD), checkpoint(1, PROD)]
    request = RebaselineRequest(reason="connection renamed ch_prod -> ch_main, same server", actor="oncall")

    moved = record_move(
        "target", ROUTE, history, STAGING, "rebaseline__1", FixedClock(), request, lambda bounds: 333
    )

    assert moved.status is CheckpointStatus.COMMITTED
    assert (moved.partition_id, moved.rows) == (history[1].partition_id, history[1].rows)
    assert moved.diagnostics[TARGET_KEY] == STAGING
    assert moved.diagnostics[SOURCE_KEY] == "orders_db"  # the source did not move
    audit = moved.diagnostics["rebaseline"]
    assert isinstance(audit, dict)
    assert (audit["target_moved_from"], audit["target_rows_now"]) == (PROD, 333)
    require_same_target(ROUTE, [*history, moved], STAGING, "m")


def test_a_target_move_with_nothing_to_record_is_refused() -> None:
    request = RebaselineRequest(reason="checked", actor="oncall")
    for history in ([checkpoint(0, None)], [checkpoint(0, PROD)]):
        with pytest.raises(DponeError) as info:
            record_move("target", ROUTE, history, PROD, "r", FixedClock(), request)
        assert info.value.code is ErrorCode.USAGE and "target connection" in info.value.safe_message


HERE, THERE = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def placed(day: int, target: str, place: str) -> PartitionCheckpoint:
    stored = checkpoint(day, target)
    return stored.model_copy(update={"diagnostics": {**stored.diagnostics, TARGET_PLACE_KEY: place}})


def test_another_name_for_the_same_place_passes_and_the_same_name_led_elsewhere_stops() -> None:
    """Environments share connection names (staging's ``ch_prod`` is another server): the place decides."""
    history = [placed(0, PROD, HERE)]
    require_same_target(ROUTE, history, STAGING, "m", place=HERE)  # a second name (longer timeouts)
    with pytest.raises(DponeError) as info:
        require_same_target(ROUTE, history, PROD, "m", place=THERE)
    assert "now leads to another server, database or folder" in info.value.safe_message
    with pytest.raises(DponeError):
        require_same_target(ROUTE, history, STAGING, "m", place=THERE)


def test_without_a_recorded_place_the_names_decide() -> None:
    require_same_target(ROUTE, [checkpoint(0, PROD)], PROD, "m", place=THERE)
    with pytest.raises(DponeError):
        require_same_target(ROUTE, [checkpoint(0, PROD)], STAGING, "m", place=THERE)


def test_a_move_to_another_place_under_the_same_name_is_recorded_with_its_place() -> None:
    request = RebaselineRequest(reason="the folder moved", actor="oncall")
    history = [placed(0, PROD, HERE)]
    moved = record_move(
        "target",
        ROUTE,
        history,
        PROD,
        "r",
        FixedClock(),
        request,
        also={TARGET_PLACE_KEY: THERE},
        unmoved=lambda newest: same_target(newest, PROD, THERE),
    )
    assert (moved.diagnostics[TARGET_KEY], moved.diagnostics[TARGET_PLACE_KEY]) == (PROD, THERE)
    require_same_target(ROUTE, [*history, moved], PROD, "m", place=THERE)
    with pytest.raises(DponeError) as info:  # the same place: nothing moved
        record_move(
            "target",
            ROUTE,
            history,
            STAGING,
            "r",
            FixedClock(),
            request,
            also={TARGET_PLACE_KEY: HERE},
            unmoved=lambda newest: same_target(newest, STAGING, HERE),
        )
    assert info.value.code is ErrorCode.USAGE
