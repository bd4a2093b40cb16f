"""A replacing run never deletes rows an earlier definition committed that its own read leaves out.

In-memory doubles: a source whose ``source.query`` is a window of ids (as a query templated per run selects
a window of hours), the in-memory store and sink. Each behaviour below goes red without the code it names.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence

import pytest

from airflow_provider_dpone.adapters.sources import definition_compare
from airflow_provider_dpone.adapters.sources.partition_planning import read_definition
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.read_definition import (
    PARTITIONS_NAMED,
    LeftOutCounts,
    NotCompared,
    ReadDefinition,
)
from airflow_provider_dpone.contracts.report import RunReport
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.ports.source import DefinitionsNotComparable
from airflow_provider_dpone.runtime.left_out_rows import compare_with_earlier, still_standing
from airflow_provider_dpone.runtime.route_identity import IdentityOverlap, changed_summary
from tests.builders import day, stored_checkpoint
from tests.doubles import (
    InMemoryCheckpointStore,
    MemorySource,
    RecordingSink,
    orders_rows,
    transfer_engine,
    within_bounds,
)

TABLE = "analytics.orders"
#: what every window's query says besides its ids: never in an error, a notice or a report
MARKER = "window-marker-7f3a"


class WindowSource(MemorySource):
    """``SELECT * FROM orders WHERE id BETWEEN lo AND hi``: each window is another read definition."""

    def __init__(self, low: int, high: int, *, refuse: NotCompared | None = None) -> None:
        self.every_row = orders_rows()
        super().__init__(
            [r for r in self.every_row if low <= r[0] <= high], query_version=f"{MARKER} ids {low}-{high}"
        )
        self.refuse = refuse
        self.compared: list[int] = []  # regions asked per call

    def _window(self, definition: ReadDefinition) -> list[tuple[int, dt.date, int]]:
        found = re.search(r"ids (\d+)-(\d+)", definition.query or "")
        assert found is not None
        low, high = int(found[1]), int(found[2])
        return [r for r in self.every_row if low <= r[0] <= high]

    def rows_left_out(
        self, earlier: ReadDefinition, regions: Sequence[Sequence[PartitionBounds]]
    ) -> LeftOutCounts:
        self.compared.append(len(regions))
        if self.refuse is not None:
            raise DefinitionsNotComparable(self.refuse)
        old, now = self._window(earlier), set(self.rows)

        def within(row: tuple[int, dt.date, int], region: Sequence[PartitionBounds]) -> bool:
            return all(within_bounds(row[1].isoformat(), b) for b in region)

        counts = [len({r for r in old if within(r, region)} - now) for region in regions]
        return LeftOutCounts(total=sum(counts), regions=tuple(counts))


class ReplacingSink(RecordingSink):
    """Deletes the armed partitions' rows before it inserts, as the ClickHouse sink does for a replace."""

    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        permit.require_open(table)
        kept = [
            row
            for row in self.tables.get(table, [])
            if not any(within_bounds(str(row[1]), b) for b in permit.bounds)
        ]
        self.tables[table] = kept
        return super().load(permit, table, schema, chunks)


def run(
    store: InMemoryCheckpointStore, sink: RecordingSink, source: MemorySource, *, allow: bool = False
) -> RunReport:
    """One ``replace_partition`` run of ``source``'s window (a new run ID each time)."""
    engine = transfer_engine(
        store=store, sink=sink, source=source, strategy="replace_partition", allow_nonempty_target=allow
    )
    return engine.run(f"run-{len(store.rows)}")


def held_ids(sink: RecordingSink) -> list[int]:
    return sorted(int(row[0]) for row in sink.tables[TABLE])  # type: ignore[call-overload]


def test_a_window_that_leaves_out_rows_an_earlier_window_loaded_stops_before_arming() -> None:
    """Red before: the second window replaced the first day with its part, ids 1 and 2 gone, exit 0."""
    store, sink = InMemoryCheckpointStore(), ReplacingSink()
    run(store, sink, WindowSource(1, 2))
    written = len(store.rows)

    with pytest.raises(DponeError) as caught:
        run(store, sink, WindowSource(3, 4))

    error = caught.value
    assert error.code is ErrorCode.TARGET_NOT_EMPTY
    assert error.details["problem"] == "rows_left_out_by_new_definition"
    assert error.details["rows"] == 2 and error.details["partitions"] == ["order_date=2026-11-28"]
    assert held_ids(sink) == [1, 2]  # the target as the first window left it
    assert sink.mutations == 1 and len(store.rows) == written  # nothing written by the stopped run
    assert any("--allow-nonempty-target" in line for line in error.hint_lines)
    for text in (error.render(), repr(error.to_json())):
        assert MARKER not in text and "SELECT" not in text


def test_allow_nonempty_target_replaces_them_and_says_how_many() -> None:
    store, sink = InMemoryCheckpointStore(), ReplacingSink()
    run(store, sink, WindowSource(1, 2))

    report = run(store, sink, WindowSource(3, 4), allow=True)

    assert held_ids(sink) == [3, 4]
    notes = " ".join(report.notices)
    assert "2 of them in 1 partition(s) (order_date=2026-11-28) not returned" in notes
    assert MARKER not in notes


def test_a_window_that_reads_every_earlier_row_again_goes_on_and_says_it_compared() -> None:
    store, sink = InMemoryCheckpointStore(), ReplacingSink()
    run(store, sink, WindowSource(1, 2))
    source = WindowSource(1, 6)

    report = run(store, sink, source)

    assert held_ids(sink) == [1, 2, 3, 4, 5, 6]
    assert source.compared == [1]  # one day overlaps the earlier window's commit, compared once
    assert any("compared on the source" in n for n in report.notices)


def test_an_earlier_commit_a_later_one_replaced_is_not_compared_again() -> None:
    """Red without ``_replaced_since``: the first window's rows were deleted with the operator's consent by
    the second run, yet the third run (which reads every row of the second) stopped on them."""
    store, sink = InMemoryCheckpointStore(), ReplacingSink()
    run(store, sink, WindowSource(1, 2))
    run(store, sink, WindowSource(3, 4), allow=True)

    run(store, sink, WindowSource(3, 8))

    assert held_ids(sink) == [3, 4, 5, 6, 7, 8]


def _later_attempt(
    store: InMemoryCheckpointStore, query_hash: str, phase: GuardPhase | None, **diagnostics: object
) -> None:
    """A later attempt's record over the commit of ``query_hash``'s partition: its progress (``phase``
    None: killed before arming), or its guard in ``phase`` (``diagnostics``: an operator's resolution)."""
    (commit,) = [
        r for r in store.rows if r.query_hash == query_hash and r.status is CheckpointStatus.COMMITTED
    ]
    moment = commit.started_at + dt.timedelta(minutes=5)
    update: dict[str, object] = {"run_id": "later", "started_at": moment, "completed_at": moment}
    if phase is None:
        update.update(status=CheckpointStatus.PLANNED, diagnostics={})
    else:
        guard = TargetCommitGuard.for_phase(phase, "sha256:" + "b" * 64).to_json()
        update.update(status=CheckpointStatus.FAILED, diagnostics={GUARD_KEY: guard, **diagnostics})
    store.write_batch([commit.model_copy(update=update)])


def _resolved(target_rows: int) -> dict[str, object]:
    return {
        "as": "not-applied",
        "forced": False,
        "other_routes_rows": 0,
        "target_rows": target_rows,
        "previous_phase": GuardPhase.TARGET_OUTCOME_UNKNOWN.value,
    }


@pytest.mark.parametrize(
    ("phase", "diagnostics"),
    [
        (None, {}),  # killed before arming
        (GuardPhase.FAILED_BEFORE_TARGET, {}),  # a failed read or quality check
        (
            GuardPhase.FAILED_BEFORE_TARGET,
            {"resolution": _resolved(2)},
        ),  # resolved: the target held the commit
        (
            GuardPhase.FAILED_BEFORE_TARGET,
            {"resolution": _resolved(1)},
        ),  # resolved over a partly rewritten day
    ],
    ids=["killed-before-arming", "failed-before-target", "resolved-not-applied", "partly-rewritten"],
)
def test_an_earlier_commit_under_a_later_failed_or_resolved_attempt_is_still_compared(
    phase: GuardPhase | None, diagnostics: dict[str, object]
) -> None:
    """Red before: the attempt's record became the partition's latest, the commit under it was never seen,
    and the second window deleted ids 1 and 2 with exit 0 (``other_identity_standing``). A partly rewritten
    partition (the resolution counted 1 of the commit's 2 rows) holds rows of that definition too."""
    store, sink = InMemoryCheckpointStore(), ReplacingSink()
    first = WindowSource(1, 2)
    run(store, sink, first)
    _later_attempt(store, first.query_hash(), phase, **diagnostics)

    with pytest.raises(DponeError) as caught:
        run(store, sink, WindowSource(3, 4))

    assert caught.value.details["problem"] == "rows_left_out_by_new_definition"
    assert caught.value.details["rows"] == 2
    assert held_ids(sink) == [1, 2]


def test_an_attempt_of_the_earlier_definition_that_never_reached_the_target_over_no_commit_is_no_overlap() -> (
    None
):
    """Nothing of a definition whose every attempt failed before the target is in it: no stop, no history
    beyond that partition's."""
    store, sink = InMemoryCheckpointStore(), ReplacingSink()
    first = WindowSource(1, 2)
    run(store, sink, first)
    _later_attempt(store, first.query_hash(), GuardPhase.FAILED_BEFORE_TARGET)
    store.rows = [r for r in store.rows if r.run_id == "later"]  # its one attempt, before the target
    sink.tables[TABLE] = []

    report = run(store, sink, WindowSource(3, 4))

    assert held_ids(sink) == [3, 4]
    assert not any("old definition" in n for n in report.notices)


def test_this_definitions_commit_under_its_own_failed_attempt_still_replaced_the_earlier_rows() -> None:
    """The second window's commit deleted the first's rows (allowed); its retry failed before the target.
    Red without ``_own_commits``: the run after it stopped on rows long gone, the failed record standing in
    for the commit that replaced them."""
    store, sink = InMemoryCheckpointStore(), ReplacingSink()
    run(store, sink, WindowSource(1, 2))
    second = WindowSource(3, 4)
    run(store, sink, second, allow=True)
    _later_attempt(store, second.query_hash(), GuardPhase.FAILED_BEFORE_TARGET)

    run(store, sink, WindowSource(3, 4))

    assert held_ids(sink) == [3, 4]


def test_an_earlier_definition_never_kept_goes_on_with_the_reason() -> None:
    """A commit of an earlier release: nothing to compare with, so the run goes on as before and says why."""
    store, sink = InMemoryCheckpointStore(), ReplacingSink()
    run(store, sink, WindowSource(1, 2))
    store.definitions.clear()

    report = run(store, sink, WindowSource(3, 4))

    assert held_ids(sink) == [3, 4]
    assert any("could not be compared" in n and NotCompared.NOT_RECORDED.phrase in n for n in report.notices)


def test_a_comparison_the_source_cannot_make_goes_on_with_its_reason() -> None:
    store, sink = InMemoryCheckpointStore(), ReplacingSink()
    run(store, sink, WindowSource(1, 2))

    report = run(store, sink, WindowSource(3, 4, refuse=NotCompared.EARLIER_READ_FAILS))

    assert held_ids(sink) == [3, 4]
    assert any(NotCompared.EARLIER_READ_FAILS.phrase in n for n in report.notices)


class LoggingStore(InMemoryCheckpointStore):
    def __init__(self, *, refuse: DponeError | None = None) -> None:
        super().__init__()
        self.log: list[str] = []
        self.refuse = refuse

    def record_definition(self, route: RouteIdentity, definition: ReadDefinition) -> None:
        self.log.append("record_definition")
        if self.refuse is not None:
            raise self.refuse
        super().record_definition(route, definition)

    def read_definitions(self, route, query_hashes):  # type: ignore[no-untyped-def]
        self.log.append("read_definitions")
        return super().read_definitions(route, query_hashes)

    def write_batch(self, checkpoints):  # type: ignore[no-untyped-def]
        self.log.append("write_batch")
        super().write_batch(checkpoints)


def test_a_replacing_run_keeps_its_definition_before_its_first_record_and_only_once() -> None:
    store, sink = LoggingStore(), ReplacingSink()
    source = WindowSource(1, 6)

    run(store, sink, source)

    assert store.log[:3] == ["read_definitions", "record_definition", "write_batch"]
    assert store.read_definitions(
        RouteIdentity.model_validate(store.rows[0].route), [source.query_hash()]
    ) == {source.query_hash(): source.read_definition()}
    source.every_row.append((99, dt.date(2026, 12, 5), 990))  # a new day: the same window, a new run
    source.rows.append((99, dt.date(2026, 12, 5), 990))
    store.log.clear()
    run(store, sink, source)
    assert "write_batch" in store.log and "record_definition" not in store.log  # one read, no write


def test_a_definition_the_store_cannot_keep_stops_the_run_before_the_target() -> None:
    failure = DponeError(
        ErrorCode.CHECKPOINT_STORE_FAILED, "checkpoint store operation record_definition failed"
    )
    store, sink = LoggingStore(refuse=failure), ReplacingSink()

    with pytest.raises(DponeError) as caught:
        run(store, sink, WindowSource(1, 6))

    assert caught.value is failure
    assert sink.mutations == 0 and store.rows == []


def test_an_append_route_keeps_no_definition() -> None:
    store, sink = LoggingStore(), ReplacingSink()
    transfer_engine(store=store, sink=sink, source=WindowSource(1, 6)).run("run-1")
    assert "record_definition" not in store.log and store.definitions == {}


# -- the decision, commit by commit -------------------------------------------------------------------

ROUTE = RouteIdentity(source_table="dbo.orders", target_table=TABLE, strategy=Strategy.REPLACE_PARTITION)
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
EARLIER = ReadDefinition(source_type="memory", table="dbo.orders", query="SELECT 1 -- ids 1-2")


class CountingSource:
    def __init__(self, rows: int) -> None:
        self.rows, self.asked = rows, []  # type: ignore[var-annotated]

    def rows_left_out(
        self, earlier: ReadDefinition, regions: Sequence[Sequence[PartitionBounds]]
    ) -> LeftOutCounts:
        self.asked.append([tuple(b.label for b in region) for region in regions])
        return LeftOutCounts(total=self.rows * len(regions), regions=tuple(self.rows for _ in regions))


def planned(bounds: PartitionBounds, query_hash: str = "sha256:now") -> PlannedPartition:
    return PlannedPartition(
        partition_id=f"p-{bounds.label}", bounds=bounds, query_hash=query_hash, schema_hash="s"
    )


def test_a_schema_change_under_the_same_query_reads_the_same_rows_and_is_not_compared() -> None:
    part = planned(day("2026-11-28", "2026-11-29"), query_hash=EARLIER.query_hash())
    commit = stored_checkpoint(ROUTE, part.bounds, T0, query_hash=EARLIER.query_hash())
    source = CountingSource(5)

    found = compare_with_earlier(
        [IdentityOverlap(part, (commit,), covered=True)],
        {},
        lambda h: {h[0]: EARLIER},
        source,  # type: ignore[arg-type]
    )

    assert found.left_out == () and found.not_compared == () and source.asked == []


def test_an_earlier_commit_of_narrower_bounds_is_compared_only_where_it_loaded() -> None:
    """A month planned over an earlier definition's day: rows of the month outside that day were never
    loaded by it, so only the day is compared (both bounds, ANDed)."""
    part = planned(day("2026-11-01", "2026-12-01", label="2026-11"))
    commit = stored_checkpoint(ROUTE, day("2026-11-28", "2026-11-29"), T0, query_hash=EARLIER.query_hash())
    source = CountingSource(3)

    found = compare_with_earlier(
        [IdentityOverlap(part, (commit,), covered=False)],
        {},
        lambda h: {h[0]: EARLIER},
        source,  # type: ignore[arg-type]
    )

    assert source.asked == [[("2026-11", "2026-11-28")]]
    assert [(p.bounds.label, rows) for p, rows in found.left_out] == [("2026-11", 3)]


def test_the_partitions_own_later_commit_replaced_the_earlier_definitions_rows() -> None:
    part = planned(day("2026-11-28", "2026-11-29"))
    earlier = stored_checkpoint(ROUTE, part.bounds, T0, query_hash=EARLIER.query_hash())
    own = stored_checkpoint(ROUTE, part.bounds, T0 + dt.timedelta(hours=1), query_hash="sha256:now")
    source = CountingSource(3)

    found = compare_with_earlier(
        [IdentityOverlap(part, (earlier,), covered=True)],
        {part.partition_id: own},
        lambda h: {h[0]: EARLIER},
        source,  # type: ignore[arg-type]
    )

    assert source.asked == [] and found.left_out == ()
    failed = own.model_copy(update={"status": CheckpointStatus.FAILED})
    found = compare_with_earlier(
        [IdentityOverlap(part, (earlier,), covered=True)],
        {part.partition_id: failed},  # an attempt that never committed replaced nothing
        lambda h: {h[0]: EARLIER},
        source,  # type: ignore[arg-type]
    )
    assert found.rows == 3


def test_an_overlap_stands_until_a_later_commit_of_the_route_replaced_the_earlier_definitions_rows() -> None:
    """What the notice after an edit names: red before, every later run named the lookback's days again."""
    part = planned(day("2026-11-28", "2026-11-29"))
    earlier = stored_checkpoint(ROUTE, part.bounds, T0, query_hash=EARLIER.query_hash())
    own = stored_checkpoint(ROUTE, part.bounds, T0 + dt.timedelta(hours=1), query_hash="sha256:now")
    overlap = IdentityOverlap(part, (earlier,), covered=True)

    assert still_standing([overlap], {}) == [overlap]  # the edit's first run
    assert still_standing([overlap], {part.partition_id: own}) == []  # replaced since
    older = stored_checkpoint(ROUTE, part.bounds, T0 - dt.timedelta(hours=1), query_hash="sha256:now")
    assert still_standing([overlap], {part.partition_id: older}) == [overlap]  # edited back since


def test_a_query_edit_is_not_called_a_schema_change_where_the_columns_differ_only_in_nullability() -> None:
    table = TableSchema(columns=(ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),))
    through_query = TableSchema(columns=(ColumnSpec(name="id", clickhouse_type="Int64", nullable=True),))
    retyped = TableSchema(columns=(ColumnSpec(name="id", clickhouse_type="String", nullable=True),))
    part = planned(day("2026-11-28", "2026-11-29")).model_copy(
        update={"schema_hash": through_query.schema_hash()}
    )

    def overlap(schema: TableSchema, query_hash: str = EARLIER.query_hash()) -> IdentityOverlap:
        commit = stored_checkpoint(ROUTE, part.bounds, T0, query_hash=query_hash)
        return IdentityOverlap(part, (commit.model_copy(update={"schema_hash": schema.schema_hash()}),), True)

    alike = through_query.hashes_up_to_nullability()
    assert changed_summary([overlap(table)]) == "query, schema"
    assert changed_summary([overlap(table)], alike) == "query"
    assert changed_summary([overlap(retyped)], alike) == "query, schema"
    assert changed_summary([overlap(table, part.query_hash)], alike) == "schema"  # the table's own change


def test_regions_are_counted_a_hundred_per_statement_and_one_by_one_only_where_rows_are_found() -> None:
    start = dt.date(2026, 1, 1)
    regions = [[day(str(start + dt.timedelta(n)), str(start + dt.timedelta(n + 1)))] for n in range(252)]
    calls: list[int] = []

    def count(batch: Sequence[Sequence[PartitionBounds]]) -> int:
        calls.append(len(batch))
        return sum(1 for region in batch if region is regions[150])

    counts = definition_compare.counts_per_region(regions, count)

    assert calls == [100, 100, 52, *[1] * 100]  # the batch holding rows is counted region by region
    assert counts.regions[150] == 1 and counts.total == 1 and counts.complete


def test_regions_are_counted_one_by_one_only_until_a_stop_names_enough_partitions() -> None:
    """An edit that leaves out a row of each of 400 days: 4 batches, then 20 regions one by one, not 400.
    Red before: every region of every batch that found rows was counted alone (220 s on a 1M-row table
    without an index on the partition column); the total comes from the batches."""
    start = dt.date(2025, 1, 1)
    regions = [[day(str(start + dt.timedelta(n)), str(start + dt.timedelta(n + 1)))] for n in range(400)]
    calls: list[int] = []

    def count(batch: Sequence[Sequence[PartitionBounds]]) -> int:
        calls.append(len(batch))
        return len(batch)

    counts = definition_compare.counts_per_region(regions, count)

    assert calls == [100, 100, 100, 100, *[1] * PARTITIONS_NAMED]
    assert counts.total == 400 and not counts.complete
    assert counts.regions[:PARTITIONS_NAMED] == (1,) * PARTITIONS_NAMED
    assert set(counts.regions[PARTITIONS_NAMED:]) == {None}


def test_regions_of_one_partition_count_as_one_named_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    """A month planned over earlier days: its regions (the month and each day) share their first bounds,
    so they name one partition, and counting goes on to the next partitions."""
    month = day("2026-11-01", "2026-12-01", label="2026-11")
    days = [day(f"2026-11-{n:02d}", f"2026-11-{n + 1:02d}") for n in range(1, 4)]
    regions = [*[[month, d] for d in days], *[[d] for d in days]]  # 3 regions of the month, then 3 days
    monkeypatch.setattr(definition_compare, "PARTITIONS_NAMED", 2)

    counts = definition_compare.counts_per_region(regions, len)

    assert counts.regions == (1, 1, 1, 1, None, None)


def test_a_batch_of_adjacent_days_is_one_range_in_the_statement() -> None:
    """Red before: the statement tested every row of both reads against an OR of 100 day ranges (48x slower
    without an index than the one range the same days make)."""
    from airflow_provider_dpone.adapters.sources import mssql_sql, sqlite_sql

    start = dt.date(2026, 1, 1)
    regions = [[day(str(start + dt.timedelta(n)), str(start + dt.timedelta(n + 1)))] for n in range(100)]
    gap = [*regions[:10], *regions[11:]]  # a day missing: two ranges
    apart = [[day("2026-01-01", "2026-01-02"), day("2026-01-01", "2026-01-03")]]  # two bounds: as they are

    assert [r[0].lower for r in definition_compare.merged_regions(regions)] == ["2026-01-01"]
    assert definition_compare.merged_regions(regions)[0][0].upper == "2026-04-11"
    assert [r[0].lower for r in definition_compare.merged_regions(gap)] == ["2026-01-01", "2026-01-12"]
    assert definition_compare.merged_regions(apart) == apart
    text, params = sqlite_sql.rows_left_out("ev", "ev", [("id", "id")], regions)
    assert " OR " not in text and len(params) == 4  # one range, in each of the two reads
    statement = mssql_sql.rows_left_out("ev", "ev", [("id", "id")], gap)
    assert statement.render().count(" OR ") == 2  # two ranges, in each of the two reads


def test_the_columns_compared_are_those_both_reads_return_named_in_any_case() -> None:
    pairs = definition_compare.shared_columns(["id", "TS", "v"], ["ID", "ts", "gone"], None)
    assert pairs == [("id", "ID"), ("TS", "ts")]
    assert definition_compare.shared_columns(["id", "ts"], ["id", "ts", "v"], ["TS"]) == [("ts", "ts")]
    with pytest.raises(DefinitionsNotComparable) as caught:
        definition_compare.shared_columns(["id"], ["x"], None)
    assert caught.value.reason is NotCompared.NO_SHARED_COLUMNS


def test_a_definition_round_trips_its_stored_text_and_hashes_as_releases_hashed_it() -> None:
    from airflow_provider_dpone.contracts.partition import canonical_json, sha256_tag

    definition = ReadDefinition(
        source_type="sqlite", table="main.ev", query="SELECT *\nFROM ev", columns=("a",)
    )
    assert ReadDefinition.from_text(definition.canonical_text()) == definition
    material = {"table": "main.ev", "query": "SELECT *\nFROM ev", "columns": ["a"], "source_type": "sqlite"}
    assert definition.query_hash() == sha256_tag(canonical_json(material))


def test_a_sql_server_text_column_is_compared_as_nvarchar_max_and_an_image_column_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``GROUP BY`` (``EXCEPT`` before it) refuses text, ntext and image. Red before: one such column (a
    legacy ``ntext`` notes column) turned the comparison off for the whole route, and an hourly window
    deleted the hour before it, exit 0, only a note. Now text and ntext are compared as ``(n)varchar(max)`` (the same characters, the same
    collation), an image column is left out, and only a read of nothing but such columns is not compared.
    The black-box proof against the TDS emulator: ``test_windowed_query_left_out_tds``."""
    from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
    from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
    from airflow_provider_dpone.contracts.manifest import SourceSpec
    from airflow_provider_dpone.contracts.schema import ColumnSpec

    spec = SourceSpec.model_validate_json(
        '{"type": "mssql", "connection": "c", "table": "dbo.notes", "query": "SELECT * FROM dbo.notes",'
        ' "partitioning": {"kind": "day", "column": "at"}}'
    )
    source = MssqlSource(EndpointDescriptor(name="c", kind=EndpointKind.MSSQL, host="h"), spec)
    types = {"id": "int", "at": "datetime2", "body": "ntext", "memo": "text", "scan": "image"}
    schema = TableSchema(
        columns=tuple(
            ColumnSpec(name=name, clickhouse_type="String", source_type=kind) for name, kind in types.items()
        )
    )
    sent: list[str] = []

    def compared(statement: object, rows: bool) -> list[tuple[object, ...]]:
        sent.append(statement.render())  # type: ignore[attr-defined]
        return [(0,)] if rows else [(name,) for name in types]

    monkeypatch.setattr(source, "describe", lambda: schema)
    monkeypatch.setattr(source, "_compared", compared)
    earlier = read_definition(spec.model_copy(update={"query": "SELECT * FROM dbo.notes WHERE id < 9"}))

    counted = source.rows_left_out(earlier, [[day("2026-11-28", "2026-11-29")]])

    assert counted.total == 0
    statement = sent[-1]
    assert "CAST([body] AS nvarchar(max)) AS [dpone_c2]" in statement
    assert "CAST([memo] AS varchar(max)) AS [dpone_c3]" in statement
    assert "[scan]" not in statement and "[id]" in statement and "[at]" in statement
    only = TableSchema(columns=(ColumnSpec(name="scan", clickhouse_type="String", source_type="image"),))
    monkeypatch.setattr(source, "describe", lambda: only)
    with pytest.raises(DefinitionsNotComparable) as caught:
        source.rows_left_out(earlier, [[day("2026-11-28", "2026-11-29")]])
    assert caught.value.reason is NotCompared.TYPE_NOT_COMPARABLE


@pytest.mark.parametrize(
    ("number", "reason"),
    [
        (207, NotCompared.EARLIER_READ_FAILS),  # invalid column name
        (208, NotCompared.EARLIER_READ_FAILS),  # invalid object name
        (421, NotCompared.TYPE_NOT_COMPARABLE),  # xml / text not comparable
        (245, NotCompared.TYPE_NOT_COMPARABLE),  # a conversion failed between the two reads' types
        (1205, None),  # a deadlock: a failed read, retried, never a reason to go on
        (None, None),
    ],
)
def test_sql_server_errors_tell_a_definition_that_cannot_be_compared_from_a_failed_read(
    number: int | None, reason: NotCompared | None
) -> None:
    assert definition_compare.mssql_reason(number) is reason
