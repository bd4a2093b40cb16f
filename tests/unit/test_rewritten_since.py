"""Which committed partitions a replacing route of the same table touched since: indexed, yet exactly the
pairs a comparison of every pair finds (``pre_arm.rewritten.rewritten_since``).

The index exists for scale (a strategy switched back and forth over years of days compared millions of
pairs: 2.8 s at 1,000 days a side, 0.01 s indexed); what must never change is the answer.
"""

from __future__ import annotations

import time
from datetime import date, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.bounds_coverage import may_overlap
from airflow_provider_dpone.runtime.pre_arm.rewritten import rewritten_since
from airflow_provider_dpone.runtime.route_family import RouteFamily

APPEND = RouteIdentity(source_table="main.t", target_table="x.t", strategy=Strategy.INCREMENTAL_APPEND)
REPLACE = APPEND.model_copy(update={"strategy": Strategy.REPLACE_PARTITION})
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def committed(route: RouteIdentity, first: int, days: int, hour: int, pid: str) -> PartitionCheckpoint:
    lower = date(2000, 1, 1) + timedelta(days=first)
    return PartitionCheckpoint(
        partition_id=pid,
        route=route,
        run_id="r",
        status=CheckpointStatus.COMMITTED,
        started_at=START + timedelta(hours=hour),
        completed_at=START + timedelta(hours=hour),
        rows=1,
        query_hash="q",
        schema_hash="s",
        bounds=PartitionBounds(
            kind=BoundsKind.RANGE,
            column="d",
            lower=lower.isoformat(),
            upper=(lower + timedelta(days=days)).isoformat(),
            value_type="date",
            label=f"d={lower}+{days}",
        ),
    )


ranges = st.tuples(st.integers(0, 200), st.sampled_from([1, 1, 7, 30, 31]), st.integers(0, 9))


@settings(max_examples=300, deadline=None)
@given(st.lists(ranges, min_size=1, max_size=25), st.lists(ranges, max_size=25))
def test_the_index_finds_exactly_the_pairs_every_comparison_finds(
    own_ranges: list[tuple[int, int, int]], other_ranges: list[tuple[int, int, int]]
) -> None:
    own = [committed(APPEND, *r, pid=f"a{i}") for i, r in enumerate(own_ranges)]
    others = [committed(REPLACE, *r, pid=f"r{i}") for i, r in enumerate(other_ranges)]
    family = RouteFamily(route=APPEND, own=tuple(own), target_wide=(*own, *others))

    found = {c.partition_id for c, _ in rewritten_since(family, own)}

    every_pair = {
        c.partition_id
        for c in own
        if any(
            o.started_at > (c.completed_at or c.started_at) and may_overlap(c.bounds, o.bounds)
            for o in others
        )
    }
    assert found == every_pair


def test_years_of_days_on_both_sides_take_no_time() -> None:
    own = [committed(APPEND, i, 1, 0, f"a{i}") for i in range(3_650)]
    others = [committed(REPLACE, 5_000 + i, 1, 1, f"r{i}") for i in range(3_650)]
    family = RouteFamily(route=APPEND, own=tuple(own), target_wide=(*own, *others))
    started = time.process_time()
    assert rewritten_since(family, own) == []  # disjoint days: nothing touched
    assert time.process_time() - started < 2.0  # CPU time (a busy machine only delays); every pair: ~37 s
