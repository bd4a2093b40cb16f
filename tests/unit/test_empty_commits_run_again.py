"""``replace_partition``: a planned day, month or range whose commit recorded 0 rows runs again.

Pure decisions of ``plan_resume``: the lookback empties a day the source lacks for one run and commits it with
0 rows; once the source plans it again (it holds rows there), it runs with reason ``empty_when_committed`` and
takes no lookback slot. A commit with rows, a ``list`` value (planned and committed empty while it has no
rows), a commit whose rows are unknown, ``incremental_append`` and ``full_refresh`` are left as before. The
black-box proof is ``tests/integration/test_emptied_days_come_back.py``.
"""

from __future__ import annotations

import datetime as dt

from airflow_provider_dpone.adapters.sources.partition_planning import (
    integer_range_partitions,
    month_partitions,
)
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind
from airflow_provider_dpone.contracts.partition import (
    BoundsKind,
    PartitionBounds,
    PlannedPartition,
    partition_id_for,
)
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.runtime.resume_planner import committed_empty, plan_resume
from tests.unit.late_rows_rig import ROUTE, committed_checkpoint, decision_summary, planned_days

NOW = dt.datetime(2026, 12, 5, 6, 0, tzinfo=dt.timezone.utc)


def _partitioning(**keys: object) -> Partitioning:
    return Partitioning(kind=PartitionKind.DAY, column="order_date", **keys)


def test_a_day_committed_empty_runs_again_when_planned_and_takes_no_lookback_slot() -> None:
    planned = planned_days()  # 11-28 .. 12-01
    latest = {p.partition_id: committed_checkpoint(p) for p in planned}
    emptied = planned[3]
    latest[emptied.partition_id] = latest[emptied.partition_id].model_copy(update={"rows": 0})

    decisions = plan_resume(
        planned, latest, Strategy.REPLACE_PARTITION, "r", partitioning=_partitioning(lookback=2), now=NOW
    )

    assert decision_summary(decisions) == [
        ("2026-11-28", "skip", "committed"),
        ("2026-11-29", "run", "lookback"),
        ("2026-11-30", "run", "lookback"),  # the two slots go to the newest days committed with rows
        ("2026-12-01", "run", "empty_when_committed"),
    ]


def test_without_lookback_a_replacing_route_runs_a_day_committed_empty_again_and_skips_the_rest() -> None:
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p) for p in planned}
    latest[planned[1].partition_id] = latest[planned[1].partition_id].model_copy(update={"rows": 0})

    decisions = plan_resume(planned, latest, Strategy.REPLACE_PARTITION, "r", partitioning=_partitioning())

    assert [d.reason.value for d in decisions] == [
        "committed",
        "empty_when_committed",
        "committed",
        "committed",
    ]


def test_append_and_full_refresh_decide_as_before_on_a_commit_of_0_rows() -> None:
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p, run_id="r") for p in planned}
    latest[planned[0].partition_id] = latest[planned[0].partition_id].model_copy(update={"rows": 0})

    append = plan_resume(planned, latest, Strategy.INCREMENTAL_APPEND, "r2", partitioning=_partitioning())
    retried = plan_resume(planned, latest, Strategy.FULL_REFRESH, "r", partitioning=_partitioning())
    refreshed = plan_resume(planned, latest, Strategy.FULL_REFRESH, "r2", partitioning=_partitioning())

    assert {d.reason.value for d in append} == {"committed"}  # appending again could duplicate
    assert {d.reason.value for d in retried} == {"committed"}  # a retry of the run that committed them all
    assert {d.reason.value for d in refreshed} == {"full_refresh_new_run"}


def test_a_list_value_an_unknown_row_count_and_a_failed_attempt_are_no_empty_commit() -> None:
    (day,) = planned_days()[:1]
    values = PartitionBounds(
        kind=BoundsKind.VALUES, column="region", values=("EU",), value_type="string", label="region=EU"
    )
    listed = PlannedPartition(
        partition_id=partition_id_for(ROUTE, "sha256:q", "sha256:s", values),
        bounds=values,
        query_hash="sha256:q",
        schema_hash="sha256:s",
    )
    committed = committed_checkpoint(day)

    assert committed_empty(committed.model_copy(update={"rows": 0}))
    (ids,) = integer_range_partitions("id", [100], 100)
    (month,) = month_partitions("order_date", [(2026, 11)])
    assert committed_empty(committed.model_copy(update={"rows": 0, "bounds": ids}))
    assert committed_empty(committed.model_copy(update={"rows": 0, "bounds": month}))
    assert not committed_empty(committed)
    assert not committed_empty(committed.model_copy(update={"rows": None}))
    assert not committed_empty(committed.model_copy(update={"rows": 0, "status": CheckpointStatus.FAILED}))
    empty_value = committed_checkpoint(listed).model_copy(update={"rows": 0})
    assert not committed_empty(empty_value)
    decisions = plan_resume(
        [listed],
        {listed.partition_id: empty_value},
        Strategy.REPLACE_PARTITION,
        "r",
        partitioning=Partitioning(kind=PartitionKind.LIST, column="region", values=("EU",)),
    )
    assert [d.reason.value for d in decisions] == ["committed"]  # planned even when empty: not every run


def test_a_day_committed_empty_and_still_open_under_settle_waits_until_it_settled() -> None:
    planned = planned_days()
    latest = {p.partition_id: committed_checkpoint(p) for p in planned}
    latest[planned[3].partition_id] = latest[planned[3].partition_id].model_copy(update={"rows": 0})
    now = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)  # 12-01 still open under settle: 6h

    decisions = plan_resume(
        planned,
        latest,
        Strategy.REPLACE_PARTITION,
        "r",
        partitioning=_partitioning(settle="6h", lookback=1),
        now=now,
    )

    assert decision_summary(decisions)[-2:] == [
        ("2026-11-30", "run", "lookback"),
        ("2026-12-01", "skip", "open_partition"),
    ]
