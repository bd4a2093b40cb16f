"""A replacing run's delete: adjacent ranges merged, the rest in statements of bounded size, same rows.

``predicates.delete_conditions`` replaced one ``OR`` of every armed partition (past ``max_query_size`` at
~3,200 days; ``tests/integration/test_replace_many_partitions.py``). What must never change is which rows
it selects: a property over sets of days and integer ranges compares it with the ranges one by one.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.clickhouse.predicates import (
    RANGES_PER_DELETE,
    adjacent_merged,
    delete_conditions,
)
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds

FIRST = date(2026, 1, 1)


def day(offset: int) -> PartitionBounds:
    lower = FIRST + timedelta(days=offset)
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column="d",
        lower=lower.isoformat(),
        upper=(lower + timedelta(days=1)).isoformat(),
        value_type="date",
        label=f"d={lower}",
    )


def span(bounds: PartitionBounds) -> tuple[date, date]:
    assert bounds.lower is not None and bounds.upper is not None
    return date.fromisoformat(bounds.lower), date.fromisoformat(bounds.upper)


def selected(all_bounds: list[PartitionBounds], horizon: int) -> set[date]:
    days = (FIRST + timedelta(days=i) for i in range(-2, horizon + 2))
    return {d for d in days if any(low <= d < high for low, high in map(span, all_bounds))}


@given(st.lists(st.integers(min_value=0, max_value=400), max_size=120))
@example([0, 1, 2, 4, 5, 9])
@example([3, 2, 1])  # not in order: each stays its own range
def test_merging_selects_exactly_the_days_of_the_ranges_one_by_one(offsets: list[int]) -> None:
    bounds = [day(o) for o in offsets]
    merged = adjacent_merged(bounds)
    assert selected(merged, 400) == selected(bounds, 400)
    assert len(merged) <= len(bounds)


def test_a_run_of_consecutive_days_is_one_range_and_a_gap_splits_it() -> None:
    merged = adjacent_merged([day(0), day(1), day(2), day(4), day(5)])
    assert [span(b) for b in merged] == [
        (FIRST, FIRST + timedelta(days=3)),
        (FIRST + timedelta(days=4), FIRST + timedelta(days=6)),
    ]


def test_lists_and_text_ranges_are_never_merged() -> None:
    listed = PartitionBounds(kind=BoundsKind.VALUES, column="c", values=("a",), label="c=a")
    text = PartitionBounds(kind=BoundsKind.RANGE, column="c", lower="a", upper="b", label="c=[a,b)")
    after = text.model_copy(update={"lower": "b", "upper": "c", "label": "c=[b,c)"})
    assert adjacent_merged([listed, listed]) == [listed, listed]
    assert adjacent_merged([text, after]) == [text, after]


def test_separate_ranges_go_in_statements_of_at_most_the_limit_each() -> None:
    bounds = [day(2 * i) for i in range(2 * RANGES_PER_DELETE + 1)]  # nothing adjacent
    conditions = delete_conditions(bounds)
    assert conditions is not None and len(conditions) == 3
    assert [c.count(" OR ") + 1 for c in conditions] == [RANGES_PER_DELETE, RANGES_PER_DELETE, 1]
    assert max(len(c) for c in conditions) < 16_384  # far below max_query_size (262,144)
    assert delete_conditions([day(i) for i in range(5_000)]) == [
        "(`d` >= toDate('2026-01-01') AND `d` < toDate('2039-09-10'))"
    ]


def test_calendar_bounds_on_a_text_column_compare_as_text_as_the_source_did() -> None:
    from airflow_provider_dpone.adapters.clickhouse.predicates import BoundsError, literal, predicate

    types = {"d": "Nullable(String)"}
    assert predicate(day(0), types) == "`d` >= '2026-01-01' AND `d` < '2026-01-02'"
    assert predicate(day(0), {"d": "Date"}) == "`d` >= toDate('2026-01-01') AND `d` < toDate('2026-01-02')"
    assert literal("2026-01-01 10:00:00", "datetime", "LowCardinality(String)") == "'2026-01-01 10:00:00'"
    assert literal("2026-01-01", "date", "LowCardinality(Nullable(String))") == "'2026-01-01'"
    with pytest.raises(BoundsError):
        literal("2026-13-01", "date", "String")  # still ISO text, whatever the column


def test_a_listed_number_is_written_as_the_number_the_source_compared() -> None:
    from airflow_provider_dpone.adapters.clickhouse.predicates import BoundsError, literal

    assert literal(" 10.5", "string", "Nullable(Decimal(12, 2))") == "'10.5'"  # the engine refuses ' 10.5'
    # a float by its exact bits: 18.16 reads a quoted number as a Decimal only, and misparses some texts
    assert literal("1e1", "string", "Float64") == "reinterpretAsFloat64(unhex('0000000000002440'))"
    assert literal("-0", "string", "Float64") == literal("0", "string", "Float64")  # member adds -0.0
    assert literal(" 10.5", "string", "String") == "' 10.5'"  # text is compared as it is spelled
    with pytest.raises(BoundsError):
        literal("ten", "string", "Decimal(12, 2)")
