"""Overlap and coverage of partition bounds agree with a brute-force check, and err toward "may overlap".

These answers decide whether a changed route may append (disjoint from everything committed) and which new
partitions ``dpone guard rebaseline`` may record as committed (fully covered): a wrong "disjoint" duplicates
rows, a wrong "covered" loses them.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.runtime.bounds_coverage import fully_covered, may_overlap
from tests.builders import day

DOMAIN = range(-10, 40)


def int_range(lower: int, upper: int, column: str = "k") -> PartitionBounds:
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column=column,
        lower=str(lower),
        upper=str(upper),
        value_type="integer",
        label=f"[{lower},{upper})",
    )


def int_values(values: list[int], column: str = "k") -> PartitionBounds:
    return PartitionBounds(
        kind=BoundsKind.VALUES,
        column=column,
        values=tuple(str(v) for v in values),
        value_type="integer",
        label="in",
    )


ALL = PartitionBounds(kind=BoundsKind.ALL, label="all")


def selected(bounds: PartitionBounds) -> set[int]:
    if bounds.kind is BoundsKind.VALUES:
        return {int(v) for v in bounds.values or ()}
    return {k for k in DOMAIN if int(bounds.lower or 0) <= k < int(bounds.upper or 0)}


ranges = st.tuples(st.integers(-5, 25), st.integers(1, 8)).map(lambda t: int_range(t[0], t[0] + t[1]))
value_lists = st.lists(st.integers(-5, 28), min_size=1, max_size=4).map(int_values)
any_bounds = st.one_of(ranges, value_lists)


@given(any_bounds, any_bounds)
def test_bounds_reported_disjoint_never_share_a_row(a: PartitionBounds, b: PartitionBounds) -> None:
    if not may_overlap(a, b):
        assert not (selected(a) & selected(b))
    else:
        assert selected(a) & selected(b)  # exact on comparable integer bounds of one column


@given(any_bounds, st.lists(any_bounds, max_size=5))
def test_bounds_reported_covered_select_no_row_outside_the_covering_ones(
    bounds: PartitionBounds, by: list[PartitionBounds]
) -> None:
    union = set().union(*(selected(o) for o in by)) if by else set()
    if fully_covered(bounds, by):
        assert selected(bounds) <= union
    elif bounds.kind is BoundsKind.VALUES or not any(o.kind is BoundsKind.VALUES for o in by):
        # without listed values covering a range (never claimed), the answer is exact
        assert not selected(bounds) <= union


def test_days_cover_a_month_only_when_every_day_is_there() -> None:
    month = day("2024-01-01", "2024-02-01")
    days = [day(f"2024-01-{d:02d}", f"2024-01-{d + 1:02d}") for d in range(1, 31)]
    assert not fully_covered(month, days)
    assert fully_covered(month, [*days, day("2024-01-31", "2024-02-01")])
    assert fully_covered(day("2024-01-05", "2024-01-06"), [month])


def test_another_column_or_the_whole_table_overlaps_everything_and_covers_nothing() -> None:
    assert may_overlap(int_range(0, 5, "a"), int_range(10, 20, "b"))
    assert not fully_covered(int_range(0, 5, "a"), [int_range(0, 5, "b")])
    assert may_overlap(ALL, int_range(0, 1))
    assert fully_covered(int_range(0, 1), [ALL])
    assert not fully_covered(ALL, [int_range(-(10**9), 10**9)])


def test_column_names_compare_ignoring_case_as_the_sources_do() -> None:
    assert not may_overlap(int_range(0, 5, "Key"), int_range(5, 9, "key"))
    assert fully_covered(int_range(0, 5, "KEY"), [int_range(0, 5, "key")])


def test_value_types_that_do_not_compare_are_taken_to_overlap() -> None:
    assert may_overlap(int_range(0, 5, "d"), day("2024-01-01", "2024-01-02", "d"))
    assert not fully_covered(int_range(0, 5, "d"), [day("2024-01-01", "2024-01-02", "d")])


def test_a_listed_datetime_falls_in_the_day_range_that_holds_it() -> None:
    listed = PartitionBounds(
        kind=BoundsKind.VALUES,
        column="order_date",
        values=("2024-01-05 10:00:00",),
        value_type="datetime",
        label="x",
    )
    assert may_overlap(listed, day("2024-01-05", "2024-01-06"))
    assert not may_overlap(listed, day("2024-01-06", "2024-01-07"))
    assert fully_covered(listed, [day("2024-01-01", "2024-02-01")])


def text_values(*values: str) -> PartitionBounds:
    return PartitionBounds(kind=BoundsKind.VALUES, column="region", values=values, label="in")


def test_text_overlaps_as_a_collation_may_match_it_and_is_covered_only_byte_for_byte() -> None:
    """Overlap errs toward a source that ignores case and trailing spaces (SQL Server's usual collations, a
    char(n) column); coverage is what the target's delete and count select, the exact spelling (red before:
    'EU  ' and 'EU' disjoint, and 'eu' covered by 'EU')."""
    listed, padded, lowered = text_values("EU"), text_values("EU  "), text_values("eu")
    assert may_overlap(listed, padded) and may_overlap(listed, lowered)
    assert not may_overlap(listed, text_values("US"))
    assert not fully_covered(padded, [listed]) and not fully_covered(lowered, [listed])
    assert fully_covered(listed, [text_values("US", "EU")])
