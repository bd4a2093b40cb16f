"""``guard inspect`` and ``guard resolve`` find other source tables' commits by an index, with the same answers.

Each blocked partition's share of other routes' rows (a fan-in) was found by a pass over every other
route's commit, and ``committed_rows_within`` compared a source's overlapping commits pair by pair: over
many partitions both commands were quadratic (2,000 blocked days beside a fan-in route's 2,000 commits:
25 CPU s of ``guard resolve``). ``CommitsBySource`` now indexes each source's commits once per command
(``bounds_coverage.OverlapIndex``); these tests hold it to the pass it replaced on mixed partitionings
(days beside a month, integer lists, another column, the whole table) and count the pair comparisons.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.bounds_coverage import fully_covered, may_overlap
from airflow_provider_dpone.runtime.guard import resolution
from airflow_provider_dpone.runtime.guard.inspection import inspect_blocked
from airflow_provider_dpone.runtime.guard.resolution import (
    CommitsBySource,
    ResolutionRequest,
    ResolveAs,
    committed_rows_within,
    other_routes_rows,
    other_routes_within,
    resolve,
)
from tests.builders import day, stored_checkpoint
from tests.doubles import CountingSink, FixedClock, InMemoryCheckpointStore
from tests.unit.test_overlap_index import bounds as any_bounds

EARLIER = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
LATER = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
BATCH = "sha256:" + "ab" * 32


def route(source: str) -> RouteIdentity:
    return RouteIdentity(source_table=source, target_table="demo.t", strategy=Strategy.INCREMENTAL_APPEND)


A, B, C, D = route("main.a"), route("main.b"), route("main.c"), route("main.d")


def listed(*values: int, column: str = "shard") -> PartitionBounds:
    text = tuple(str(v) for v in values)
    return PartitionBounds(
        kind=BoundsKind.VALUES, column=column, values=text, value_type="integer", label=f"{column}={text}"
    )


def blocked(checkpoint: PartitionCheckpoint) -> PartitionCheckpoint:
    """``checkpoint`` as an attempt armed and never settled (blocked)."""
    guard = TargetCommitGuard.for_phase(GuardPhase.ARMED, BATCH).to_json()
    return checkpoint.model_copy(
        update={"status": CheckpointStatus.EXPORTED, "diagnostics": {GUARD_KEY: guard}}
    )


def nov(first: int, last: int | None = None) -> PartitionBounds:
    """Days ``first`` .. ``last`` of 2026-11 as one range (one day without ``last``)."""
    upper = dt.date(2026, 11, 1) + dt.timedelta(days=last if last is not None else first)
    lower = dt.date(2026, 11, first)
    return day(lower.isoformat(), upper.isoformat(), label=f"{lower}..{upper}")


def mixed_store() -> list[PartitionCheckpoint]:
    """Route A blocked over days, a month and integer lists; B committed days and, rebaselined since, the
    month over them; C integer lists of another column; D the whole table once; A's own commits too."""
    b_days = [stored_checkpoint(B, nov(d), EARLIER, rows=d) for d in range(1, 31)]
    b_month = stored_checkpoint(B, nov(1, 30), LATER, query_hash="sha256:" + "d" * 64, rows=465)
    c_lists = [
        stored_checkpoint(C, listed(*values), EARLIER, rows=len(values))
        for values in ((1, 2), (3,), (5, 8), (13,))
    ]
    d_whole = stored_checkpoint(D, PartitionBounds(kind=BoundsKind.ALL, label="all"), EARLIER, rows=7)
    a_own = [stored_checkpoint(A, nov(d), EARLIER) for d in (1, 2, 3)]
    a_blocked = [
        blocked(stored_checkpoint(A, bounds, LATER, query_hash="sha256:" + "e" * 64))
        for bounds in (nov(4), nov(30), nov(1, 30), nov(29, 31), listed(2), listed(4), listed(2, 13))
    ]
    return [*b_days, b_month, *c_lists, d_whole, *a_own, *a_blocked]


def full_pass(
    latest: Sequence[PartitionCheckpoint], checkpoint: PartitionCheckpoint
) -> list[PartitionCheckpoint]:
    """What ``of_others`` returned before (every other source's commit) kept by ``may_overlap``."""
    others = [
        c
        for c in latest
        if c.status is CheckpointStatus.COMMITTED and c.route.source_table != checkpoint.route.source_table
    ]
    by_source: dict[str, list[PartitionCheckpoint]] = {}
    for c in others:
        by_source.setdefault(c.route.source_table, []).append(c)
    return [c for commits in by_source.values() for c in commits if may_overlap(c.bounds, checkpoint.bounds)]


def test_other_sources_commits_of_mixed_partitionings_are_those_a_pass_over_all_keeps() -> None:
    latest = mixed_store()
    commits = CommitsBySource(latest)
    asked = [c for c in latest if c.status is not CheckpointStatus.COMMITTED]
    assert len(asked) == 7
    for checkpoint in asked:
        found = commits.of_others(checkpoint)
        assert found == full_pass(latest, checkpoint)
        everything = [c for c in latest if c.route.source_table != checkpoint.route.source_table]
        assert other_routes_rows(checkpoint, found) == other_routes_rows(checkpoint, everything)
        assert other_routes_within(checkpoint, found) == other_routes_within(checkpoint, everything)
    shares = {c.bounds.label: other_routes_rows(c, commits.of_others(c)) for c in asked}
    # a day: B's day and the month rebaselined over it is the same rows (the month, newest, only partly
    # within the day: unknown); a list: C's lists of another column, D's whole table: unknown
    assert set(shares.values()) == {None}
    names = other_routes_within(asked[0], commits.of_others(asked[0]))
    assert names == [B.describe(), C.describe(), D.describe()]  # C: another column, all of it may overlap
    listed_two = commits.of_others(asked[4])
    assert {c.bounds.label for c in listed_two} == {listed(1, 2).label, "all"} | {
        c.bounds.label for c in latest if c.route == B
    }


def test_an_integer_list_finds_the_lists_sharing_a_value_and_no_other() -> None:
    """Without B's days (another column) and D's whole table: exactly C's lists holding 1, 2 or 13."""
    c_lists = [stored_checkpoint(C, listed(*v), EARLIER, rows=len(v)) for v in ((1, 2), (3,), (5, 8), (13,))]
    asked = blocked(stored_checkpoint(A, listed(1, 2, 13), LATER))
    found = CommitsBySource([*c_lists, asked]).of_others(asked)
    assert [c.bounds.values for c in found] == [("1", "2"), ("13",)]
    assert other_routes_rows(asked, found) == 3
    partly = blocked(stored_checkpoint(A, listed(2, 13), LATER))  # holds 2 of (1, 2): C's share unknown
    assert other_routes_rows(partly, CommitsBySource([*c_lists, partly]).of_others(partly)) is None
    assert CommitsBySource([*c_lists, asked]).of_others(blocked(stored_checkpoint(A, listed(4), LATER))) == []


def pair_by_pair(bounds: PartitionBounds, latest: Sequence[PartitionCheckpoint]) -> int | None:
    """``committed_rows_within`` as it compared a source's overlapping commits before the index."""
    by_source: dict[str, list[PartitionCheckpoint]] = {}
    for other in latest:
        if other.status is CheckpointStatus.COMMITTED and may_overlap(other.bounds, bounds):
            by_source.setdefault(other.route.source_table, []).append(other)
    total = 0
    for commits in by_source.values():
        newest: dict[PartitionBounds, PartitionCheckpoint] = {}
        for other in commits:
            kept = newest.get(other.bounds)
            if kept is None or checkpoint_moment(other) > checkpoint_moment(kept):
                newest[other.bounds] = other
        counted: list[PartitionCheckpoint] = []
        for other in sorted(newest.values(), key=checkpoint_moment, reverse=True):
            newer = [c.bounds for c in counted if may_overlap(other.bounds, c.bounds)]
            if newer and fully_covered(other.bounds, newer):
                continue
            if newer or not fully_covered(other.bounds, [bounds]) or other.rows is None:
                return None
            counted.append(other)
            total += other.rows
    return total


commit = st.tuples(
    any_bounds(), st.sampled_from([B, C]), st.integers(0, 5), st.none() | st.integers(0, 9), st.booleans()
)


@settings(max_examples=500, deadline=None)
@given(held=st.lists(commit, max_size=25), asked=st.lists(any_bounds(), min_size=1, max_size=4))
def test_rows_committed_within_bounds_are_what_the_pair_by_pair_comparison_said(
    held: list[tuple[PartitionBounds, RouteIdentity, int, int | None, bool]], asked: list[PartitionBounds]
) -> None:
    latest = []
    for bounds, owner, hours, rows, committed in held:
        at = EARLIER + dt.timedelta(hours=hours)
        one = stored_checkpoint(owner, bounds, at, rows=rows or 0)  # equal bounds: the newest counts
        update: dict[str, object] = {"rows": rows}
        if not committed:
            update["status"] = CheckpointStatus.FAILED
        latest.append(one.model_copy(update=update))
    for bounds in asked:
        assert committed_rows_within(bounds, latest) == pair_by_pair(bounds, latest)


def test_days_committed_since_over_a_years_months_are_counted_without_comparing_each_pair() -> None:
    """A year of B's days, newer than its twelve months (a rebaseline back to days): each month is covered
    by the days, every day counts. Pair by pair: ~70,000 comparisons; now one pass over the commits."""
    first = dt.date(2025, 1, 1)
    days = [
        stored_checkpoint(
            B, day(str(first + dt.timedelta(d)), str(first + dt.timedelta(d + 1))), LATER, rows=2
        )
        for d in range(365)
    ]
    months = [
        stored_checkpoint(
            B, day(f"2025-{m:02d}-01", f"{2025 + m // 12}-{m % 12 + 1:02d}-01"), EARLIER, rows=60
        )
        for m in range(1, 13)
    ]
    year = day("2025-01-01", "2026-01-01", label="2025")
    with mock.patch.object(resolution, "may_overlap", side_effect=may_overlap) as compared:
        assert committed_rows_within(year, [*months, *days]) == 730
    assert compared.call_count <= len(months) + len(days)


def test_inspect_and_resolve_over_many_blocked_days_compare_no_pair_of_partitions() -> None:
    """400 blocked days of route A beside route B's 400 committed days: each day's share is B's rows
    there. A pass over every commit per partition compared 160,000 pairs; the index a few per partition."""
    first = dt.date(2020, 1, 1)
    bounds = [day(str(first + dt.timedelta(d)), str(first + dt.timedelta(d + 1))) for d in range(400)]
    theirs = [stored_checkpoint(B, b, EARLIER, rows=i % 7) for i, b in enumerate(bounds)]
    attempts = [blocked(stored_checkpoint(A, b, LATER, rows=5)) for b in bounds]
    latest = [*theirs, *attempts]
    sink = CountingSink({c.bounds: c.rows or 0 for c in theirs})
    with mock.patch.object(resolution, "may_overlap", side_effect=may_overlap) as compared:
        rows = inspect_blocked(latest, None, sink, "demo.t")  # type: ignore[arg-type]
    assert compared.call_count <= 4 * len(bounds)
    assert [(r.target_rows, r.other_routes_rows) for r in rows] == [(i % 7, i % 7) for i in range(400)]
    assert not any(r.other_routes_rows_lost_by for r in rows)
    store = InMemoryCheckpointStore()
    store.write_batch(latest)
    with mock.patch.object(resolution, "may_overlap", side_effect=may_overlap) as compared:
        records = resolve(
            store,
            FixedClock(),
            A,
            ResolutionRequest(None, ResolveAs.NOT_APPLIED, "the attempt never reached the target", "me"),
            latest=latest,
            count_target=lambda c: sink.count_rows("demo.t", c.bounds),
        )
    assert compared.call_count <= 4 * len(bounds)
    share = {c.bounds: c.rows for c in theirs}
    for record in records:
        audit = record.diagnostics["resolution"]
        assert isinstance(audit, dict)
        assert audit["target_rows"] == audit["other_routes_rows"] == share[record.bounds]
    assert len(records) == 400
