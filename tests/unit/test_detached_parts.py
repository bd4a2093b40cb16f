"""Which detached parts lie where a run writes (ADR 0093): the partition-ID mapping and the decision.

The mapping (``adapters.clickhouse.detached_parts.covered_values``) reads the values a partition holds from
its ID only for keys whose IDs ClickHouse writes as the value (checked on chDB 26.9 and the 18.16 server:
a plain ``Date`` as ``YYYYMMDD``, a ``Date32`` or ``Nullable(Date)`` as a day number); anything else maps
to nothing, and the decision (``runtime.detached_parts``) then takes the part as within every partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from airflow_provider_dpone.adapters.clickhouse.detached_parts import covered_values
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.detached_part import DetachedPart
from airflow_provider_dpone.contracts.errors import ErrorCode
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.detached_parts import (
    COUNTED_ON_LEGACY,
    detached_in_scope_error,
    emptied_commits,
    in_scope,
    scope_of,
)
from airflow_provider_dpone.runtime.guard.batch_id import checkpoint_batch_id


def day(label: str, column: str = "order_date") -> PartitionBounds:
    lower = datetime.fromisoformat(label).date()
    upper = lower.fromordinal(lower.toordinal() + 1)
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column=column,
        lower=lower.isoformat(),
        upper=upper.isoformat(),
        value_type="date",
        label=f"{column}={label}",
    )


def planned(bounds: PartitionBounds) -> PlannedPartition:
    return PlannedPartition(
        partition_id="sha256:" + format(abs(hash(bounds.label)), "064x")[-64:],
        bounds=bounds,
        query_hash="sha256:" + "1" * 64,
        schema_hash="sha256:" + "2" * 64,
    )


def part(partition_id: str | None, covers: PartitionBounds | None, reason: str = "") -> DetachedPart:
    return DetachedPart(name=f"{partition_id}_1_1_0", partition_id=partition_id, reason=reason, covers=covers)


@pytest.mark.parametrize(
    ("type_name", "function", "partition_id", "expected"),
    [
        ("Date", None, "20261129", ("2026-11-29", "2026-11-30")),
        ("Date", "toYYYYMMDD", "20261129", ("2026-11-29", "2026-11-30")),
        ("Date", "toYYYYMM", "202612", ("2026-12-01", "2027-01-01")),
        ("Date32", "toStartOfMonth", "20260201", ("2026-02-01", "2026-03-01")),
        ("Date", "toMonday", "20261123", ("2026-11-23", "2026-11-30")),
        ("Date", "toYear", "2026", ("2026-01-01", "2027-01-01")),
        ("Nullable(Date)", "toYYYYMM", "202611", ("2026-11-01", "2026-12-01")),
        # a DateTime's day is taken in a time zone the bounds do not name: a day more each side
        ("DateTime('Asia/Tokyo')", "toYYYYMMDD", "20261129", ("2026-11-28", "2026-12-01")),
        ("DateTime64(3)", "toDate", "20261129", ("2026-11-28", "2026-12-01")),
    ],
)
def test_a_calendar_key_maps_its_partition_id_to_the_days_it_holds(
    type_name: str, function: str | None, partition_id: str, expected: tuple[str, str]
) -> None:
    covers = covered_values("order_date", type_name, function, partition_id)
    assert covers is not None
    assert (covers.lower, covers.upper, covers.value_type, covers.column) == (*expected, "date", "order_date")


def test_an_integer_key_maps_its_partition_id_to_its_value() -> None:
    covers = covered_values("bucket", "Int32", None, "-7")
    assert covers is not None and (covers.lower, covers.upper, covers.value_type) == ("-7", "-6", "integer")


@pytest.mark.parametrize(
    ("type_name", "function", "partition_id"),
    [
        ("Date32", None, "20786"),  # a day number, not YYYYMMDD
        ("Nullable(Date)", None, "20786"),
        ("Nullable(Date)", "toStartOfMonth", "20758"),
        ("DateTime", None, "1796000000"),  # a second of its own
        ("String", None, "51fbadfb0deeea70ceafbd3c7c8aef25"),  # a digest
        ("Nullable(Int64)", None, "5"),
        ("Date", None, "all"),
        ("Date", "toStartOfMonth", "20261102"),  # no month starts there
        ("Date", "toMonday", "20261129"),  # a Sunday
        ("Date", None, "20261331"),
        ("Date", "toYYYYMM", "999912"),  # one past the calendar's end would not be written
    ],
)
def test_a_partition_id_the_key_does_not_spell_as_a_value_maps_to_nothing(
    type_name: str, function: str | None, partition_id: str
) -> None:
    assert covered_values("order_date", type_name, function, partition_id) is None


def test_a_detached_day_outside_the_days_a_run_writes_is_not_in_its_scope() -> None:
    written = [day("2026-11-29"), day("2026-11-30")]
    old = part("20261127", covered_values("order_date", "Date", None, "20261127"))
    hit = part("20261129", covered_values("order_date", "Date", None, "20261129"))

    found = in_scope([old, hit], written)

    assert [(p.partition_id, [b.label for b in hits]) for p, hits in found.mapped] == [
        ("20261129", ["order_date=2026-11-29"])
    ]
    assert not found.unmapped
    assert not in_scope([old], written)


def test_a_part_of_an_unmapped_partition_or_another_column_is_within_every_run_that_writes() -> None:
    written = [day("2026-11-30")]
    unkeyed = part("all", None)
    other_column = part("20200101", covered_values("created_on", "Date", None, "20200101"))

    found = in_scope([unkeyed, other_column], written)

    assert found.unmapped == (unkeyed, other_column) and not found.mapped


def test_a_full_refresh_writes_the_whole_table_so_every_detached_part_is_in_its_scope() -> None:
    old = part("20100101", covered_values("order_date", "Date", None, "20100101"))
    scope = scope_of(Strategy.FULL_REFRESH, [planned(day("2026-11-30"))])

    assert scope is None
    assert [p for p, _ in in_scope([old], scope).mapped] == [old]


def test_the_stop_names_route_partitions_and_detached_ids_and_what_clickhouse_detached_itself() -> None:
    route = RouteIdentity(
        source_table="main.orders", target_table="demo.orders", strategy=Strategy.REPLACE_PARTITION
    )
    found = in_scope(
        [
            part("20261129", covered_values("order_date", "Date", None, "20261129")),
            part("20261129", covered_values("order_date", "Date", None, "20261129"), reason="ignored"),
        ],
        [day("2026-11-29")],
    )

    error = detached_in_scope_error(route, "demo.orders", found, "orders.yaml")

    assert error.code is ErrorCode.TARGET_NOT_EMPTY
    assert error.details["problem"] == "detached_parts_in_scope"
    assert error.details["partitions"] == ["order_date=2026-11-29"]
    assert error.details["detached_partitions"] == ["20261129"]
    assert error.details["reasons"] == ["detached", "ignored"]
    assert "ClickHouse detached 1 of them itself (ignored)" in error.safe_message
    assert any("A detached partition in the run's scope" in line for line in error.hint_lines)
    assert "ALTER TABLE demo" not in error.render()  # statements are the runbook's, not the error's


def committed(bounds: PartitionBounds, rows: int) -> PartitionCheckpoint:
    moment = datetime(2026, 12, 1, tzinfo=UTC)
    plan = planned(bounds)
    return PartitionCheckpoint(
        route=RouteIdentity(
            source_table="main.orders", target_table="demo.orders", strategy=Strategy.REPLACE_PARTITION
        ),
        partition_id=plan.partition_id,
        bounds=bounds,
        query_hash=plan.query_hash,
        schema_hash=plan.schema_hash,
        status=CheckpointStatus.COMMITTED,
        rows=rows,
        run_id="r1",
        started_at=moment,
        completed_at=moment,
    )


def test_where_detached_parts_are_unlisted_a_committed_partition_found_empty_is_named() -> None:
    days = [day(f"2026-11-{d}") for d in (28, 29, 30)]
    own = [committed(days[0], 300), committed(days[1], 300), committed(days[2], 0)]
    held = {days[0].label: 300, days[1].label: 0, days[2].label: 0}

    emptied = emptied_commits(
        Strategy.REPLACE_PARTITION, own, [planned(b) for b in days], lambda b: held[b.label] if b else 0
    )

    # the day committed empty (the source had none) is no sign of a detach
    assert [(p.bounds.label, rows) for p, rows in emptied] == [("order_date=2026-11-29", 300)]
    assert emptied_commits(Strategy.INCREMENTAL_APPEND, own, [planned(b) for b in days], lambda b: 0) == []


def test_where_detached_parts_are_unlisted_a_day_an_attempt_since_its_commit_reached_is_not_named() -> None:
    """A replace under an edited definition (another partition ID, same bounds) killed between its delete
    and its insert, then resolved: the empty day is its own doing, not a detach."""
    days = [day("2026-11-29"), day("2026-11-30")]
    later = datetime(2026, 12, 2, tzinfo=UTC)
    # what ``guard resolve --as not-applied`` records: failed before the target, with the resolution
    guard = TargetCommitGuard.for_phase(
        GuardPhase.FAILED_BEFORE_TARGET, checkpoint_batch_id("r2", ["p"])
    ).to_json()
    attempt = committed(days[0], 300).model_copy(
        update={
            "partition_id": "sha256:" + "e" * 64,
            "status": CheckpointStatus.FAILED,
            "started_at": later,
            "completed_at": later,
            "diagnostics": {GUARD_KEY: guard, "resolution": {"as": "not-applied"}},
        }
    )
    own = [committed(days[0], 300), committed(days[1], 300), attempt]

    emptied = emptied_commits(Strategy.REPLACE_PARTITION, own, [planned(b) for b in days], lambda b: 0)

    assert [(p.bounds.label, rows) for p, rows in emptied] == [("order_date=2026-11-30", 300)]


def test_where_detached_parts_are_unlisted_only_the_newest_partitions_are_counted() -> None:
    days = [day(f"2026-{m:02d}-{d:02d}") for m in range(1, 4) for d in range(1, 29)]
    counted: list[str] = []

    def count(bounds: PartitionBounds | None) -> int:
        counted.append("whole" if bounds is None else bounds.label)
        return 1

    own = [committed(b, 5) for b in days]
    assert emptied_commits(Strategy.REPLACE_PARTITION, own, [planned(b) for b in days], count) == []
    assert len(counted) == COUNTED_ON_LEGACY and counted[0] == "order_date=2026-03-28"


def test_where_detached_parts_are_unlisted_the_newest_partitions_are_counted_in_one_grouped_call() -> None:
    """``count_each`` (``target_counts.rows_within_each``): the newest ``COUNTED_ON_LEGACY`` partitions'
    bounds in one call, newest first, none counted alone; the answers are those of one count each."""
    days = [day(f"2026-{m:02d}-{d:02d}") for m in range(1, 4) for d in range(1, 29)]
    own = [committed(b, 5) for b in days]
    empty = {days[-1].label, days[-30].label, days[0].label}  # the oldest is not among the newest 62
    asked: list[list[str]] = []

    def count_each(bounds: Sequence[PartitionBounds]) -> list[int]:
        asked.append([b.label for b in bounds])
        return [0 if b.label in empty else 5 for b in bounds]

    def count(bounds: PartitionBounds | None) -> int:
        raise AssertionError("counted alone")

    emptied = emptied_commits(
        Strategy.REPLACE_PARTITION, own, [planned(b) for b in days], count, count_each=count_each
    )
    assert len(asked) == 1 and len(asked[0]) == COUNTED_ON_LEGACY
    assert asked[0][0] == "order_date=2026-03-28" and asked[0] == sorted(asked[0], reverse=True)
    assert [(p.bounds.label, rows) for p, rows in emptied] == [
        (days[-1].label, 5),
        (days[-30].label, 5),
    ]
    one_each = emptied_commits(
        Strategy.REPLACE_PARTITION,
        own,
        [planned(b) for b in days],
        lambda b: 0 if b and b.label in empty else 5,
    )
    assert one_each == emptied


def test_where_detached_parts_are_unlisted_a_full_refresh_holding_every_committed_row_is_counted_once() -> (
    None
):
    days = [day(f"2026-11-{d}") for d in (28, 29, 30)]
    own = [committed(b, 300) for b in days]
    counted: list[str | None] = []

    def count(bounds: PartitionBounds | None) -> int:
        counted.append(None if bounds is None else bounds.label)
        return 900 if bounds is None else 0

    assert emptied_commits(Strategy.FULL_REFRESH, own, [planned(b) for b in days], count) == []
    assert counted == [None]


def test_where_detached_parts_are_unlisted_a_commit_under_a_failed_before_target_attempt_counts() -> None:
    """Seen on 18.16: a staging insert broke (the source dropped), its record became the day's latest, and the
    fallback took the day for never committed: detached, it was loaded again, exit 0, twice once attached.
    An attempt that reached the target since (its own delete may have emptied the day) still hides it."""
    days = [day("2026-11-29"), day("2026-11-30")]
    later = datetime(2026, 12, 2, tzinfo=UTC)

    def attempt(bounds: PartitionBounds, **diagnostics: object) -> PartitionCheckpoint:
        guard = TargetCommitGuard.for_phase(
            GuardPhase.FAILED_BEFORE_TARGET, checkpoint_batch_id("r2", ["p"])
        ).to_json()
        return committed(bounds, 0).model_copy(
            update={
                "status": CheckpointStatus.FAILED,
                "rows": None,
                "started_at": later,
                "completed_at": later,
                "diagnostics": {GUARD_KEY: guard, **diagnostics},
            }
        )

    failed, resolved = attempt(days[0]), attempt(days[1], resolution={"as": "not-applied"})
    history = {
        failed.partition_id: [committed(days[0], 300), failed],
        resolved.partition_id: [committed(days[1], 300), resolved],
    }

    emptied = emptied_commits(
        Strategy.REPLACE_PARTITION,
        [failed, resolved],
        [planned(b) for b in days],
        lambda b: 0,
        history=lambda latest: history[latest.partition_id],
    )

    assert [(p.bounds.label, rows) for p, rows in emptied] == [("order_date=2026-11-29", 300)]
    assert (
        emptied_commits(
            Strategy.REPLACE_PARTITION, [failed, resolved], [planned(b) for b in days], lambda b: 0
        )
        == []
    )


def test_where_detached_parts_are_unlisted_a_full_refresh_counts_only_its_newest_refreshs_commits() -> None:
    """Seen on 18.16: a day left the source, the next refresh truncated the table without it, and once it
    was back every run stopped on it (its commit by the refresh before); nothing was detached."""
    days = [day(f"2026-11-{d}") for d in (28, 29, 30)]
    newer = datetime(2026, 12, 2, tzinfo=UTC)
    older = committed(days[0], 300)
    newest = [
        committed(b, 300).model_copy(update={"started_at": newer, "completed_at": newer}) for b in days[1:]
    ]
    counted: list[str | None] = []

    def count(bounds: PartitionBounds | None) -> int:
        counted.append(None if bounds is None else bounds.label)
        return 0 if bounds is None or bounds == days[2] else 300

    emptied = emptied_commits(Strategy.FULL_REFRESH, [older, *newest], [planned(b) for b in days], count)

    assert [p.bounds.label for p, _ in emptied] == ["order_date=2026-11-30"]  # newest refresh's, emptied
    assert "order_date=2026-11-28" not in counted
