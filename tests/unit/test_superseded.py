"""``replace_partition``: which committed partitions a later commit of another definition replaced.

``runtime/superseded.rerun_superseded`` runs them again; checked with in-memory checkpoints, and through the
engine with the in-memory store, source and sink, where the other definition's replacing record lies under
a later attempt of it (``route_family.other_identity_replacing``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta, timezone

import pytest

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.guard import GUARD_KEY, UNREADABLE_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.report import RunReport
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, ResumeDecision
from airflow_provider_dpone.runtime.superseded import could_supersede, rerun_superseded
from tests.builders import day, stored_checkpoint
from tests.doubles import (
    InMemoryCheckpointStore,
    MemorySource,
    RecordingSink,
    orders_rows,
    transfer_engine,
    within_bounds,
)

Row = tuple[int, date, int]

ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.REPLACE_PARTITION
)
T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
MINE, THEIRS = "sha256:" + "a" * 64, "sha256:" + "b" * 64
NOV_29, NOV_30 = day("2026-11-29", "2026-11-30"), day("2026-11-30", "2026-12-01")


def checkpoint(query_hash: str, bounds: PartitionBounds, at: datetime) -> PartitionCheckpoint:
    return stored_checkpoint(ROUTE, bounds, at, query_hash=query_hash)


def skipped(mine: PartitionCheckpoint) -> ResumeDecision:
    planned = PlannedPartition(
        partition_id=mine.partition_id, bounds=mine.bounds, query_hash=MINE, schema_hash=MINE
    )
    return ResumeDecision(planned, Action.SKIP, Reason.COMMITTED)


def test_a_partition_another_definition_replaced_later_runs_again() -> None:
    mine = checkpoint(MINE, NOV_30, T0)
    decided = rerun_superseded(
        [skipped(mine)], {mine.partition_id: mine}, [checkpoint(THEIRS, NOV_30, T0 + timedelta(hours=1))]
    )
    assert [(d.action, d.reason) for d in decided] == [(Action.RUN, Reason.QUERY_OR_SCHEMA_CHANGED)]


def test_an_older_or_disjoint_commit_of_another_definition_changes_nothing() -> None:
    mine = checkpoint(MINE, NOV_30, T0)
    for other in (
        checkpoint(THEIRS, NOV_30, T0 - timedelta(hours=1)),
        checkpoint(THEIRS, NOV_29, T0 + timedelta(hours=1)),
    ):
        decided = rerun_superseded([skipped(mine)], {mine.partition_id: mine}, [other])
        assert [(d.action, d.reason) for d in decided] == [(Action.SKIP, Reason.COMMITTED)]


def test_decisions_that_are_not_committed_skips_are_left_alone() -> None:
    mine = checkpoint(MINE, NOV_30, T0)
    open_day = skipped(mine)._replace(reason=Reason.OPEN_PARTITION)
    running = skipped(mine)._replace(action=Action.RUN, reason=Reason.MISSING_CHECKPOINT)
    later = [checkpoint(THEIRS, NOV_30, T0 + timedelta(hours=1))]
    assert rerun_superseded([open_day, running], {mine.partition_id: mine}, later) == [open_day, running]


def test_only_a_later_record_of_overlapping_bounds_could_supersede_a_skipped_commit() -> None:
    """Equal bounds by lookup, others (another partitioning: a month over the days) by ``may_overlap``."""
    mine = [checkpoint(MINE, NOV_29, T0), checkpoint(MINE, NOV_30, T0 + timedelta(hours=1))]
    near = could_supersede([skipped(c) for c in mine], {c.partition_id: c for c in mine})
    november, october = day("2026-11-01", "2026-12-01"), day("2026-10-01", "2026-11-01")

    assert near(checkpoint(THEIRS, NOV_30, T0 + timedelta(hours=2)))
    assert near(checkpoint(THEIRS, november, T0 + timedelta(minutes=30)))  # later than the 29th's commit
    assert not near(checkpoint(THEIRS, NOV_30, T0 + timedelta(minutes=30)))  # older than the 30th's
    assert not near(checkpoint(THEIRS, november, T0 - timedelta(hours=1)))
    assert not near(checkpoint(THEIRS, october, T0 + timedelta(hours=2)))


# -- a replacing record of the other definition hidden under its later attempt (``could_supersede``) --------

TABLE = "analytics.orders"
EVEN_ROWS = [r for r in orders_rows() if r[0] % 2 == 0]
ODD_ROWS = [r for r in orders_rows() if r[0] % 2 == 1]


class ReplacingSink(RecordingSink):
    """Deletes the armed partitions' rows before it inserts, as the ClickHouse sink does for a replace."""

    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        permit.require_open(table)
        self.tables[table] = [
            row
            for row in self.tables.get(table, [])
            if not any(within_bounds(str(row[1]), b) for b in permit.bounds)
        ]
        return super().load(permit, table, schema, chunks)


class CountingStore(InMemoryCheckpointStore):
    """Counts the history reads of each query hash's partitions."""

    def __init__(self) -> None:
        super().__init__()
        self.history_reads: list[str] = []

    def history(self, route: RouteIdentity, partition_id: str) -> list[PartitionCheckpoint]:
        found = super().history(route, partition_id)
        self.history_reads.extend(c.query_hash for c in found[:1])
        return found


def run(store: InMemoryCheckpointStore, sink: RecordingSink, rows: list[Row], version: str) -> RunReport:
    """One ``replace_partition`` run of the definition ``version`` selecting ``rows`` (allowed to replace the
    other's: an in-memory source cannot compare reads, so nothing stops it anyway)."""
    source = MemorySource(rows, query_version=version)
    engine = transfer_engine(
        store=store, sink=sink, source=source, strategy="replace_partition", allow_nonempty_target=True
    )
    return engine.run(f"run-{len(store.rows)}")


def held_ids(sink: RecordingSink) -> list[int]:
    return sorted(int(row[0]) for row in sink.tables[TABLE])  # type: ignore[call-overload]


def later_attempts(
    store: InMemoryCheckpointStore, version: str, *diagnostics: dict[str, object] | None
) -> None:
    """A record over each latest record of definition ``version``'s partitions, per ``diagnostics``, each a
    minute after the store's newest: ``None`` an attempt killed before arming (PLANNED), else a FAILED
    record with these diagnostics."""
    query_hash = MemorySource([], query_version=version).query_hash()
    for extra in diagnostics:
        newest = max(checkpoint_moment(r) for r in store.rows)
        at = newest + timedelta(minutes=1)
        latest = {r.partition_id: r for r in store.rows if r.query_hash == query_hash}
        update: dict[str, object] = {"run_id": "later", "started_at": at, "completed_at": at}
        if extra is None:
            update.update(status=CheckpointStatus.PLANNED, diagnostics={})
        else:
            update.update(status=CheckpointStatus.FAILED, diagnostics=extra)
        store.write_batch([c.model_copy(update=update) for c in latest.values()])


def guarded(phase: GuardPhase, **more: object) -> dict[str, object]:
    return {GUARD_KEY: TargetCommitGuard.for_phase(phase, "sha256:" + "b" * 64).to_json(), **more}


def resolved(target_rows: int, previous: str = GuardPhase.TARGET_OUTCOME_UNKNOWN.value) -> dict[str, object]:
    """An operator's ``not-applied`` over an attempt left in ``previous`` (``target_rows`` then held)."""
    resolution = {
        "as": "not-applied",
        "forced": False,
        "other_routes_rows": 0,
        "target_rows": target_rows,
        "previous_phase": previous,
        "over_unreadable_row": previous == UNREADABLE,
    }
    return guarded(GuardPhase.FAILED_BEFORE_TARGET, resolution=resolution)


#: the phase a resolution records over a row that cannot be read (``route_guard``: the reason, no phase)
UNREADABLE = "stored checkpoint is unreadable"


FAILED_BEFORE_TARGET = guarded(GuardPhase.FAILED_BEFORE_TARGET)


@pytest.mark.parametrize(
    "attempts",
    [
        [None],
        [FAILED_BEFORE_TARGET],
        [resolved(2), FAILED_BEFORE_TARGET],
        [resolved(2)],
        [resolved(1)],
        [{UNREADABLE_KEY: {}}, resolved(2, UNREADABLE)],
    ],
    ids=[
        "killed-before-arming",
        "failed-before-target",
        "resolved-then-failed",
        "resolved-not-applied",
        "partly-rewritten",
        "unreadable-then-resolved",
    ],
)
def test_a_definition_edited_back_reruns_what_the_other_replaced_under_its_later_attempts(
    attempts: list[dict[str, object] | None],
) -> None:
    """Red before (all but ``resolved-not-applied`` and ``partly-rewritten``, whose latest record counted): the
    other definition's later record, the partitions' latest, hid what replaced the rows, and the first
    definition, edited back, skipped every day as committed: the target kept only the other's rows. Over a
    row that cannot be read, the resolution names no phase: the row itself counts (it may have replaced)."""
    store, sink = CountingStore(), ReplacingSink()
    run(store, sink, EVEN_ROWS, "even")
    run(store, sink, ODD_ROWS, "odd")
    later_attempts(store, "odd", *attempts)

    report = run(store, sink, EVEN_ROWS, "even")

    assert report.rows_committed == len(EVEN_ROWS)
    assert held_ids(sink) == [r[0] for r in EVEN_ROWS]
    assert run(store, sink, EVEN_ROWS, "even").rows_committed == 0  # nothing replaced it since


def test_an_attempt_that_reached_the_target_above_the_other_commit_counts_not_the_commit_itself() -> None:
    """The first definition re-ran after the other's commit; then the other's attempt reached the target
    (its delete ran) and was resolved ``not-applied`` over its own commit's rows; then its retry failed
    before the target. Red with the commit under them taken (``other_identity_standing``'s lookup): it is
    older than the first definition's commit, which was skipped, the target keeping only the other's rows."""
    store, sink = CountingStore(), ReplacingSink()
    run(store, sink, EVEN_ROWS, "even")
    run(store, sink, ODD_ROWS, "odd")
    run(store, sink, EVEN_ROWS, "even")
    later_attempts(store, "odd", resolved(2), FAILED_BEFORE_TARGET)
    sink.tables[TABLE] = list(ODD_ROWS)  # what its attempt left there

    report = run(store, sink, EVEN_ROWS, "even")

    assert report.rows_committed == len(EVEN_ROWS)
    assert held_ids(sink) == [r[0] for r in EVEN_ROWS]


def test_attempts_of_the_other_definition_that_never_reached_the_target_rerun_nothing() -> None:
    """Its every record failed before the target (nothing of it is there): no rerun, one history read of
    each of its partitions."""
    store, sink = CountingStore(), ReplacingSink()
    run(store, sink, EVEN_ROWS, "even")
    run(store, sink, ODD_ROWS, "odd")
    later_attempts(store, "odd", None, FAILED_BEFORE_TARGET)
    odd = MemorySource([], query_version="odd").query_hash()
    # its commits never were: only the later attempts are left
    store.rows = [r for r in store.rows if r.query_hash != odd or r.run_id == "later"]
    sink.tables[TABLE] = list(EVEN_ROWS)

    report = run(store, sink, EVEN_ROWS, "even")

    assert report.rows_committed == 0
    assert held_ids(sink) == [r[0] for r in EVEN_ROWS]
    assert store.history_reads == [odd] * 3  # its three days


def test_a_route_long_past_the_edit_reads_no_history_of_the_other_definition() -> None:
    """Every commit of this definition is newer than the other's failed records: none is read again."""
    store, sink = CountingStore(), ReplacingSink()
    run(store, sink, EVEN_ROWS, "even")
    run(store, sink, ODD_ROWS, "odd")
    later_attempts(store, "odd", FAILED_BEFORE_TARGET)
    run(store, sink, EVEN_ROWS, "even")
    store.history_reads.clear()

    assert run(store, sink, EVEN_ROWS, "even").rows_committed == 0
    assert store.history_reads == []
