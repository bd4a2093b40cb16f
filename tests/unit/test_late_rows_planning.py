"""Late-arriving rows (issue 12, point 3): ``settle`` holds open partitions back, ``lookback`` re-moves the
most recent committed ones under the guard, and both keys are strict manifest input.

The planner is driven directly (pure decisions) and through ``TransferEngine`` with in-memory port doubles
(a fixed clock, a recording sink that can fail after mutating), so the guard lifecycle of a lookback
partition is the real one.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions, read_definition_hash
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.manifests.loader import load_manifest_dict
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, plan_resume
from tests.doubles import FixedClock, InjectedFault, InMemoryCheckpointStore, RecordingSink, phase_of
from tests.unit.late_rows_rig import (
    DAYS,
    ROUTE,
    committed_checkpoint,
    decision_summary,
    late_rows_engine,
    planned_days,
)

UTC = dt.timezone.utc
#: The route the engine tests run (manifest_dict's tables, canonical as written).
ROUTE_OF_ENGINE = ROUTE


def _partitioning(**keys: Any) -> Partitioning:
    return Partitioning(kind=PartitionKind.DAY, column="order_date", **keys)


# -- settle ------------------------------------------------------------------------------------------


def test_settle_holds_back_partitions_whose_upper_bound_is_later_than_now_minus_settle() -> None:
    planned = planned_days()
    now = dt.datetime(2026, 12, 1, 1, 30, tzinfo=UTC)  # 11-30 ended 90 minutes ago, 12-01 is today
    decisions = plan_resume(
        planned, {}, Strategy.INCREMENTAL_APPEND, "r", partitioning=_partitioning(settle="2h"), now=now
    )
    assert decision_summary(decisions) == [
        ("2026-11-28", "run", "missing_checkpoint"),
        ("2026-11-29", "run", "missing_checkpoint"),
        ("2026-11-30", "skip", "open_partition"),
        ("2026-12-01", "skip", "open_partition"),
    ]
    # exactly at the boundary the partition has settled (its upper bound is not LATER than now - settle)
    at_boundary = plan_resume(
        planned,
        {},
        Strategy.INCREMENTAL_APPEND,
        "r",
        partitioning=_partitioning(settle="2h"),
        now=dt.datetime(2026, 12, 1, 2, 0, tzinfo=UTC),
    )
    assert [d.reason for d in at_boundary][2:] == [Reason.MISSING_CHECKPOINT, Reason.OPEN_PARTITION]


def test_without_settle_every_partition_runs_and_a_committed_open_partition_stays_committed() -> None:
    planned = planned_days()
    now = dt.datetime(2026, 12, 1, 1, 30, tzinfo=UTC)
    plain = plan_resume(planned, {}, Strategy.INCREMENTAL_APPEND, "r", partitioning=_partitioning(), now=now)
    assert {d.action for d in plain} == {Action.RUN}
    latest = {planned[3].partition_id: committed_checkpoint(planned[3])}
    held = plan_resume(
        planned, latest, Strategy.INCREMENTAL_APPEND, "r", partitioning=_partitioning(settle="1d"), now=now
    )
    assert decision_summary(held)[2:] == [
        ("2026-11-30", "skip", "open_partition"),
        ("2026-12-01", "skip", "committed"),
    ]


def test_settle_reads_a_clock_in_another_zone_as_the_same_instant() -> None:
    planned = planned_days()
    kathmandu = dt.timezone(dt.timedelta(hours=5, minutes=45))
    now = dt.datetime(2026, 12, 1, 7, 15, tzinfo=kathmandu)  # 01:30 UTC
    decisions = plan_resume(
        planned, {}, Strategy.INCREMENTAL_APPEND, "r", partitioning=_partitioning(settle="2h"), now=now
    )
    assert [d.reason for d in decisions][2] is Reason.OPEN_PARTITION


# -- lookback ----------------------------------------------------------------------------------------


def test_lookback_runs_the_n_most_recent_settled_committed_partitions_again() -> None:
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p) for p in planned[:3]}  # 12-01 is new
    now = dt.datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
    decisions = plan_resume(
        planned, latest, Strategy.REPLACE_PARTITION, "r", partitioning=_partitioning(lookback=2), now=now
    )
    assert decision_summary(decisions) == [
        ("2026-11-28", "skip", "committed"),
        ("2026-11-29", "run", "lookback"),
        ("2026-11-30", "run", "lookback"),
        ("2026-12-01", "run", "missing_checkpoint"),
    ]


def test_lookback_never_moves_an_open_partition_and_takes_fewer_when_fewer_are_committed() -> None:
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p) for p in planned}
    now = dt.datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # 12-01 still open
    decisions = plan_resume(
        planned,
        latest,
        Strategy.REPLACE_PARTITION,
        "r",
        partitioning=_partitioning(settle="6h", lookback=10),
        now=now,
    )
    assert decision_summary(decisions) == [
        ("2026-11-28", "run", "lookback"),
        ("2026-11-29", "run", "lookback"),
        ("2026-11-30", "run", "lookback"),
        ("2026-12-01", "skip", "committed"),
    ]


def test_the_planner_refuses_lookback_on_append_and_settle_on_full_refresh_if_the_manifest_was_bypassed() -> (
    None
):
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p) for p in planned}
    now = dt.datetime(2026, 12, 5, tzinfo=UTC)
    for strategy, keys in (
        (Strategy.INCREMENTAL_APPEND, {"lookback": 1}),
        (Strategy.FULL_REFRESH, {"lookback": 1}),
        (Strategy.FULL_REFRESH, {"settle": "1d"}),
    ):
        with pytest.raises(DponeError) as caught:
            plan_resume(planned, latest, strategy, "r", partitioning=_partitioning(**keys), now=now)
        assert caught.value.code is ErrorCode.MANIFEST_INVALID


# -- the engine: open partitions, and lookback under the guard ---------------------------------------


def test_an_open_day_is_planned_not_moved_then_moves_once_it_settled() -> None:
    store = InMemoryCheckpointStore()
    sink = RecordingSink()
    # rows on 11-28, 11-29, 11-30; the @daily run at 11-30 23:00 UTC must not commit 11-30
    clock = FixedClock(dt.datetime(2026, 11, 30, 23, 0, tzinfo=UTC))
    report = late_rows_engine(store, sink, clock, settle="2h").run("run-1")
    outcome = {p.label: (p.decision, p.reason) for p in report.partitions}
    assert outcome == {
        "order_date=2026-11-28": ("run", "missing_checkpoint"),
        "order_date=2026-11-29": ("run", "missing_checkpoint"),
        "order_date=2026-11-30": ("skip", "open_partition"),
    }
    assert sorted(r[1] for r in sink.tables["analytics.orders"]) == [DAYS[0]] * 4 + [DAYS[1]] * 4
    labels = {c.bounds.label for c in store.list_latest(late_rows_engine(store, sink, clock)._route)}
    assert "order_date=2026-11-30" not in labels  # no checkpoint at all for the open day

    clock.current = dt.datetime(2026, 12, 1, 2, 30, tzinfo=UTC)
    second = late_rows_engine(store, sink, clock, settle="2h").run("run-2")
    assert {p.label: p.reason for p in second.partitions}["order_date=2026-11-30"] == "missing_checkpoint"
    assert sorted(r[0] for r in sink.tables["analytics.orders"]) == list(range(1, 13))


def test_lookback_partitions_are_armed_and_promoted_like_any_active_partition() -> None:
    store = InMemoryCheckpointStore()
    sink = RecordingSink()
    clock = FixedClock(dt.datetime(2026, 12, 5, 6, 0, tzinfo=UTC))
    late_rows_engine(store, sink, clock, lookback=1).run("run-1")
    engine = late_rows_engine(store, sink, clock, lookback=1)
    report = engine.run("run-2")
    again = [p for p in report.partitions if p.decision == "run"]
    assert [(p.label, p.reason, p.status) for p in again] == [
        ("order_date=2026-11-30", "lookback", "COMMITTED")
    ]
    assert report.checkpoint_batch_id is not None
    history = store.history(engine._route, again[0].partition_id)
    assert [(h.run_id, h.status.value, phase_of(h)) for h in history][-2:] == [
        ("run-2", "EXPORTED", "armed"),
        ("run-2", "COMMITTED", "checkpoint_committed"),
    ]


def test_a_lookback_reload_that_fails_after_the_target_mutation_blocks_every_later_run() -> None:
    store = InMemoryCheckpointStore()
    clock = FixedClock(dt.datetime(2026, 12, 5, 6, 0, tzinfo=UTC))
    first = RecordingSink()
    late_rows_engine(store, first, clock, lookback=1).run("run-1")
    failing = RecordingSink(fail_after_mutation=True)
    failing.tables, failing.names = first.tables, first.names  # one target table across the runs
    with pytest.raises(InjectedFault):
        late_rows_engine(store, failing, clock, lookback=1).run("run-2")
    reloaded = [c for c in store.list_latest(ROUTE_OF_ENGINE) if c.bounds.label == "order_date=2026-11-30"]
    assert [phase_of(c) for c in reloaded] == ["target_outcome_unknown"]
    later = RecordingSink()
    later.tables, later.names = first.tables, first.names
    with pytest.raises(DponeError) as caught:
        late_rows_engine(store, later, clock, lookback=1).run("run-3")
    assert caught.value.code is ErrorCode.MANUAL_RECONCILIATION_REQUIRED
    assert later.events == []  # stopped before any target I/O


# -- manifest input ----------------------------------------------------------------------------------

BASE: dict[str, Any] = {
    "kind": "native_transfer",
    "name": "x",
    "source": {
        "type": "sqlite",
        "connection": "sqlite:///a.db",
        "table": "orders",
        "partitioning": {"kind": "day", "column": "order_date"},
    },
    "sink": {"type": "clickhouse", "connection": "c", "table": "a.b", "strategy": "incremental_append"},
    "checkpoints": {"connection": "sqlite:///s.db"},
}
#: The identity this manifest had before settle/lookback existed (computed from the previous release).
BASE_IDENTITY = "sha256:ac8fc71620b11a367ad828e7e6b7a98849bf8623f0f6d418888df1992b5a4723"


def _manifest(strategy: str = "incremental_append", **partitioning: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["sink"]["strategy"] = strategy
    data["source"]["partitioning"].update(partitioning)
    return data


def _problem(data: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(DponeError) as caught:
        load_manifest_dict(data, "m.yaml")
    assert caught.value.code is ErrorCode.MANIFEST_INVALID
    problems = caught.value.details["problems"]
    assert len(problems) == 1
    return dict(problems[0])


@pytest.mark.parametrize("text", ["2x", "0h", "1.5h", "2 h", "h", "", "-1d", "2H", "1d2h", "30", "P1D"])
def test_a_bad_settle_duration_is_manifest_invalid_naming_the_key_not_the_value(text: str) -> None:
    problem = _problem(_manifest(settle=text))
    assert problem["path"] == "source.partitioning.settle"
    # one fixed message: the text written is never echoed (it could be a secret pasted into the wrong key)
    assert problem["message"] == (
        "expected a duration: a whole number followed by m, h or d (minutes, hours, days), e.g. 2h or 1d"
    )


@pytest.mark.parametrize(("text", "minutes"), [("30m", 30), ("2h", 120), ("1d", 1440), ("14d", 20160)])
def test_settle_durations_parse(text: str, minutes: int) -> None:
    loaded = load_manifest_dict(_manifest(settle=text), "m.yaml")
    assert loaded.manifest.source.partitioning.settle_delta() == dt.timedelta(minutes=minutes)


def test_new_keys_are_strict_typed_and_misspellings_suggest_the_key() -> None:
    assert _problem(_manifest(settle=120))["message"] == "expected string, found integer"
    assert _problem(_manifest("replace_partition", lookback="3"))["path"] == "source.partitioning.lookback"
    assert _problem(_manifest("replace_partition", lookback=0))["path"] == "source.partitioning.lookback"
    assert _problem(_manifest("replace_partition", lookback=True))["path"] == "source.partitioning.lookback"
    typo = _problem(_manifest(setle="2h"))
    assert typo["suggestion"] == "source.partitioning.settle"
    typo = _problem(_manifest("replace_partition", lookbak=2))
    assert typo["suggestion"] == "source.partitioning.lookback"


def test_settle_needs_time_bounds_and_lookback_needs_replace_partition() -> None:
    for partitioning in (
        {"kind": "integer_range", "column": "id", "size": 10},
        {"kind": "list", "column": "customer", "values": ["a"]},
        {"kind": "none", "column": None},
    ):
        data = _manifest(settle="1d", **partitioning)
        problem = _problem(data)
        assert problem["path"] == "source.partitioning.settle"
        assert "day or month" in problem["message"]
    assert _problem(_manifest("full_refresh", settle="1d"))["path"] == "source.partitioning.settle"
    for strategy in ("incremental_append", "full_refresh"):
        problem = _problem(_manifest(strategy, lookback=2))
        assert problem["path"] == "source.partitioning.lookback"
        assert "replace_partition" in problem["message"]
    assert _problem(_manifest("replace_partition", lookback=2, kind="none", column=None))["path"] == (
        "source.partitioning.lookback"
    )
    ok = load_manifest_dict(_manifest("replace_partition", settle="2h", lookback=3, kind="month"), "m.yaml")
    assert ok.manifest.source.partitioning.lookback == 3


def test_existing_manifests_keep_their_identity_and_partition_ids() -> None:
    plain = load_manifest_dict(_manifest(), "m.yaml")
    assert plain.identity == BASE_IDENTITY
    assert "settle" not in plain.normalized["source"]["partitioning"]
    assert "allow_target_ttl" not in plain.normalized["sink"]["options"]  # ADR 0083's opt-in, unset
    retention = _manifest()
    retention["sink"]["options"] = {"allow_target_ttl": True}
    assert load_manifest_dict(retention, "m.yaml").identity != BASE_IDENTITY
    assert "allow_target_views" not in plain.normalized["sink"]["options"]  # ADR 0086's opt-in, unset
    viewed = _manifest()
    viewed["sink"]["options"] = {"allow_target_views": True}
    assert load_manifest_dict(viewed, "m.yaml").identity != BASE_IDENTITY
    settled = load_manifest_dict(_manifest(settle="2h"), "m.yaml")
    assert settled.identity != BASE_IDENTITY  # once set, the key is bound like every other field
    assert settled.normalized["source"]["partitioning"]["settle"] == "2h"
    replaced = load_manifest_dict(_manifest("replace_partition", lookback=2), "m.yaml")
    # partition IDs hash route, read definition, schema and bounds: neither key takes part
    for loaded in (settled, replaced):
        assert read_definition_hash(loaded.manifest.source) == read_definition_hash(plain.manifest.source)


def test_the_example_manifests_hold_open_partitions_back() -> None:
    from pathlib import Path

    from airflow_provider_dpone.manifests.loader import load_manifest

    examples = Path(__file__).resolve().parents[2] / "dags_examples" / "manifests"
    daily = load_manifest(examples / "orders_incremental.yaml").manifest.source.partitioning
    assert daily.settle_delta() == dt.timedelta(hours=2) and daily.lookback is None
    monthly = load_manifest(examples / "orders_quality_replay.yaml").manifest
    assert monthly.source.partitioning.settle_delta() == dt.timedelta(days=1)
    assert monthly.source.partitioning.lookback == 1 and monthly.sink.strategy is Strategy.REPLACE_PARTITION


def test_only_bounds_that_are_exactly_one_partition_of_the_grouping_get_a_group_key() -> None:
    from airflow_provider_dpone.adapters.sources.partition_counts import Grouping, bounds_key
    from airflow_provider_dpone.adapters.sources.partition_planning import integer_range_partitions
    from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
    from airflow_provider_dpone.contracts.schema import ColumnSpec

    date_column = ColumnSpec(name="order_date", clickhouse_type="Date")
    day, month = Grouping(PartitionKind.DAY, date_column), Grouping(PartitionKind.MONTH, date_column)
    (one_day,) = day_partitions("order_date", [dt.date(2026, 11, 30)])
    (december,) = month_partitions_of([(2026, 12)])
    assert bounds_key(day, one_day) == "2026-11-30"
    assert bounds_key(month, december) == "2026-12-01"
    assert bounds_key(day, december) is None and bounds_key(month, one_day) is None
    other_column = one_day.model_copy(update={"column": "shipped_on"})
    assert bounds_key(day, other_column) is None
    ranges = Grouping(PartitionKind.INTEGER_RANGE, ColumnSpec(name="id", clickhouse_type="Int64"), size=10)
    (aligned,) = integer_range_partitions("id", [20], 10)
    assert bounds_key(ranges, aligned) == "20"
    assert bounds_key(ranges, aligned.model_copy(update={"lower": "25", "upper": "35"})) is None
    assert bounds_key(ranges, integer_range_partitions("id", [100], 100)[0]) is None
    whole = PartitionBounds(kind=BoundsKind.ALL, label="all")
    assert bounds_key(day, whole) is None


def month_partitions_of(months: list[tuple[int, int]]) -> list[Any]:
    from airflow_provider_dpone.adapters.sources.partition_planning import month_partitions

    return month_partitions("order_date", months)
