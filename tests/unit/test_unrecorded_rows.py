"""Finding the rows of a lookback window that no checkpoint records (``runtime/unrecorded.py``).

Pure: units as integers, a target as a map of unit -> rows. What is found must be exactly the units that
hold rows outside every recorded range, spelled as the planner spells partitions, newest first; a spent
count budget says so instead of claiming the window is clean.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources.partition_planning import (
    day_partitions,
    integer_range_partitions,
    month_partitions,
)
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.runtime.unrecorded import Units, locate, units_of, unrecorded_stretches

DAY = Partitioning(kind=PartitionKind.DAY, column="order_date", lookback=2)
MONTH = Partitioning(kind=PartitionKind.MONTH, column="order_date", lookback=2)
RANGE = Partitioning(kind=PartitionKind.INTEGER_RANGE, column="id", size=100, lookback=2)
FIRST = dt.date(2026, 1, 1).toordinal()


def _units(partitioning: Partitioning) -> Units:
    template = (
        day_partitions("order_date", [dt.date(2026, 1, 1)])[0]
        if partitioning.kind is PartitionKind.DAY
        else month_partitions("order_date", [(2026, 1)])[0]
        if partitioning.kind is PartitionKind.MONTH
        else integer_range_partitions("id", [0], 100)[0]
    )
    units = units_of(partitioning, template)
    assert units is not None
    return units


def _target(
    units: Units, rows: dict[int, int], calls: list[PartitionBounds]
) -> Callable[[PartitionBounds], int]:
    """A target holding ``rows[i]`` rows in unit ``i``; counts bounds aligned to units, records each call."""

    def count(bounds: PartitionBounds) -> int:
        calls.append(bounds)
        assert bounds.lower is not None
        low = units.index_of(bounds.lower)
        high = None if bounds.upper is None else units.index_of(bounds.upper)
        return sum(n for i, n in rows.items() if i >= low and (high is None or i < high))

    return count


@given(day=st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(9000, 12, 30)))
def test_a_day_unit_is_spelled_as_the_planner_spells_it(day: dt.date) -> None:
    units = _units(DAY)
    assert units.unit(units.index_of(day.isoformat())) == day_partitions("order_date", [day])[0]


@given(year=st.integers(1900, 9000), month=st.integers(1, 12))
def test_a_month_unit_is_spelled_as_the_planner_spells_it(year: int, month: int) -> None:
    units = _units(MONTH)
    first = dt.date(year, month, 1).isoformat()
    assert units.unit(units.index_of(first)) == month_partitions("order_date", [(year, month)])[0]


@given(start=st.integers(-(10**12), 10**12))
def test_an_integer_range_unit_is_spelled_as_the_planner_spells_it(start: int) -> None:
    units = _units(RANGE)
    assert units.unit(units.index_of(str(start))) == integer_range_partitions("id", [start], 100)[0]


@settings(max_examples=200)
@given(
    held=st.dictionaries(st.integers(0, 400), st.integers(1, 50), max_size=8),
    covered=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 30)), max_size=12),
    floor=st.integers(0, 60),
)
def test_exactly_the_units_holding_rows_outside_every_recorded_range_are_found_newest_first(
    held: dict[int, int], covered: list[tuple[int, int]], floor: int
) -> None:
    units = _units(DAY)
    recorded = [units.region(FIRST + start, FIRST + start + length) for start, length in covered]
    rows = {FIRST + i: n for i, n in held.items()}

    stretches = unrecorded_stretches(units, units.lower_of(FIRST + floor), recorded)
    located = locate(units, stretches, _target(units, rows, []), budget=10_000)

    inside = [(s, e) for s, e in ((FIRST + a, FIRST + a + n) for a, n in covered)]
    expected = sorted(
        (
            (units.unit(i), n)
            for i, n in rows.items()
            if i >= FIRST + floor and not any(s <= i < e for s, e in inside)
        ),
        key=lambda pair: pair[0].lower or "",
        reverse=True,
    )
    assert located.units == expected
    assert not located.incomplete


def test_a_clean_window_costs_one_count_per_stretch() -> None:
    units = _units(DAY)
    planned = [units.unit(FIRST + i) for i in (0, 1, 2, 3, 4, 7, 8)]  # a weekend between them
    calls: list[PartitionBounds] = []

    stretches = unrecorded_stretches(units, planned[0].lower or "", planned)
    located = locate(
        units, stretches, _target(units, {FIRST + i: 5 for i in (0, 1, 2, 3, 4, 7, 8)}, calls), 400
    )

    assert stretches == [(FIRST + 5, FIRST + 7), (FIRST + 9, None)]
    assert located.units == [] and not located.incomplete
    assert len(calls) == 2


def test_a_day_far_past_the_newest_is_found_by_closing_the_open_stretch() -> None:
    units = _units(DAY)
    planned = [units.unit(FIRST)]
    far = FIRST + 3_000  # a mistyped year in the target

    stretches = unrecorded_stretches(units, planned[0].lower or "", planned)
    located = locate(units, stretches, _target(units, {far: 7}, []), 400)

    assert located.units == [(units.unit(far), 7)]


def test_a_spent_budget_says_the_search_is_incomplete() -> None:
    units = _units(DAY)
    rows = {FIRST + i: 1 for i in range(1, 200, 3)}
    stretches = unrecorded_stretches(units, units.lower_of(FIRST), [units.unit(FIRST)])

    located = locate(units, stretches, _target(units, rows, []), budget=20)

    assert located.incomplete
    assert {b.lower for b, _ in located.units} <= {units.lower_of(i) for i in rows}


def test_a_month_partly_covered_by_a_recorded_day_counts_as_recorded() -> None:
    """An old day partition inside a month of the current partitioning: the month's rows may be that
    commit's, so the month is not counted as unrecorded."""
    units = _units(MONTH)
    january = units.unit(units.index_of("2026-01-01"))
    old_day = day_partitions("order_date", [dt.date(2026, 2, 10)])[0]

    stretches = unrecorded_stretches(units, january.lower or "", [january, old_day])

    assert stretches == [(units.index_of("2026-03-01"), None)]


def test_bounds_of_a_list_or_another_value_type_have_no_units() -> None:
    listed = PartitionBounds(kind=BoundsKind.VALUES, column="region", values=("eu",), label="region=eu")
    assert units_of(Partitioning(kind=PartitionKind.LIST, column="region", values=("eu",)), listed) is None
    day_of_text = day_partitions("order_date", [dt.date(2026, 1, 1)])[0].model_copy(
        update={"value_type": "string"}
    )
    assert units_of(DAY, day_of_text) is None


def test_a_single_day_between_recorded_days_is_found() -> None:
    """The day a source moved its rows away from, between the day before and the day they moved to."""
    units = _units(DAY)
    planned = [units.unit(FIRST), units.unit(FIRST + 2)]

    stretches = unrecorded_stretches(units, planned[0].lower or "", planned)
    located = locate(units, stretches, _target(units, {FIRST: 3, FIRST + 1: 3, FIRST + 2: 3}, []), 400)

    assert located.units == [(units.unit(FIRST + 1), 3)]
