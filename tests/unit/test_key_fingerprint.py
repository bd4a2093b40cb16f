"""The key comparison of ``--verify`` and ``--source-moved`` (``runtime.key_fingerprint``), without engines.

What it decides: which columns a fingerprint uses, how partitions are batched (a batch keys each row by the
first bounds that selects it, so bounds of a batch must never overlap), when a partition is compared at all,
and what a refusal says. The engines' own arithmetic is proven in
``tests/integration/test_key_fingerprint_engines.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta, timezone

import pytest

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.key_fingerprint import (
    ColumnDigest,
    KeyFingerprint,
    MalformedFingerprint,
    fingerprint_from_row,
    fingerprints_from_rows,
)
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.runtime.key_fingerprint import (
    BATCH_PARTITIONS,
    NO_KEY_COLUMN,
    TARGET_MISSING,
    KeyVerdict,
    NotCompared,
    check_keys,
    disjoint_batches,
    fingerprint_columns,
    key_audit,
    key_candidates,
    refuse_other_keys,
    refuse_unverified_keys,
)

ROUTE = RouteIdentity(
    source_table="dbo.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)


def day(first: date, *, column: str = "order_date") -> PartitionBounds:
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column=column,
        lower=first.isoformat(),
        upper=(first + timedelta(days=1)).isoformat(),
        value_type="date",
        label=f"{column}={first.isoformat()}",
    )


def month(first: date) -> PartitionBounds:
    following = date(first.year + (first.month == 12), first.month % 12 + 1, 1)
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column="order_date",
        lower=first.isoformat(),
        upper=following.isoformat(),
        value_type="date",
        label=f"month={first.isoformat()}",
    )


def listed(*values: str, value_type: str = "integer") -> PartitionBounds:
    return PartitionBounds(
        kind=BoundsKind.VALUES, column="code", values=values, value_type=value_type, label=f"code={values}"
    )


def overlapping(a: PartitionBounds, b: PartitionBounds) -> bool:
    if a.kind is BoundsKind.VALUES:
        return bool(set(a.values or ()) & set(b.values or ()))
    return not (str(a.upper) <= str(b.lower) or str(b.upper) <= str(a.lower))


def schema(**types: str) -> TableSchema:
    return TableSchema(columns=tuple(ColumnSpec(name=n, clickhouse_type=t) for n, t in types.items()))


def committed(bounds: PartitionBounds, rows: int | None, pid: str) -> PartitionCheckpoint:
    return PartitionCheckpoint(
        route=ROUTE,
        partition_id=pid,
        bounds=bounds,
        query_hash="sha256:" + "0" * 64,
        schema_hash="sha256:" + "1" * 64,
        status=CheckpointStatus.COMMITTED,
        run_id="r1",
        started_at=datetime(2026, 3, 1, tzinfo=timezone.utc),
        rows=rows,
    )


def fingerprint(rows: int, low: int) -> KeyFingerprint:
    return KeyFingerprint(
        rows=rows,
        columns=(ColumnDigest(values=rows, minimum=low, maximum=low + rows, residue_sum=rows * low),),
    )


class FakeSource:
    def __init__(self, found: dict[str, KeyFingerprint], read: TableSchema) -> None:
        self.found, self.read, self.statements = found, read, 0

    def describe(self) -> TableSchema:
        return self.read

    def key_columns(self) -> list[str]:
        return ["id"]

    def key_fingerprints(
        self, bounds: Sequence[PartitionBounds], columns: Sequence[str]
    ) -> list[KeyFingerprint]:
        self.statements += 1
        return [self.found[b.label] for b in bounds]


class FakeSink:
    def __init__(self, found: dict[str, KeyFingerprint] | None, held: TableSchema | None) -> None:
        self.found, self.held, self.statements = found, held, 0

    def target_schema(self, table: str) -> TableSchema | None:
        return self.held

    def key_fingerprints(
        self, table: str, bounds: Sequence[PartitionBounds], columns: Sequence[str]
    ) -> list[KeyFingerprint] | None:
        self.statements += 1
        return None if self.found is None else [self.found[b.label] for b in bounds]


def candidates(source: object) -> list[str]:
    return key_candidates(["id"], ["order_date", "id"], "order_date")


# -- columns ---------------------------------------------------------------------------------------------


def test_the_columns_are_the_integer_keys_both_sides_hold_primary_key_first() -> None:
    read = schema(order_date="Date", id="Int64", ref="Int32", code="String")
    target = schema(order_date="Date", id="Int64", ref="Int64", code="String")

    assert key_candidates(["id"], ["order_date", "ref", "id"], "order_date") == ["id", "order_date", "ref"]
    assert fingerprint_columns(read, target, ["id", "order_date", "ref", "code"]) == ("id", "ref")
    assert (
        fingerprint_columns(read, schema(order_date="Date"), ["id", "order_date"]) == ()
    )  # not in the target
    assert fingerprint_columns(read, target, ["code", "order_date"]) == ()  # no integer among them


# -- batches ---------------------------------------------------------------------------------------------


def test_days_of_one_column_are_batched_without_overlap_and_a_repartitioned_history_in_layers() -> None:
    days = [day(date(2026, 1, 1) + timedelta(days=i)) for i in range(120)]
    months = [month(date(2026, m, 1)) for m in (1, 2, 3)]

    batches = disjoint_batches([*months, *days])

    assert sorted(b.label for batch in batches for b in batch) == sorted(b.label for b in [*months, *days])
    assert all(len(batch) <= BATCH_PARTITIONS for batch in batches)
    for batch in batches:
        assert not any(overlapping(a, b) for i, a in enumerate(batch) for b in batch[i + 1 :]), batch
    # two layers: the months then April's days (first fit), and January to March's 90 days (50 + 40)
    assert [len(batch) for batch in batches] == [33, 50, 40]


def test_integer_lists_are_batched_when_their_values_do_not_meet_and_anything_else_stands_alone() -> None:
    text = listed("a", "b", value_type="string")
    whole = PartitionBounds(kind=BoundsKind.ALL, label="all")
    other_column = day(date(2026, 1, 1), column="shipped")

    batches = disjoint_batches([listed("1", "2"), listed("3"), listed("2", "4"), text, whole, other_column])

    grouped = sorted(sorted(b.label for b in batch) for batch in batches)
    assert grouped == sorted(
        [
            sorted(["code=('1', '2')", "code=('3',)"]),
            ["code=('2', '4')"],
            ["code=('a', 'b')"],
            ["all"],
            ["shipped=2026-01-01"],
        ]
    )


# -- verdicts --------------------------------------------------------------------------------------------


def test_a_partition_is_compared_where_both_sides_hold_the_committed_rows_and_differs_on_other_keys() -> None:
    days = [day(date(2026, 1, 1) + timedelta(days=i)) for i in range(5)]
    rows = [committed(b, 10, f"p{i}") for i, b in enumerate(days)]
    rows.append(committed(day(date(2026, 2, 1)), None, "p5"))  # a commit with no row count
    source = {
        days[0].label: fingerprint(10, 1),  # the same rows
        days[1].label: fingerprint(10, 1000),  # as many rows, other keys: another table
        days[2].label: fingerprint(12, 1),  # late rows: the counts tell
        days[3].label: fingerprint(10, 1),
        days[4].label: fingerprint(10, 1),
        "order_date=2026-02-01": fingerprint(3, 1),
    }
    target = {**source, days[1].label: fingerprint(10, 1), days[2].label: fingerprint(10, 1)}
    target[days[3].label] = fingerprint(15, 1)  # other routes' rows in the target too
    read = schema(order_date="Date", id="Int64")
    fake_source, fake_sink = FakeSource(source, read), FakeSink(target, read)

    checks = check_keys(rows, fake_source, fake_sink, "demo.orders", candidates)  # type: ignore[arg-type]

    assert checks.columns == ("id",) and checks.unusable is None
    assert {pid: (c.verdict, c.why) for pid, c in checks.checks.items()} == {
        "p0": (KeyVerdict.MATCH, None),
        "p1": (KeyVerdict.DIFFERS, None),
        "p2": (KeyVerdict.NOT_COMPARED, NotCompared.SOURCE_ROWS_DIFFER),
        "p3": (KeyVerdict.NOT_COMPARED, NotCompared.TARGET_ROWS_DIFFER),
        "p4": (KeyVerdict.MATCH, None),
        "p5": (KeyVerdict.NOT_COMPARED, NotCompared.NO_ROW_COUNT),
    }
    assert (fake_source.statements, fake_sink.statements) == (1, 1)  # one statement per side and batch
    assert key_audit(checks, rows) == {
        "key_columns": ["id"],
        "keys_compared": 3,
        "keys_differ": [days[1].label],
    }


def test_no_usable_column_or_no_target_compares_nothing_and_says_why() -> None:
    rows = [committed(day(date(2026, 1, 1)), 10, "p0")]
    found = {rows[0].bounds.label: fingerprint(10, 1)}
    texts = schema(order_date="String", id="String")

    no_key = check_keys(rows, FakeSource(found, texts), FakeSink(found, texts), "t", candidates)  # type: ignore[arg-type]
    no_table = check_keys(rows, FakeSource(found, texts), FakeSink(None, None), "t", candidates)  # type: ignore[arg-type]

    assert (no_key.unusable, no_key.checks) == (NO_KEY_COLUMN, {})
    assert no_table.unusable == TARGET_MISSING
    assert "not compared" in no_key.summary() and "(a shard)" in no_key.summary()
    assert key_audit(no_key, rows) == {"keys_not_compared": NO_KEY_COLUMN}


def test_a_refusal_names_the_route_columns_and_days_and_the_command_past_it() -> None:
    days = [day(date(2026, 1, 1) + timedelta(days=i)) for i in range(12)]
    rows = [committed(b, 10, f"p{i}") for i, b in enumerate(days)]
    found = {b.label: fingerprint(10, 1) for b in days}
    other = {b.label: fingerprint(10, 999_999) for b in days}
    read = schema(order_date="Date", id="Int64")
    checks = check_keys(rows, FakeSource(other, read), FakeSink(found, read), "t", candidates)  # type: ignore[arg-type]

    with pytest.raises(DponeError) as refused:
        refuse_other_keys(ROUTE, checks, rows, "m.yaml")

    error = refused.value
    assert error.code is ErrorCode.ROUTE_IDENTITY_CHANGED and error.details["changed"] == ["source"]
    assert error.details["partitions_differing"] == 12 and len(error.details["partitions"]) == 10
    assert "and 2 more" in error.safe_message and "999999" not in error.safe_message
    assert any("--source-moved --force" in line for line in error.hint_lines)
    same = check_keys(rows, FakeSource(found, read), FakeSink(found, read), "t", candidates)  # type: ignore[arg-type]
    refuse_other_keys(ROUTE, same, rows, "m.yaml")  # the same keys: nothing to refuse


def test_a_move_whose_keys_no_partition_holding_rows_could_compare_is_refused() -> None:
    """Seen: a shard of other counts in every day (and the F6 shard into a target another source table's
    route also appends to, a fan-in: the target holds more rows in every day) compared no partition, and
    ``--source-moved`` recorded it, exit 0 ("keys match the target's in 0 partition(s)"); every later run
    skipped its days as committed. A partition without a row proves nothing either."""
    days = [day(date(2026, 1, 1) + timedelta(days=i)) for i in range(4)]
    rows = [committed(b, 10, f"p{i}") for i, b in enumerate(days)]
    rows.append(committed(day(date(2026, 2, 1)), 0, "p4"))  # an empty day, empty on both sides
    target = {b.label: fingerprint(10, 1) for b in days} | {"order_date=2026-02-01": fingerprint(0, 0)}
    read = schema(order_date="Date", id="Int64")
    shard = {**target} | {b.label: fingerprint(11, 500) for b in days}  # other counts everywhere
    fan_in = {**target} | {b.label: fingerprint(14, 1) for b in days}  # other routes' rows too

    for source, sink in ((shard, target), (target, fan_in)):
        checks = check_keys(rows, FakeSource(source, read), FakeSink(sink, read), "t", candidates)  # type: ignore[arg-type]
        refuse_other_keys(ROUTE, checks, rows, "m.yaml")  # no partition of equal counts differs
        with pytest.raises(DponeError) as refused:
            refuse_unverified_keys(ROUTE, checks, rows, "m.yaml")
        error = refused.value
        assert error.code is ErrorCode.ROUTE_IDENTITY_CHANGED and error.details["changed"] == ["source"]
        assert error.details["partitions_compared"] == 0 and "nothing was recorded" in error.safe_message
        assert any("--source-moved --force" in line for line in error.hint_lines)
    differ = (error.details["source_rows_differ"], error.details["target_rows_differ"])
    assert differ == (0, 4)  # the fan-in's: the target holds other rows, the source the committed ones

    one_day_settled = {**shard, days[0].label: fingerprint(10, 1)}
    settled = check_keys(rows, FakeSource(one_day_settled, read), FakeSink(target, read), "t", candidates)  # type: ignore[arg-type]
    refuse_unverified_keys(ROUTE, settled, rows, "m.yaml")  # a live table: one day holding rows matches
    no_key = check_keys(rows, FakeSource(shard, schema(id="String")), FakeSink(target, read), "t", candidates)  # type: ignore[arg-type]
    refuse_unverified_keys(ROUTE, no_key, rows, "m.yaml")  # no key column at all: counts only, a warning


# -- the contract ----------------------------------------------------------------------------------------


def test_an_aggregate_row_becomes_a_fingerprint_and_an_empty_column_has_no_extremes() -> None:
    # ClickHouse answers 0 for min/max/sum of no value of a non-Nullable column, SQL engines NULL
    assert fingerprint_from_row([3, 0, 0, 0, 0], 1) == fingerprint_from_row([3, 0, None, None, None], 1)
    assert fingerprints_from_rows([(1, 2, 2, -5, 7, 2), (-1, 9, 9, 0, 0, 0)], 2, 1)[1] == KeyFingerprint(
        rows=2, columns=(ColumnDigest(values=2, minimum=-5, maximum=7, residue_sum=2),)
    )
    for malformed in ([1.5, 1, 1, 1, 1], [1, 1, "1", 1, 1], [1, 1, 1, 1]):
        with pytest.raises(MalformedFingerprint):
            fingerprint_from_row(malformed, 1)
    with pytest.raises(MalformedFingerprint):
        fingerprints_from_rows([(7, 1, 1, 1, 1, 1)], 2, 1)
